//! Bootstrap, ids and stores: IsBootstrapped, Bootstrap, AllocID, PutStore, GetStore, GetAllStores, StoreHeartbeat.

use super::*;

impl PdService {
    pub(super) async fn bootstrap(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::BootstrapRequest>,
    ) -> Result<GrpcResponse<pdpb::BootstrapResponse>, Status> {
        let caller = ConnectionGrants::caller_of(&request);
        let req = self.admit(request, Call::Bootstrap)?;
        let store = convert::store_from(
            req.store
                .as_ref()
                .ok_or_else(|| Status::invalid_argument("no store"))?,
        )
        .map_err(bad)?;
        let region_pb = req
            .region
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("no region"))?;
        let region = convert::region_from(region_pb, region_pb.peers.first()).map_err(bad)?;
        // PD answers a second bootstrap with its own error type, not a failure.
        let header = match self.placement(Request::IsBootstrapped).await? {
            Ok(Reply::Bootstrapped(true)) => self.error_header(
                pdpb::ErrorType::AlreadyBootstrapped,
                "cluster is already bootstrapped".into(),
            ),
            Ok(Reply::Bootstrapped(false)) => {
                match self
                    .placement_as(
                        &caller,
                        Request::Bootstrap {
                            store: Box::new(store),
                            region,
                        },
                    )
                    .await?
                {
                    Ok(_) => self.header(),
                    Err(header) => header,
                }
            }
            Ok(other) => return Err(unexpected(other)),
            Err(header) => header,
        };
        Ok(GrpcResponse::new(pdpb::BootstrapResponse {
            header,
            ..Default::default()
        }))
    }

    pub(super) async fn is_bootstrapped(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::IsBootstrappedRequest>,
    ) -> Result<GrpcResponse<pdpb::IsBootstrappedResponse>, Status> {
        self.unary(
            request,
            Call::IsBootstrapped,
            |_| Ok(Request::IsBootstrapped),
            |_, reply| match reply {
                Reply::Bootstrapped(bootstrapped) => Ok(pdpb::IsBootstrappedResponse {
                    bootstrapped,
                    ..Default::default()
                }),
                other => Err(unexpected(other)),
            },
        )
        .await
    }

    pub(super) async fn alloc_id(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::AllocIdRequest>,
    ) -> Result<GrpcResponse<pdpb::AllocIdResponse>, Status> {
        let batch = request.get_ref().count > 1;
        // One id per call whatever `count` asks for: the reply's `count` says how many were
        // given, and ids are not promised consecutive across concurrent callers.
        self.unary(
            request,
            Call::AllocId,
            |_| Ok(Request::AllocId),
            |_, reply| match reply {
                Reply::Id(id) => Ok(pdpb::AllocIdResponse {
                    id,
                    // PD sets `count` only for a batch; a batch asked for gets one id here.
                    count: u32::from(batch),
                    ..Default::default()
                }),
                other => Err(unexpected(other)),
            },
        )
        .await
    }

    pub(super) async fn get_store(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetStoreRequest>,
    ) -> Result<GrpcResponse<pdpb::GetStoreResponse>, Status> {
        let id = request.get_ref().store_id;
        self.unary(
            request,
            Call::GetStore,
            |req| Ok(Request::GetStore { id: req.store_id }),
            |this, reply| match reply {
                Reply::Store(Some(s)) => Ok(pdpb::GetStoreResponse {
                    store: Some(convert::store_to(&s)),
                    stats: Some(convert::store_stats_to(&s)),
                    ..Default::default()
                }),
                Reply::Store(None) => Ok(pdpb::GetStoreResponse {
                    header: this.error_header(
                        pdpb::ErrorType::Unknown,
                        format!("invalid store ID {id}, not found"),
                    ),
                    ..Default::default()
                }),
                other => Err(unexpected(other)),
            },
        )
        .await
    }

    pub(super) async fn put_store(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::PutStoreRequest>,
    ) -> Result<GrpcResponse<pdpb::PutStoreResponse>, Status> {
        self.unary(
            request,
            Call::PutStore,
            |req| {
                let store = req
                    .store
                    .as_ref()
                    .ok_or_else(|| Status::invalid_argument("no store"))?;
                Ok(Request::PutStore {
                    store: Box::new(convert::store_from(store).map_err(bad)?),
                })
            },
            |_, _| Ok(pdpb::PutStoreResponse::default()),
        )
        .await
    }

    pub(super) async fn get_all_stores(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetAllStoresRequest>,
    ) -> Result<GrpcResponse<pdpb::GetAllStoresResponse>, Status> {
        let req = self.admit(request, Call::GetAllStores)?;
        // PD's reply has no paging: the pages are gathered into one message.
        let mut stores = Vec::new();
        let mut after_id = 0;
        loop {
            match self.placement(Request::GetAllStores { after_id }).await? {
                Ok(Reply::Stores { stores: page, more }) => {
                    let last = page.last().map_or(after_id, |s| s.store.id);
                    stores.extend(page.iter().map(convert::store_to).filter(|s| {
                        !req.exclude_tombstone_stores
                            || s.state != metapb::StoreState::Tombstone as i32
                    }));
                    if !more || last == after_id {
                        break;
                    }
                    after_id = last;
                }
                Ok(other) => return Err(unexpected(other)),
                Err(header) => {
                    return Ok(GrpcResponse::new(pdpb::GetAllStoresResponse {
                        header,
                        ..Default::default()
                    }))
                }
            }
        }
        Ok(GrpcResponse::new(pdpb::GetAllStoresResponse {
            header: self.header(),
            stores,
        }))
    }

    pub(super) async fn store_heartbeat(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::StoreHeartbeatRequest>,
    ) -> Result<GrpcResponse<pdpb::StoreHeartbeatResponse>, Status> {
        self.unary(
            request,
            Call::StoreHeartbeat,
            |req| {
                // PD's words, as a plain error (gRPC UNKNOWN).
                let stats = req.stats.as_ref().ok_or_else(|| {
                    Status::unknown("invalid store heartbeat command, but it carries no stats")
                })?;
                Ok(Request::StoreHeartbeat {
                    store_id: stats.store_id,
                    stats: convert::store_stats_from(stats),
                })
            },
            |_, reply| match reply {
                // Every answer carries the cluster version: TiKV turns its features on by it.
                Reply::StoreHeartbeat(beat) => Ok(pdpb::StoreHeartbeatResponse {
                    cluster_version: beat.cluster_version,
                    state: convert::node_state(beat.state) as i32,
                    ..Default::default()
                }),
                other => Err(unexpected(other)),
            },
        )
        .await
    }
}

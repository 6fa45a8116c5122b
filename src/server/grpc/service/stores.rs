//! Bootstrap, ids and stores: IsBootstrapped, Bootstrap, AllocID, PutStore, GetStore, GetAllStores, StoreHeartbeat.

use super::*;

impl PdService {
    pub(super) async fn bootstrap(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::BootstrapRequest>,
    ) -> Result<GrpcResponse<pdpb::BootstrapResponse>, Status> {
        self.authorize(&request, Call::Bootstrap)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
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
        let bootstrapped = match self.placement(Request::IsBootstrapped).await? {
            Ok(Reply::Bootstrapped(b)) => b,
            Ok(other) => return Err(unexpected(other)),
            Err(header) => {
                return Ok(GrpcResponse::new(pdpb::BootstrapResponse {
                    header,
                    ..Default::default()
                }))
            }
        };
        if bootstrapped {
            return Ok(GrpcResponse::new(pdpb::BootstrapResponse {
                header: self.error_header(
                    pdpb::ErrorType::AlreadyBootstrapped,
                    "cluster is already bootstrapped".into(),
                ),
                ..Default::default()
            }));
        }
        let header = match self.placement(Request::Bootstrap { store, region }).await? {
            Ok(_) => self.header(),
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
        self.authorize(&request, Call::IsBootstrapped)?;
        self.check(request.get_ref().header.as_ref())?;
        match self.placement(Request::IsBootstrapped).await? {
            Ok(Reply::Bootstrapped(bootstrapped)) => {
                Ok(GrpcResponse::new(pdpb::IsBootstrappedResponse {
                    header: self.header(),
                    bootstrapped,
                }))
            }
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(GrpcResponse::new(pdpb::IsBootstrappedResponse {
                header,
                bootstrapped: false,
            })),
        }
    }

    pub(super) async fn alloc_id(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::AllocIdRequest>,
    ) -> Result<GrpcResponse<pdpb::AllocIdResponse>, Status> {
        self.authorize(&request, Call::AllocId)?;
        self.check(request.get_ref().header.as_ref())?;
        let request_count = request.get_ref().count;
        // One id per call whatever `count` asks for: the reply's `count` says how many were
        // given, and ids are not promised consecutive across concurrent callers.
        match self.placement(Request::AllocId).await? {
            Ok(Reply::Id(id)) => Ok(GrpcResponse::new(pdpb::AllocIdResponse {
                header: self.header(),
                id,
                // PD sets `count` only for a batch; a batch asked for gets one id here.
                count: u32::from(request_count > 1),
            })),
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(GrpcResponse::new(pdpb::AllocIdResponse {
                header,
                ..Default::default()
            })),
        }
    }

    pub(super) async fn get_store(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetStoreRequest>,
    ) -> Result<GrpcResponse<pdpb::GetStoreResponse>, Status> {
        self.authorize(&request, Call::GetStore)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let header = match self
            .placement(Request::GetStore { id: req.store_id })
            .await?
        {
            Ok(Reply::Store(Some(s))) => {
                return Ok(GrpcResponse::new(pdpb::GetStoreResponse {
                    header: self.header(),
                    store: Some(convert::store_to(&s)),
                    stats: Some(convert::store_stats_to(&s)),
                }))
            }
            Ok(Reply::Store(None)) => self.error_header(
                pdpb::ErrorType::Unknown,
                format!("invalid store ID {}, not found", req.store_id),
            ),
            Ok(other) => return Err(unexpected(other)),
            Err(header) => header,
        };
        Ok(GrpcResponse::new(pdpb::GetStoreResponse {
            header,
            ..Default::default()
        }))
    }

    pub(super) async fn put_store(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::PutStoreRequest>,
    ) -> Result<GrpcResponse<pdpb::PutStoreResponse>, Status> {
        self.authorize(&request, Call::PutStore)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let store = convert::store_from(
            req.store
                .as_ref()
                .ok_or_else(|| Status::invalid_argument("no store"))?,
        )
        .map_err(bad)?;
        let header = match self.placement(Request::PutStore { store }).await? {
            Ok(_) => self.header(),
            Err(header) => header,
        };
        Ok(GrpcResponse::new(pdpb::PutStoreResponse {
            header,
            ..Default::default()
        }))
    }

    pub(super) async fn get_all_stores(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetAllStoresRequest>,
    ) -> Result<GrpcResponse<pdpb::GetAllStoresResponse>, Status> {
        self.authorize(&request, Call::GetAllStores)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
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
        self.authorize(&request, Call::StoreHeartbeat)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let stats = req
            .stats
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("no stats"))?;
        let header = match self
            .placement(Request::StoreHeartbeat {
                store_id: stats.store_id,
                stats: convert::store_stats_from(stats),
            })
            .await?
        {
            Ok(_) => self.header(),
            Err(header) => header,
        };
        Ok(GrpcResponse::new(pdpb::StoreHeartbeatResponse {
            header,
            ..Default::default()
        }))
    }
}

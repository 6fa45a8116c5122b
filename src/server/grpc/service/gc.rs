//! GC safe points: the cluster's and each service's, and GetGCState by keyspace.

use super::*;

/// PD's `NullKeyspaceID`: the keyspace of a request that names none, whose GC state is the
/// cluster-wide ("unified") one (tikv/pd pkg/keyspace/constant/constant.go).
const NULL_KEYSPACE: u32 = 0xFFFF_FFFF;
/// Keyspace ids PD can hold; an id with higher bits set is taken as the null keyspace.
const VALID_KEYSPACE_ID_MASK: u32 = 0x00FF_FFFF;
/// PD's `DefaultKeyspaceID`: the DEFAULT keyspace PD creates at bootstrap, GC'd cluster-wide.
const DEFAULT_KEYSPACE: u32 = 0;

impl PdService {
    pub(super) async fn get_gc_safe_point(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetGcSafePointRequest>,
    ) -> Result<GrpcResponse<pdpb::GetGcSafePointResponse>, Status> {
        self.unary(
            request,
            Call::GetGcSafePoint,
            |_| Ok(Request::GetGcSafePoint),
            |_, reply| match reply {
                Reply::GcSafePoint(safe_point) => Ok(pdpb::GetGcSafePointResponse {
                    safe_point,
                    ..Default::default()
                }),
                other => Err(unexpected(other)),
            },
        )
        .await
    }

    pub(super) async fn update_gc_safe_point(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::UpdateGcSafePointRequest>,
    ) -> Result<GrpcResponse<pdpb::UpdateGcSafePointResponse>, Status> {
        self.unary(
            request,
            Call::UpdateGcSafePoint,
            |req| {
                Ok(Request::UpdateGcSafePoint {
                    safe_point: req.safe_point,
                })
            },
            |_, reply| match reply {
                Reply::GcSafePoint(new_safe_point) => Ok(pdpb::UpdateGcSafePointResponse {
                    new_safe_point,
                    ..Default::default()
                }),
                other => Err(unexpected(other)),
            },
        )
        .await
    }

    pub(super) async fn update_service_gc_safe_point(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::UpdateServiceGcSafePointRequest>,
    ) -> Result<GrpcResponse<pdpb::UpdateServiceGcSafePointResponse>, Status> {
        self.unary(
            request,
            Call::UpdateServiceGcSafePoint,
            |req| {
                let service_id = String::from_utf8(req.service_id)
                    .map_err(|_| Status::invalid_argument("service id is not UTF-8"))?;
                Ok(Request::UpdateServiceGcSafePoint {
                    service_id,
                    ttl_secs: req.ttl,
                    safe_point: req.safe_point,
                })
            },
            |_, reply| match reply {
                Reply::ServiceSafePoint {
                    service_id,
                    ttl_secs,
                    safe_point,
                } => Ok(pdpb::UpdateServiceGcSafePointResponse {
                    service_id: service_id.into_bytes(),
                    ttl: ttl_secs,
                    min_safe_point: safe_point,
                    ..Default::default()
                }),
                other => Err(unexpected(other)),
            },
        )
        .await
    }

    /// PD's `GetGCState` (tikv/pd server/gc_service.go) over Meridian's v1 GC state. Meridian has
    /// no keyspaces, so every request reads the null keyspace's ("unified") state, as PD does for
    /// a request without a keyspace, for an id outside the keyspace id range, and for the
    /// DEFAULT keyspace (0, which PD GCs with the unified state); any other keyspace id does not
    /// exist here, which PD answers with an UNKNOWN error in the header.
    ///
    /// Meridian keeps no txn safe point apart from the GC safe point (no `AdvanceTxnSafePoint`;
    /// `gc_worker`'s service safe point is an ordinary one), so the GC safe point is reported as
    /// both. PD keeps `gc_safe_point <= txn_safe_point`, so this is the lowest txn safe point its
    /// invariant allows: clients refuse reads below the txn safe point, and below this one is
    /// exactly what GC may already have collected.
    ///
    /// Service safe points (`UpdateServiceGCSafePoint`) are what PD now keeps as GC barriers
    /// (its compatible path turns them into `SetGCBarrier`), so they are the reported barriers,
    /// without `gc_worker`'s, as PD leaves it out. Global GC barriers cannot be set here
    /// (`SetGlobalGCBarrier` is not served): when asked for, the answer is PD's "fulfilled, none
    /// stored", an empty list.
    pub(super) async fn get_gc_state(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetGcStateRequest>,
    ) -> Result<GrpcResponse<pdpb::GetGcStateResponse>, Status> {
        let req = self.admit(request, Call::GetGcState)?;
        // The placement path first: it answers a cluster not bootstrapped as PD does, before
        // the keyspace is looked at.
        let mut gc_safe_point = match self.placement(Request::GetGcSafePoint).await? {
            Ok(Reply::GcSafePoint(safe_point)) => safe_point,
            Ok(other) => return Err(unexpected(other)),
            Err(header) => {
                return Ok(GrpcResponse::new(pdpb::GetGcStateResponse {
                    header,
                    ..Default::default()
                }))
            }
        };
        // PD's `getKeyspaceID`: no scope is the null keyspace; a scope whose oneof holds no
        // `keyspace_id` reads as id 0.
        let keyspace =
            req.keyspace_scope
                .as_ref()
                .map_or(NULL_KEYSPACE, |scope| match scope.keyspace {
                    Some(pdpb::keyspace_scope::Keyspace::KeyspaceId(id)) => id,
                    None => DEFAULT_KEYSPACE,
                });
        if keyspace & !VALID_KEYSPACE_ID_MASK == 0 && keyspace != DEFAULT_KEYSPACE {
            // PD's message for `errs.ErrKeyspaceNotFound`, with the id.
            let message = format!(
                "[PD:keyspace:ErrKeyspaceNotFound]keyspace does not exist (keyspace id {keyspace})"
            );
            return Ok(GrpcResponse::new(pdpb::GetGcStateResponse {
                header: self.error_header(pdpb::ErrorType::Unknown, message),
                ..Default::default()
            }));
        }
        let mut gc_barriers = Vec::new();
        if !req.exclude_gc_barriers {
            let state = &*self.shared.placement;
            let now_secs = (state.clock.now_ms() / 1000) as i64;
            let gc = state.gc.lock().await;
            // The safe point and the barriers from one look at the state.
            gc_safe_point = gc.gc();
            gc_barriers = gc
                .services()
                .filter(|s| s.service_id != crate::gc::GC_WORKER)
                .map(|s| pdpb::GcBarrierInfo {
                    barrier_id: s.service_id.clone(),
                    barrier_ts: s.safe_point,
                    // PD: the seconds left, rounded down, never below 0; i64::MAX never expires.
                    ttl_seconds: if s.expired_at == i64::MAX {
                        i64::MAX
                    } else {
                        s.expired_at.saturating_sub(now_secs).max(0)
                    },
                })
                .collect();
        }
        Ok(GrpcResponse::new(pdpb::GetGcStateResponse {
            header: self.header(),
            gc_state: Some(pdpb::GcState {
                keyspace_scope: Some(pdpb::KeyspaceScope {
                    keyspace: Some(pdpb::keyspace_scope::Keyspace::KeyspaceId(NULL_KEYSPACE)),
                }),
                is_keyspace_level_gc: false,
                txn_safe_point: gc_safe_point,
                gc_safe_point,
                gc_barriers,
            }),
            global_gc_barriers: req
                .include_global_gc_barriers
                .then(pdpb::GlobalGcBarriersInfo::default),
        }))
    }
}

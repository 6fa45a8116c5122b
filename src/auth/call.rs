//! The calls a client can make, whatever the transport, and the role each one needs. The
//! match in [`need_of`] has no catch-all: a new call does not compile until it is given a
//! rule here.
//!
//! The rules (SECURITY.md has the reasoning):
//! - reads (timestamps, members, routes, stores, GC state): any role;
//! - what a storage node reports or asks for (bootstrap, store registration, heartbeats,
//!   splits, ids): `store`;
//! - moving the GC safe points, which lets history be deleted: `client` (TiDB's GC worker, BR
//!   and CDC run as clients);
//! - writes into the etcd namespace (etcd API, MetaStorage) and resource group DDL: `client`
//!   (TiDB's sessions and CREATE RESOURCE GROUP);
//! - asking for splits and scatters (SplitRegions, ScatterRegion, SplitAndScatterRegions):
//!   `client` (TiDB's SPLIT TABLE and pre-split tables, BR and Lightning restores); these
//!   only start operators, run within the store limits and safety rules like any other, and
//!   never write the region map themselves;
//! - leadership and membership changes, debug controls (every admin route that is not a
//!   GET), and every route of PD's HTTP API that is not a GET (placement and label rules):
//!   `admin`.

use crate::proto::Request;

use super::{Grants, Role};

/// One kind of call, with no arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Ping,
    Tso,
    GetMembers,
    GetClusterInfo,
    /// Marking a QUIC stream's routing reads as reads a follower may answer.
    AllowFollowerHandle,
    IsBootstrapped,
    Bootstrap,
    AllocId,
    PutStore,
    GetStore,
    GetAllStores,
    StoreHeartbeat,
    RegionHeartbeat,
    GetRegion,
    GetPrevRegion,
    GetRegionById,
    ScanRegions,
    QueryRegion,
    AskBatchSplit,
    ReportBatchSplit,
    GetGcSafePoint,
    GetGcState,
    UpdateGcSafePoint,
    UpdateServiceGcSafePoint,
    // The rest of the pdpb surface TiKV and client-go call.
    IsSnapshotRecovering,
    ReportMinResolvedTs,
    GetClusterConfig,
    PutClusterConfig,
    SetExternalTimestamp,
    GetExternalTimestamp,
    ReportBuckets,
    GetRegionBuckets,
    StoreGlobalConfig,
    LoadGlobalConfig,
    WatchGlobalConfig,
    /// PD's client-driven operators: ScatterRegion, SplitRegions, SplitAndScatterRegions
    /// (`client`), and the status a client waits on, GetOperator (any role: a read).
    ScatterRegion,
    SplitRegions,
    SplitAndScatterRegions,
    GetOperator,
    /// The region syncer's stream, leader to follower (`member`: every region of the
    /// cluster, and only another member needs them).
    SyncRegions,
    /// Admin API probes: health, readiness, metrics.
    AdminProbe,
    /// Admin API reads: members, leader.
    AdminRead,
    /// Any admin API route that is not a GET: resign, leader transfer, member deletion, the
    /// debug clock. A new route of that kind is covered before anyone thinks of it.
    AdminChange,
    /// etcd v3 at the client address, proxied into the etcd namespace: reads and watches
    /// (any role), writes and leases (`client`: TiDB's sessions, DDL owner and safe points).
    EtcdRange,
    EtcdWatch,
    EtcdLeaseTimeToLive,
    EtcdLeaseLeases,
    EtcdMemberList,
    EtcdPut,
    EtcdDeleteRange,
    EtcdTxn,
    EtcdLeaseGrant,
    EtcdLeaseRevoke,
    EtcdLeaseKeepAlive,
    /// PD's HTTP API at the client address: a GET (any role), or any other method (`admin`,
    /// as on the admin port: placement rules, labels, config).
    PdHttpRead,
    PdHttpChange,
    /// kvproto's MetaStorage, on the same etcd namespace: reads and watches (any role: TiKV's
    /// resource control reads with its `store` certificate), writes (`client`, as etcd's).
    MetaStorageGet,
    MetaStorageWatch,
    MetaStoragePut,
    MetaStorageDelete,
    /// kvproto's ResourceManager: reads and token grants (any role), resource group DDL
    /// (`client`: TiDB's CREATE/ALTER/DROP RESOURCE GROUP).
    ListResourceGroups,
    GetResourceGroup,
    AcquireTokenBuckets,
    AddResourceGroup,
    ModifyResourceGroup,
    DeleteResourceGroup,
}

/// What a call needs of the caller's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Any role at all: a certificate from the cluster CA that names none grants nothing.
    AnyRole,
    Role(Role),
}

/// Why a call was refused; the message names the missing role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("{0:?} needs a client certificate with the role `{1}`")]
    Missing(Call, &'static str),
    #[error("{0:?} needs a client certificate with a role (client, store, admin or member)")]
    NoRole(Call),
}

pub fn need_of(call: Call) -> Need {
    use Call::*;
    match call {
        IsSnapshotRecovering => Need::AnyRole,
        ReportMinResolvedTs => Need::Role(Role::Store),
        GetClusterConfig => Need::AnyRole,
        PutClusterConfig => Need::Role(Role::Admin),
        SetExternalTimestamp => Need::Role(Role::Client),
        GetExternalTimestamp => Need::AnyRole,
        ReportBuckets => Need::Role(Role::Store),
        GetRegionBuckets => Need::AnyRole,
        StoreGlobalConfig => Need::Role(Role::Client),
        LoadGlobalConfig | WatchGlobalConfig => Need::AnyRole,
        ScatterRegion | SplitRegions | SplitAndScatterRegions => Need::Role(Role::Client),
        GetOperator => Need::AnyRole,
        SyncRegions => Need::Role(Role::Member),
        Ping | Tso | GetMembers | GetClusterInfo | AllowFollowerHandle | IsBootstrapped
        | GetStore | GetAllStores | GetRegion | GetPrevRegion | GetRegionById | ScanRegions
        | QueryRegion | GetGcSafePoint | GetGcState | AdminProbe | AdminRead => Need::AnyRole,
        Bootstrap | AllocId | PutStore | StoreHeartbeat | RegionHeartbeat | AskBatchSplit
        | ReportBatchSplit => Need::Role(Role::Store),
        UpdateGcSafePoint | UpdateServiceGcSafePoint => Need::Role(Role::Client),
        AdminChange => Need::Role(Role::Admin),
        PdHttpRead => Need::AnyRole,
        PdHttpChange => Need::Role(Role::Admin),
        EtcdRange | EtcdWatch | EtcdLeaseTimeToLive | EtcdLeaseLeases | EtcdMemberList => {
            Need::AnyRole
        }
        EtcdPut | EtcdDeleteRange | EtcdTxn | EtcdLeaseGrant | EtcdLeaseRevoke
        | EtcdLeaseKeepAlive => Need::Role(Role::Client),
        MetaStorageGet | MetaStorageWatch => Need::AnyRole,
        MetaStoragePut | MetaStorageDelete => Need::Role(Role::Client),
        ListResourceGroups | GetResourceGroup | AcquireTokenBuckets => Need::AnyRole,
        AddResourceGroup | ModifyResourceGroup | DeleteResourceGroup => Need::Role(Role::Client),
    }
}

impl Call {
    /// Whether `grants` may make this call.
    pub fn permitted(self, grants: Grants) -> Result<(), Denied> {
        match need_of(self) {
            Need::AnyRole if grants.is_empty() => Err(Denied::NoRole(self)),
            Need::AnyRole => Ok(()),
            Need::Role(role) if grants.has(role) => Ok(()),
            Need::Role(role) => Err(Denied::Missing(self, role.name())),
        }
    }
}

/// The call a request makes, as a method of the request (which the client crate defines).
pub trait RequestCall {
    fn call(&self) -> Call;
}

impl RequestCall for Request {
    fn call(&self) -> Call {
        match self {
            Request::Ping => Call::Ping,
            Request::Tso { .. } => Call::Tso,
            Request::GetMembers => Call::GetMembers,
            Request::Bootstrap { .. } => Call::Bootstrap,
            Request::IsBootstrapped => Call::IsBootstrapped,
            Request::AllocId => Call::AllocId,
            Request::PutStore { .. } => Call::PutStore,
            Request::GetStore { .. } => Call::GetStore,
            Request::GetAllStores { .. } => Call::GetAllStores,
            Request::StoreHeartbeat { .. } => Call::StoreHeartbeat,
            Request::RegionHeartbeat { .. } => Call::RegionHeartbeat,
            Request::GetRegion { .. } => Call::GetRegion,
            Request::GetPrevRegion { .. } => Call::GetPrevRegion,
            Request::GetRegionById { .. } => Call::GetRegionById,
            Request::ScanRegions { .. } => Call::ScanRegions,
            Request::AskBatchSplit { .. } => Call::AskBatchSplit,
            Request::ReportBatchSplit { .. } => Call::ReportBatchSplit,
            Request::GetGcSafePoint => Call::GetGcSafePoint,
            Request::UpdateGcSafePoint { .. } => Call::UpdateGcSafePoint,
            Request::UpdateServiceGcSafePoint { .. } => Call::UpdateServiceGcSafePoint,
            Request::IsSnapshotRecovering => Call::IsSnapshotRecovering,
            Request::ReportMinResolvedTs { .. } => Call::ReportMinResolvedTs,
            Request::GetClusterConfig => Call::GetClusterConfig,
            Request::PutClusterConfig { .. } => Call::PutClusterConfig,
            Request::SetExternalTimestamp { .. } => Call::SetExternalTimestamp,
            Request::GetExternalTimestamp => Call::GetExternalTimestamp,
            Request::ReportBuckets { .. } => Call::ReportBuckets,
            Request::GetRegionBuckets { .. } => Call::GetRegionBuckets,
            Request::StoreGlobalConfig { .. } => Call::StoreGlobalConfig,
            Request::LoadGlobalConfig { .. } => Call::LoadGlobalConfig,
            Request::WatchGlobalConfig { .. } => Call::WatchGlobalConfig,
            Request::AllowFollowerHandle => Call::AllowFollowerHandle,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITES_BY_STORES: [Call; 7] = [
        Call::Bootstrap,
        Call::AllocId,
        Call::PutStore,
        Call::StoreHeartbeat,
        Call::RegionHeartbeat,
        Call::AskBatchSplit,
        Call::ReportBatchSplit,
    ];
    const ADMIN: [Call; 2] = [Call::AdminChange, Call::PdHttpChange];

    #[test]
    fn store_writes_need_store_and_admin_changes_need_admin() {
        for call in WRITES_BY_STORES {
            assert!(call.permitted(Grants::of_roles(&[Role::Store])).is_ok());
            for other in [Role::Client, Role::Admin, Role::Member] {
                let err = call.permitted(Grants::of_roles(&[other])).unwrap_err();
                assert!(err.to_string().contains("`store`"), "{err}");
            }
        }
        for call in ADMIN {
            assert!(call.permitted(Grants::of_roles(&[Role::Admin])).is_ok());
            let err = call
                .permitted(Grants::of_roles(&[Role::Client, Role::Store, Role::Member]))
                .unwrap_err();
            assert!(err.to_string().contains("`admin`"), "{err}");
        }
        for call in [
            Call::ScatterRegion,
            Call::SplitRegions,
            Call::SplitAndScatterRegions,
        ] {
            assert!(call.permitted(Grants::of_roles(&[Role::Client])).is_ok());
            for other in [Role::Store, Role::Admin, Role::Member] {
                let err = call.permitted(Grants::of_roles(&[other])).unwrap_err();
                assert!(err.to_string().contains("`client`"), "{err}");
            }
        }
        for role in Role::ALL {
            assert!(Call::GetOperator
                .permitted(Grants::of_roles(&[role]))
                .is_ok());
        }
        assert!(Call::SyncRegions
            .permitted(Grants::of_roles(&[Role::Member]))
            .is_ok());
        for other in [Role::Client, Role::Store, Role::Admin] {
            let err = Call::SyncRegions
                .permitted(Grants::of_roles(&[other]))
                .unwrap_err();
            assert!(err.to_string().contains("`member`"), "{err}");
        }
        for call in [Call::UpdateGcSafePoint, Call::UpdateServiceGcSafePoint] {
            assert!(call.permitted(Grants::of_roles(&[Role::Client])).is_ok());
            assert!(call.permitted(Grants::of_roles(&[Role::Store])).is_err());
        }
    }

    #[test]
    fn reads_need_some_role_and_nothing_passes_without_one() {
        for call in [
            Call::Tso,
            Call::GetRegion,
            Call::GetMembers,
            Call::AdminRead,
            Call::PdHttpRead,
        ] {
            for role in Role::ALL {
                assert!(call.permitted(Grants::of_roles(&[role])).is_ok());
            }
        }
        for call in WRITES_BY_STORES.into_iter().chain(ADMIN).chain([Call::Tso]) {
            assert!(call.permitted(Grants::NONE).is_err(), "{call:?}");
            assert!(call.permitted(Grants::all()).is_ok(), "{call:?}");
        }
    }

    #[test]
    fn every_request_is_classified_as_its_own_call() {
        use crate::placement::{Epoch, Region, RegionStats};
        let region = Region {
            id: 1,
            start_key: vec![],
            end_key: vec![],
            epoch: Epoch::default(),
            peers: vec![],
            leader: None,
        };
        let cases = [
            (
                Request::RegionHeartbeat {
                    region: region.clone(),
                    stats: RegionStats::default(),
                },
                Call::RegionHeartbeat,
            ),
            (
                Request::ReportBatchSplit {
                    regions: vec![region],
                },
                Call::ReportBatchSplit,
            ),
            (Request::Tso { count: 1 }, Call::Tso),
            (Request::AllocId, Call::AllocId),
            (Request::GetRegion { key: vec![] }, Call::GetRegion),
        ];
        for (req, call) in cases {
            assert_eq!(req.call(), call);
        }
    }
}

//! kvproto's `resource_manager.ResourceManager` on the client address, with PD's semantics:
//! resource groups listed, read, added, modified and deleted (the `default` group always
//! there), and token buckets granted over the AcquireTokenBuckets stream (`tokens`).
//!
//! Owns the adaptation: authorize, check that this node serves (the leader, with its term's
//! groups loaded; anyone else answers PD's `Unavailable` "not leader"), call the pure
//! `resource_group` registry, persist a change through the term's persister, answer in PD's
//! shapes and words (PD returns its errors as gRPC errors with its message). Decisions stay in
//! `resource_group`; the term's registry in `server::placement`.
//!
//! On etcd, each record is also written, in the same batch, where PD keeps it
//! (`resource_group/settings/<name>`) inside the etcd namespace clients see: TiDB's
//! resource-group controller loads and watches that prefix through `MetaStorage`, as it does
//! against PD. Meridian reads only its own copy, which no client can write.

mod tokens;

use std::sync::Arc;

use prost::Message;
use tonic::{Request, Response, Status, Streaming};

use super::connection::ConnectionGrants;
use super::etcd::namespace::Namespace;
use crate::admin::CoreMetrics;
use crate::auth::Call;
use crate::kvproto::resource_manager::resource_manager_server::{
    ResourceManager, ResourceManagerServer,
};
use crate::kvproto::resource_manager::{
    DeleteResourceGroupRequest, DeleteResourceGroupResponse, GetResourceGroupRequest,
    GetResourceGroupResponse, ListResourceGroupsRequest, ListResourceGroupsResponse,
    PutResourceGroupRequest, PutResourceGroupResponse, ResourceGroup, TokenBucketsRequest,
    TokenBucketsResponse,
};
use crate::meta::WriteOp;
use crate::resource_group::{check_keyspace, null_keyspace, GroupError, Registry};
use crate::server::placement::{ResourceGroupWriteError, ResourceGroups};
use crate::server::Shared;

/// Largest message taken from a client: a token request names a few groups; a group's record
/// is bounded by `resource_group::MAX_GROUP_BYTES`.
const MAX_REQUEST: usize = 4 << 20;
/// Largest reply: a list of every group (their records take at most
/// `resource_group::MAX_TOTAL_BYTES` together, and each answer adds a few bytes to its record).
const MAX_RESPONSE: usize = 64 << 20;

/// What PD's client is told on success.
const SUCCESS: &str = "Success!";

/// Where PD keeps a group's record, as TiDB's controller reads it through `MetaStorage`.
fn pd_key(name: &str) -> Vec<u8> {
    format!("resource_group/settings/{name}").into_bytes()
}

type Stream<T> = std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

#[derive(Clone)]
pub struct ResourceManagerService {
    shared: Arc<Shared>,
    metrics_slot: usize,
    /// The namespace PD's copies of the records go to, on etcd; `None` on the embedded store.
    pd_copies: Option<Arc<Namespace>>,
}

/// PD's refusal on a member that does not serve the resource manager.
fn not_leader() -> Status {
    Status::unavailable("not leader")
}

/// PD returns its resource manager errors as they are: gRPC's `Unknown` with PD's message.
fn refused(e: GroupError) -> Status {
    Status::unknown(e.to_string())
}

fn write_failed(e: ResourceGroupWriteError) -> Status {
    match e {
        ResourceGroupWriteError::Gone => not_leader(),
        e => Status::unavailable(e.to_string()),
    }
}

impl ResourceManagerService {
    pub fn new(shared: Arc<Shared>, metrics_slot: usize, on_etcd: bool) -> Self {
        ResourceManagerService {
            shared,
            metrics_slot,
            pd_copies: on_etcd.then(|| Arc::new(Namespace::default())),
        }
    }

    pub fn server(self) -> ResourceManagerServer<ResourceManagerService> {
        ResourceManagerServer::new(self)
            .max_decoding_message_size(MAX_REQUEST)
            .max_encoding_message_size(MAX_RESPONSE)
    }

    fn metrics(&self) -> &CoreMetrics {
        self.shared.metrics.core(self.metrics_slot)
    }

    fn groups(&self) -> &ResourceGroups {
        self.shared.placement.resource_groups()
    }

    /// Refuses the call, counted, unless the connection's certificate carries the role it
    /// needs.
    fn authorize<T>(&self, request: &Request<T>, call: Call) -> Result<(), Status> {
        ConnectionGrants::authorize(request, call, self.metrics())
    }

    /// `f` on the registry, when this node leads and holds its term's groups.
    fn serving<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> Result<R, Status> {
        if !self.shared.membership.is_leader() {
            return Err(not_leader());
        }
        self.groups().with(f).ok_or_else(not_leader)
    }

    /// The writes that store `record` (or delete `name`'s when `None`): Meridian's copy, and
    /// PD's on etcd.
    fn writes(&self, name: &str, record: Option<&ResourceGroup>) -> Vec<WriteOp> {
        let value = record.map(|r| {
            let mut stored = r.clone();
            stored.keyspace_id = null_keyspace();
            stored.encode_to_vec()
        });
        let mut ops = vec![(
            self.shared.placement.keys.resource_group(name),
            value.clone(),
        )];
        if record.is_none() {
            // A deleted group's running state goes with it.
            ops.push((self.shared.placement.keys.resource_group_state(name), None));
        }
        if let Some(ns) = &self.pd_copies {
            ops.push((ns.key(&pd_key(name)), value));
        }
        ops
    }

    async fn put(
        &self,
        request: Request<PutResourceGroupRequest>,
        call: Call,
    ) -> Result<(), Status> {
        self.authorize(&request, call)?;
        let group = request.into_inner().group.unwrap_or_default();
        let groups = self.groups();
        let _writer = groups.writer().await;
        if call == Call::AddResourceGroup {
            let record = self.serving(|r| r.plan_add(group))?.map_err(refused)?;
            let mut ops = self.writes(&record.name, Some(&record));
            // An added group starts afresh, also after a restart: no running state of the
            // group it replaces.
            let state = self
                .shared
                .placement
                .keys
                .resource_group_state(&record.name);
            ops.push((state, None));
            groups.persist(ops).await.map_err(write_failed)?;
            groups.with(|r| r.put(record, groups.now()));
        } else {
            let change = self.serving(|r| r.plan_modify(&group))?.map_err(refused)?;
            let ops = self.writes(&change.record.name, Some(&change.record));
            groups.persist(ops).await.map_err(write_failed)?;
            groups.with(|r| r.modify(change, groups.now()));
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl ResourceManager for ResourceManagerService {
    async fn list_resource_groups(
        &self,
        request: Request<ListResourceGroupsRequest>,
    ) -> Result<Response<ListResourceGroupsResponse>, Status> {
        self.authorize(&request, Call::ListResourceGroups)?;
        let req = request.into_inner();
        check_keyspace(req.keyspace_id.as_ref()).map_err(refused)?;
        let groups = self.serving(|r| r.list(req.with_ru_stats))?;
        Ok(Response::new(ListResourceGroupsResponse {
            error: None,
            groups,
        }))
    }

    async fn get_resource_group(
        &self,
        request: Request<GetResourceGroupRequest>,
    ) -> Result<Response<GetResourceGroupResponse>, Status> {
        self.authorize(&request, Call::GetResourceGroup)?;
        let req = request.into_inner();
        check_keyspace(req.keyspace_id.as_ref()).map_err(refused)?;
        let group = self
            .serving(|r| r.get(&req.resource_group_name, req.with_ru_stats))?
            .map_err(refused)?;
        Ok(Response::new(GetResourceGroupResponse {
            error: None,
            group: Some(group),
        }))
    }

    async fn add_resource_group(
        &self,
        request: Request<PutResourceGroupRequest>,
    ) -> Result<Response<PutResourceGroupResponse>, Status> {
        self.put(request, Call::AddResourceGroup).await?;
        Ok(Response::new(PutResourceGroupResponse {
            error: None,
            body: SUCCESS.into(),
        }))
    }

    async fn modify_resource_group(
        &self,
        request: Request<PutResourceGroupRequest>,
    ) -> Result<Response<PutResourceGroupResponse>, Status> {
        self.put(request, Call::ModifyResourceGroup).await?;
        Ok(Response::new(PutResourceGroupResponse {
            error: None,
            body: SUCCESS.into(),
        }))
    }

    async fn delete_resource_group(
        &self,
        request: Request<DeleteResourceGroupRequest>,
    ) -> Result<Response<DeleteResourceGroupResponse>, Status> {
        self.authorize(&request, Call::DeleteResourceGroup)?;
        let req = request.into_inner();
        check_keyspace(req.keyspace_id.as_ref()).map_err(refused)?;
        let name = req.resource_group_name;
        let groups = self.groups();
        let _writer = groups.writer().await;
        self.serving(|r| r.plan_delete(&name))?.map_err(refused)?;
        groups
            .persist(self.writes(&name, None))
            .await
            .map_err(write_failed)?;
        groups.with(|r| r.delete(&name));
        Ok(Response::new(DeleteResourceGroupResponse {
            error: None,
            body: SUCCESS.into(),
        }))
    }

    async fn acquire_token_buckets(
        &self,
        request: Request<Streaming<TokenBucketsRequest>>,
    ) -> Result<Response<Stream<TokenBucketsResponse>>, Status> {
        self.authorize(&request, Call::AcquireTokenBuckets)?;
        Ok(Response::new(tokens::serve(
            self.clone(),
            request.into_inner(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use crate::auth::{need_of, Call, Need};
    use crate::tls::cert::Role;

    #[test]
    fn reads_and_grants_take_any_role_and_ddl_needs_client() {
        for call in [
            Call::ListResourceGroups,
            Call::GetResourceGroup,
            Call::AcquireTokenBuckets,
        ] {
            assert_eq!(need_of(call), Need::AnyRole, "{call:?}");
        }
        for call in [
            Call::AddResourceGroup,
            Call::ModifyResourceGroup,
            Call::DeleteResourceGroup,
        ] {
            assert_eq!(need_of(call), Need::Role(Role::Client), "{call:?}");
        }
    }

    #[test]
    fn pds_copy_of_a_record_is_where_tidb_reads_it() {
        assert_eq!(super::pd_key("rg1"), b"resource_group/settings/rg1");
    }
}

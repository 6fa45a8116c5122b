//! kvproto's `ResourceManager` against the real binary, with kvproto's generated client: the
//! `default` group with PD's settings, adding, reading, modifying and deleting groups with
//! PD's answers and errors, the groups still there after a restart (on the embedded store, and
//! on etcd across a leader's SIGKILL, where TiDB's controller also finds each record through
//! `MetaStorage`), roles, and token buckets granted over the AcquireTokenBuckets stream within
//! the fill rate, the burst and PD's loans, whose drained state a restarted or new leader
//! resumes. One file per concern: the groups (`groups`), the grants (`tokens`), a drained
//! bucket across a restart or a new leader (`resume`); the shared calls are here.

mod groups;
mod resume;
mod tokens;

use std::time::{Duration, Instant};

use meridian::harness::{
    null_keyspace, ru_group, test_binary, token_request, Cluster, ServerProcess,
};
use meridian::kvproto::meta_storagepb::{meta_storage_client::MetaStorageClient, GetRequest};
use meridian::kvproto::resource_manager::{
    keyspace_id_value, resource_manager_client::ResourceManagerClient, Consumption,
    DeleteResourceGroupRequest, GetResourceGroupRequest, GroupMode, KeyspaceIdValue,
    ListResourceGroupsRequest, PutResourceGroupRequest, ResourceGroup, TokenBucketsRequest,
    TokenBucketsResponse,
};
use meridian::pd_grpc;
use meridian::tls::cert::Role;
use meridian::tls::Trust;
use prost::Message;
use tonic::transport::Channel;
use tonic::Code;

type Rm = ResourceManagerClient<Channel>;

async fn rm(addr: &str, trust: &Trust) -> Rm {
    ResourceManagerClient::new(pd_grpc::channel(addr, trust).await.unwrap())
}

fn settings(g: &ResourceGroup) -> (u64, i64) {
    let s = g
        .r_u_settings
        .as_ref()
        .and_then(|s| s.r_u.as_ref())
        .and_then(|b| b.settings.as_ref())
        .expect("RU settings");
    (s.fill_rate, s.burst_limit)
}

async fn list(rm: &mut Rm) -> Result<Vec<ResourceGroup>, tonic::Status> {
    Ok(rm
        .list_resource_groups(ListResourceGroupsRequest {
            with_ru_stats: false,
            keyspace_id: null_keyspace(),
        })
        .await?
        .into_inner()
        .groups)
}

/// The groups, once the node leads and has loaded its term.
async fn list_when_serving(rm: &mut Rm) -> Vec<ResourceGroup> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match list(rm).await {
            Ok(groups) => return groups,
            Err(s) if s.code() == Code::Unavailable && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(s) => panic!("the resource manager never served: {s:?}"),
        }
    }
}

async fn add(rm: &mut Rm, g: ResourceGroup) -> Result<String, tonic::Status> {
    Ok(rm
        .add_resource_group(PutResourceGroupRequest { group: Some(g) })
        .await?
        .into_inner()
        .body)
}

async fn modify(rm: &mut Rm, g: ResourceGroup) -> Result<String, tonic::Status> {
    Ok(rm
        .modify_resource_group(PutResourceGroupRequest { group: Some(g) })
        .await?
        .into_inner()
        .body)
}

async fn get(rm: &mut Rm, name: &str) -> Result<ResourceGroup, tonic::Status> {
    Ok(rm
        .get_resource_group(GetResourceGroupRequest {
            resource_group_name: name.into(),
            with_ru_stats: false,
            keyspace_id: null_keyspace(),
        })
        .await?
        .into_inner()
        .group
        .expect("a group"))
}

async fn delete(rm: &mut Rm, name: &str) -> Result<String, tonic::Status> {
    Ok(rm
        .delete_resource_group(DeleteResourceGroupRequest {
            resource_group_name: name.into(),
            keyspace_id: null_keyspace(),
        })
        .await?
        .into_inner()
        .body)
}

/// PD's error for a call: gRPC's `Unknown` with PD's message.
fn pd_error(result: Result<impl std::fmt::Debug, tonic::Status>, message: &str) {
    let status = result.expect_err(message);
    assert_eq!(
        (status.code(), status.message()),
        (Code::Unknown, message),
        "{status:?}"
    );
}

/// A client of the resource manager at `addr`, once that serves; the groups it serves then.
async fn serving(addr: &str, trust: &Trust) -> (Rm, Vec<ResourceGroup>) {
    let mut rm = rm(addr, trust).await;
    let groups = list_when_serving(&mut rm).await;
    (rm, groups)
}

/// A single node on `data` (new, or started again on what a stopped one left), once it
/// serves: the node, a client of its resource manager, the groups it serves.
async fn start_serving(data: &std::path::Path) -> (ServerProcess, Rm, Vec<ResourceGroup>) {
    let node = ServerProcess::start(test_binary(), data, "127.0.0.1:0", Some(1)).unwrap();
    let (rm, groups) = serving(&node.grpc_addr.clone().unwrap(), &node.trust()).await;
    (node, rm, groups)
}

/// Three nodes on etcd below `dir`, once one leads: the cluster, the leader, the trust and a
/// client of the leader's resource manager.
async fn led_on_etcd(dir: &std::path::Path) -> (Cluster, usize, Trust, Rm) {
    let (cluster, leader) = Cluster::start_led(dir, 3, "", Duration::from_secs(15)).unwrap();
    let trust = cluster.trust();
    let (rm, _) = serving(&cluster.grpc_addr(leader), &trust).await;
    (cluster, leader, trust, rm)
}

/// Kills the `leader`; a client of the next leader's resource manager once that serves, and
/// the groups it serves.
async fn next_leader(
    cluster: &mut Cluster,
    leader: usize,
    trust: &Trust,
) -> (Rm, Vec<ResourceGroup>) {
    cluster.nodes[leader].kill().unwrap();
    let next = cluster
        .leader_within(Some(leader), Duration::from_secs(20))
        .expect("a new leader");
    serving(&cluster.grpc_addr(next), trust).await
}

/// The RU tokens group `name` holds.
async fn tokens(rm: &mut Rm, name: &str) -> f64 {
    get(rm, name)
        .await
        .unwrap()
        .r_u_settings
        .and_then(|s| s.r_u)
        .unwrap()
        .tokens
}

fn names(groups: &[ResourceGroup]) -> Vec<&str> {
    groups.iter().map(|g| g.name.as_str()).collect()
}

/// The RU granted to each group answered, in order.
fn granted(reply: &TokenBucketsResponse) -> Vec<f64> {
    reply
        .responses
        .iter()
        .flat_map(|r| &r.granted_r_u_tokens)
        .map(|g| g.granted_tokens.as_ref().unwrap().tokens)
        .collect()
}

/// An AcquireTokenBuckets stream of its own: the sender of its requests, and its replies.
async fn token_stream(
    rm: &mut Rm,
) -> (
    tokio::sync::mpsc::Sender<TokenBucketsRequest>,
    tonic::Streaming<TokenBucketsResponse>,
) {
    let (send, requests) = tokio::sync::mpsc::channel(4);
    let replies = rm
        .acquire_token_buckets(tokio_stream::wrappers::ReceiverStream::new(requests))
        .await
        .unwrap()
        .into_inner();
    (send, replies)
}

/// One request on an AcquireTokenBuckets stream of its own, and its answer.
async fn grant_once(rm: &mut Rm, ask: TokenBucketsRequest) -> TokenBucketsResponse {
    let mut replies = rm
        .acquire_token_buckets(tokio_stream::iter([ask]))
        .await
        .unwrap()
        .into_inner();
    replies.message().await.unwrap().expect("an answer")
}

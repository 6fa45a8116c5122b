//! A TiDB 8.5 server's start against Meridian, emulated from the code that makes its calls:
//! PD's Go client (GetMembers, the TSO stream, GetAllStores for client-go's store cache),
//! TiDB's `pkg/domain/infosync` (an etcd session, `/tidb/server/info/<id>` under its lease, a
//! topology session of 45 s with `/topology/tidb/<addr>/info`), its schema syncer
//! (`/tidb/ddl/all_schema_versions/<id>` under the lease, a watch on
//! `/tidb/ddl/global_schema_version`), its DDL owner election (etcd's `concurrency.Election`:
//! a transaction that creates `/tidb/ddl/fg/owner/<lease>` only if absent, then the prefix read
//! oldest first), the resource-group controller of PD's client
//! (`client/resource_group/controller`: MetaStorage Get of `resource_group/controller`,
//! ListResourceGroups, a MetaStorage watch of `resource_group/settings`, AcquireTokenBuckets),
//! the global config (LoadGlobalConfig and WatchGlobalConfig on `/global/config`), and the
//! HTTP reads its PD HTTP client makes at start (label rules, placement rule bundles, stores,
//! the replication config, min resolved ts). Every call must succeed: an UNIMPLEMENTED or a
//! refusal stops a real TiDB's start. On a 3-member cluster on etcd, across a SIGKILL of the
//! leader: the etcd session outlives the failover (its lease is etcd's), and the calls that
//! follow succeed on the new leader.

use meridian::etcdpb::etcdserverpb::{
    compare, kv_client::KvClient, lease_client::LeaseClient, request_op, watch_client::WatchClient,
    watch_request::RequestUnion, Compare, LeaseGrantRequest, LeaseKeepAliveRequest, PutRequest,
    RangeRequest, RequestOp, TxnRequest, WatchCreateRequest, WatchRequest,
};
use meridian::harness::{ru_group, token_request, Cluster};
use meridian::kvproto::meta_storagepb::{
    meta_storage_client::MetaStorageClient, GetRequest as MetaGet, RequestHeader as MetaHeader,
    WatchRequest as MetaWatch,
};
use meridian::kvproto::resource_manager::{
    resource_manager_client::ResourceManagerClient, ListResourceGroupsRequest,
    PutResourceGroupRequest,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::*;

const ID: &str = "5f6e0a1c-tidb-0";
const ADDR: &str = "127.0.0.1:4000";

/// `key`'s prefix range end, as etcd's `clientv3.WithPrefix` makes it.
fn prefix_end(key: &[u8]) -> Vec<u8> {
    let mut end = key.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

fn ok<T>(what: &str, r: Result<tonic::Response<T>, tonic::Status>) -> T {
    match r {
        Ok(r) => r.into_inner(),
        Err(s) => panic!("{what}: {} {}", s.code(), s.message()),
    }
}

async fn put(kv: &mut KvClient<Channel>, key: &str, value: &str, lease: i64) -> i64 {
    let r = kv
        .put(PutRequest {
            key: key.into(),
            value: value.into(),
            lease,
            ..Default::default()
        })
        .await;
    ok(key, r).header.map(|h| h.revision).unwrap_or_default()
}

async fn grant(lease: &mut LeaseClient<Channel>, ttl: i64) -> i64 {
    let r = lease.lease_grant(LeaseGrantRequest { ttl, id: 0 }).await;
    let g = ok("LeaseGrant", r);
    assert!(g.error.is_empty(), "{}", g.error);
    g.id
}

/// One keep-alive of `id`, as the session's keep-alive loop sends it every TTL/3: the TTL
/// left.
async fn keep_alive(lease: &mut LeaseClient<Channel>, id: i64) -> i64 {
    let (tx, rx) = mpsc::channel(1);
    tx.send(LeaseKeepAliveRequest { id }).await.unwrap();
    let mut replies = ok(
        "LeaseKeepAlive",
        lease.lease_keep_alive(ReceiverStream::new(rx)).await,
    );
    let reply = tokio::time::timeout(Duration::from_secs(5), replies.message())
        .await
        .expect("a keep-alive answer")
        .unwrap()
        .expect("one answer");
    reply.ttl
}

/// A watch on `key` (a prefix when `prefix`), created and confirmed.
async fn watch(
    addr: &str,
    trust: &Trust,
    key: &str,
    prefix: bool,
) -> (
    mpsc::Sender<WatchRequest>,
    tonic::Streaming<meridian::etcdpb::etcdserverpb::WatchResponse>,
) {
    let (tx, rx) = mpsc::channel(4);
    tx.send(WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
            key: key.into(),
            range_end: if prefix {
                prefix_end(key.as_bytes())
            } else {
                Vec::new()
            },
            ..Default::default()
        })),
    })
    .await
    .unwrap();
    let channel = pd_grpc::channel(addr, trust).await.unwrap();
    let mut stream = ok(
        "Watch",
        WatchClient::new(channel)
            .watch(ReceiverStream::new(rx))
            .await,
    );
    let created = stream.message().await.unwrap().expect("created");
    assert!(created.created, "{created:?}");
    (tx, stream)
}

/// The HTTP reads TiDB's PD HTTP client makes at start; each answers 200 with JSON.
async fn http_reads(addr: &str, trust: &Trust) {
    for path in [
        "/pd/api/v1/config/region-label/rules",
        "/pd/api/v1/config/placement-rule",
        "/pd/api/v1/stores",
        "/pd/api/v1/config/replicate",
        "/pd/api/v1/min-resolved-ts",
    ] {
        let a = get(addr, trust, Proto::H2, path).await;
        assert_eq!(a.status, StatusCode::OK, "{path}: {}", a.text());
        let _ = a.json();
    }
}

/// The PD calls of a start: GetAllStores, one timestamp, the resource-group controller's,
/// the global config's.
async fn pd_calls(addr: &str, trust: &Trust, cluster_id: u64, round: u32) {
    let channel = pd_grpc::channel(addr, trust).await.unwrap();
    let mut pd = PdClient::new(channel.clone());
    let h = pd_header(cluster_id);
    let stores = ok(
        "GetAllStores",
        pd.get_all_stores(pdpb::GetAllStoresRequest {
            header: h.clone(),
            exclude_tombstone_stores: true,
        })
        .await,
    );
    assert_eq!(stores.header.and_then(|h| h.error), None);
    let mut tso = ok(
        "Tso",
        pd.tso(tokio_stream::iter([pdpb::TsoRequest {
            header: h.clone(),
            count: 1,
            ..Default::default()
        }]))
        .await,
    );
    assert!(tso.message().await.unwrap().is_some(), "a timestamp");

    // The resource-group controller: its config, the groups, a watch from their revision,
    // and tokens for the default group.
    let mut meta = MetaStorageClient::new(channel.clone());
    let header = Some(MetaHeader {
        cluster_id,
        source: "resource_group".into(),
    });
    let config = ok(
        "MetaStorage.Get controller",
        meta.get(MetaGet {
            header: header.clone(),
            key: b"resource_group/controller".to_vec(),
            ..Default::default()
        })
        .await,
    );
    assert_eq!(config.header.as_ref().and_then(|h| h.error.clone()), None);
    let mut rm = ResourceManagerClient::new(channel.clone());
    let groups = ok(
        "ListResourceGroups",
        rm.list_resource_groups(ListResourceGroupsRequest::default())
            .await,
    );
    assert!(
        groups.groups.iter().any(|g| g.name == "default"),
        "the default group: {groups:?}"
    );
    let revision = config.header.map(|h| h.revision).unwrap_or_default();
    let mut settings = ok(
        "MetaStorage.Watch settings",
        meta.watch(MetaWatch {
            header,
            key: b"resource_group/settings".to_vec(),
            range_end: prefix_end(b"resource_group/settings"),
            start_revision: revision + 1,
            prev_kv: true,
        })
        .await,
    );
    // CREATE RESOURCE GROUP from another TiDB: the watch sees the group's record.
    let name = format!("oltp-{round}");
    let added = rm
        .add_resource_group(PutResourceGroupRequest {
            group: Some(ru_group(&name, 1_000, 1_000)),
        })
        .await;
    ok("AddResourceGroup", added);
    let event = tokio::time::timeout(Duration::from_secs(5), settings.message())
        .await
        .expect("the watch sees the new group")
        .unwrap()
        .expect("the watch goes on");
    assert_eq!(event.header.as_ref().and_then(|h| h.error.clone()), None);
    assert!(
        event.events.iter().any(|e| e
            .kv
            .as_ref()
            .is_some_and(|kv| kv.key.ends_with(name.as_bytes()))),
        "{event:?}"
    );
    let (tx, rx) = mpsc::channel(1);
    tx.send(token_request(&[("default", 1_000.0)], 7))
        .await
        .unwrap();
    let mut tokens = ok(
        "AcquireTokenBuckets",
        rm.acquire_token_buckets(ReceiverStream::new(rx)).await,
    );
    let granted = tokens.message().await.unwrap().expect("a grant");
    assert_eq!(granted.error, None, "{granted:?}");
    assert_eq!(granted.responses.len(), 1);

    // The global config TiDB loads and follows.
    let loaded = ok(
        "LoadGlobalConfig",
        pd.load_global_config(pdpb::LoadGlobalConfigRequest {
            names: Vec::new(),
            config_path: "/global/config".into(),
        })
        .await,
    );
    let mut changes = ok(
        "WatchGlobalConfig",
        pd.watch_global_config(pdpb::WatchGlobalConfigRequest {
            config_path: "/global/config".into(),
            revision: loaded.revision,
        })
        .await,
    );
    // The watch is open; a change shows on it.
    let stored = ok(
        "StoreGlobalConfig",
        pd.store_global_config(pdpb::StoreGlobalConfigRequest {
            changes: vec![pdpb::GlobalConfigItem {
                name: "enable_resource_control".into(),
                payload: b"true".to_vec(),
                kind: pdpb::EventType::Put as i32,
                ..Default::default()
            }],
            config_path: "/global/config".into(),
        })
        .await,
    );
    assert_eq!(stored.error, None);
    let change = tokio::time::timeout(Duration::from_secs(5), changes.message())
        .await
        .expect("a global config change")
        .unwrap()
        .expect("the watch goes on");
    assert!(
        change
            .changes
            .iter()
            .any(|c| c.name.ends_with("enable_resource_control")),
        "{change:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tidb_server_starts_against_meridian_and_its_session_outlives_the_leader() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Cluster::start(tmp.path(), 3, "[election]\nlease_ttl_secs = 2\n").unwrap();
    let trust = c.trust();
    let leader = tokio::task::block_in_place(|| c.leader_within(None, Duration::from_secs(20)))
        .expect("a leader");
    let at = |c: &Cluster, i: usize| c.nodes[i].process().client_addr.clone();
    let addr = at(&c, leader);
    let (mut pd, cluster_id) = connect_when_placement_loads(&addr, &trust, Duration::from_secs(20))
        .await
        .unwrap();
    // TiDB needs a bootstrapped cluster (TiKV did it): one store, one region.
    let h = pd_header(cluster_id);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let r = ok(
            "AllocID",
            pd.alloc_id(pdpb::AllocIdRequest {
                header: h.clone(),
                count: 0,
            })
            .await,
        );
        ids.push(r.id);
    }
    let boot = ok(
        "Bootstrap",
        pd.bootstrap(pdpb::BootstrapRequest {
            header: h.clone(),
            store: Some(meridian::kvproto::metapb::Store {
                id: ids[0],
                address: "tikv-0:20160".into(),
                version: "8.5.4".into(),
                ..Default::default()
            }),
            region: Some(meridian::kvproto::metapb::Region {
                id: ids[1],
                region_epoch: Some(meridian::kvproto::metapb::RegionEpoch {
                    conf_ver: 1,
                    version: 1,
                }),
                peers: vec![meridian::kvproto::metapb::Peer {
                    id: ids[2],
                    store_id: ids[0],
                    ..Default::default()
                }],
                ..Default::default()
            }),
        })
        .await,
    );
    assert_eq!(boot.header.and_then(|h| h.error), None);

    // The etcd sessions and the keys TiDB keeps under their leases.
    let channel = pd_grpc::channel(&addr, &trust).await.unwrap();
    let mut kv = KvClient::new(channel.clone());
    let mut lease = LeaseClient::new(channel);
    let session = grant(&mut lease, 60).await;
    assert!(keep_alive(&mut lease, session).await > 0);
    let info = format!(
        r#"{{"version":"8.0.11-TiDB-v8.5.4","ddl_id":"{ID}","ip":"127.0.0.1","listening_port":4000,"status_port":10080,"lease":"45s"}}"#
    );
    put(&mut kv, &format!("/tidb/server/info/{ID}"), &info, session).await;
    let topology = grant(&mut lease, 45).await;
    put(
        &mut kv,
        &format!("/topology/tidb/{ADDR}/info"),
        &info,
        topology,
    )
    .await;
    put(
        &mut kv,
        &format!("/topology/tidb/{ADDR}/ttl"),
        "1764000000000000000",
        topology,
    )
    .await;
    put(
        &mut kv,
        &format!("/tidb/ddl/all_schema_versions/{ID}"),
        "0",
        session,
    )
    .await;
    let (_keep, mut schema) = watch(&addr, &trust, "/tidb/ddl/global_schema_version", false).await;

    // The DDL owner election: create the candidate key only if absent, then the oldest
    // candidate under the prefix leads.
    let candidate = format!("/tidb/ddl/fg/owner/{session:x}");
    let txn = ok(
        "Txn campaign",
        kv.txn(TxnRequest {
            compare: vec![Compare {
                result: compare::CompareResult::Equal as i32,
                target: compare::CompareTarget::Create as i32,
                key: candidate.clone().into(),
                target_union: Some(compare::TargetUnion::CreateRevision(0)),
                ..Default::default()
            }],
            success: vec![RequestOp {
                request: Some(request_op::Request::RequestPut(PutRequest {
                    key: candidate.clone().into(),
                    value: ID.into(),
                    lease: session,
                    ..Default::default()
                })),
            }],
            failure: vec![RequestOp {
                request: Some(request_op::Request::RequestRange(RangeRequest {
                    key: candidate.clone().into(),
                    ..Default::default()
                })),
            }],
        })
        .await,
    );
    assert!(txn.succeeded, "the first candidate creates its key");
    let owners = ok(
        "Range owners",
        kv.range(RangeRequest {
            key: b"/tidb/ddl/fg/owner".to_vec(),
            range_end: prefix_end(b"/tidb/ddl/fg/owner"),
            sort_order: 1,  // ascend
            sort_target: 2, // create revision
            limit: 1,
            ..Default::default()
        })
        .await,
    );
    assert_eq!(
        owners.kvs.first().map(|kv| kv.key.as_slice()),
        Some(candidate.as_bytes())
    );
    // The owner publishes a schema version; the syncer's watch sees it.
    put(&mut kv, "/tidb/ddl/global_schema_version", "1", 0).await;
    let event = tokio::time::timeout(Duration::from_secs(5), schema.message())
        .await
        .expect("the schema version change")
        .unwrap()
        .expect("the watch goes on");
    assert_eq!(event.events[0].kv.as_ref().unwrap().value, b"1");

    pd_calls(&addr, &trust, cluster_id, 1).await;
    http_reads(&addr, &trust).await;

    // The leader dies. The session's lease is etcd's: kept alive through another member, it
    // and the keys under it are still there; the calls of a start succeed on the new leader.
    c.nodes[leader].process.take().unwrap().kill().unwrap();
    let other = (leader + 1) % 3;
    let channel = pd_grpc::channel(&at(&c, other), &trust).await.unwrap();
    let mut lease = LeaseClient::new(channel.clone());
    let mut kv = KvClient::new(channel);
    assert!(
        keep_alive(&mut lease, session).await > 0,
        "the session is alive"
    );
    let info_now = ok(
        "Range server info",
        kv.range(RangeRequest {
            key: format!("/tidb/server/info/{ID}").into(),
            ..Default::default()
        })
        .await,
    );
    assert_eq!(
        info_now.kvs.len(),
        1,
        "the server info outlived the failover"
    );
    let next =
        tokio::task::block_in_place(|| c.leader_within(Some(leader), Duration::from_secs(20)))
            .expect("a new leader");
    let addr = at(&c, next);
    let (_, same_cluster) = connect_when_placement_loads(&addr, &trust, Duration::from_secs(20))
        .await
        .expect("the new leader serves");
    assert_eq!(same_cluster, cluster_id);
    pd_calls(&addr, &trust, cluster_id, 2).await;
    http_reads(&addr, &trust).await;
    c.stop_all().unwrap();
}

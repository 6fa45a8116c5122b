//! kvproto's `MetaStorage` against the real binary and a real etcd, with kvproto's generated
//! client, called as TiKV's resource control and TiDB's resource-group controller call it: Get
//! (one key, a prefix, a revision, a limit), Put (with the previous value), Delete, and Watch
//! (a prefix with previous values; from a compacted revision, PD's `DATA_COMPACTED`), all
//! inside the etcd namespace the etcd API uses, so Meridian's own keys are out of reach;
//! etcd's refusals come back in PD's header; a `store` certificate reads but does not write;
//! a node without etcd says to run on etcd; the leader writes PD's resource controller config
//! where TiDB's controller reads it.

use std::time::Duration;

use meridian::harness::{assert_needs_etcd, connect_when_placement_loads, ServerProcess};
use meridian::kvproto::meta_storagepb::{
    event::EventType, meta_storage_client::MetaStorageClient, DeleteRequest, ErrorType, GetRequest,
    GetResponse, PutRequest, RequestHeader, WatchRequest, WatchResponse,
};
use meridian::pd_grpc;
use meridian::tls::cert::Role;
use meridian::tls::Trust;
use tonic::transport::Channel;
use tonic::{Code, Streaming};

type Meta = MetaStorageClient<Channel>;

async fn meta(addr: &str, trust: &Trust) -> Meta {
    MetaStorageClient::new(pd_grpc::channel(addr, trust).await.unwrap())
}

/// What TiKV's and PD's clients put in the header.
fn header() -> Option<RequestHeader> {
    Some(RequestHeader {
        cluster_id: 0,
        source: "resource_manager".into(),
    })
}

async fn put(meta: &mut Meta, key: &str, value: &str) -> i64 {
    let reply = meta
        .put(PutRequest {
            header: header(),
            key: key.into(),
            value: value.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let header = reply.header.unwrap();
    assert_eq!(header.error, None);
    header.revision
}

/// Get of the keys from `key` up to `range_end`, as TiDB's controller lists the groups.
async fn range(meta: &mut Meta, key: &[u8], range_end: &[u8]) -> GetResponse {
    meta.get(GetRequest {
        key: key.to_vec(),
        range_end: range_end.to_vec(),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
}

/// The first answer of `watch` that carries events, within a few seconds.
async fn next_events(watch: &mut Streaming<WatchResponse>) -> WatchResponse {
    tokio::time::timeout(Duration::from_secs(5), watch.message())
        .await
        .expect("an answer")
        .unwrap()
        .expect("the watch goes on")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_put_delete_and_watch_inside_the_namespace() {
    let tmp = tempfile::tempdir().unwrap();
    let (etcd, node) = ServerProcess::start_with_etcd(tmp.path()).unwrap();
    let addr = node.grpc_addr.clone().unwrap();
    let mut meta = meta(&addr, &node.trust()).await;

    // The controller's config and a prefix watch with previous values, as TiDB opens them.
    let first = put(&mut meta, "resource_group/controller", "{}").await;
    assert!(first > 0);
    let mut watch = meta
        .watch(WatchRequest {
            header: header(),
            key: b"resource_group/settings".to_vec(),
            range_end: b"resource_group/settingt".to_vec(),
            start_revision: 0,
            prev_kv: true,
        })
        .await
        .unwrap()
        .into_inner();
    // The watch starts asynchronously at etcd: write until it reports.
    let mut answer = None;
    for _ in 0..50 {
        put(&mut meta, "resource_group/settings/a", "1").await;
        if let Ok(Ok(Some(a))) =
            tokio::time::timeout(Duration::from_millis(200), watch.message()).await
        {
            answer = Some(a);
            break;
        }
    }
    let answer = answer.expect("the watch saw a put");
    let header = answer.header.as_ref().unwrap();
    assert_eq!(header.error, None);
    assert!(header.revision > first);
    let event = &answer.events[0];
    assert_eq!(event.r#type, EventType::Put as i32);
    let kv = event.kv.as_ref().unwrap();
    assert_eq!(
        (kv.key.as_slice(), kv.value.as_slice()),
        (&b"resource_group/settings/a"[..], &b"1"[..])
    );
    assert!(kv.mod_revision > 0 && kv.version >= 1);

    // Put with the previous value: only its key and value come back, as PD sends them.
    let reply = meta
        .put(PutRequest {
            header: self::header(),
            key: b"resource_group/settings/a".to_vec(),
            value: b"2".to_vec(),
            prev_kv: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let prev = reply.prev_kv.unwrap();
    assert_eq!(
        (prev.key.as_slice(), prev.value.as_slice()),
        (&b"resource_group/settings/a"[..], &b"1"[..])
    );
    assert_eq!(prev.mod_revision, 0);
    let event = next_events(&mut watch).await;
    assert_eq!(event.events[0].prev_kv.as_ref().unwrap().value, b"1");

    // Get: one key, a prefix, at a revision, with a limit.
    put(&mut meta, "resource_group/settings/b", "3").await;
    let one = meta
        .get(GetRequest {
            header: self::header(),
            key: b"resource_group/controller".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(one.kvs.len(), 1);
    assert_eq!(one.kvs[0].value, b"{}");
    assert_eq!(
        one.kvs[0].mod_revision, 0,
        "PD passes on keys and values only"
    );
    let all = range(
        &mut meta,
        b"resource_group/settings",
        b"resource_group/settingt",
    )
    .await;
    assert_eq!((all.count, all.kvs.len()), (2, 2));
    let limited = meta
        .get(GetRequest {
            key: b"resource_group/settings".to_vec(),
            range_end: b"resource_group/settingt".to_vec(),
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (limited.kvs.len(), limited.more, limited.count),
        (1, true, 2)
    );
    let then = meta
        .get(GetRequest {
            key: b"resource_group/controller".to_vec(),
            revision: first,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(then.kvs[0].value, b"{}");

    // Delete, seen by the watch with the value it had.
    let deleted = meta
        .delete(DeleteRequest {
            header: self::header(),
            key: b"resource_group/settings/b".to_vec(),
            prev_kv: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.deleted, 1);
    assert_eq!(deleted.prev_kvs[0].value, b"3");
    let mut seen = next_events(&mut watch).await;
    while seen.events[0].r#type != EventType::Delete as i32 {
        seen = next_events(&mut watch).await;
    }
    assert_eq!(
        seen.events[0].kv.as_ref().unwrap().key,
        b"resource_group/settings/b"
    );
    assert_eq!(seen.events[0].prev_kv.as_ref().unwrap().value, b"3");

    // Everything landed in the real etcd under the namespace, and Meridian's own keys are
    // out of reach: a range over them through MetaStorage is empty.
    let mut direct = etcd.client(None).await.unwrap();
    let stored = direct
        .get("/meridian-kv/resource_group/controller", None)
        .await
        .unwrap();
    assert_eq!(stored.kvs()[0].value(), b"{}");
    assert!(!etcd.meridian_keys().await.unwrap().is_empty());
    let outside = range(&mut meta, b"/meridian/", b"/meridian0").await;
    assert_eq!((outside.count, outside.kvs.len()), (0, 0));
    let everything = range(&mut meta, &[0], &[0]).await;
    assert!(
        everything
            .kvs
            .iter()
            .all(|kv| !kv.key.starts_with(b"/meridian")),
        "{everything:?}"
    );

    // etcd's refusal, in PD's header: an empty key.
    let empty = meta.put(PutRequest::default()).await.unwrap().into_inner();
    let error = empty.header.unwrap().error.unwrap();
    assert_eq!(
        (error.r#type, error.message.as_str()),
        (ErrorType::Unknown as i32, "etcdserver: key is not provided")
    );
    node.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_compacted_revision_is_told_so() {
    let tmp = tempfile::tempdir().unwrap();
    let (etcd, node) = ServerProcess::start_with_etcd(tmp.path()).unwrap();
    let addr = node.grpc_addr.clone().unwrap();
    let mut meta = meta(&addr, &node.trust()).await;
    put(&mut meta, "k", "1").await;
    let revision = put(&mut meta, "k", "2").await;
    let mut direct = etcd.client(None).await.unwrap();
    direct.compact(revision, None).await.unwrap();

    let mut watch = meta
        .watch(WatchRequest {
            key: b"k".to_vec(),
            start_revision: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let answer = next_events(&mut watch).await;
    let error = answer.header.unwrap().error.unwrap();
    assert_eq!(error.r#type, ErrorType::DataCompacted as i32, "{error:?}");
    assert_eq!(
        error.message,
        format!(
            "required watch revision: 1 is smaller than current compact/min revision {revision}."
        )
    );
    assert_eq!(answer.compact_revision, revision);
    let end = tokio::time::timeout(Duration::from_secs(5), watch.message())
        .await
        .expect("the watch ends");
    assert!(end.is_err() || end.unwrap().is_none());
    node.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_certificate_reads_and_is_refused_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let (_etcd, node) = ServerProcess::start_with_etcd(tmp.path()).unwrap();
    let addr = node.grpc_addr.clone().unwrap();
    let tikv = node.role_cert(Role::Store, "tikv").unwrap();
    let mut store = meta(&addr, &tikv).await;
    let reply = range(
        &mut store,
        b"resource_group/settings",
        b"resource_group/settingt",
    )
    .await;
    assert_eq!(reply.header.unwrap().error, None);
    for refused in [
        store
            .put(PutRequest {
                key: b"x".to_vec(),
                ..Default::default()
            })
            .await
            .map(|_| ()),
        store
            .delete(DeleteRequest {
                key: b"x".to_vec(),
                ..Default::default()
            })
            .await
            .map(|_| ()),
    ] {
        let status = refused.unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
        assert!(status.message().contains("`client`"), "{status:?}");
    }
    node.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_etcd_meta_storage_is_unavailable_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let node = ServerProcess::start_embedded(&tmp.path().join("n0")).unwrap();
    let mut meta = meta(node.grpc_addr.as_deref().unwrap(), &node.trust()).await;
    let refused = meta
        .get(GetRequest {
            key: b"resource_group/controller".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_needs_etcd(&refused);
    let refused = meta.watch(WatchRequest::default()).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    node.stop().unwrap();
}

/// What TiDB's controller decodes from `resource_group/controller` (tikv/pd
/// `client/resource_group/controller/config.go`: `Config`, `RequestUnitConfig`), field names
/// and types as Go's `encoding/json` reads them; an unknown field would be ignored by Go, so
/// this checks the fields are there and typed as Go wants.
#[derive(serde::Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct ControllerConfig {
    #[serde(rename = "degraded-mode-wait-duration")]
    degraded_mode_wait_duration: String,
    #[serde(rename = "ltb-max-wait-duration")]
    ltb_max_wait_duration: String,
    #[serde(rename = "ltb-token-rpc-max-delay")]
    ltb_token_rpc_max_delay: String,
    #[serde(rename = "request-unit")]
    request_unit: RequestUnit,
    /// A bool under Go's `,string` tag: the string `"true"` or `"false"`.
    #[serde(rename = "enable-controller-trace-log")]
    enable_controller_trace_log: String,
    #[serde(rename = "push-metrics-address")]
    push_metrics_address: String,
    #[serde(rename = "push-metrics-interval")]
    push_metrics_interval: String,
}

#[derive(serde::Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RequestUnit {
    read_base_cost: f64,
    read_per_batch_base_cost: f64,
    read_cost_per_byte: f64,
    write_base_cost: f64,
    write_per_batch_base_cost: f64,
    write_cost_per_byte: f64,
    read_cpu_ms_cost: f64,
}

/// As PD's resource manager does when it starts, the leader writes PD's default controller
/// config where TiDB's controller reads it (`loadServerConfig`: one `MetaStorage.Get`), and
/// any role reads it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_writes_pds_controller_config_where_tidb_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (etcd, node) = ServerProcess::start_with_etcd(tmp.path()).unwrap();
    let addr = node.grpc_addr.clone().unwrap();
    let tidb = node.role_cert(Role::Client, "tidb").unwrap();
    let mut meta = meta(&addr, &tidb).await;
    let get = GetRequest {
        header: header(),
        key: b"resource_group/controller".to_vec(),
        ..Default::default()
    };
    // Written with the term's load, which follows the election.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let value = loop {
        let reply = meta.get(get.clone()).await.unwrap().into_inner();
        assert_eq!(reply.header.unwrap().error, None);
        if let Some(kv) = reply.kvs.first() {
            assert_eq!(kv.key, b"resource_group/controller");
            break kv.value.clone();
        }
        assert!(std::time::Instant::now() < deadline, "never written");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let config: ControllerConfig = serde_json::from_slice(&value)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&value)));
    assert_eq!(config.degraded_mode_wait_duration, "0s");
    assert_eq!(config.ltb_max_wait_duration, "30s");
    assert_eq!(config.ltb_token_rpc_max_delay, "1s");
    assert_eq!(config.enable_controller_trace_log, "false");
    assert_eq!(config.push_metrics_address, "");
    assert_eq!(config.push_metrics_interval, "0s");
    let ru = &config.request_unit;
    assert_eq!(ru.read_base_cost, 0.125);
    assert_eq!(ru.read_per_batch_base_cost, 0.5);
    assert_eq!(ru.read_cost_per_byte, 1.0 / 65536.0);
    assert_eq!(ru.write_base_cost, 1.0);
    assert_eq!(ru.write_per_batch_base_cost, 1.0);
    assert_eq!(ru.write_cost_per_byte, 1.0 / 1024.0);
    assert_eq!(ru.read_cpu_ms_cost, 1.0 / 3.0);

    // TiKV's store certificate reads it too.
    let tikv = node.role_cert(Role::Store, "tikv").unwrap();
    let mut store = self::meta(&addr, &tikv).await;
    let reply = store.get(get.clone()).await.unwrap().into_inner();
    assert_eq!(reply.kvs[0].value, value);

    // At the next term, a config PD's manager would not load is replaced with PD's default;
    // one it would load is kept as it is.
    let mut node = node;
    for (stored, kept) in [
        ("not json", false),
        (r#"{"ltb-max-wait-duration":"10s"}"#, true),
    ] {
        let addr = node.grpc_addr.clone().unwrap();
        put(
            &mut self::meta(&addr, &tidb).await,
            "resource_group/controller",
            stored,
        )
        .await;
        node.stop().unwrap();
        node = ServerProcess::start_on_etcd(&etcd, &tmp.path().join("n0"), &[]).unwrap();
        let addr = node.grpc_addr.clone().unwrap();
        // Placement serves once the term's load, which writes the config, is done.
        connect_when_placement_loads(&addr, &node.trust(), Duration::from_secs(20))
            .await
            .unwrap();
        let reply = self::meta(&addr, &tidb)
            .await
            .get(get.clone())
            .await
            .unwrap()
            .into_inner();
        let expected = if kept {
            stored
        } else {
            meridian::resource_group::DEFAULT_CONTROLLER_CONFIG
        };
        assert_eq!(
            String::from_utf8_lossy(&reply.kvs[0].value),
            expected,
            "{stored}"
        );
    }
    node.stop().unwrap();
}

//! etcd v3 at the client address, against a real etcd and the real binary: Debian's `etcdctl`
//! works unchanged with Meridian's client certificate (put, get, leases and keep-alive, watch,
//! txn) and sees nothing of Meridian's own keys, while what it writes lands in the real etcd
//! under `/meridian-kv/`; a caller without a certificate gets nothing, a `store` certificate
//! may read but not write, Meridian's own lease is out of a client's reach, a node without
//! etcd says so, and an etcd session's lease outlives the SIGKILL of the member it was
//! granted through.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use meridian::etcdpb::etcdserverpb::{
    kv_client::KvClient, lease_client::LeaseClient, watch_client::WatchClient,
    watch_request::RequestUnion, LeaseGrantRequest, LeaseKeepAliveRequest, LeaseLeasesRequest,
    LeaseRevokeRequest, LeaseTimeToLiveRequest, PutRequest, RangeRequest, WatchCreateRequest,
    WatchRequest,
};
use meridian::harness::{
    assert_needs_etcd, test_binary, Cluster, EtcdProcess, ServerProcess, ROOT_PASSWORD,
};
use meridian::pd_grpc;
use meridian::tls::cert::Role;
use meridian::tls::Trust;
use tonic::transport::Channel;
use tonic::Code;

/// Puts `key` through the node and reads it back through it.
async fn round_trip(kv: &mut KvClient<Channel>, key: &[u8]) -> Result<(), tonic::Status> {
    kv.put(PutRequest {
        key: key.to_vec(),
        value: b"v".to_vec(),
        ..Default::default()
    })
    .await?;
    let kvs = kv
        .range(RangeRequest {
            key: key.to_vec(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .kvs;
    assert_eq!(kvs.len(), 1);
    Ok(())
}

async fn channel(addr: &str, caller: &Trust) -> Channel {
    pd_grpc::channel(addr, caller).await.unwrap()
}

async fn kv(addr: &str, caller: &Trust) -> KvClient<Channel> {
    KvClient::new(channel(addr, caller).await)
}

async fn lease(addr: &str, caller: &Trust) -> LeaseClient<Channel> {
    LeaseClient::new(channel(addr, caller).await)
}

fn etcdctl_installed() -> bool {
    let found = Command::new("etcdctl")
        .arg("version")
        .env("ETCDCTL_API", "3")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipping: etcdctl is not installed (Debian package etcd-client)");
    }
    found
}

/// `etcdctl` (API 3) at `endpoint`, as `caller` when given: its CA, and its certificate if
/// it presents one.
fn etcdctl(endpoint: &str, caller: Option<&Trust>) -> Command {
    let mut cmd = Command::new("etcdctl");
    cmd.env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .args(["--dial-timeout=3s", "--command-timeout=5s"]);
    if let Some(caller) = caller {
        cmd.arg("--cacert")
            .arg(caller.ca().expect("a CA to verify with"));
        if let Some((cert, key)) = caller.identity_files() {
            cmd.arg("--cert").arg(cert).arg("--key").arg(key);
        }
    }
    cmd
}

fn run(mut cmd: Command, args: &[&str]) -> Output {
    cmd.args(args).output().unwrap()
}

/// Runs and insists on success; its stdout.
fn ok(cmd: Command, args: &[&str]) -> String {
    let out = run(cmd, args);
    assert!(
        out.status.success(),
        "etcdctl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// etcdctl `txn --interactive=false` with `script` on stdin.
fn txn(cmd: Command, script: &str) -> String {
    use std::io::Write;
    let mut cmd = cmd;
    let mut child = cmd
        .args(["txn", "--interactive=false"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The seconds `etcdctl lease timetolive` says remain.
fn remaining(text: &str) -> i64 {
    text.split("remaining(")
        .nth(1)
        .and_then(|t| t.split("s)").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no remaining TTL in {text:?}"))
}

#[test]
fn etcdctl_works_unchanged_at_the_client_address_inside_the_namespace() {
    if !etcdctl_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (etcd, node) = ServerProcess::start_with_etcd(tmp.path()).unwrap();
    let endpoint = format!("https://{}", node.grpc_addr.clone().unwrap());
    let me = node.trust();
    let at = || etcdctl(&endpoint, Some(&me));
    let direct = || etcdctl(&etcd.endpoint(), None);

    // put and get, one key and a prefix.
    assert_eq!(ok(at(), &["put", "/tidb/a", "1"]).trim(), "OK");
    ok(at(), &["put", "/tidb/b", "2"]);
    assert_eq!(ok(at(), &["get", "/tidb/a"]), "/tidb/a\n1\n");
    assert_eq!(
        ok(at(), &["get", "/tidb/", "--prefix"]),
        "/tidb/a\n1\n/tidb/b\n2\n"
    );
    // What was written is in the real etcd, under the namespace (the client's key follows
    // the prefix whole, its leading slash too).
    assert_eq!(
        ok(direct(), &["get", "/meridian-kv//tidb/a"]),
        "/meridian-kv//tidb/a\n1\n"
    );
    // Meridian's own keys are there too, and out of the client's sight.
    assert!(!ok(direct(), &["get", "/meridian/", "--prefix", "--keys-only"]).is_empty());
    assert_eq!(ok(at(), &["get", "/meridian/", "--prefix"]), "");
    // Every client key: the two written, and PD's resource controller config, which the
    // leader writes as its term starts (as PD's resource manager does).
    let keys = ok(at(), &["get", "", "--from-key", "--keys-only"]);
    assert_eq!(
        keys.replace("resource_group/controller\n\n", ""),
        "/tidb/a\n\n/tidb/b\n\n",
        "{keys}"
    );

    // A lease: granted, a key on it, kept alive past what its TTL left, then revoked.
    let granted = ok(at(), &["lease", "grant", "6"]);
    let id = granted.split_whitespace().nth(1).unwrap().to_string();
    ok(at(), &["put", "--lease", &id, "/tidb/session", "s"]);
    let ttl = ok(at(), &["lease", "timetolive", &id, "--keys"]);
    assert!(ttl.contains("attached keys([/tidb/session])"), "{ttl}");
    std::thread::sleep(Duration::from_secs(3));
    let mut keep_alive = at();
    keep_alive.args(["lease", "keep-alive", &id]);
    let mut keeping = keep_alive.stdout(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    BufReader::new(keeping.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let _ = keeping.kill();
    let _ = keeping.wait();
    assert!(first.contains("keepalived with TTL(6)"), "{first}");
    let left = remaining(&ok(at(), &["lease", "timetolive", &id]));
    assert!(left >= 4, "the keep-alive renewed the lease: {left} s left");
    assert!(ok(at(), &["lease", "list"]).contains(&id));
    ok(at(), &["lease", "revoke", &id]);
    assert_eq!(ok(at(), &["get", "/tidb/session"]), "");

    // A watch sees a put (retried until the watch is in place: it starts asynchronously).
    let mut watch = at();
    watch.args(["watch", "/tidb/w"]);
    let mut watching = watch.stdout(Stdio::piped()).spawn().unwrap();
    let (seen, lines) = std::sync::mpsc::channel();
    let stdout = watching.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if seen.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut events = Vec::new();
    while !events.iter().any(|l: &String| l == "PUT") {
        assert!(
            Instant::now() < deadline,
            "the watch saw nothing: {events:?}"
        );
        ok(at(), &["put", "/tidb/w", "v"]);
        while let Ok(line) = lines.recv_timeout(Duration::from_millis(300)) {
            events.push(line);
        }
    }
    let _ = watching.kill();
    let _ = watching.wait();
    let put = events.iter().position(|l| l == "PUT").unwrap();
    assert_eq!(events[put + 1..put + 3], ["/tidb/w", "v"], "{events:?}");

    // A transaction: its compare and both branches inside the namespace.
    let out = txn(
        at(),
        "value(\"/tidb/a\") = \"1\"\n\nput /tidb/a 10\nget /tidb/b\n\nput /tidb/a never\n\n",
    );
    assert!(out.starts_with("SUCCESS"), "{out}");
    assert!(out.contains("/tidb/b\n2"), "{out}");
    assert_eq!(ok(at(), &["get", "/tidb/a"]), "/tidb/a\n10\n");
    let out = txn(
        at(),
        "value(\"/tidb/a\") = \"1\"\n\nput /tidb/a no\n\nput /tidb/c 3\n\n",
    );
    assert!(out.starts_with("FAILURE"), "{out}");
    assert_eq!(
        ok(
            direct(),
            &["get", "/meridian-kv//tidb/c", "--print-value-only"]
        ),
        "3\n"
    );

    // The members listed are Meridian's, at its gRPC address.
    let members = ok(at(), &["member", "list"]);
    assert!(
        members.contains(&format!("harness, , {endpoint}")),
        "{members}"
    );

    // Compaction is not for a namespace to ask for.
    let out = run(at(), &["compact", "1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Unimplemented"));

    // Without a certificate, nothing: the handshake fails.
    let anonymous = node.anonymous_trust(&tmp.path().join("bare")).unwrap();
    let out = run(etcdctl(&endpoint, Some(&anonymous)), &["get", "/tidb/a"]);
    assert!(!out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty());
    node.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_certificate_reads_but_is_refused_writes_naming_the_role() {
    let tmp = tempfile::tempdir().unwrap();
    let (_etcd, node) = ServerProcess::start_with_etcd(tmp.path()).unwrap();
    let addr = node.grpc_addr.clone().unwrap();
    let tikv_cert = node.role_cert(Role::Store, "tikv").unwrap();
    let mut tikv = kv(&addr, &tikv_cert).await;

    let put = PutRequest {
        key: b"/tidb/x".to_vec(),
        value: b"1".to_vec(),
        ..Default::default()
    };
    let refused = tikv.put(put.clone()).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(refused.message().contains("`client`"), "{refused:?}");
    let mut lease = lease(&addr, &tikv_cert).await;
    let refused = lease
        .lease_grant(LeaseGrantRequest { ttl: 5, id: 0 })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");

    // Reads are any role's; the refused put changed nothing.
    let get = RangeRequest {
        key: b"/tidb/x".to_vec(),
        ..Default::default()
    };
    assert!(tikv
        .range(get.clone())
        .await
        .unwrap()
        .into_inner()
        .kvs
        .is_empty());
    let mut client = kv(&addr, &node.trust()).await;
    client.put(put).await.unwrap();
    let kvs = tikv.range(get).await.unwrap().into_inner().kvs;
    assert_eq!(kvs.len(), 1);
    assert_eq!(kvs[0].key, b"/tidb/x");
    node.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meridians_own_lease_is_out_of_a_clients_reach() {
    let tmp = tempfile::tempdir().unwrap();
    let (_etcd, node) = ServerProcess::start_with_etcd(tmp.path()).unwrap();
    let addr = node.grpc_addr.clone().unwrap();
    let mut lease = lease(&addr, &node.trust()).await;
    let admin = node.admin().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while admin.get_json("/health").unwrap().1["is_leader"] != true {
        assert!(Instant::now() < deadline, "the node never led");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The leader's lease is the one that holds keys the client cannot see.
    let mut own = None;
    for status in lease
        .lease_leases(LeaseLeasesRequest {})
        .await
        .unwrap()
        .into_inner()
        .leases
    {
        let ttl = lease
            .lease_time_to_live(LeaseTimeToLiveRequest {
                id: status.id,
                keys: true,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(
            ttl.keys.is_empty(),
            "Meridian's keys are not shown: {ttl:?}"
        );
        own = Some(status.id);
    }
    let own = own.expect("the leader holds a lease");

    let refused = lease
        .lease_revoke(LeaseRevokeRequest { id: own })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let requests = tokio_stream::iter([LeaseKeepAliveRequest { id: own }]);
    let mut replies = lease.lease_keep_alive(requests).await.unwrap().into_inner();
    let refused = tokio::time::timeout(Duration::from_secs(5), replies.message())
        .await
        .expect("an answer")
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");

    // Still leading on that lease.
    let (status, health) = admin.get_json("/health").unwrap();
    assert_eq!((status, health["is_leader"].as_bool()), (200, Some(true)));
    node.stop().unwrap();
}

/// A watch held open does not hold the node up: stopping ends it with `Unavailable` (so the
/// client reconnects elsewhere), and the node exits cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_node_ends_its_watches() {
    let tmp = tempfile::tempdir().unwrap();
    let (_etcd, node) = ServerProcess::start_with_etcd(tmp.path()).unwrap();
    let addr = node.grpc_addr.clone().unwrap();
    let caller = node.trust();
    let mut watch = WatchClient::new(channel(&addr, &caller).await);
    let (send, requests) = tokio::sync::mpsc::channel(1);
    send.send(WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
            key: b"/tidb/w".to_vec(),
            ..Default::default()
        })),
    })
    .await
    .unwrap();
    let mut replies = watch
        .watch(tokio_stream::wrappers::ReceiverStream::new(requests))
        .await
        .unwrap()
        .into_inner();
    let created = replies.message().await.unwrap().expect("created");
    assert!(created.created, "{created:?}");
    let mut kv = kv(&addr, &caller).await;
    kv.put(PutRequest {
        key: b"/tidb/w".to_vec(),
        value: b"1".to_vec(),
        ..Default::default()
    })
    .await
    .unwrap();
    let event = replies.message().await.unwrap().expect("an event");
    assert_eq!(event.events[0].kv.as_ref().unwrap().key, b"/tidb/w");

    let stopping = tokio::task::spawn_blocking(move || node.stop());
    let ended = tokio::time::timeout(Duration::from_secs(5), replies.message())
        .await
        .expect("the watch ends when the node stops");
    match ended {
        Err(status) => assert_eq!(status.code(), Code::Unavailable, "{status:?}"),
        Ok(reply) => assert!(reply.is_none(), "{reply:?}"),
    }
    stopping.await.unwrap().unwrap();
    drop(send);
}

/// The proxy reaches etcd the way the node does: over TLS with the node's etcd client
/// certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_reaches_an_etcd_over_tls() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start_tls(&tmp.path().join("etcd")).unwrap();
    let data = tmp.path().join("n0");
    let node =
        ServerProcess::start_on_etcd(&etcd, &data, &etcd.tls().unwrap().serve_flags()).unwrap();
    let addr = node.grpc_addr.clone().unwrap();
    let mut kv = kv(&addr, &node.trust()).await;
    round_trip(&mut kv, b"/tidb/tls").await.unwrap();
    node.stop().unwrap();
}

/// With etcd auth, the proxy logs in as `--etcd-user`, and logs in again when etcd drops its
/// token (etcd drops a user's tokens when the password is set, here to the same one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_logs_in_as_the_etcd_user_and_again_when_its_token_is_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
    let password = "proxy-password";
    etcd.enable_auth("meridian", password).await.unwrap();
    let mut root = etcd.client(Some(("root", ROOT_PASSWORD))).await.unwrap();
    // Meridian's user needs the namespace too (SECURITY.md).
    root.role_grant_permission(
        "meridian-readwrite",
        etcd_client::Permission::read_write("/meridian-kv/").with_prefix(),
    )
    .await
    .unwrap();
    let data = tmp.path().join("n0");
    let env = [("MERIDIAN_ETCD_PASSWORD", password)];
    let args = [
        "--etcd",
        &etcd.endpoint(),
        "--etcd-user",
        "meridian",
        "--cores",
        "1",
    ]
    .map(String::from);
    let node =
        ServerProcess::start_with_env(test_binary(), &data, "127.0.0.1:0", &args, &env).unwrap();
    let addr = node.grpc_addr.clone().unwrap();
    let mut kv = kv(&addr, &node.trust()).await;
    round_trip(&mut kv, b"/tidb/auth").await.unwrap();

    root.user_change_password("meridian", password)
        .await
        .unwrap();
    // The first call after it is answered: the refused token is renewed and the call sent again.
    round_trip(&mut kv, b"/tidb/auth").await.unwrap();
    assert!(
        node.log_text().contains("logging in again"),
        "{}",
        node.log_text()
    );
    node.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_etcd_the_api_is_unavailable_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let node = ServerProcess::start_embedded(&tmp.path().join("n0")).unwrap();
    let mut kv = kv(node.grpc_addr.as_deref().unwrap(), &node.trust()).await;
    let refused = kv
        .range(RangeRequest {
            key: b"/tidb/a".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_needs_etcd(&refused);
    node.stop().unwrap();
}

/// TiDB's etcd session is a lease kept alive through whichever member its client reaches:
/// granted through the leader, it stays alive through a follower after the leader is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_lease_outlives_the_leader_it_was_granted_through() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut cluster, leader) =
        Cluster::start_led(tmp.path(), 3, "", Duration::from_secs(15)).unwrap();
    let other = (leader + 1) % 3;
    let (leader_addr, other_addr) = (cluster.grpc_addr(leader), cluster.grpc_addr(other));
    let caller = cluster.trust();

    let mut lease = lease(&leader_addr, &caller).await;
    let ttl = 4;
    let id = lease
        .lease_grant(LeaseGrantRequest { ttl, id: 0 })
        .await
        .unwrap()
        .into_inner()
        .id;
    let key = b"/tidb/server/info/1".to_vec();
    kv(&leader_addr, &caller)
        .await
        .put(PutRequest {
            key: key.clone(),
            value: b"tidb-0".to_vec(),
            lease: id,
            ..Default::default()
        })
        .await
        .unwrap();

    // A follower serves etcd's API as the leader does: etcd is the same behind every member.
    let kvs = kv(&other_addr, &caller)
        .await
        .range(RangeRequest {
            key: key.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .kvs;
    assert_eq!(kvs.len(), 1, "read through a follower");

    cluster.nodes[leader].kill().unwrap();
    let mut lease = self::lease(&other_addr, &caller).await;
    let (keep, requests) = tokio::sync::mpsc::channel(4);
    let mut replies = lease
        .lease_keep_alive(tokio_stream::wrappers::ReceiverStream::new(requests))
        .await
        .unwrap()
        .into_inner();
    // Twice the TTL, renewed every second through the surviving member.
    for _ in 0..2 * ttl {
        keep.send(LeaseKeepAliveRequest { id }).await.unwrap();
        let renewed = replies
            .message()
            .await
            .unwrap()
            .expect("a keep-alive reply");
        assert_eq!((renewed.id, renewed.ttl), (id, ttl), "{renewed:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let alive = lease
        .lease_time_to_live(LeaseTimeToLiveRequest { id, keys: true })
        .await
        .unwrap()
        .into_inner();
    assert!(alive.ttl > 0, "{alive:?}");
    assert_eq!(alive.keys, vec![key.clone()]);
    let kvs = kv(&other_addr, &caller)
        .await
        .range(RangeRequest {
            key,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .kvs;
    assert_eq!(kvs.len(), 1, "the session's key outlived the kill");
    drop(keep);
    cluster.stop_all().unwrap();
}

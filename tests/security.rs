//! Authentication and authorization end to end, on a real node backed by a real etcd: every
//! port (QUIC, PD gRPC, admin HTTPS) refuses callers without a valid certificate from the
//! cluster CA (none, another CA's, an expired one) and denies, by name, a call the
//! certificate's role does not allow. After each refusal the region map, the member list and
//! the leader's term in etcd are what they were.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use meridian::admin::AdminClient;
use meridian::client::{Client, ClientError, ClientOptions};
use meridian::harness::{self, test_binary, up_store, EtcdProcess, ServerProcess};
use meridian::kvproto::pdpb;
use meridian::pd_grpc;
use meridian::placement::{Epoch, Peer, PeerRole, Region, RegionStats, Store};
use meridian::proto::ErrorReply;
use meridian::tls::cert::{self, Role, Validity};
use meridian::tls::Trust;

/// The certificates of one test: a cluster CA with a node certificate and one client
/// certificate per role, plus the bad ones.
struct Certs {
    dir: PathBuf,
    ca: cert::Pem,
}

impl Certs {
    fn new(dir: &Path) -> Certs {
        let ca = harness::ca_and_node(dir, "test cluster CA").unwrap();
        Certs {
            dir: dir.to_path_buf(),
            ca,
        }
    }

    fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The node's flags: its certificate; the CA that verifies clients is ca.pem beside it.
    fn node_args(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.dir.join("node.pem").display().to_string(),
            "--tls-key".into(),
            self.dir.join("node-key.pem").display().to_string(),
            "--cores".into(),
            "1".into(),
        ]
    }

    fn trust_of(&self, name: &str, pem: &cert::Pem) -> Trust {
        if !self.dir.join(format!("{name}-key.pem")).exists() {
            cert::write_pair(&self.dir, name, pem).unwrap();
        }
        Trust::Mutual {
            ca: self.ca_path(),
            cert: self.dir.join(format!("{name}.pem")),
            key: self.dir.join(format!("{name}-key.pem")),
        }
    }

    /// A client certificate with just `role`, made once.
    fn role(&self, role: Role) -> Trust {
        let pem = cert::create_client(&self.ca, role.name(), role).unwrap();
        self.trust_of(role.name(), &pem)
    }

    /// The callers that must not get in: one with no certificate, one whose certificate
    /// another CA signed, one whose certificate expired yesterday. The last two carry every
    /// role, so only the certificate's validity can stop them.
    fn strangers(&self) -> Vec<(&'static str, Trust)> {
        let other_ca = cert::create_ca("another CA").unwrap();
        let all = [Role::Client, Role::Store, Role::Admin, Role::Member];
        let foreign = cert::create_client_with(&other_ca, "foreign", &all).unwrap();
        let now = SystemTime::now();
        let day = Duration::from_secs(86_400);
        let expired = cert::create_client_valid(
            &self.ca,
            "expired",
            &all,
            Validity {
                not_before: now - day * 30,
                not_after: now - day,
            },
        )
        .unwrap();
        // ca.pem alone in a directory: Trust::Ca would present a client.pem found beside it.
        let bare = self.dir.join("bare");
        std::fs::create_dir_all(&bare).unwrap();
        std::fs::copy(self.ca_path(), bare.join("ca.pem")).unwrap();
        vec![
            ("no certificate", Trust::Ca(bare.join("ca.pem"))),
            ("another CA", self.trust_of("foreign", &foreign)),
            ("expired", self.trust_of("expired", &expired)),
        ]
    }
}

async fn quic(addr: &str, trust: Trust, budget: Duration) -> Result<Client, ClientError> {
    let mut opts = ClientOptions::new(vec![addr.to_string()], trust);
    opts.retry_budget = budget;
    Client::connect(opts).await
}

fn store(id: u64) -> Store {
    up_store(id, &format!("127.0.0.1:{}", 20000 + id))
}

/// A region over every key, as a forger would report it: newer than anything, led by a
/// store of the forger's choosing.
fn whole_keyspace(id: u64, store_id: u64, version: u64) -> Region {
    Region {
        id,
        start_key: vec![],
        end_key: vec![],
        epoch: Epoch {
            conf_ver: version,
            version,
        },
        peers: vec![Peer {
            id: id + 1,
            store_id,
            role: PeerRole::Voter,
        }],
        leader: Some(id + 1),
    }
}

/// A bootstrapped node on etcd, with a store and a map split in two.
struct Cluster {
    _etcd: EtcdProcess,
    etcd_endpoint: String,
    node: ServerProcess,
    certs: Certs,
    store_client: Client,
    store_id: u64,
}

async fn cluster(tmp: &Path, extra: &[&str]) -> Cluster {
    let certs_dir = tmp.join("certs");
    std::fs::create_dir_all(&certs_dir).unwrap();
    let certs = Certs::new(&certs_dir);
    let etcd = EtcdProcess::start(&tmp.join("etcd")).unwrap();
    let mut args = certs.node_args();
    args.extend(["--etcd".into(), etcd.endpoint()]);
    args.extend(extra.iter().map(|a| a.to_string()));
    let node =
        ServerProcess::start_with(test_binary(), &tmp.join("node"), "127.0.0.1:0", &args).unwrap();
    let store_client = quic(
        &node.client_addr,
        certs.role(Role::Store),
        Duration::from_secs(15),
    )
    .await
    .unwrap();
    let store_id = store_client.alloc_id().await.unwrap();
    let region_id = store_client.alloc_id().await.unwrap();
    let peer_id = store_client.alloc_id().await.unwrap();
    let mut first = whole_keyspace(region_id, store_id, 1);
    first.peers[0].id = peer_id;
    first.leader = Some(peer_id);
    store_client
        .bootstrap(store(store_id), first.clone())
        .await
        .unwrap();
    let ids = store_client
        .ask_batch_split(first.clone(), 1)
        .await
        .unwrap();
    let mut left = first.clone();
    left.end_key = b"m".to_vec();
    left.epoch.version += 1;
    left.id = ids[0].region_id;
    left.peers[0].id = ids[0].peer_ids[0];
    left.leader = Some(left.peers[0].id);
    let mut right = first;
    right.start_key = b"m".to_vec();
    right.epoch.version += 1;
    store_client
        .report_batch_split(vec![left, right])
        .await
        .unwrap();
    Cluster {
        etcd_endpoint: etcd.endpoint(),
        _etcd: etcd,
        node,
        certs,
        store_client,
        store_id,
    }
}

/// What no refused call may change: the map, the members, and the leader's key in etcd
/// (its create revision is the term: a resign or a transfer makes a new one).
#[derive(Debug, PartialEq)]
struct State {
    regions: Vec<Region>,
    members: serde_json::Value,
    leader_term: i64,
}

impl Cluster {
    async fn state(&self) -> State {
        let admin = AdminClient::new(&self.node.admin_addr, &self.certs.role(Role::Admin)).unwrap();
        let (code, members) = admin.get_json("/api/v1/members").unwrap();
        assert_eq!(code, 200, "{members}");
        State {
            regions: self.store_client.scan_regions(b"", b"", 0).await.unwrap(),
            members: members["members"].clone(),
            leader_term: self.leader_term().await,
        }
    }

    async fn leader_term(&self) -> i64 {
        self.leader_term_if_any()
            .await
            .expect("a leader key in etcd")
    }

    /// Waits until the node leads and answers a store's read.
    async fn leading(&self) {
        for _ in 0..300 {
            if self.store_client.get_ts().await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the node never served");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_without_a_valid_certificate_are_refused_on_every_port_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cluster(tmp.path(), &[]).await;
    c.leading().await;
    let before = c.state().await;
    let grpc_addr = c.node.grpc_addr.clone().expect("gRPC on by default");
    let member = before.members[0]["name"].as_str().unwrap().to_string();
    for (who, trust) in c.certs.strangers() {
        // QUIC: TLS 1.3 lets a client finish its side before the server judges its
        // certificate, so the refusal comes at connect or at the first call; never an answer.
        if let Ok(client) = quic(
            &c.node.client_addr,
            trust.clone(),
            Duration::from_millis(500),
        )
        .await
        {
            assert!(client.get_ts().await.is_err(), "{who}: QUIC served a TSO");
            let forged = whole_keyspace(1 << 40, c.store_id, 1 << 30);
            assert!(
                client
                    .region_heartbeat(forged, RegionStats::default())
                    .await
                    .is_err(),
                "{who}: QUIC took a heartbeat"
            );
        }
        // gRPC, the front end PD clients use.
        if let Ok(mut pd) = pd_grpc::connect(&grpc_addr, &trust).await {
            let members = pd.get_members(pdpb::GetMembersRequest::default()).await;
            assert!(members.is_err(), "{who}: gRPC answered GetMembers");
            let put = pd
                .put_store(pdpb::PutStoreRequest {
                    header: None,
                    store: Some(meridian::kvproto::metapb::Store {
                        id: c.store_id,
                        address: "10.0.0.66:20160".into(),
                        ..Default::default()
                    }),
                })
                .await;
            assert!(put.is_err(), "{who}: gRPC took PutStore");
        }
        // Admin HTTPS: no route answers, not even a read.
        let admin = AdminClient::new(&c.node.admin_addr, &trust).unwrap();
        for (method, path) in [
            ("GET", "/health".to_string()),
            ("GET", "/api/v1/members".into()),
            ("POST", "/api/v1/leader/resign".into()),
            ("DELETE", format!("/api/v1/members/{member}")),
        ] {
            let answer = match method {
                "GET" => admin.get(&path),
                "POST" => admin.post(&path),
                _ => admin.delete(&path),
            };
            assert!(
                answer.is_err(),
                "{who}: admin answered {method} {path}: {answer:?}"
            );
        }
    }
    assert_eq!(
        c.state().await,
        before,
        "a refused caller changed something"
    );
    c.node.stop().unwrap();
}

fn denied_naming(r: Result<impl std::fmt::Debug, ClientError>, role: &str) {
    match r {
        Err(ClientError::Server(ErrorReply::PermissionDenied(why))) => {
            assert!(why.contains(&format!("`{role}`")), "{why}")
        }
        other => panic!("expected PermissionDenied naming {role}, got {other:?}"),
    }
}

fn grpc_denied_naming<T: std::fmt::Debug>(r: Result<T, tonic::Status>, role: &str) {
    match r {
        Err(s) if s.code() == tonic::Code::PermissionDenied => {
            assert!(s.message().contains(&format!("`{role}`")), "{s:?}")
        }
        other => panic!("expected PermissionDenied naming {role}, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wrong_role_is_denied_by_name_on_every_port_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cluster(tmp.path(), &[]).await;
    c.leading().await;
    let before = c.state().await;
    let member = before.members[0]["name"].as_str().unwrap().to_string();
    let client_role = c.certs.role(Role::Client);

    // QUIC with a `client` certificate: reads and timestamps yes, writes no. The forged
    // whole-keyspace heartbeat, newer than every region, would replace the map if taken.
    let client = quic(
        &c.node.client_addr,
        client_role.clone(),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    client.get_ts().await.unwrap();
    assert_eq!(
        client.scan_regions(b"", b"", 0).await.unwrap(),
        before.regions
    );
    let forged = whole_keyspace(1 << 40, c.store_id, 1 << 30);
    denied_naming(
        client
            .region_heartbeat(forged.clone(), RegionStats::default())
            .await,
        "store",
    );
    denied_naming(client.put_store(store(c.store_id)).await, "store");
    denied_naming(client.alloc_id().await, "store");
    denied_naming(
        client.report_batch_split(vec![forged.clone()]).await,
        "store",
    );

    // gRPC with a `client` certificate.
    let grpc_addr = c.node.grpc_addr.clone().expect("gRPC on by default");
    let mut pd = pd_grpc::connect(&grpc_addr, &client_role).await.unwrap();
    let cluster_id = pd_grpc::cluster_id(&mut pd).await.unwrap();
    let header = || {
        Some(pdpb::RequestHeader {
            cluster_id,
            ..Default::default()
        })
    };
    grpc_denied_naming(
        pd.put_store(pdpb::PutStoreRequest {
            header: header(),
            store: Some(meridian::kvproto::metapb::Store {
                id: c.store_id,
                address: "10.0.0.66:20160".into(),
                ..Default::default()
            }),
        })
        .await,
        "store",
    );
    grpc_denied_naming(
        pd.alloc_id(pdpb::AllocIdRequest {
            header: header(),
            count: 1,
        })
        .await,
        "store",
    );
    let forged_pb = pdpb::RegionHeartbeatRequest {
        header: header(),
        region: Some(meridian::kvproto::metapb::Region {
            id: forged.id,
            region_epoch: Some(meridian::kvproto::metapb::RegionEpoch {
                conf_ver: forged.epoch.conf_ver,
                version: forged.epoch.version,
            }),
            peers: vec![meridian::kvproto::metapb::Peer {
                id: forged.id + 1,
                store_id: c.store_id,
                ..Default::default()
            }],
            ..Default::default()
        }),
        leader: Some(meridian::kvproto::metapb::Peer {
            id: forged.id + 1,
            store_id: c.store_id,
            ..Default::default()
        }),
        ..Default::default()
    };
    let stream = tokio_stream::iter(vec![forged_pb]);
    let heartbeat = pd.region_heartbeat(stream).await;
    grpc_denied_naming(heartbeat.map(|_| ()), "store");

    // Admin with a `store` certificate: it may read, not change.
    let admin_as_store = AdminClient::new(&c.node.admin_addr, &c.certs.role(Role::Store)).unwrap();
    assert_eq!(admin_as_store.get("/api/v1/members").unwrap().0, 200);
    for (method, path) in [
        ("POST", "/api/v1/leader/resign".to_string()),
        ("POST", format!("/api/v1/leader/transfer/{member}")),
        ("POST", "/api/v1/debug/clock/shift/-10000".into()),
        ("DELETE", format!("/api/v1/members/{member}")),
        ("PUT", "/api/v1/debug/failpoints/meta::wal::fsync".into()),
        ("DELETE", "/api/v1/debug/failpoints/meta::wal::fsync".into()),
    ] {
        let (code, body) = match method {
            "POST" => admin_as_store.post(&path),
            "PUT" => admin_as_store.put(&path, "return(eio)"),
            _ => admin_as_store.delete(&path),
        }
        .unwrap();
        assert_eq!(code, 403, "{method} {path}: {body}");
        assert!(body.contains("`admin`"), "{method} {path}: {body}");
    }
    assert_eq!(c.state().await, before, "a denied call changed something");

    // The checks above can fail: the right roles do change things.
    let mut grown = before.regions[0].clone();
    grown.epoch.version += 1;
    c.store_client
        .region_heartbeat(grown.clone(), RegionStats::default())
        .await
        .unwrap();
    let admin = AdminClient::new(&c.node.admin_addr, &c.certs.role(Role::Admin)).unwrap();
    let (code, body) = admin.post("/api/v1/leader/resign").unwrap();
    assert_eq!(code, 200, "{body}");
    let mut new_term = before.leader_term;
    for _ in 0..200 {
        new_term = c.leader_term_if_any().await.unwrap_or(new_term);
        if new_term != before.leader_term {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_ne!(
        new_term, before.leader_term,
        "resign by admin made no new term"
    );
    c.leading().await;
    let after = c.state().await;
    assert_eq!(after.regions[0], grown);
    c.node.stop().unwrap();
}

impl Cluster {
    async fn leader_term_if_any(&self) -> Option<i64> {
        let mut etcd = etcd_client::Client::connect([self.etcd_endpoint.as_str()], None)
            .await
            .ok()?;
        let all = etcd
            .get("/", Some(etcd_client::GetOptions::new().with_prefix()))
            .await
            .ok()?;
        all.kvs()
            .iter()
            .find(|kv| kv.key().ends_with(b"/leader"))
            .map(|kv| kv.create_revision())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_probes_answer_without_a_certificate_and_nothing_else_does() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = Certs::new(tmp.path());
    let mut args = certs.node_args();
    args.push("--admin-open-probes".into());
    let open = ServerProcess::start_with(
        test_binary(),
        &tmp.path().join("open"),
        "127.0.0.1:0",
        &args,
    )
    .unwrap();
    let closed = ServerProcess::start_with(
        test_binary(),
        &tmp.path().join("closed"),
        "127.0.0.1:0",
        &certs.node_args(),
    )
    .unwrap();
    let (_, anonymous) = certs.strangers().swap_remove(0);
    // Probes and Prometheus get in without a certificate when the flag says so...
    let probe = AdminClient::new(&open.admin_addr, &anonymous).unwrap();
    for path in ["/health", "/ready", "/metrics"] {
        assert_eq!(probe.get(path).unwrap().0, 200, "{path}");
    }
    // ...and nothing else does: a read needs a role, a change needs `admin`.
    let (code, body) = probe.get("/api/v1/members").unwrap();
    assert_eq!(code, 403, "{body}");
    let (code, body) = probe.post("/api/v1/leader/resign").unwrap();
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("`admin`"), "{body}");
    // Without the flag, not even a probe.
    let closed_probe = AdminClient::new(&closed.admin_addr, &anonymous).unwrap();
    assert!(closed_probe.get("/health").is_err());
    // The QUIC port stays closed to the anonymous either way.
    if let Ok(client) = quic(&open.client_addr, anonymous, Duration::from_millis(500)).await {
        assert!(client.get_ts().await.is_err());
    }
    // A certificate with a role reads on both.
    let reader = certs.role(Role::Client);
    for node in [&open, &closed] {
        let admin = AdminClient::new(&node.admin_addr, &reader).unwrap();
        assert_eq!(admin.get("/api/v1/members").unwrap().0, 200);
    }
    open.stop().unwrap();
    closed.stop().unwrap();
}

/// Writes `pem` over `<dir>/<name>.pem` and `<dir>/<name>-key.pem` the way a Secret update
/// does: new files renamed over the old.
fn replace_pair(dir: &Path, name: &str, pem: &cert::Pem) {
    for (file, text) in [
        (format!("{name}-key.pem"), &pem.key),
        (format!("{name}.pem"), &pem.cert),
    ] {
        let tmp = dir.join(format!("{file}.new"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, dir.join(file)).unwrap();
    }
}

/// Whether a client with `trust` gets a timestamp over QUIC, a member list over gRPC and over
/// admin, each on a new connection.
async fn served_everywhere(node: &ServerProcess, trust: &Trust) -> [bool; 3] {
    let quic_ok = match quic(&node.client_addr, trust.clone(), Duration::from_millis(500)).await {
        Ok(c) => c.get_ts().await.is_ok(),
        Err(_) => false,
    };
    let grpc_ok = match pd_grpc::connect(node.grpc_addr.as_deref().unwrap(), trust).await {
        Ok(mut pd) => pd
            .get_members(pdpb::GetMembersRequest::default())
            .await
            .is_ok(),
        Err(_) => false,
    };
    let admin_ok = AdminClient::new(&node.admin_addr, trust)
        .and_then(|a| a.get("/api/v1/members"))
        .is_ok_and(|(code, _)| code == 200);
    [quic_ok, grpc_ok, admin_ok]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_rotates_the_certificate_and_the_ca_on_every_port_without_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = Certs::new(tmp.path());
    let node = ServerProcess::start_with(
        test_binary(),
        &tmp.path().join("node"),
        "127.0.0.1:0",
        &certs.node_args(),
    )
    .unwrap();
    // The old client keeps its own copy of the old CA: the node's ca.pem is about to change.
    let old_client = match certs.role(Role::Client) {
        Trust::Mutual { ca, cert, key } => {
            let kept = tmp.path().join("old-ca.pem");
            std::fs::copy(ca, &kept).unwrap();
            Trust::Mutual {
                ca: kept,
                cert,
                key,
            }
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(served_everywhere(&node, &old_client).await, [true; 3]);

    // A new CA, a node certificate and a client certificate from it, in a directory of
    // their own (the client's trust), and the node's files replaced in place.
    let new_dir = tmp.path().join("new");
    std::fs::create_dir_all(&new_dir).unwrap();
    let new_ca = cert::create_ca("rotated CA").unwrap();
    cert::write_pair(&new_dir, "ca", &new_ca).unwrap();
    let new_client_pem = cert::create_client(&new_ca, "c2", Role::Client).unwrap();
    cert::write_pair(&new_dir, "c2", &new_client_pem).unwrap();
    let new_client = Trust::Mutual {
        ca: new_dir.join("ca.pem"),
        cert: new_dir.join("c2.pem"),
        key: new_dir.join("c2-key.pem"),
    };
    let new_node = cert::create_node(&new_ca, &["localhost".into(), "127.0.0.1".into()]).unwrap();
    replace_pair(&certs.dir, "node", &new_node);
    replace_pair(&certs.dir, "ca", &new_ca);
    // Files alone change nothing: the node serves what it loaded.
    assert_eq!(served_everywhere(&node, &new_client).await, [false; 3]);
    assert_eq!(served_everywhere(&node, &old_client).await, [true; 3]);

    node.signal(libc::SIGHUP).unwrap();
    let mut seen = [false; 3];
    for _ in 0..50 {
        seen = served_everywhere(&node, &new_client).await;
        if seen == [true; 3] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        seen, [true; 3],
        "after SIGHUP the new CA's client is served"
    );
    assert_eq!(
        served_everywhere(&node, &old_client).await,
        [false; 3],
        "after SIGHUP the old CA's client is refused"
    );

    // A broken file: the reload fails, the node keeps serving what it had.
    std::fs::write(certs.dir.join("node.pem"), "not a certificate").unwrap();
    node.signal(libc::SIGHUP).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(served_everywhere(&node, &new_client).await, [true; 3]);
    node.stop().unwrap();
}

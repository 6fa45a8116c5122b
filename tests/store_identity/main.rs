//! Bring your own PKI, against the real binary: certificates from an operator's own CA (a
//! common name, DNS names, no Meridian SAN) get the roles `[security]` maps their names to, on
//! QUIC, gRPC and admin alike, and one mapped to nothing gets no role, is refused, and is
//! logged once per connection. With `bind-store-identity`, a `store` certificate acts only for
//! its store (the one it names, or the first one it registers): it cannot register or
//! heartbeat another store, nor report a region led on another store, and such a forged report
//! changes nothing; the binding is in the meta store, on the embedded store and on etcd alike,
//! and outlives a restart. What a bound store says of a region it sends no heartbeat for
//! (buckets, splits asked for) is `regions`'s.

mod regions;

use std::path::{Path, PathBuf};
use std::time::Duration;

use meridian::admin::AdminClient;
use meridian::client::{Client, ClientError, ClientOptions};
use meridian::harness::{self, pd_header, test_binary, up_store, EtcdProcess, ServerProcess};
use meridian::kvproto::metapb;
use meridian::kvproto::pdpb::{self, pd_client::PdClient};
use meridian::pd_grpc;
use meridian::placement::{Epoch, Peer, PeerRole, Region, RegionStats, Store, StoreStats};
use meridian::proto::ErrorReply;
use meridian::tls::cert::{self, NodeRole, Role, Validity};
use meridian::tls::Trust;
use tonic::transport::Channel;
use tonic::Code;

/// A cluster CA, the node's certificate, and the callers' certificates.
struct Pki {
    dir: PathBuf,
    ca: cert::Pem,
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        let ca = harness::ca_and_node(dir, "operator CA").unwrap();
        Pki {
            dir: dir.to_path_buf(),
            ca,
        }
    }

    fn node_args(&self, config: &Path) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.dir.join("node.pem").display().to_string(),
            "--tls-key".into(),
            self.dir.join("node-key.pem").display().to_string(),
            "--cores".into(),
            "1".into(),
            "--config".into(),
            config.display().to_string(),
        ]
    }

    /// A node of one core in `dir/node` that serves this PKI's node certificate, with `text` as
    /// its config file.
    fn start_node(&self, dir: &Path, text: &str) -> ServerProcess {
        let args = self.node_args(&config(dir, text));
        ServerProcess::start_with(test_binary(), &dir.join("node"), "127.0.0.1:0", &args).unwrap()
    }

    fn trust(&self, name: &str, pem: &cert::Pem) -> Trust {
        if !self.dir.join(format!("{name}-key.pem")).exists() {
            cert::write_pair(&self.dir, name, pem).unwrap();
        }
        Trust::Mutual {
            ca: self.dir.join("ca.pem"),
            cert: self.dir.join(format!("{name}.pem")),
            key: self.dir.join(format!("{name}-key.pem")),
        }
    }

    /// A certificate as another PKI issues it (TiUP's, cert-manager's): a common name, DNS
    /// names, server and client usages, and no Meridian SAN.
    fn foreign(&self, file: &str, cn: &str, dns: &[&str]) -> Trust {
        let mut params =
            rcgen::CertificateParams::new(dns.iter().map(|d| d.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let ca_key = rcgen::KeyPair::from_pem(&self.ca.key).unwrap();
        let issuer = rcgen::Issuer::from_ca_cert_pem(&self.ca.cert, ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let c = params.signed_by(&key, &issuer).unwrap();
        let pem = cert::Pem {
            cert: c.pem(),
            key: key.serialize_pem(),
        };
        self.trust(file, &pem)
    }

    /// A store's certificate from `meridian cert create-node --role store`, naming `store` if
    /// given.
    fn store(&self, name: &str, store: Option<u64>) -> Trust {
        let hosts = vec![format!("{name}.tikv-peer.svc")];
        let spec = NodeRole {
            name,
            hosts: &hosts,
            role: Role::Store,
            store,
        };
        let pem = cert::create_node_for_role(&self.ca, &spec, Validity::days(1)).unwrap();
        self.trust(name, &pem)
    }
}

fn config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("meridian.toml");
    std::fs::write(&path, text).unwrap();
    path
}

async fn quic(node: &ServerProcess, trust: &Trust) -> Client {
    let mut opts = ClientOptions::new(vec![node.client_addr.clone()], trust.clone());
    opts.retry_budget = Duration::from_secs(15);
    Client::connect(opts).await.unwrap()
}

/// A PD client on one gRPC connection.
struct Pd {
    pd: PdClient<Channel>,
    cluster_id: u64,
}

impl Pd {
    /// Connects and waits until placement answers (a node serves before it has loaded).
    async fn connect(node: &ServerProcess, trust: &Trust) -> Pd {
        let mut pd = pd_grpc::connect(node.grpc_addr.as_deref().unwrap(), trust)
            .await
            .unwrap();
        // Every reply's header carries the cluster id; GetMembers answers any role.
        let cluster_id = pd
            .get_members(pdpb::GetMembersRequest::default())
            .await
            .map_or(0, |r| r.into_inner().header.map_or(0, |h| h.cluster_id));
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            match pd
                .get_region(pdpb::GetRegionRequest {
                    header: pd_header(cluster_id),
                    region_key: vec![],
                    ..Default::default()
                })
                .await
            {
                Ok(_) => break,
                Err(e) if e.code() == Code::Unavailable && std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                // Refused by role: the caller may not read; placement's readiness is then
                // someone else's to wait for.
                Err(e) if e.code() == Code::PermissionDenied => break,
                Err(e) => panic!("placement did not come up: {e}"),
            }
        }
        Pd { pd, cluster_id }
    }

    fn h(&self) -> Option<pdpb::RequestHeader> {
        pd_header(self.cluster_id)
    }

    async fn alloc_id(&mut self) -> u64 {
        harness::alloc_id(&mut self.pd, self.cluster_id)
            .await
            .unwrap()
    }

    async fn bootstrap(&mut self, store_id: u64, region: metapb::Region) -> Option<pdpb::Error> {
        let request = pdpb::BootstrapRequest {
            header: self.h(),
            store: Some(store_pb(store_id)),
            region: Some(region),
        };
        header_error(
            self.pd
                .bootstrap(request)
                .await
                .unwrap()
                .into_inner()
                .header,
        )
    }

    async fn put_store(&mut self, id: u64) -> Option<pdpb::Error> {
        let request = pdpb::PutStoreRequest {
            header: self.h(),
            store: Some(store_pb(id)),
        };
        header_error(
            self.pd
                .put_store(request)
                .await
                .unwrap()
                .into_inner()
                .header,
        )
    }

    async fn store_heartbeat(&mut self, id: u64) -> Option<pdpb::Error> {
        let request = pdpb::StoreHeartbeatRequest {
            header: self.h(),
            stats: Some(pdpb::StoreStats {
                store_id: id,
                ..Default::default()
            }),
        };
        header_error(
            self.pd
                .store_heartbeat(request)
                .await
                .unwrap()
                .into_inner()
                .header,
        )
    }

    /// Sends region heartbeats on one stream; returns the error of each refused one (an
    /// accepted heartbeat with nothing to do is not answered), waiting `settle` for them.
    async fn region_heartbeats(
        &mut self,
        beats: Vec<(metapb::Region, metapb::Peer)>,
        settle: Duration,
    ) -> Vec<pdpb::Error> {
        let (tx, rx) = tokio::sync::mpsc::channel(beats.len().max(1));
        let mut replies = self
            .pd
            .region_heartbeat(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        for (region, leader) in beats {
            tx.send(pdpb::RegionHeartbeatRequest {
                header: self.h(),
                region: Some(region),
                leader: Some(leader),
                ..Default::default()
            })
            .await
            .unwrap();
        }
        let mut errors = Vec::new();
        while let Ok(next) = tokio::time::timeout(settle, replies.message()).await {
            match next {
                Ok(Some(reply)) => {
                    if let Some(e) = reply.header.and_then(|h| h.error) {
                        errors.push(e);
                    }
                }
                Ok(None) => break,
                Err(status) => panic!("the stream ended on a refused heartbeat: {status}"),
            }
        }
        drop(tx);
        errors
    }

    async fn region_at(&mut self, key: &[u8]) -> (metapb::Region, Option<metapb::Peer>) {
        let r = self
            .pd
            .get_region(pdpb::GetRegionRequest {
                header: self.h(),
                region_key: key.to_vec(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        (r.region.expect("a region holds every key"), r.leader)
    }
}

/// The error PD put in a reply's header (every reply carries one).
fn header_error(header: Option<pdpb::ResponseHeader>) -> Option<pdpb::Error> {
    header.expect("a reply header").error
}

fn store_pb(id: u64) -> metapb::Store {
    metapb::Store {
        id,
        address: format!("127.0.0.1:{}", 20000 + id),
        version: "8.5.0".into(),
        ..Default::default()
    }
}

fn peer_pb(id: u64, store_id: u64) -> metapb::Peer {
    metapb::Peer {
        id,
        store_id,
        ..Default::default()
    }
}

fn region_pb(id: u64, version: u64, peers: Vec<metapb::Peer>) -> metapb::Region {
    metapb::Region {
        id,
        start_key: vec![],
        end_key: vec![],
        region_epoch: Some(metapb::RegionEpoch {
            conf_ver: version,
            version,
        }),
        peers,
        ..Default::default()
    }
}

fn store(id: u64) -> Store {
    up_store(id, &format!("127.0.0.1:{}", 20000 + id))
}

/// Counts the log lines saying a certificate granted no role, for certificates named `who`.
fn no_role_lines(node: &ServerProcess, who: &str) -> usize {
    node.log_text()
        .lines()
        .filter(|l| l.contains("grants no role") && l.contains(who))
        .count()
}

fn denied_by_role<T: std::fmt::Debug>(r: Result<T, tonic::Status>) {
    let status = r.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_map_to_roles_on_every_port_and_an_unmapped_certificate_gets_none() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::new(&tmp.path().join("certs"));
    let node = pki.start_node(
        tmp.path(),
        "[security.cn-roles]\n\"tikv-server\" = [\"store\"]\n\
         [security.dns-roles]\n\"tidb-0.tidb-peer.ns.svc\" = [\"client\"]\n\
         \"ops.example.com\" = [\"admin\"]\n",
    );
    let tikv = pki.foreign("tikv", "tikv-server", &["tikv-0.tikv-peer.ns.svc"]);
    let tidb = pki.foreign("tidb", "tidb", &["tidb-0.tidb-peer.ns.svc"]);
    let ops = pki.foreign("ops", "someone", &["OPS.example.com"]);
    let stranger = pki.foreign("stranger", "stranger", &["stranger.example.com"]);

    // The common name maps to `store`: ids over QUIC and gRPC, nothing of `client`'s.
    let store_quic = quic(&node, &tikv).await;
    store_quic.alloc_id().await.unwrap();
    let mut store_grpc = Pd::connect(&node, &tikv).await;
    store_grpc.alloc_id().await;
    denied_by_role(
        store_grpc
            .pd
            .update_gc_safe_point(pdpb::UpdateGcSafePointRequest {
                header: store_grpc.h(),
                safe_point: 1,
            })
            .await,
    );

    // A DNS name maps to `client`: timestamps and reads, no store writes.
    let client_quic = quic(&node, &tidb).await;
    client_quic.get_ts().await.unwrap();
    match client_quic.alloc_id().await {
        Err(ClientError::Server(ErrorReply::PermissionDenied(m))) => {
            assert!(m.contains("`store`"), "{m}")
        }
        other => panic!("a client certificate allocated an id: {other:?}"),
    }
    let mut client_grpc = Pd::connect(&node, &tidb).await;
    client_grpc
        .pd
        .get_members(pdpb::GetMembersRequest::default())
        .await
        .unwrap();
    denied_by_role(
        client_grpc
            .pd
            .alloc_id(pdpb::AllocIdRequest {
                header: client_grpc.h(),
                count: 0,
            })
            .await,
    );

    // A DNS name (in another case) maps to `admin` on the admin port; the others' are read
    // there too and grant no admin change.
    let admin = AdminClient::new(&node.admin_addr, &ops).unwrap();
    let (code, members) = admin.get_json("/api/v1/members").unwrap();
    assert_eq!(code, 200, "{members}");
    let (code, _) = AdminClient::new(&node.admin_addr, &tikv)
        .unwrap()
        .get_json("/api/v1/members")
        .unwrap();
    assert_eq!(code, 200, "any role reads");

    // Mapped to nothing: the handshake succeeds (the CA signed it), every call is refused,
    // on every port, and the reason is logged once per connection, not once per call.
    assert_eq!(no_role_lines(&node, "stranger"), 0);
    let mut lost = pd_grpc::connect(node.grpc_addr.as_deref().unwrap(), &stranger)
        .await
        .unwrap();
    for _ in 0..5 {
        denied_by_role(lost.get_members(pdpb::GetMembersRequest::default()).await);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while no_role_lines(&node, "stranger") == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        no_role_lines(&node, "stranger"),
        1,
        "one line for one connection of five refused calls"
    );
    let mut opts = ClientOptions::new(vec![node.client_addr.clone()], stranger.clone());
    opts.retry_budget = Duration::from_secs(5);
    match Client::connect(opts).await {
        Ok(c) => match c.get_ts().await {
            Err(ClientError::Server(ErrorReply::PermissionDenied(m))) => {
                assert!(m.contains("with a role"), "{m}")
            }
            other => panic!("an unmapped certificate got a timestamp: {other:?}"),
        },
        // Refused while the client looked for the leader.
        Err(e) => assert!(e.to_string().contains("permission denied"), "{e}"),
    }
    let (code, _) = AdminClient::new(&node.admin_addr, &stranger)
        .unwrap()
        .get_json("/api/v1/members")
        .unwrap();
    assert_eq!(code, 403);
    let log = node.log_text();
    assert!(
        log.contains("cn-roles or dns-roles"),
        "the line says where to map it"
    );
    node.stop().unwrap();
}

/// The scenario of one backend: store certificates A and B register their stores, A is
/// refused B's, a third certificate is refused both, and after a restart every binding holds.
async fn stores_are_bound(tmp: &Path, etcd: Option<&EtcdProcess>) {
    let pki = Pki::new(&tmp.join("certs"));
    let cfg = config(tmp, "[security]\nbind-store-identity = true\n");
    let mut args = pki.node_args(&cfg);
    if let Some(etcd) = etcd {
        args.extend(["--etcd".into(), etcd.endpoint()]);
    }
    let data = tmp.join("node");
    let node = ServerProcess::start_with(test_binary(), &data, "127.0.0.1:0", &args).unwrap();
    let (a, b, c) = (
        pki.store("tikv-a", None),
        pki.store("tikv-b", None),
        pki.store("tikv-c", None),
    );
    let mut pa = Pd::connect(&node, &a).await;
    let mut pb = Pd::connect(&node, &b).await;
    let mut pc = Pd::connect(&node, &c).await;

    // A bootstraps with its store and a region over every key; B registers its own store.
    let (sa, r1, p1) = (
        pa.alloc_id().await,
        pa.alloc_id().await,
        pa.alloc_id().await,
    );
    let boot = pa
        .bootstrap(sa, region_pb(r1, 1, vec![peer_pb(p1, sa)]))
        .await;
    assert!(boot.is_none(), "{boot:?}");
    let sb = pb.alloc_id().await;
    let pb_peer = pb.alloc_id().await;
    assert!(pb.put_store(sb).await.is_none());
    assert!(pa.store_heartbeat(sa).await.is_none());
    assert!(pb.store_heartbeat(sb).await.is_none());
    // A reports its region (the map learns its leader), then the map is taken as it is.
    let own = (region_pb(r1, 1, vec![peer_pb(p1, sa)]), peer_pb(p1, sa));
    let errors = pa
        .region_heartbeats(vec![own.clone()], Duration::from_millis(300))
        .await;
    assert!(errors.is_empty(), "{errors:?}");
    let map_before = pa.region_at(b"").await;
    assert_eq!(map_before.1.as_ref().map(|p| p.id), Some(p1));

    // A may not register or heartbeat B's store: PD's error header, naming both stores.
    for refused in [pa.put_store(sb).await, pa.store_heartbeat(sb).await] {
        let e = refused.expect("refused");
        assert_eq!(e.r#type, pdpb::ErrorType::Unknown as i32);
        assert!(
            e.message.contains("permission denied")
                && e.message.contains(&format!("store {sa}, not store {sb}")),
            "{}",
            e.message
        );
    }
    // C, bound to nothing, may claim neither A's store nor B's.
    for id in [sa, sb] {
        let e = pc.put_store(id).await.expect("refused");
        assert!(
            e.message.contains("bound to another certificate"),
            "{}",
            e.message
        );
        assert!(pc.store_heartbeat(id).await.is_some());
    }
    // A forged whole-keyspace heartbeat, led by a peer on B's store, from A's certificate,
    // with a version far above the map's: refused, the stream goes on, and the map is what
    // it was. A's own report of its region is taken.
    let forged = region_pb(r1, 100, vec![peer_pb(pb_peer, sb)]);
    let errors = pa
        .region_heartbeats(
            vec![(forged, peer_pb(pb_peer, sb)), own],
            Duration::from_millis(500),
        )
        .await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].message.contains("permission denied"),
        "{errors:?}"
    );
    assert_eq!(pa.region_at(b"").await, map_before);
    assert_eq!(pa.region_at(b"zzz").await, map_before);
    // Nor report a split of regions with no peer on its store, nor B's min resolved ts.
    let split = pa
        .pd
        .report_batch_split(pdpb::ReportBatchSplitRequest {
            header: pa.h(),
            regions: vec![region_pb(r1, 7, vec![peer_pb(pb_peer, sb)])],
        })
        .await
        .unwrap()
        .into_inner();
    let e = split.header.unwrap().error.expect("refused");
    assert!(e.message.contains("permission denied"), "{}", e.message);
    let resolved = pa
        .pd
        .report_min_resolved_ts(pdpb::ReportMinResolvedTsRequest {
            header: pa.h(),
            store_id: sb,
            min_resolved_ts: 1,
        })
        .await
        .unwrap()
        .into_inner();
    let e = resolved.header.unwrap().error.expect("refused");
    assert!(
        e.message.contains(&format!("not store {sb}")),
        "{}",
        e.message
    );
    assert_eq!(pa.region_at(b"").await, map_before);
    // The same over QUIC: a typed PermissionDenied, and nothing changed.
    let qa = quic(&node, &a).await;
    match qa.put_store(store(sb)).await {
        Err(ClientError::Server(ErrorReply::PermissionDenied(m))) => {
            assert!(m.contains(&format!("not store {sb}")), "{m}")
        }
        other => panic!("A registered B's store over QUIC: {other:?}"),
    }
    match qa.store_heartbeat(sb, StoreStats::default()).await {
        Err(ClientError::Server(ErrorReply::PermissionDenied(_))) => {}
        other => panic!("A heartbeat B's store over QUIC: {other:?}"),
    }
    let forged_quic = Region {
        id: r1,
        start_key: vec![],
        end_key: vec![],
        epoch: Epoch {
            conf_ver: 200,
            version: 200,
        },
        peers: vec![Peer {
            id: pb_peer,
            store_id: sb,
            role: PeerRole::Voter,
        }],
        leader: Some(pb_peer),
    };
    match qa
        .region_heartbeat(forged_quic, RegionStats::default())
        .await
    {
        Err(ClientError::Server(ErrorReply::PermissionDenied(_))) => {}
        other => panic!("A reported a region led on B over QUIC: {other:?}"),
    }
    assert_eq!(pa.region_at(b"").await, map_before);
    qa.store_heartbeat(sa, StoreStats::default()).await.unwrap();
    drop((pa, pb, pc, qa));

    // After a restart the bindings are what they were: B heartbeats its store without
    // registering it again, A is still bound to its own, C still to nothing it may claim.
    node.stop().unwrap();
    let node = ServerProcess::start_with(test_binary(), &data, "127.0.0.1:0", &args).unwrap();
    let mut pa = Pd::connect(&node, &a).await;
    let mut pb = Pd::connect(&node, &b).await;
    let mut pc = Pd::connect(&node, &c).await;
    assert!(pb.store_heartbeat(sb).await.is_none());
    let e = pa.put_store(sb).await.expect("refused after a restart");
    assert!(
        e.message.contains(&format!("store {sa}, not store {sb}")),
        "{}",
        e.message
    );
    let e = pc.put_store(sb).await.expect("refused after a restart");
    assert!(
        e.message.contains("bound to another certificate"),
        "{}",
        e.message
    );
    let errors = pb
        .region_heartbeats(
            vec![(region_pb(r1, 300, vec![peer_pb(p1, sa)]), peer_pb(p1, sa))],
            Duration::from_millis(500),
        )
        .await;
    assert_eq!(errors.len(), 1, "B reported a region led on A: {errors:?}");
    // The route as it was (a leader learnt from heartbeats need not outlive a restart).
    assert_eq!(pa.region_at(b"").await.0, map_before.0);

    // A certificate that names its store acts for it, and for no other, from its first call.
    let sn = pa.alloc_id().await;
    let named = pki.store("tikv-n", Some(sn));
    let mut pn = Pd::connect(&node, &named).await;
    assert!(pn.put_store(sn).await.is_none());
    let e = pn.put_store(sb).await.expect("refused");
    assert!(
        e.message.contains(&format!("store {sn}, not store {sb}")),
        "{}",
        e.message
    );
    node.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_certificate_acts_only_for_its_store_on_the_embedded_store() {
    let tmp = tempfile::tempdir().unwrap();
    stores_are_bound(tmp.path(), None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_certificate_acts_only_for_its_store_on_etcd() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
    stores_are_bound(tmp.path(), Some(&etcd)).await;
}

//! bind-store-identity for what a store says of a region it does not send a heartbeat for:
//! buckets (only the region's leader reports them) and splits asked for (only a store with a
//! peer of the region asks). A `store` certificate bound to one store may not report buckets
//! for a region led on another, which would replace what lookups are answered with, and pin it
//! with a high version against the real leader's reports; nor ask for a split of a region it
//! holds no peer of. The region is judged as the leader knows it, not as the request says.

use std::path::{Path, PathBuf};
use std::time::Duration;

use meridian::harness::{test_binary, ServerProcess};
use meridian::kvproto::metapb;
use meridian::kvproto::pdpb::{self, pd_client::PdClient};
use meridian::pd_grpc;
use meridian::tls::cert::{self, NodeRole, Role, Validity};
use meridian::tls::Trust;
use tonic::transport::Channel;
use tonic::Code;

struct Pki {
    dir: PathBuf,
    ca: cert::Pem,
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let ca = cert::create_ca("cluster CA").unwrap();
        cert::write_pair(dir, "ca", &ca).unwrap();
        let node = cert::create_node(&ca, &["localhost".into(), "127.0.0.1".into()]).unwrap();
        cert::write_pair(dir, "node", &node).unwrap();
        Pki {
            dir: dir.to_path_buf(),
            ca,
        }
    }

    /// A store's certificate that names no store: bound by its first registration.
    fn store(&self, name: &str) -> Trust {
        let hosts = vec![format!("{name}.tikv-peer.svc")];
        let spec = NodeRole {
            name,
            hosts: &hosts,
            role: Role::Store,
            store: None,
        };
        let pem = cert::create_node_for_role(&self.ca, &spec, Validity::days(1)).unwrap();
        cert::write_pair(&self.dir, name, &pem).unwrap();
        Trust::Mutual {
            ca: self.dir.join("ca.pem"),
            cert: self.dir.join(format!("{name}.pem")),
            key: self.dir.join(format!("{name}-key.pem")),
        }
    }
}

struct Pd {
    pd: PdClient<Channel>,
    cluster_id: u64,
}

impl Pd {
    async fn connect(node: &ServerProcess, trust: &Trust) -> Pd {
        let mut pd = pd_grpc::connect(node.grpc_addr.as_deref().unwrap(), trust)
            .await
            .unwrap();
        let cluster_id = pd_grpc::cluster_id(&mut pd).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let asked = pd
                .is_bootstrapped(pdpb::IsBootstrappedRequest {
                    header: header(cluster_id),
                })
                .await;
            match asked {
                Ok(_) => break,
                Err(e) if e.code() == Code::Unavailable && std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(e) => panic!("placement did not come up: {e}"),
            }
        }
        Pd { pd, cluster_id }
    }

    fn h(&self) -> Option<pdpb::RequestHeader> {
        header(self.cluster_id)
    }

    async fn alloc_id(&mut self) -> u64 {
        let r = self
            .pd
            .alloc_id(pdpb::AllocIdRequest {
                header: self.h(),
                count: 0,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(r.header.unwrap().error.is_none());
        r.id
    }

    fn error_of(header: Option<pdpb::ResponseHeader>) -> Option<pdpb::Error> {
        header.and_then(|h| h.error)
    }

    async fn put_store(&mut self, id: u64) -> Option<pdpb::Error> {
        let r = self
            .pd
            .put_store(pdpb::PutStoreRequest {
                header: self.h(),
                store: Some(store_pb(id)),
            })
            .await
            .unwrap()
            .into_inner();
        Pd::error_of(r.header)
    }

    async fn report_buckets(&mut self, region_id: u64, version: u64, keys: &[&[u8]]) {
        let report = pdpb::ReportBucketsRequest {
            header: self.h(),
            region_epoch: None,
            buckets: Some(metapb::Buckets {
                region_id,
                version,
                keys: keys.iter().map(|k| k.to_vec()).collect(),
                period_in_ms: 10_000,
                ..Default::default()
            }),
        };
        let answer = self
            .pd
            .report_buckets(tokio_stream::iter([report]))
            .await
            .expect("a refused report is dropped and the stream goes on")
            .into_inner();
        assert!(Pd::error_of(answer.header).is_none());
    }

    async fn buckets(&mut self) -> Option<metapb::Buckets> {
        self.pd
            .get_region(pdpb::GetRegionRequest {
                header: self.h(),
                region_key: b"k".to_vec(),
                need_buckets: true,
            })
            .await
            .unwrap()
            .into_inner()
            .buckets
    }

    /// AskBatchSplit of one, and AskSplit (deprecated in kvproto, still sent by TiKV).
    #[allow(deprecated)]
    async fn ask_split(&mut self, region: metapb::Region) -> Option<pdpb::Error> {
        let batch = self
            .pd
            .ask_batch_split(pdpb::AskBatchSplitRequest {
                header: self.h(),
                region: Some(region.clone()),
                split_count: 1,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let single = self
            .pd
            .ask_split(pdpb::AskSplitRequest {
                header: self.h(),
                region: Some(region),
            })
            .await
            .unwrap()
            .into_inner();
        let (batch, single) = (Pd::error_of(batch.header), Pd::error_of(single.header));
        assert_eq!(
            batch.as_ref().map(|e| &e.message),
            single.as_ref().map(|e| &e.message),
            "AskSplit is AskBatchSplit of one"
        );
        batch
    }
}

fn header(cluster_id: u64) -> Option<pdpb::RequestHeader> {
    Some(pdpb::RequestHeader {
        cluster_id,
        ..Default::default()
    })
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

fn region_pb(id: u64, peers: Vec<metapb::Peer>) -> metapb::Region {
    metapb::Region {
        id,
        region_epoch: Some(metapb::RegionEpoch {
            conf_ver: 1,
            version: 1,
        }),
        peers,
        ..Default::default()
    }
}

fn keys(b: &metapb::Buckets) -> Vec<&[u8]> {
    b.keys.iter().map(Vec::as_slice).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_store_speaks_only_of_regions_on_its_store() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::new(&tmp.path().join("certs"));
    let cfg = tmp.path().join("meridian.toml");
    std::fs::write(&cfg, "[security]\nbind-store-identity = true\n").unwrap();
    let args: Vec<String> = vec![
        "--tls-cert".into(),
        pki.dir.join("node.pem").display().to_string(),
        "--tls-key".into(),
        pki.dir.join("node-key.pem").display().to_string(),
        "--cores".into(),
        "1".into(),
        "--config".into(),
        cfg.display().to_string(),
    ];
    let node = ServerProcess::start_with(
        test_binary(),
        &tmp.path().join("node"),
        "127.0.0.1:0",
        &args,
    )
    .unwrap();
    let mut a = Pd::connect(&node, &pki.store("tikv-a")).await;
    let mut b = Pd::connect(&node, &pki.store("tikv-b")).await;

    // A bootstraps with its store and the one region, led by its peer; B registers its store.
    let (sa, r1, p1) = (a.alloc_id().await, a.alloc_id().await, a.alloc_id().await);
    let boot =
        a.pd.bootstrap(pdpb::BootstrapRequest {
            header: a.h(),
            store: Some(store_pb(sa)),
            region: Some(region_pb(r1, vec![peer_pb(p1, sa)])),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(Pd::error_of(boot.header).is_none());
    let sb = b.alloc_id().await;
    let pb_peer = b.alloc_id().await;
    assert!(b.put_store(sb).await.is_none());

    // The leader's buckets are taken.
    a.report_buckets(r1, 2, &[b"", b"g", b""]).await;
    let held = a.buckets().await.expect("the leader's buckets");
    assert_eq!((held.region_id, held.version), (r1, 2));

    // B's report for the region A leads, with a version far above, is dropped: lookups keep
    // the leader's buckets, and the leader's next report is still taken.
    b.report_buckets(r1, u64::MAX, &[b"", b"forged", b""]).await;
    let after = b.buckets().await.expect("still the leader's buckets");
    assert_eq!(
        (after.version, keys(&after)),
        (2, vec![&b""[..], b"g", b""])
    );
    a.report_buckets(r1, 3, &[b"", b"t", b""]).await;
    assert_eq!(a.buckets().await.unwrap().version, 3);

    // B may not ask for a split of A's region, even naming a peer of its own in the request;
    // A may. The refusal is PD's error header, naming the region.
    let claimed = region_pb(r1, vec![peer_pb(p1, sa), peer_pb(pb_peer, sb)]);
    let refused = b.ask_split(claimed).await.expect("refused");
    assert_eq!(refused.r#type, pdpb::ErrorType::Unknown as i32);
    assert!(
        refused.message.contains("permission denied")
            && refused.message.contains(&format!("no peer of region {r1}")),
        "{}",
        refused.message
    );
    let allowed = a.ask_split(region_pb(r1, vec![peer_pb(p1, sa)])).await;
    assert!(allowed.is_none(), "{allowed:?}");
}

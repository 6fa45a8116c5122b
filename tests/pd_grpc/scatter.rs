//! The operators a client asks for, against the binary, embedded and on etcd: SplitRegions
//! sends the region's leader `split_region` with the keys on its next heartbeat and answers
//! 100 % once the store reported the split; ScatterRegion spreads a group's regions over six
//! stores (GetOperator: RUNNING, then SUCCESS, as client-go's `WaitScatterRegionFinish` reads
//! it); SplitAndScatterRegions does both. Six stores are emulated as TiKV's leaders act on a
//! heartbeat reply: a conf change or leader transfer carried out and reported in the next
//! heartbeat, a split asked for with AskBatchSplit and reported with ReportBatchSplit. The
//! patrol is slowed to once an hour so that only the operators asked for here run.

use std::collections::BTreeMap;
use std::path::Path;

use meridian::harness::{pd_header as header, Cluster};
use meridian::kvproto::eraftpb::ConfChangeType;
use meridian::tls::Trust;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::*;

const CONFIG: &str = "[schedule]\npatrol_interval_ms = 3600000\n";
const STORES: usize = 6;

/// Six stores' leaders on one heartbeat stream, and the regions as they lead them.
struct Stores {
    pd: PdClient<Channel>,
    h: Option<pdpb::RequestHeader>,
    ids: Vec<u64>,
    /// Region id to (region, leader peer id).
    regions: BTreeMap<u64, (metapb::Region, u64)>,
    tx: mpsc::Sender<pdpb::RegionHeartbeatRequest>,
    replies: tonic::Streaming<pdpb::RegionHeartbeatResponse>,
    /// The split asks the replies carried, not carried out yet.
    splits: Vec<pdpb::RegionHeartbeatResponse>,
}

impl Stores {
    async fn id(pd: &mut PdClient<Channel>, h: &Option<pdpb::RequestHeader>) -> u64 {
        pd.alloc_id(pdpb::AllocIdRequest {
            header: h.clone(),
            count: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .id
    }

    /// Bootstraps, registers six stores, and reports the first region with three voters on
    /// the first three.
    async fn start(mut pd: PdClient<Channel>, cluster_id: u64) -> Stores {
        let h = header(cluster_id);
        let mut ids = Vec::new();
        for _ in 0..STORES {
            ids.push(Self::id(&mut pd, &h).await);
        }
        let region_id = Self::id(&mut pd, &h).await;
        let mut peers = Vec::new();
        for s in &ids[..3] {
            peers.push(peer(Self::id(&mut pd, &h).await, *s));
        }
        let r = pd
            .bootstrap(pdpb::BootstrapRequest {
                header: h.clone(),
                store: Some(store(ids[0], "tikv-0:20160")),
                region: Some(region(region_id, b"", b"", (1, 1), vec![peers[0]])),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&r.header), None, "{:?}", r.header);
        for (i, id) in ids.iter().enumerate().skip(1) {
            let r = pd
                .put_store(pdpb::PutStoreRequest {
                    header: h.clone(),
                    store: Some(store(*id, &format!("tikv-{i}:20160"))),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(error_type(&r.header), None, "{:?}", r.header);
        }
        let (tx, rx) = mpsc::channel(256);
        let replies = pd
            .region_heartbeat(ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        let first = region(region_id, b"", b"", (3, 1), peers.clone());
        let mut regions = BTreeMap::new();
        regions.insert(region_id, (first, peers[0].id));
        let mut s = Stores {
            pd,
            h,
            ids,
            regions,
            tx,
            replies,
            splits: Vec::new(),
        };
        s.beat().await;
        s
    }

    /// Every store's heartbeat, every region's, then the replies until none comes for a while,
    /// each carried out (a split ask is kept for the test to carry out).
    async fn beat(&mut self) {
        for id in self.ids.clone() {
            let count = self
                .regions
                .values()
                .filter(|(r, _)| r.peers.iter().any(|p| p.store_id == id))
                .count();
            let r = self
                .pd
                .store_heartbeat(pdpb::StoreHeartbeatRequest {
                    header: self.h.clone(),
                    stats: Some(pdpb::StoreStats {
                        store_id: id,
                        capacity: 1 << 40,
                        available: 1 << 39,
                        region_count: count as u32,
                        ..Default::default()
                    }),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(error_type(&r.header), None, "{:?}", r.header);
        }
        for (r, leader) in self.regions.values() {
            let leader = *r.peers.iter().find(|p| p.id == *leader).unwrap();
            let request = pdpb::RegionHeartbeatRequest {
                header: self.h.clone(),
                region: Some(r.clone()),
                leader: Some(leader),
                approximate_size: 1,
                approximate_keys: 10,
                ..Default::default()
            };
            self.tx.send(request).await.unwrap();
        }
        while let Ok(reply) =
            tokio::time::timeout(Duration::from_millis(300), self.replies.message()).await
        {
            let reply = reply.unwrap().expect("the stream goes on");
            assert_eq!(error_type(&reply.header), None, "{reply:?}");
            self.carry_out(reply);
        }
    }

    /// What the region's leader does with a reply, as TiKV does it.
    fn carry_out(&mut self, reply: pdpb::RegionHeartbeatResponse) {
        let (r, leader) = self
            .regions
            .get_mut(&reply.region_id)
            .expect("a known region");
        if reply.split_region.is_some() {
            // An ask answering a report from before the split is stale.
            if reply.region_epoch == r.region_epoch {
                self.splits.push(reply);
            }
            return;
        }
        if let Some(cp) = reply.change_peer {
            let p = cp.peer.unwrap();
            let kind = ConfChangeType::try_from(cp.change_type).unwrap();
            let existing = r.peers.iter().position(|q| q.id == p.id);
            match (kind, existing) {
                (ConfChangeType::AddLearnerNode, None) => r.peers.push(metapb::Peer {
                    role: metapb::PeerRole::Learner as i32,
                    ..p
                }),
                (ConfChangeType::AddNode, Some(i)) => {
                    r.peers[i].role = metapb::PeerRole::Voter as i32
                }
                (ConfChangeType::AddNode, None) => r.peers.push(p),
                (ConfChangeType::RemoveNode, Some(i)) => {
                    assert_ne!(p.id, *leader, "a leader is never removed");
                    r.peers.remove(i);
                }
                // Already done: the reply was sent before the report showed it.
                _ => return,
            }
            r.region_epoch.as_mut().unwrap().conf_ver += 1;
            let mut stores: Vec<u64> = r.peers.iter().map(|p| p.store_id).collect();
            stores.sort_unstable();
            stores.dedup();
            assert_eq!(stores.len(), r.peers.len(), "two peers on a store: {r:?}");
        }
        if let Some(v2) = reply.change_peer_v2 {
            // As raftstore applies it: a list enters the joint state (AddNode makes a learner an
            // incoming voter, AddLearnerNode a voter a demoting one), an empty list leaves it.
            let (voter, learner) = (
                metapb::PeerRole::Voter as i32,
                metapb::PeerRole::Learner as i32,
            );
            let (incoming, demoting) = (
                metapb::PeerRole::IncomingVoter as i32,
                metapb::PeerRole::DemotingVoter as i32,
            );
            let joint = r
                .peers
                .iter()
                .any(|p| p.role == incoming || p.role == demoting);
            let mut changed = 0;
            if v2.changes.is_empty() {
                for p in r.peers.iter_mut() {
                    if p.role == incoming || p.role == demoting {
                        assert!(
                            !(p.role == demoting && p.id == *leader),
                            "a joint state is never left with its leader demoted: {p:?}"
                        );
                        p.role = if p.role == incoming { voter } else { learner };
                        changed += 1;
                    }
                }
            } else if !joint {
                for cp in &v2.changes {
                    let p = cp.peer.as_ref().unwrap();
                    let kind = ConfChangeType::try_from(cp.change_type).unwrap();
                    let q = r
                        .peers
                        .iter_mut()
                        .find(|q| q.id == p.id)
                        .expect("a joint change names peers the region has");
                    q.role = match (kind, q.role) {
                        (ConfChangeType::AddNode, role) if role == learner => incoming,
                        (ConfChangeType::AddLearnerNode, role) if role == voter => demoting,
                        other => panic!("no joint change {other:?} for {p:?}"),
                    };
                    changed += 1;
                }
            }
            // Otherwise already done: the reply was sent before the report showed it.
            r.region_epoch.as_mut().unwrap().conf_ver += changed;
        }
        if let Some(t) = reply.transfer_leader {
            let to = t.peer.unwrap();
            let voter = r.peers.iter().any(|p| {
                p.id == to.id
                    && (p.role == metapb::PeerRole::Voter as i32
                        || p.role == metapb::PeerRole::IncomingVoter as i32)
            });
            assert!(voter, "leadership goes to a voter: {to:?} in {r:?}");
            *leader = to.id;
        }
    }

    /// The split the reply asked of `region`, as the raftstore makes it: new ids from
    /// AskBatchSplit, the new regions on the left and the old id keeping the last range,
    /// reported with ReportBatchSplit.
    async fn split(&mut self, reply: &pdpb::RegionHeartbeatResponse) {
        let keys = reply.split_region.as_ref().unwrap().keys.clone();
        let (old, leader) = self.regions[&reply.region_id].clone();
        let ask = self
            .pd
            .ask_batch_split(pdpb::AskBatchSplitRequest {
                header: self.h.clone(),
                region: Some(old.clone()),
                split_count: keys.len() as u32,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&ask.header), None, "{:?}", ask.header);
        let mut epoch = old.region_epoch.unwrap();
        epoch.version += keys.len() as u64;
        let leader_store = old.peers.iter().find(|p| p.id == leader).unwrap().store_id;
        let mut made = Vec::new();
        let mut start = old.start_key.clone();
        for (ids, key) in ask.ids.iter().zip(&keys) {
            let peers: Vec<metapb::Peer> = old
                .peers
                .iter()
                .zip(&ids.new_peer_ids)
                .map(|(p, id)| peer(*id, p.store_id))
                .collect();
            let lead = peers
                .iter()
                .find(|p| p.store_id == leader_store)
                .unwrap()
                .id;
            let r = metapb::Region {
                id: ids.new_region_id,
                start_key: start.clone(),
                end_key: key.clone(),
                region_epoch: Some(epoch),
                peers,
                ..Default::default()
            };
            made.push((r, lead));
            start = key.clone();
        }
        let last = metapb::Region {
            start_key: start,
            region_epoch: Some(epoch),
            ..old
        };
        made.push((last, leader));
        let report = self
            .pd
            .report_batch_split(pdpb::ReportBatchSplitRequest {
                header: self.h.clone(),
                regions: made.iter().map(|(r, _)| r.clone()).collect(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&report.header), None, "{:?}", report.header);
        for (r, lead) in made {
            self.regions.insert(r.id, (r, lead));
        }
    }

    /// Beats until a reply asks for a split; carries it out and returns the ask.
    async fn next_split(&mut self) -> pdpb::RegionHeartbeatResponse {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.splits.is_empty() {
            assert!(std::time::Instant::now() < deadline, "no split asked");
            self.beat().await;
        }
        let ask = self.splits.remove(0);
        self.splits.clear();
        self.split(&ask).await;
        self.beat().await;
        self.splits.clear();
        ask
    }

    /// Per store (in `ids` order): the regions it holds a peer of, and those it leads.
    fn spread(&self) -> (Vec<usize>, Vec<usize>) {
        let peers = self
            .ids
            .iter()
            .map(|s| {
                self.regions
                    .values()
                    .filter(|(r, _)| r.peers.iter().any(|p| p.store_id == *s))
                    .count()
            })
            .collect();
        let leaders = self
            .ids
            .iter()
            .map(|s| {
                self.regions
                    .values()
                    .filter(|(r, l)| r.peers.iter().any(|p| p.id == *l && p.store_id == *s))
                    .count()
            })
            .collect();
        (peers, leaders)
    }

    async fn operator(&mut self, region_id: u64) -> pdpb::GetOperatorResponse {
        self.pd
            .get_operator(pdpb::GetOperatorRequest {
                header: self.h.clone(),
                region_id,
            })
            .await
            .unwrap()
            .into_inner()
    }

    async fn scatter(&mut self, ids: Vec<u64>, group: &str) -> pdpb::ScatterRegionResponse {
        let r = self
            .pd
            .scatter_region(pdpb::ScatterRegionRequest {
                header: self.h.clone(),
                regions_id: ids,
                group: group.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&r.header), None, "{:?}", r.header);
        r
    }
}

fn status(r: &pdpb::GetOperatorResponse) -> pdpb::OperatorStatus {
    pdpb::OperatorStatus::try_from(r.status).unwrap()
}

/// The whole story on one member reached at `pd`.
async fn splits_and_scatters(pd: PdClient<Channel>, cluster_id: u64) {
    let mut s = Stores::start(pd, cluster_id).await;
    let first = *s.regions.keys().next().unwrap();
    let none = s.operator(first).await;
    assert_eq!(
        error_type(&none.header),
        Some(pdpb::ErrorType::RegionNotFound),
        "no operator yet: {none:?}"
    );

    // SplitRegions waits while the leader gets the split with its next heartbeat.
    let keys: Vec<Vec<u8>> = [b"b", b"c", b"d", b"e", b"f"]
        .iter()
        .map(|k| k.to_vec())
        .collect();
    let mut pd = s.pd.clone();
    let h = s.h.clone();
    let asked = keys.clone();
    let call = tokio::spawn(async move {
        pd.split_regions(pdpb::SplitRegionsRequest {
            header: h,
            split_keys: asked,
            retry_limit: 3,
        })
        .await
        .unwrap()
        .into_inner()
    });
    let ask = s.next_split().await;
    assert_eq!(ask.region_id, first);
    let split = ask.split_region.as_ref().unwrap();
    assert_eq!(split.policy, pdpb::CheckPolicy::Usekey as i32);
    assert_eq!(split.keys, keys);
    let answer = call.await.unwrap();
    assert_eq!(error_type(&answer.header), None, "{:?}", answer.header);
    assert_eq!(answer.finished_percentage, 100);
    let mut at_keys: Vec<u64> = s
        .regions
        .values()
        .filter(|(r, _)| keys.contains(&r.start_key))
        .map(|(r, _)| r.id)
        .collect();
    at_keys.sort_unstable();
    let mut got = answer.regions_id.clone();
    got.sort_unstable();
    assert_eq!(got, at_keys, "the regions starting at the keys");
    assert_eq!(s.regions.len(), 6);
    let op = s.operator(first).await;
    assert_eq!(op.desc, b"region-splitter");
    assert_eq!(op.kind, b"split");
    assert_eq!(status(&op), pdpb::OperatorStatus::Success, "{op:?}");

    // ScatterRegion: six regions on stores 0-2 spread over all six stores.
    let ids: Vec<u64> = s.regions.keys().copied().collect();
    let answer = s.scatter(ids.clone(), "t").await;
    assert_eq!(answer.finished_percentage, 100, "{answer:?}");
    assert!(answer.failed_regions_id.is_empty(), "{answer:?}");
    let mut running = Vec::new();
    for id in &ids {
        let op = s.operator(*id).await;
        // A region the scatter leaves in place shows its last operator, the split.
        if op.desc == b"scatter-region" {
            assert_eq!(status(&op), pdpb::OperatorStatus::Running, "{op:?}");
            running.push((*id, op.kind));
        } else {
            assert_ne!(status(&op), pdpb::OperatorStatus::Running, "{op:?}");
        }
    }
    let moving: Vec<u64> = running
        .iter()
        .filter(|(_, kind)| kind.starts_with(b"admin,region"))
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(moving.len(), 3, "half the regions move: {running:?}");
    // The same scatter again while it runs is done already; another group's is refused.
    let again = s.scatter(vec![moving[0]], "t").await;
    assert_eq!(
        (again.finished_percentage, again.failed_regions_id),
        (100, vec![])
    );
    let other = s.scatter(vec![moving[0]], "other").await;
    assert_eq!(other.failed_regions_id, vec![moving[0]]);
    assert_eq!(other.finished_percentage, 0);

    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        s.beat().await;
        let mut busy = 0;
        for (id, _) in &running {
            if status(&s.operator(*id).await) == pdpb::OperatorStatus::Running {
                busy += 1;
            }
        }
        if busy == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{busy} scatters still running: {:?}",
            s.regions
        );
    }
    for (id, _) in &running {
        let op = s.operator(*id).await;
        assert_eq!(op.desc, b"scatter-region");
        assert_eq!(status(&op), pdpb::OperatorStatus::Success, "{op:?}");
    }
    let (peers, leaders) = s.spread();
    assert_eq!(peers, vec![3; STORES], "peers per store: {:?}", s.regions);
    assert_eq!(
        leaders,
        vec![1; STORES],
        "leaders per store: {:?}",
        s.regions
    );

    // SplitAndScatterRegions: split inside one region, then scatter what the split made.
    let mut pd = s.pd.clone();
    let h = s.h.clone();
    let call = tokio::spawn(async move {
        pd.split_and_scatter_regions(pdpb::SplitAndScatterRegionsRequest {
            header: h,
            split_keys: vec![b"b5".to_vec()],
            group: "u".into(),
            retry_limit: 3,
        })
        .await
        .unwrap()
        .into_inner()
    });
    let ask = s.next_split().await;
    assert_eq!(ask.split_region.unwrap().keys, vec![b"b5".to_vec()]);
    let answer = call.await.unwrap();
    assert_eq!(error_type(&answer.header), None, "{:?}", answer.header);
    assert_eq!(answer.split_finished_percentage, 100);
    assert_eq!(answer.scatter_finished_percentage, 100);
    let at = s
        .regions
        .values()
        .find(|(r, _)| r.start_key == b"b5")
        .map(|(r, _)| r.id);
    assert_eq!(answer.regions_id, at.into_iter().collect::<Vec<_>>());
}

async fn connect_and_wait(addr: &str, trust: &Trust) -> (PdClient<Channel>, u64) {
    let mut pd = pd_grpc::connect(addr, trust).await.unwrap();
    let cluster_id = pd_grpc::cluster_id(&mut pd).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while let Err(e) = pd
        .is_bootstrapped(pdpb::IsBootstrappedRequest {
            header: header(cluster_id),
        })
        .await
    {
        assert!(
            std::time::Instant::now() < deadline,
            "placement did not come up: {e}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (pd, cluster_id)
}

/// A client certificate with the `store` role alone, made by the node's CA.
fn store_certificate(tls: &Path) -> Trust {
    let out = std::process::Command::new(test_binary())
        .arg("cert")
        .arg("--certs-dir")
        .arg(tls)
        .arg("--ca-key")
        .arg(tls.join("ca-key.pem"))
        .args(["create-client", "--role", "store", "--name", "tikv"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Trust::Mutual {
        ca: tls.join("ca.pem"),
        cert: tls.join("tikv.pem"),
        key: tls.join("tikv-key.pem"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_and_scatter_as_pd_does_embedded() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(tmp.path()).unwrap();
    let config = tmp.path().join("meridian.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let extra = [
        "--config".to_string(),
        config.display().to_string(),
        "--cores".to_string(),
        "2".to_string(),
    ];
    let server = ServerProcess::start_with(test_binary(), &data, "127.0.0.1:0", &extra).unwrap();
    let addr = server.grpc_addr.clone().unwrap();
    let (pd, cluster_id) = connect_and_wait(&addr, &Trust::Ca(data.join("tls/ca.pem"))).await;
    splits_and_scatters(pd, cluster_id).await;

    // A store's certificate may not ask for a scatter or a split, but may read an operator.
    let mut store = pd_grpc::connect(&addr, &store_certificate(&data.join("tls")))
        .await
        .unwrap();
    let refused = store
        .scatter_region(pdpb::ScatterRegionRequest {
            header: header(cluster_id),
            regions_id: vec![1],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused}");
    let refused = store
        .split_regions(pdpb::SplitRegionsRequest {
            header: header(cluster_id),
            split_keys: vec![b"x".to_vec()],
            retry_limit: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused}");
    let read = store
        .get_operator(pdpb::GetOperatorRequest {
            header: header(cluster_id),
            region_id: 1,
        })
        .await;
    assert!(read.is_ok(), "{read:?}");
    server.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_and_scatter_as_pd_does_on_etcd() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Cluster::start(tmp.path(), 1, CONFIG).unwrap();
    let addr = c.nodes[0].process().grpc_addr.clone().unwrap();
    let (pd, cluster_id) = connect_and_wait(&addr, &c.trust()).await;
    splits_and_scatters(pd, cluster_id).await;
    c.stop_all().unwrap();
}

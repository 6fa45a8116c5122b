//! Follower reads of routing on a cluster of three on etcd, as PD's clients ask for them
//! (`pd-allow-follower-handle` in the metadata): a follower's region syncer keeps its copy of
//! the leader's index, and a follower in sync answers GetRegion, GetRegionByID, ScanRegions,
//! BatchScanRegions and QueryRegion from it; every answer is a region the leader had, never
//! one it did not. Without the key a follower refuses a unary routing read in PD's words and
//! answers QueryRegion from its copy all the same, as PD's follower does. When the leader stops
//! (SIGSTOP, its streams silent but open), the followers stop answering within the 1 s silence
//! bound (PD's REGION_NOT_FOUND); the member that leads next takes its copy over instead of
//! reading every region from etcd, and the other follows it and answers again.

use std::collections::HashSet;

use meridian::harness::{bootstrap_over_grpc, Cluster};
use tonic::metadata::MetadataValue;

use super::on_etcd::{client, leader};
use super::*;

/// `message` with PD's follower-handle key, as PD's Go client sends it.
pub(super) fn allowing<T>(message: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.metadata_mut().insert(
        "pd-allow-follower-handle",
        MetadataValue::from_static("true"),
    );
    r
}

/// What a routing answer said: a region (id, start, end, version), none, or a refusal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Seen {
    Region(u64, Vec<u8>, Vec<u8>, u64),
    NotFound,
}

pub(super) fn seen(r: &pdpb::GetRegionResponse) -> Seen {
    match error_type(&r.header) {
        Some(pdpb::ErrorType::RegionNotFound) => Seen::NotFound,
        None => {
            let m = r
                .region
                .as_ref()
                .expect("a region in an answer without an error");
            let version = m.region_epoch.as_ref().map_or(0, |e| e.version);
            Seen::Region(m.id, m.start_key.clone(), m.end_key.clone(), version)
        }
        other => panic!("unexpected answer {other:?}: {r:?}"),
    }
}

pub(super) async fn get(
    pd: &mut PdClient<Channel>,
    h: &Option<pdpb::RequestHeader>,
    key: &[u8],
) -> Seen {
    let r = pd
        .get_region(allowing(get_request(h, key)))
        .await
        .unwrap()
        .into_inner();
    seen(&r)
}

/// Splits the rightmost region, `[start, "")` with id `right` at `version`, at `at`; the new
/// left half gets a fresh id. Returns every region the split made (what the leader now has).
async fn split(
    pd: &mut PdClient<Channel>,
    cluster_id: u64,
    store: u64,
    (right, start, version): (u64, &[u8], u64),
    at: &[u8],
) -> [Seen; 2] {
    let (request, made) = split_report(pd, cluster_id, store, (right, start, version), at).await;
    report(pd, request).await;
    made
}

/// The rightmost region, split again and again at `k{n}` for each `n` given.
pub(super) struct Splitter {
    cluster_id: u64,
    store: u64,
    /// The rightmost region's id: the bootstrapped region's, which keeps the right half.
    pub(super) right: u64,
    start: Vec<u8>,
    version: u64,
}

impl Splitter {
    /// Splits at `k{n}` for each `n` in `ns`; returns every region the splits made.
    pub(super) async fn split(
        &mut self,
        pd: &mut PdClient<Channel>,
        ns: std::ops::Range<u32>,
    ) -> Vec<Seen> {
        let mut made = Vec::new();
        for n in ns {
            let at = format!("k{n:04}").into_bytes();
            made.extend(
                split(
                    pd,
                    self.cluster_id,
                    self.store,
                    (self.right, &self.start, self.version),
                    &at,
                )
                .await,
            );
            self.start = at;
            self.version += 1;
        }
        made
    }

    /// The report of the next split, at `at`, built with fresh ids and not sent.
    #[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
    pub(super) async fn next_report(
        &self,
        pd: &mut PdClient<Channel>,
        at: &[u8],
    ) -> pdpb::ReportBatchSplitRequest {
        let rightmost = (self.right, &self.start[..], self.version);
        split_report(pd, self.cluster_id, self.store, rightmost, at)
            .await
            .0
    }

    /// The rightmost region as it stands (before any split, the bootstrapped one).
    pub(super) fn rightmost(&self) -> Seen {
        Seen::Region(self.right, self.start.clone(), Vec::new(), self.version)
    }
}

/// The config of the three-member clusters here: a short lease, so that a failover is quick.
pub(super) const ON_ETCD: &str = "[election]\nlease_ttl_secs = 2\n";

/// A cluster bootstrapped through its leader: the cluster, the leader, a client of it, the
/// request header and a splitter of the one region.
pub(super) type Bootstrapped = (
    Cluster,
    usize,
    PdClient<Channel>,
    Option<pdpb::RequestHeader>,
    Splitter,
);

/// Three members on etcd ([`ON_ETCD`]), bootstrapped through the leader (see
/// [`bootstrap_led`]).
pub(super) async fn bootstrapped(dir: &std::path::Path) -> Bootstrapped {
    bootstrap_led(Cluster::start(dir, 3, ON_ETCD).unwrap()).await
}

/// `c` bootstrapped through the member that leads.
#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
pub(super) async fn bootstrap_led(c: Cluster) -> Bootstrapped {
    let first = leader(&c, None);
    let addr = c.nodes[first].process().grpc_addr.clone().unwrap();
    let (mut pd, cluster_id) =
        connect_when_placement_loads(&addr, &c.trust(), Duration::from_secs(20))
            .await
            .unwrap();
    let (store, boot) = bootstrap_over_grpc(&mut pd, cluster_id).await.unwrap();
    let splitter = Splitter {
        cluster_id,
        store: store.id,
        right: boot.id,
        start: Vec::new(),
        version: 1,
    };
    (c, first, pd, pd_header(cluster_id), splitter)
}

/// The report of the split [`split`] makes, with fresh ids, and the regions it makes.
async fn split_report(
    pd: &mut PdClient<Channel>,
    cluster_id: u64,
    store: u64,
    (right, start, version): (u64, &[u8], u64),
    at: &[u8],
) -> (pdpb::ReportBatchSplitRequest, [Seen; 2]) {
    let left_id = harness::alloc_id(pd, cluster_id).await.unwrap();
    let left_peer = harness::alloc_id(pd, cluster_id).await.unwrap();
    let right_peer = harness::alloc_id(pd, cluster_id).await.unwrap();
    let left = region(
        left_id,
        start,
        at,
        (1, version + 1),
        vec![peer(left_peer, store)],
    );
    let right_half = region(
        right,
        at,
        b"",
        (1, version + 1),
        vec![peer(right_peer, store)],
    );
    let request = pdpb::ReportBatchSplitRequest {
        header: pd_header(cluster_id),
        regions: vec![left, right_half],
    };
    let made = [
        Seen::Region(left_id, start.to_vec(), at.to_vec(), version + 1),
        Seen::Region(right, at.to_vec(), Vec::new(), version + 1),
    ];
    (request, made)
}

/// Sends a split report and requires it acknowledged.
pub(super) async fn report(pd: &mut PdClient<Channel>, request: pdpb::ReportBatchSplitRequest) {
    let r = pd.report_batch_split(request).await.unwrap().into_inner();
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_in_sync_answer_routing_and_never_invent_a_region() {
    let tmp = tempfile::tempdir().unwrap();
    let (c, first, mut pd, h, mut splitter) = bootstrapped(tmp.path()).await;
    let boot = splitter.right;
    let followers: Vec<usize> = (0..3).filter(|i| *i != first).collect();
    let mut fpd = Vec::new();
    for &f in &followers {
        fpd.push(client(&c, f).await);
    }

    // Without the key a follower refuses, as before and as PD's does.
    let refused = fpd[0]
        .get_region(pdpb::GetRegionRequest {
            header: h.clone(),
            region_key: b"k".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused}");

    // Splits on the leader while the followers are read: every answer is a region the
    // leader had at some time (or a refusal), never one it did not.
    let mut had: HashSet<Seen> = HashSet::new();
    had.insert(splitter.rightmost());
    for n in 0..40u32 {
        had.extend(splitter.split(&mut pd, n..n + 1).await);
        for f in fpd.iter_mut() {
            for key in [&b""[..], b"k0005", b"k0020", b"zz"] {
                match get(f, &h, key).await {
                    Seen::NotFound => {}
                    region => assert!(had.contains(&region), "invented: {region:?}"),
                }
            }
        }
    }

    // Converged: each follower answers every key as the leader does, within the lag bound's
    // time (the stream polls every 5 ms; allow a second).
    let keys: Vec<Vec<u8>> = (0..42u32)
        .map(|n| format!("k{n:04}").into_bytes())
        .collect();
    let mut want = Vec::new();
    for k in &keys {
        want.push(get(&mut pd, &h, k).await);
    }
    for f in fpd.iter_mut() {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let mut got = Vec::new();
            for k in &keys {
                got.push(get(f, &h, k).await);
            }
            if got == want {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "a follower did not converge: {got:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The other routing reads from the copy: by id, a scan, a batch scan, QueryRegion.
        let by_id = f
            .get_region_by_id(allowing(pdpb::GetRegionByIdRequest {
                header: h.clone(),
                region_id: boot,
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(seen(&by_id), want[41], "by id: the rightmost region");
        let scan = f
            .scan_regions(allowing(pdpb::ScanRegionsRequest {
                header: h.clone(),
                start_key: Vec::new(),
                end_key: Vec::new(),
                limit: 100,
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&scan.header), None);
        assert_eq!(scan.regions.len(), 41, "40 splits make 41 regions");
        let batch = f
            .batch_scan_regions(allowing(pdpb::BatchScanRegionsRequest {
                header: h.clone(),
                ranges: vec![pdpb::KeyRange {
                    start_key: b"k0010".to_vec(),
                    end_key: b"k0012".to_vec(),
                }],
                limit: 10,
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&batch.header), None);
        assert_eq!(batch.regions.len(), 2, "[k0010, k0012) spans two regions");
        let mut query = f
            .query_region(allowing(tokio_stream::iter([pdpb::QueryRegionRequest {
                header: h.clone(),
                keys: vec![b"k0007".to_vec()],
                ..Default::default()
            }])))
            .await
            .unwrap()
            .into_inner();
        let answer = query.message().await.unwrap().expect("one answer");
        assert_eq!(error_type(&answer.header), None, "{:?}", answer.header);
        let Seen::Region(id, ..) = &want[7] else {
            panic!("k0007 has a region")
        };
        assert_eq!(answer.key_id_map, vec![*id]);
        // Without the key, PD's follower refuses a unary routing read in its own words, and
        // answers QueryRegion from its copy all the same.
        let refused = f.get_region(get_request(&h, b"k0007")).await.unwrap_err();
        assert_eq!(refused.code(), Code::Unavailable, "{refused}");
        assert_eq!(
            refused.message(),
            "not leader and follower handling not allowed"
        );
        let mut query = f
            .query_region(tokio_stream::iter([pdpb::QueryRegionRequest {
                header: h.clone(),
                keys: vec![b"k0007".to_vec()],
                ..Default::default()
            }]))
            .await
            .unwrap()
            .into_inner();
        let answer = query.message().await.unwrap().expect("one answer");
        assert_eq!(error_type(&answer.header), None, "{:?}", answer.header);
        assert_eq!(answer.key_id_map, vec![*id], "QueryRegion without the key");
    }

    // The leader stops (SIGSTOP: its connections stay open and silent, as in a long pause):
    // within the silence bound the followers refuse; the lease runs out, and the one that does
    // not lead next follows the new leader and answers again.
    c.nodes[first].process().signal(libc::SIGSTOP).unwrap();
    let killed = std::time::Instant::now();
    let mut refused_by = [false, false];
    while refused_by != [true, true] && killed.elapsed() < Duration::from_secs(10) {
        for (j, f) in fpd.iter_mut().enumerate() {
            if let Ok(r) = f.get_region(allowing(get_request(&h, b"k0020"))).await {
                match seen(&r.into_inner()) {
                    Seen::NotFound => refused_by[j] = true,
                    region => assert_eq!(region, want[20], "after the kill: what the leader had"),
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        refused_by,
        [true, true],
        "both followers stopped answering once silent"
    );
    let next = leader(&c, Some(first));
    let follower = followers.iter().position(|f| *f != next).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(r) = fpd[follower]
            .get_region(allowing(get_request(&h, b"k0020")))
            .await
        {
            match seen(&r.into_inner()) {
                Seen::NotFound => {}
                region => {
                    assert_eq!(region, want[20], "the new leader's copy is the old one's");
                    break;
                }
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the follower never synced with {next}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The new leader took its copy over instead of reading every region from etcd, and
    // answers every key as the old leader did.
    let log = without_colours(&c.nodes[next].process().log_text());
    assert!(
        log.lines()
            .any(|l| l.contains("placement loaded") && l.contains("from_copy=true")),
        "the new leader loaded from etcd: {log}"
    );
    let mut new_leader = client(&c, next).await;
    for (k, want) in keys.iter().zip(&want) {
        let r = new_leader
            .get_region(get_request(&h, k))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(&seen(&r), want, "the new leader on {k:?}");
    }
}

/// `log` without its ANSI colour sequences (`ESC [ ... m`).
pub(super) fn without_colours(log: &str) -> String {
    let mut out = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub(super) fn get_request(h: &Option<pdpb::RequestHeader>, key: &[u8]) -> pdpb::GetRegionRequest {
    pdpb::GetRegionRequest {
        header: h.clone(),
        region_key: key.to_vec(),
        ..Default::default()
    }
}

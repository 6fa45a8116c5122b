//! `loadgen nemesis`: a Jepsen-style run. It starts an etcd (from PATH) and three `meridian`
//! nodes, each reaching etcd through a proxy of its own; under TSO load (the checker), id
//! allocation and a stream of splits with region heartbeats, it applies one random fault
//! after another: SIGKILL and restart, SIGSTOP of the leader past its lease, a member cut off
//! from etcd, the debug clock jumped forward or back, a graceful transfer. At the end it
//! checks what a client was promised: timestamps in order and unique, no id handed out twice,
//! every acknowledged split still in the map, and the map covering each key exactly once.
//!
//! The fault plan (`plan`) and the end checks (`lost_splits`, `coverage_errors`,
//! `duplicates`) are pure and unit-tested; the rest drives processes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use meridian::client::{Client, ClientOptions};
use meridian::harness::{bootstrap_one_region, Cluster};
use meridian::placement::{Epoch, Peer, PeerRole, Region, RegionStats};
use serde::Serialize;

use crate::args::TsoArgs;
use crate::checker::count_duplicates;
use crate::run;

#[derive(clap::Args, Debug, Clone)]
pub struct NemesisArgs {
    /// How long faults are applied (the load runs a little longer on both ends).
    #[arg(long, value_parser = crate::duration::parse, default_value = "60s")]
    pub duration: Duration,
    /// Writes the summary as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Seed of the fault plan: the same seed gives the same faults in the same order.
    #[arg(long)]
    pub seed: Option<u64>,
    /// The leaders' lease in seconds (a pause is longer than this).
    #[arg(long, default_value_t = 2)]
    pub lease_ttl_secs: u64,
    /// Concurrent TSO callers.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
}

/// One fault, as planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// SIGKILL member `node`, restart it after `down`.
    Kill { node: usize, down_ms: u64 },
    /// SIGSTOP the leader for `pause` (longer than the lease), then SIGCONT.
    PauseLeader { pause_ms: u64 },
    /// Cut `node` off from etcd for `cut`, then heal.
    Partition { node: usize, cut_ms: u64 },
    /// Shift the leader's clock by `shift` ms (either sign), and back after `hold`.
    ClockJump { shift_ms: i64, hold_ms: u64 },
    /// Hand leadership to the member `offset` places after the leader.
    Transfer { offset: usize },
}

impl Fault {
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Kill { .. } => "kill",
            Fault::PauseLeader { .. } => "pause_leader",
            Fault::Partition { .. } => "partition",
            Fault::ClockJump { .. } => "clock_jump",
            Fault::Transfer { .. } => "transfer",
        }
    }
}

/// splitmix64: a reproducible stream from a seed, enough for a fault plan.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// The next fault for a cluster of `nodes` members whose leader is `leader`. Half the kills
/// and partitions hit the leader, where they hurt; pauses outlast the lease.
pub fn plan(rng: &mut Rng, nodes: usize, leader: usize, lease_ms: u64) -> Fault {
    let pick = |rng: &mut Rng| {
        if rng.next_u64() % 2 == 0 {
            leader
        } else {
            rng.between(0, nodes as u64 - 1) as usize
        }
    };
    match rng.next_u64() % 5 {
        0 => Fault::Kill {
            node: pick(rng),
            down_ms: rng.between(100, 1_500),
        },
        1 => Fault::PauseLeader {
            pause_ms: lease_ms + rng.between(200, 1_500),
        },
        2 => Fault::Partition {
            node: pick(rng),
            cut_ms: rng.between(500, lease_ms + 1_500),
        },
        3 => {
            let magnitude = rng.between(200, 3_000) as i64;
            Fault::ClockJump {
                shift_ms: if rng.next_u64() % 2 == 0 {
                    magnitude
                } else {
                    -magnitude
                },
                hold_ms: rng.between(500, 2_000),
            }
        }
        _ => Fault::Transfer {
            offset: rng.between(1, nodes as u64 - 1) as usize,
        },
    }
}

/// Acknowledged splits whose left half is not in `map` with at least the acknowledged epoch.
/// (Its right half is split again later, so only the left half keeps its identity.)
pub fn lost_splits(acknowledged: &[Region], map: &[Region]) -> Vec<u64> {
    let by_id: HashMap<u64, &Region> = map.iter().map(|r| (r.id, r)).collect();
    acknowledged
        .iter()
        .filter(|left| {
            !by_id.get(&left.id).is_some_and(|r| {
                r.start_key == left.start_key
                    && r.end_key == left.end_key
                    && r.epoch.version >= left.epoch.version
            })
        })
        .map(|r| r.id)
        .collect()
}

/// Gaps and overlaps in `map` (any order): it must cover every key exactly once.
pub fn coverage_errors(map: &[Region]) -> Vec<String> {
    let mut sorted: Vec<&Region> = map.iter().collect();
    sorted.sort_by(|a, b| a.start_key.cmp(&b.start_key));
    let mut errors = Vec::new();
    let mut covered_to: Vec<u8> = Vec::new();
    let mut reached_end = false;
    for r in sorted {
        if reached_end {
            errors.push(format!(
                "region {} lies past the region ending at +inf",
                r.id
            ));
            continue;
        }
        if r.start_key != covered_to {
            errors.push(format!(
                "region {} starts at {:?}, the previous one ends at {:?}",
                r.id,
                String::from_utf8_lossy(&r.start_key),
                String::from_utf8_lossy(&covered_to)
            ));
        }
        covered_to = r.end_key.clone();
        reached_end = r.end_key.is_empty();
    }
    if !reached_end {
        errors.push("no region reaches +inf".into());
    }
    errors
}

#[derive(Debug, Default, Serialize)]
pub struct NemesisReport {
    pub seed: u64,
    pub duration_s: f64,
    pub faults: u64,
    pub faults_by_kind: HashMap<&'static str, u64>,
    /// Timestamps out of order plus duplicates (the TSO checker).
    pub violations: u64,
    pub timestamps: u64,
    pub tso_errors: u64,
    pub longest_stall_ms: f64,
    pub unavailable_ms: f64,
    pub ids: u64,
    pub duplicate_ids: u64,
    pub splits_acknowledged: u64,
    pub lost_splits: u64,
    pub coverage_errors: Vec<String>,
    /// Faults after which no member served within 20 s (availability, not safety).
    pub leaderless: u64,
    pub log: Vec<String>,
}

impl NemesisReport {
    /// Every broken promise: what makes the run fail.
    pub fn failures(&self) -> u64 {
        self.violations + self.duplicate_ids + self.lost_splits + self.coverage_errors.len() as u64
    }

    pub fn print(&self) {
        let mut kinds: Vec<_> = self.faults_by_kind.iter().collect();
        kinds.sort();
        println!(
            "nemesis (seed {}): {} faults in {:.0} s ({})",
            self.seed,
            self.faults,
            self.duration_s,
            kinds
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "tso: {} timestamps, {} violations, {} errors, longest stall {:.0} ms, unavailable {:.0} ms",
            self.timestamps,
            self.violations,
            self.tso_errors,
            self.longest_stall_ms,
            self.unavailable_ms
        );
        println!(
            "ids: {} handed out, {} duplicates",
            self.ids, self.duplicate_ids
        );
        println!(
            "splits: {} acknowledged, {} lost; map coverage errors: {}; leaderless after a fault: {}",
            self.splits_acknowledged,
            self.lost_splits,
            self.coverage_errors.len(),
            self.leaderless
        );
        for e in &self.coverage_errors {
            println!("  coverage: {e}");
        }
    }
}

const STORE_ADDRESS: &str = "127.0.0.1:20160";

pub async fn run(args: &NemesisArgs) -> anyhow::Result<NemesisReport> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let binary = crate::demo::meridian_binary()?;
    let dir = tempfile::tempdir()?;
    let lease_ms = args.lease_ttl_secs * 1000;
    let config = format!(
        "[election]\nlease_ttl_secs = {}\nsafety_margin_ms = 300\n[debug]\nclock_injection = true\n",
        args.lease_ttl_secs
    );
    let cluster = tokio::task::block_in_place(|| {
        Cluster::start_binary(&binary, dir.path(), 3, &config, true)
    })
    .context("starting etcd and three members")?;
    let cluster = Arc::new(Mutex::new(cluster));
    let (endpoints, ca) = {
        let c = lock(&cluster);
        (c.endpoints(), c.ca.clone())
    };
    leader_within(&cluster, None, Duration::from_secs(20)).context("no first leader")?;

    let warmup = Duration::from_secs(2);
    let tso_args = TsoArgs::checked(
        endpoints.clone(),
        ca.clone(),
        warmup + args.duration + Duration::from_secs(3),
        args.concurrency,
    );
    let tso = tokio::spawn(async move { run::run(&tso_args).await });
    let mut opts = ClientOptions::new(endpoints, meridian::tls::Trust::Ca(ca));
    opts.retry_budget = Duration::from_secs(5);
    let client = Arc::new(Client::connect(opts).await?);
    let stop = Arc::new(AtomicBool::new(false));
    let ids = tokio::spawn(allocate_ids(client.clone(), stop.clone()));
    let splits = tokio::spawn(split_forever(client.clone(), stop.clone()));
    tokio::time::sleep(warmup).await;

    let mut report = NemesisReport {
        seed,
        ..Default::default()
    };
    let mut rng = Rng::new(seed);
    let started = Instant::now();
    while started.elapsed() < args.duration {
        let Some(leader) = leader_within(&cluster, None, Duration::from_secs(20)) else {
            report.leaderless += 1;
            continue;
        };
        let fault = plan(&mut rng, 3, leader, lease_ms);
        let at = started.elapsed().as_secs_f64();
        apply(&cluster, leader, fault).await?;
        report.faults += 1;
        *report.faults_by_kind.entry(fault.kind()).or_default() += 1;
        let line = format!("{at:7.2} s: {fault:?} (leader n{leader})");
        tracing::info!("{line}");
        report.log.push(line);
        if leader_within(&cluster, None, Duration::from_secs(20)).is_none() {
            report.leaderless += 1;
        }
    }
    report.duration_s = started.elapsed().as_secs_f64();

    let tso_report = tso.await??;
    stop.store(true, Ordering::Relaxed);
    let ids = ids.await?;
    let acknowledged = splits.await?;
    report.violations = tso_report.violations;
    report.timestamps = tso_report.checked;
    report.tso_errors = tso_report.errors;
    report.longest_stall_ms = tso_report.longest_stall_ms;
    report.unavailable_ms = tso_report.unavailable_ms;
    report.ids = ids.len() as u64;
    report.duplicate_ids = count_duplicates(ids);
    report.splits_acknowledged = acknowledged.len() as u64;
    // The map as the leader holds it after every fault, read back in full once it is ready:
    // a new leader that took over its syncer's copy serves routing from the copy while it
    // reconciles it with the store, a state an earlier leader held, which may predate the
    // last splits acknowledged; durability is what is checked here.
    wait_ready(&cluster).await;
    let map = crate::cluster::scan_all(&client).await?;
    report.lost_splits = lost_splits(&acknowledged, &map).len() as u64;
    report.coverage_errors = coverage_errors(&map);
    let cluster = Arc::try_unwrap(cluster)
        .map_err(|_| anyhow::anyhow!("cluster still shared"))?
        .into_inner()
        .map_err(|_| anyhow::anyhow!("cluster lock poisoned"))?;
    drop(cluster);
    Ok(report)
}

fn lock(cluster: &Mutex<Cluster>) -> std::sync::MutexGuard<'_, Cluster> {
    cluster.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits (up to 20 s) until the leader's `/ready` says yes: placement loaded and reconciled.
async fn wait_ready(cluster: &Arc<Mutex<Cluster>>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(leader) = leader_within(cluster, None, Duration::from_secs(5)) {
            let ready = tokio::task::block_in_place(|| {
                let admin = lock(cluster).admin(leader).ok()?;
                admin.get_json("/ready").ok()
            });
            if ready.is_some_and(|(code, _)| code == 200) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn leader_within(cluster: &Mutex<Cluster>, except: Option<usize>, t: Duration) -> Option<usize> {
    tokio::task::block_in_place(|| lock(cluster).leader_within(except, t))
}

async fn apply(cluster: &Arc<Mutex<Cluster>>, leader: usize, fault: Fault) -> anyhow::Result<()> {
    let sleep = |ms: u64| tokio::time::sleep(Duration::from_millis(ms));
    match fault {
        Fault::Kill { node, down_ms } => {
            if let Some(p) = lock(cluster).nodes[node].process.take() {
                p.kill()?;
            }
            sleep(down_ms).await;
            tokio::task::block_in_place(|| lock(cluster).nodes[node].start())?;
        }
        Fault::PauseLeader { pause_ms } => {
            lock(cluster).nodes[leader]
                .process()
                .signal(libc::SIGSTOP)?;
            sleep(pause_ms).await;
            lock(cluster).nodes[leader]
                .process()
                .signal(libc::SIGCONT)?;
        }
        Fault::Partition { node, cut_ms } => {
            lock(cluster).proxies[node].partition();
            sleep(cut_ms).await;
            lock(cluster).proxies[node].heal();
        }
        Fault::ClockJump { shift_ms, hold_ms } => {
            let admin = lock(cluster).admin(leader)?;
            let shift = |ms: i64| {
                let admin = admin.clone();
                tokio::task::spawn_blocking(move || {
                    admin.post(&format!("/api/v1/debug/clock/shift/{ms}"))
                })
            };
            shift(shift_ms).await??;
            sleep(hold_ms).await;
            // Back to the real clock; the node may have been replaced meanwhile (a restart
            // starts on the real clock), so a failure here is not the nemesis's.
            let _ = shift(-shift_ms).await;
        }
        Fault::Transfer { offset } => {
            let (admin, target) = {
                let c = lock(cluster);
                let target = (leader + offset) % c.nodes.len();
                (c.admin(leader)?, c.nodes[target].name.clone())
            };
            // Refused or timed out is an outcome too: the checks judge what followed.
            let _ = tokio::task::spawn_blocking(move || {
                admin.post(&format!("/api/v1/leader/transfer/{target}"))
            })
            .await?;
        }
    }
    Ok(())
}

/// Ids from 8 callers until `stop`; every one handed out.
async fn allocate_ids(client: Arc<Client>, stop: Arc<AtomicBool>) -> Vec<u64> {
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (client, stop) = (client.clone(), stop.clone());
            tokio::spawn(async move {
                let mut got = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match client.alloc_id().await {
                        Ok(id) => got.push(id),
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                }
                got
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap_or_default());
    }
    all
}

/// Bootstraps, then splits the rightmost region again and again until `stop`, each split
/// reported until acknowledged, with region heartbeats for the regions made; returns the
/// left halves of the acknowledged splits.
async fn split_forever(client: Arc<Client>, stop: Arc<AtomicBool>) -> Vec<Region> {
    let retry = || tokio::time::sleep(Duration::from_millis(100));
    let mut acknowledged = Vec::new();
    let mut current = loop {
        if stop.load(Ordering::Relaxed) {
            return acknowledged;
        }
        match bootstrap_one_region(&client, STORE_ADDRESS).await {
            Ok(r) => break r,
            Err(_) => retry().await,
        }
    };
    let store_id = current.peers[0].store_id;
    let mut round: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let split = match client.ask_batch_split(current.clone(), 1).await {
            Ok(s) if !s.is_empty() && !s[0].peer_ids.is_empty() => s[0].clone(),
            _ => {
                retry().await;
                continue;
            }
        };
        let at = format!("k{round:010}").into_bytes();
        let epoch = Epoch {
            conf_ver: current.epoch.conf_ver,
            version: current.epoch.version + 1,
        };
        let left = Region {
            id: split.region_id,
            start_key: current.start_key.clone(),
            end_key: at.clone(),
            epoch,
            peers: vec![Peer {
                id: split.peer_ids[0],
                store_id,
                role: PeerRole::Voter,
            }],
            leader: Some(split.peer_ids[0]),
        };
        let right = Region {
            start_key: at,
            epoch,
            ..current.clone()
        };
        // Reported until acknowledged: a report lost to a fault may or may not have been
        // applied, and reporting it again is a no-op if it was.
        loop {
            match client
                .report_batch_split(vec![left.clone(), right.clone()])
                .await
            {
                Ok(()) => break,
                Err(_) if stop.load(Ordering::Relaxed) => return acknowledged,
                Err(_) => retry().await,
            }
        }
        acknowledged.push(left.clone());
        let _ = client.region_heartbeat(left, RegionStats::default()).await;
        let _ = client
            .store_heartbeat(store_id, meridian::placement::StoreStats::default())
            .await;
        current = right;
        round += 1;
    }
    acknowledged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(id: u64, start: &str, end: &str, version: u64) -> Region {
        Region {
            id,
            start_key: start.as_bytes().to_vec(),
            end_key: end.as_bytes().to_vec(),
            epoch: Epoch {
                conf_ver: 1,
                version,
            },
            peers: vec![],
            leader: None,
        }
    }

    #[test]
    fn the_plan_is_reproducible_and_uses_every_fault() {
        let faults = |seed| {
            let mut rng = Rng::new(seed);
            (0..200)
                .map(|i| plan(&mut rng, 3, i % 3, 2_000))
                .collect::<Vec<_>>()
        };
        assert_eq!(faults(7), faults(7));
        assert_ne!(faults(7), faults(8));
        let kinds: std::collections::HashSet<_> = faults(7).iter().map(Fault::kind).collect();
        assert_eq!(kinds.len(), 5, "{kinds:?}");
        for f in faults(9) {
            match f {
                Fault::PauseLeader { pause_ms } => assert!(pause_ms > 2_000, "{f:?}"),
                Fault::Kill { node, .. } | Fault::Partition { node, .. } => assert!(node < 3),
                Fault::Transfer { offset } => assert!((1..3).contains(&offset)),
                Fault::ClockJump { shift_ms, .. } => assert!(shift_ms != 0),
            }
        }
    }

    #[test]
    fn a_split_is_lost_when_its_left_half_is_missing_shrunk_or_older() {
        let acked = vec![region(2, "", "b", 2), region(3, "b", "c", 3)];
        let whole = vec![
            region(2, "", "b", 2),
            region(3, "b", "c", 3),
            region(1, "c", "", 3),
        ];
        assert!(lost_splits(&acked, &whole).is_empty());
        // A later epoch of the same range is fine (a conf change, say).
        let newer = vec![
            region(2, "", "b", 5),
            region(3, "b", "c", 3),
            region(1, "c", "", 3),
        ];
        assert!(lost_splits(&acked, &newer).is_empty());
        let missing = vec![region(2, "", "b", 2), region(1, "b", "", 3)];
        assert_eq!(lost_splits(&acked, &missing), vec![3]);
        let older = vec![
            region(2, "", "b", 1),
            region(3, "b", "c", 3),
            region(1, "c", "", 3),
        ];
        assert_eq!(lost_splits(&acked, &older), vec![2]);
        let shrunk = vec![
            region(2, "", "a", 2),
            region(3, "b", "c", 3),
            region(1, "c", "", 3),
        ];
        assert_eq!(lost_splits(&acked, &shrunk), vec![2]);
    }

    #[test]
    fn coverage_finds_gaps_overlaps_and_a_missing_end() {
        let whole = vec![
            region(3, "b", "", 1),
            region(1, "", "a", 1),
            region(2, "a", "b", 1),
        ];
        assert!(coverage_errors(&whole).is_empty());
        let gap = vec![region(1, "", "a", 1), region(3, "b", "", 1)];
        assert_eq!(coverage_errors(&gap).len(), 1);
        let overlap = vec![region(1, "", "b", 1), region(2, "a", "", 1)];
        assert_eq!(coverage_errors(&overlap).len(), 1);
        let open = vec![region(1, "", "a", 1)];
        assert_eq!(
            coverage_errors(&open),
            vec!["no region reaches +inf".to_string()]
        );
        assert_eq!(coverage_errors(&[]).len(), 1);
    }
}

//! `loadgen cluster`: simulated stores and regions. Bootstraps the cluster if needed, splits
//! the first region until there are `--regions`, then sends every region's heartbeat from its
//! leader, round after round, pipelined on several streams (optionally at `--rate`), applies
//! the operators that come back, and sends each store's heartbeat every second.
//!
//! With `--carry-out-operators` the stores behave as TiKV does with what PD sends
//! (`carry_out`): each step is carried out as a conf change, a leader transfer or a split, the
//! region is reported again at once, stores report the regions and leaders they hold, and a
//! store that stops (`Fleet`) hands its leaders to the live voters. Only a region that got an
//! operator is touched: every other heartbeat stays encoded, so the hot loop costs the same.

mod args;
mod carry_out;
mod fleet;
mod setup;
mod share;

pub use args::ClusterArgs;
pub use carry_out::{carry_out, elect, has_live_leader, healthy_voters, Applied, Change};
pub use fleet::Fleet;
pub use setup::{region_key, scan_all, setup};

use share::Share;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use meridian::client::Client;
use meridian::kvproto::pdpb::{self, pd_client::PdClient};
use meridian::placement::{Region, StoreStats};
use meridian::proto::{Reply, Response};
use serde::Serialize;
use tonic::transport::Channel;

use crate::args::Protocol;
use crate::latency::Latencies;
use crate::phase::Phase;
use crate::report::Latency;
use crate::target::TargetArgs;

#[derive(Debug, Clone, Serialize)]
pub struct ClusterReport {
    pub stores: u64,
    pub regions: u64,
    pub setup_s: f64,
    pub duration_s: f64,
    pub heartbeats: u64,
    pub heartbeats_per_sec: f64,
    /// Round trip of the pipelined batch each heartbeat went in.
    pub latency_us: Latency,
    pub errors: u64,
    pub operators: u64,
    /// Splits made with `--splits-per-sec`, each acknowledged.
    pub splits: u64,
    /// With `--carry-out-operators`: the changes carried out (conf changes, leader moves,
    /// elections, splits) and the safety rules they broke.
    pub changes: u64,
    pub violations: u64,
}

struct Counters {
    heartbeats: AtomicU64,
    errors: AtomicU64,
    operators: AtomicU64,
    splits: AtomicU64,
    latencies: Latencies,
}

/// One stream's share of the regions, heartbeated round after round until `deadline` (or the
/// fleet's end); returns the stream's gaps (`stall::Gaps`, since `run_start`), or None if it
/// never got a stream. With a fleet, operators are carried out as TiKV would.
async fn drive(
    client: Client,
    regions: Vec<Region>,
    depth: usize,
    pace: Pace,
    (run_start, deadline): (Instant, Instant),
    counters: Arc<Counters>,
    fleet: Option<Arc<Fleet>>,
) -> Option<Vec<(u64, u64)>> {
    let Ok(mut stream) = client.open_stream().await else {
        counters.errors.fetch_add(1, Relaxed);
        return None;
    };
    let since_start = || run_start.elapsed().as_nanos() as u64;
    let mut gaps = crate::stall::Gaps::starting_at(since_start());
    let recorder = counters.latencies.recorder();
    let start = Instant::now();
    let mut sent = 0u64;
    let mut at = 0usize;
    // Each region's heartbeat stays encoded until an operator changes the region: the
    // simulator should cost the machine less than the server it measures.
    // Each region's heartbeat stays encoded until an operator changes the region: the
    // simulator should cost the machine less than the server it measures.
    let mut share = Share::new(regions);
    let mut batch = Vec::with_capacity(depth * 200);
    // Which region each frame of the batch is.
    let mut picked: Vec<usize> = Vec::with_capacity(depth);
    let mut stops_seen = 0;
    let (mut splits, mut split_at) = (0u64, 0usize);
    let mut in_flight = share::SplitTasks::new();
    let ended = || fleet.as_ref().is_some_and(|f| f.is_ended());
    while Instant::now() < deadline && !share.regions.is_empty() && !ended() {
        if let Some(rate) = pace.splits {
            // The splits due by now start; those done are taken in. Neither waits, so the
            // heartbeats keep their pace.
            let mut due = 0;
            while start + Duration::from_secs_f64(splits as f64 / rate) <= Instant::now() {
                splits += 1;
                due += 1;
            }
            let not_started = share.start_splits(due, &mut split_at, &client, &mut in_flight);
            let (made, refused) = share
                .take_splits(&mut in_flight, false, fleet.as_deref())
                .await;
            counters.splits.fetch_add(made, Relaxed);
            counters.errors.fetch_add(refused + not_started, Relaxed);
        }
        if let Some(f) = &fleet {
            if f.stops() != stops_seen {
                stops_seen = f.stops();
                share.elect_all(f);
            }
            share.catch_up(Instant::now());
        }
        if let Some(rate) = pace.heartbeats {
            let due = start + Duration::from_secs_f64(sent as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
        }
        batch.clear();
        picked.clear();
        let now_s = share::unix_s();
        while picked.len() < depth {
            let Some(i) = share.urgent.pop() else { break };
            if !share.frames[i].is_empty() {
                share.send(i, &mut batch, now_s);
                picked.push(i);
            }
        }
        let n = share.regions.len();
        let mut looked = 0;
        while picked.len() < depth && looked < n {
            let i = at;
            at = (at + 1) % n;
            looked += 1;
            if !share.frames[i].is_empty() {
                share.send(i, &mut batch, now_s);
                picked.push(i);
            }
        }
        let count = picked.len();
        if count == 0 {
            // Every region of the share is silent (no quorum left to lead it).
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let t = Instant::now();
        match stream.call_frames(&batch, count).await {
            Ok(responses) => {
                let rtt = t.elapsed().as_nanos() as u64;
                let at = since_start();
                gaps.success(at);
                for (&i, r) in picked.iter().zip(responses) {
                    recorder.record_at(at, rtt);
                    match r {
                        Response::Ok(Reply::RegionHeartbeat { operator }) => {
                            let Some(op) = operator else { continue };
                            counters.operators.fetch_add(1, Relaxed);
                            match &fleet {
                                Some(f) => share.carry_out(i, &op, f, &client).await,
                                // Load generation alone: the region follows the step, with
                                // every store taken as live and no split carried out.
                                None => {
                                    let applied =
                                        carry_out(&mut share.regions[i], &op, &|_: u64| true);
                                    if applied.change.is_some()
                                        && !matches!(applied.change, Change::Split(_))
                                    {
                                        share.changed(i, false);
                                    }
                                }
                            }
                        }
                        _ => {
                            counters.errors.fetch_add(1, Relaxed);
                        }
                    }
                }
                counters.heartbeats.fetch_add(count as u64, Relaxed);
            }
            Err(_) => {
                counters.errors.fetch_add(count as u64, Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        sent += count as u64;
    }
    // Splits still on their way are waited for: each is counted, made or refused.
    let (made, refused) = share
        .take_splits(&mut in_flight, true, fleet.as_deref())
        .await;
    counters.splits.fetch_add(made, Relaxed);
    counters.errors.fetch_add(refused, Relaxed);
    Some(gaps.finish((Instant::now().min(deadline) - run_start).as_nanos() as u64))
}

/// One stream's share over the gRPC front end: kvproto region heartbeats on one
/// `RegionHeartbeat` stream, round after round until `deadline`, then the stream is closed and
/// its replies (operators, refusals) read until the server ends its side, which it does once it
/// handled every heartbeat sent.
async fn drive_grpc(
    (mut pd, cluster_id): (PdClient<Channel>, u64),
    regions: Vec<Region>,
    per_sec: Option<f64>,
    deadline: Instant,
    counters: Arc<Counters>,
) {
    use meridian::pd_grpc::{leader_to, region_to};
    if regions.is_empty() {
        return;
    }
    let header = Some(pdpb::RequestHeader {
        cluster_id,
        ..Default::default()
    });
    let requests: Vec<pdpb::RegionHeartbeatRequest> = regions
        .iter()
        .map(|r| pdpb::RegionHeartbeatRequest {
            header: header.clone(),
            region: Some(region_to(r)),
            leader: leader_to(r),
            approximate_size: 96 << 20,
            approximate_keys: 1_000_000,
            bytes_written: 4096,
            keys_written: 16,
            ..Default::default()
        })
        .collect();
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    let replies = match pd
        .region_heartbeat(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
    {
        Ok(r) => r.into_inner(),
        Err(_) => {
            counters.errors.fetch_add(1, Relaxed);
            return;
        }
    };
    let reader = {
        let counters = counters.clone();
        tokio::spawn(async move {
            let mut replies = replies;
            loop {
                match replies.message().await {
                    Ok(Some(r)) if r.header.as_ref().and_then(|h| h.error.as_ref()).is_some() => {
                        counters.errors.fetch_add(1, Relaxed);
                    }
                    Ok(Some(_)) => {
                        counters.operators.fetch_add(1, Relaxed);
                    }
                    Ok(None) => return,
                    Err(_) => {
                        counters.errors.fetch_add(1, Relaxed);
                        return;
                    }
                }
            }
        })
    };
    let start = Instant::now();
    // Each region's last report (Unix seconds): a report's interval runs from it, or from
    // the start for the first, as TiKV stamps its heartbeats.
    let started_s = share::unix_s();
    let mut reported_s = vec![started_s; requests.len()];
    for (sent, req) in requests.iter().cycle().enumerate() {
        if Instant::now() >= deadline {
            break;
        }
        if let Some(rate) = per_sec {
            let due = start + Duration::from_secs_f64(sent as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
        }
        let mut req = req.clone();
        let last = &mut reported_s[sent % requests.len()];
        let now_s = share::unix_s().max(*last);
        req.interval = Some(pdpb::TimeInterval {
            start_timestamp: *last,
            end_timestamp: now_s,
        });
        *last = now_s;
        // The channel is bounded and HTTP/2 flow control stands behind it: the sender waits
        // for the server instead of queueing without end.
        if tx.send(req).await.is_err() {
            break;
        }
        counters.heartbeats.fetch_add(1, Relaxed);
    }
    drop(tx);
    let _ = reader.await;
}

/// A stream's rates: heartbeats per second (closed loop without), and splits per second.
#[derive(Debug, Clone, Copy)]
struct Pace {
    heartbeats: Option<f64>,
    splits: Option<f64>,
}

/// What every connection's thread runs with.
#[derive(Clone)]
struct Load {
    target: TargetArgs,
    protocol: Protocol,
    depth: usize,
    pace: Pace,
    /// When the heartbeats started, and when they stop.
    window: (Instant, Instant),
    counters: Arc<Counters>,
    /// The stores carrying out operators (`--carry-out-operators`).
    fleet: Option<Arc<Fleet>>,
}

impl Load {
    /// One connection: its streams' shares of the regions heartbeated until the deadline;
    /// returns each stream's gaps (none over gRPC, which has no round trips to time).
    async fn connection(self, shares: Vec<Vec<Region>>) -> anyhow::Result<Vec<Vec<(u64, u64)>>> {
        let (started, deadline) = self.window;
        if self.protocol == Protocol::Grpc {
            let (pd, cluster_id) =
                crate::grpc_tso::leader_client(&self.target.endpoints, &self.target.trust()?)
                    .await?;
            let mut tasks = tokio::task::JoinSet::new();
            for share in shares {
                tasks.spawn(drive_grpc(
                    (pd.clone(), cluster_id),
                    share,
                    self.pace.heartbeats,
                    deadline,
                    self.counters.clone(),
                ));
            }
            while tasks.join_next().await.is_some() {}
            return Ok(Vec::new());
        }
        let client = self.target.connect().await?;
        let mut tasks = tokio::task::JoinSet::new();
        for share in shares {
            tasks.spawn(drive(
                client.clone(),
                share,
                self.depth,
                self.pace,
                (started, deadline),
                self.counters.clone(),
                self.fleet.clone(),
            ));
        }
        let mut gaps = Vec::new();
        while let Some(g) = tasks.join_next().await {
            gaps.extend(g.ok().flatten());
        }
        Ok(gaps)
    }
}

pub async fn run(args: &ClusterArgs) -> anyhow::Result<ClusterReport> {
    if args.plot.is_some() && args.protocol == Protocol::Grpc {
        anyhow::bail!("--plot draws round trips, which the gRPC heartbeat stream has none of");
    }
    if args.splits_per_sec.is_some() && args.protocol == Protocol::Grpc {
        anyhow::bail!("--splits-per-sec splits over QUIC; give --protocol quic");
    }
    if args.carry_out_operators && args.protocol == Protocol::Grpc {
        anyhow::bail!(
            "--carry-out-operators reads operators from QUIC replies; over gRPC they are only counted"
        );
    }
    if let Some(path) = &args.plot {
        crate::plot::check_writable(path)?;
    }
    let client = args.target.connect().await?;
    let t = Instant::now();
    let (stores, regions) = setup(&client, args.stores, args.regions).await?;
    let setup_s = t.elapsed().as_secs_f64();
    eprintln!(
        "{} stores, {} regions ready in {setup_s:.1} s",
        stores.len(),
        regions.len()
    );
    let fleet = args
        .carry_out_operators
        .then(|| Fleet::new(&stores, &regions, args.catch_up));
    heartbeat(args, &client, (&stores, regions), fleet, setup_s).await
}

/// The stores' heartbeats: `stores`' and `regions`' (as `setup` left them) until the run's
/// duration is over, or `fleet` ends it. With a fleet, its stores carry out the operators that
/// come back and report what they hold; the caller may stop stores and add new ones meanwhile.
pub async fn heartbeat(
    args: &ClusterArgs,
    client: &Client,
    (stores, regions): (&[u64], Vec<Region>),
    fleet: Option<Arc<Fleet>>,
    setup_s: f64,
) -> anyhow::Result<ClusterReport> {
    let n_regions = regions.len() as u64;
    let streams = (args.connections * args.streams).max(1);
    let mut shares: Vec<Vec<Region>> = vec![Vec::new(); streams];
    for (i, r) in regions.into_iter().enumerate() {
        shares[i % streams].push(r);
    }
    let counters = Arc::new(Counters {
        heartbeats: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        operators: AtomicU64::new(0),
        splits: AtomicU64::new(0),
        latencies: Latencies::per_second(args.plot.is_some()),
    });
    let pace = Pace {
        heartbeats: args.rate.map(|r| r as f64 / streams as f64),
        splits: args.splits_per_sec.map(|r| r / streams as f64),
    };
    let watch = match &args.plot {
        Some(_) => Some((args.target.endpoints.clone(), args.target.trust()?)),
        None => None,
    };
    let done = counters.clone();
    let phase = Phase::start(args.duration, move || done.heartbeats.load(Relaxed), watch);
    let (started, deadline) = (phase.started, phase.deadline);
    // Stores report every interval: what they hold when they carry out operators, else their
    // share of regions and leaders.
    let store_task = {
        let client = client.clone();
        let n = n_regions;
        let s = stores.len() as u64;
        let stores = stores.to_vec();
        let fleet = fleet.clone();
        let interval = args.store_heartbeat_interval;
        tokio::spawn(async move {
            let ended = || fleet.as_ref().is_some_and(|f| f.is_ended());
            while Instant::now() < deadline && !ended() {
                let holding: Vec<(u64, u64, u64)> = match &fleet {
                    Some(f) => f.live_stores(),
                    None => stores.iter().map(|id| (*id, n * 3 / s, n / s)).collect(),
                };
                for (id, region_count, leader_count) in holding {
                    let stats = StoreStats {
                        capacity: 1 << 40,
                        available: 1 << 39,
                        used_size: 1 << 39,
                        region_count,
                        leader_count,
                    };
                    let _ = client.store_heartbeat(id, stats).await;
                }
                tokio::time::sleep(interval).await;
            }
        })
    };
    let mut shares = shares.into_iter();
    let per_connection: Vec<Vec<Vec<Region>>> = (0..args.connections.max(1))
        .map(|_| shares.by_ref().take(args.streams.max(1)).collect())
        .collect();
    let load = Load {
        target: args.target.clone(),
        protocol: args.protocol,
        depth: args.depth.max(1),
        pace,
        window: (started, deadline),
        counters: counters.clone(),
        fleet: fleet.clone(),
    };
    let pin = !args.no_pin;
    let gaps = crate::threads::per_connection(
        per_connection.into_iter().enumerate(),
        move |(i, shares)| {
            // Runs on the connection's own thread, before it connects.
            if pin {
                meridian::server::pin_to_cpu(i);
            }
            load.clone().connection(shares)
        },
    )
    .await?;
    let (elapsed, failovers) = phase.finish().await;
    let _ = store_task.await;
    let heartbeats = counters.heartbeats.load(Relaxed);
    let latencies = counters.latencies.merged();
    let report = ClusterReport {
        stores: stores.len() as u64,
        regions: n_regions,
        setup_s,
        duration_s: elapsed.as_secs_f64(),
        heartbeats,
        heartbeats_per_sec: heartbeats as f64 / elapsed.as_secs_f64().max(1e-9),
        latency_us: Latency::of(&latencies),
        errors: counters.errors.load(Relaxed),
        operators: counters.operators.load(Relaxed),
        splits: counters.splits.load(Relaxed),
        changes: fleet.as_ref().map_or(0, |f| f.changes()),
        violations: fleet.as_ref().map_or(0, |f| f.violations().0),
    };
    if args.protocol == Protocol::Grpc {
        println!(
            "{} region heartbeats in {:.1} s over gRPC streams, every one handled: {:.0}/s; {} errors, {} operators",
            report.heartbeats, report.duration_s, report.heartbeats_per_sec, report.errors, report.operators
        );
    } else {
        println!(
            "{} region heartbeats in {:.1} s: {:.0}/s; latency (batch of {}) p50 {:.0} us, p99 {:.0} us, p999 {:.0} us; {} errors, {} operators",
            report.heartbeats, report.duration_s, report.heartbeats_per_sec, args.depth,
            report.latency_us.p50, report.latency_us.p99, report.latency_us.p999, report.errors, report.operators
        );
    }
    if args.splits_per_sec.is_some() {
        println!("{} splits made beside the heartbeats", report.splits);
    }
    if let Some(f) = &fleet {
        let (_, described) = f.violations();
        println!(
            "{} changes carried out; {} safety violations",
            report.changes, report.violations
        );
        for v in described {
            println!("  {v}");
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    if let Some(path) = &args.plot {
        let run = crate::plot::Run {
            title: format!(
                "loadgen cluster: {} stores, {} regions, heartbeats in batches of {} on {}x{} streams{}",
                report.stores,
                report.regions,
                args.depth,
                args.connections,
                args.streams,
                args.rate
                    .map(|r| format!(", offered {r}/s"))
                    .unwrap_or_default()
            ),
            unit: "heartbeats",
            latency: "batch round trip",
            duration_s: report.duration_s,
            buckets: crate::plot::buckets(
                &counters.latencies.merged_seconds(),
                report.duration_s,
            ),
            stalls: crate::plot::stalls_s(&crate::stall::common(&gaps)),
            failovers,
            histogram: &latencies,
        };
        crate::plot::write(&run, path)?;
        println!("plot: {}", path.display());
    }
    Ok(report)
}

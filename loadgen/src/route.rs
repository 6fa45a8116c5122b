//! `loadgen route`: GetRegion for random keys in the simulated key space, pipelined on several
//! streams; reports lookups per second and latency.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use meridian::proto::{Reply, Request, Response};
use serde::Serialize;

use crate::args::Protocol;
use crate::grpc_router::GrpcRouter;
use crate::latency::Latencies;
use crate::phase::Phase;
use crate::report::Latency;
use crate::stall::Gaps;
use crate::target::TargetArgs;

#[derive(Debug, Clone, clap::Args)]
pub struct RouteArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[arg(long, default_value = "10s", value_parser = crate::duration::parse)]
    pub duration: Duration,
    #[arg(long, default_value_t = 2)]
    pub connections: usize,
    #[arg(long, default_value_t = 4)]
    pub streams: usize,
    /// Lookups in flight per stream (sent with one write).
    #[arg(long, default_value_t = 64)]
    pub depth: usize,
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// QUIC (pipelined GetRegion frames) or the PD-compatible gRPC front end (`depth` unary
    /// GetRegion calls in flight per stream, as PD clients issue them).
    #[arg(long, value_enum, default_value_t = Protocol::Quic)]
    pub protocol: Protocol,
    /// What each gRPC caller does: `get-region`, the unary lookup; `query-region`, the same
    /// lookup batched with the stream's other callers into `QueryRegion` messages, as PD's own
    /// client sends GetRegion by default (its router client); `get-members`, a unary call the
    /// server answers with almost no work (the floor the transport sets on any unary call, to
    /// compare the lookup with).
    #[arg(long, value_enum, default_value_t = Rpc::GetRegion)]
    pub rpc: Rpc,
    /// Draw the run into this SVG file: lookups/s and p50/p99/p99.9 latency per second, the
    /// stretches with no completed lookup and the leader changes seen, and the latency
    /// percentile distribution.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
    /// Spread the lookups over every member given in `--endpoints`, each marked as a read a
    /// follower may answer: over gRPC caller i asks member i mod n with PD's
    /// `pd-allow-follower-handle`; over QUIC stream i is opened on member i mod n and marked
    /// with `AllowFollowerHandle`. Without it every lookup goes to the leader.
    #[arg(long)]
    pub follower_reads: bool,
}

/// What each gRPC caller asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Rpc {
    GetRegion,
    QueryRegion,
    GetMembers,
}

#[derive(Debug, Clone, Serialize)]
pub struct RouteReport {
    pub duration_s: f64,
    pub lookups: u64,
    pub lookups_per_sec: f64,
    /// Lookups that found no region (a gap, or an empty cluster).
    pub misses: u64,
    pub latency_us: Latency,
    pub errors: u64,
}

struct Counters {
    lookups: AtomicU64,
    misses: AtomicU64,
    errors: AtomicU64,
    latencies: Latencies,
}

/// The next key of a stream's xorshift sequence, in the simulated key space (`t` + 8 bytes).
fn next_key(x: &mut u64) -> Vec<u8> {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    let mut key = b"t".to_vec();
    key.extend_from_slice(&x.to_be_bytes());
    key
}

/// Gaps (`stall::Gaps`) of each caller, since the run's start.
type CallerGaps = Vec<Vec<(u64, u64)>>;

/// `depth` callers, each one lookup at a time, over one HTTP/2 connection: each a unary call,
/// or all of them through one router (`QueryRegion` batches).
async fn drive_grpc(
    target: TargetArgs,
    (depth, rpc, follower_reads): (usize, Rpc, bool),
    seed: u64,
    (run_start, deadline): (Instant, Instant),
    c: Arc<Counters>,
) -> anyhow::Result<CallerGaps> {
    use meridian::kvproto::pdpb;
    let trust = target.trust()?;
    let (leader, cluster_id) = crate::grpc_tso::leader_client(&target.endpoints, &trust).await?;
    // Where each caller goes: the leader, or with follower reads each member in turn.
    let mut members = Vec::new();
    let mut routers = Vec::new();
    if follower_reads {
        for endpoint in &target.endpoints {
            members.push(meridian::pd_grpc::connect(endpoint, &trust).await?);
            if rpc == Rpc::QueryRegion {
                routers.push(GrpcRouter::connect_to_member(endpoint.clone(), trust.clone()).await?);
            }
        }
    } else {
        members.push(leader);
        if rpc == Rpc::QueryRegion {
            routers.push(GrpcRouter::connect(target.endpoints.clone(), trust.clone()).await?);
        }
    }
    let mut callers = tokio::task::JoinSet::new();
    for i in 0..depth {
        let mut pd = members[i % members.len()].clone();
        let router = (!routers.is_empty()).then(|| routers[i % routers.len()].clone());
        let c = c.clone();
        let mut x = seed.wrapping_add((i as u64).wrapping_mul(0x2545_F491_4F6C_DD1D)) | 1;
        callers.spawn(async move {
            let recorder = c.latencies.recorder();
            let since_start = || run_start.elapsed().as_nanos() as u64;
            let mut gaps = Gaps::starting_at(since_start());
            let header = Some(pdpb::RequestHeader {
                cluster_id,
                ..Default::default()
            });
            while Instant::now() < deadline {
                let t = Instant::now();
                // Ok(found): the call succeeded; found is whether a region was there.
                let answer = match rpc {
                    Rpc::GetRegion => {
                        let req = pdpb::GetRegionRequest {
                            header: header.clone(),
                            region_key: next_key(&mut x),
                            ..Default::default()
                        };
                        let req = if follower_reads {
                            crate::grpc_router::allowing_follower(tonic::Request::new(req))
                        } else {
                            tonic::Request::new(req)
                        };
                        pd.get_region(req).await.map(|r| {
                            let r = r.into_inner();
                            (r.header.and_then(|h| h.error).is_none(), r.region.is_some())
                        })
                    }
                    Rpc::QueryRegion => match &router {
                        // A refusal, a broken stream or a wrong route: an error either way.
                        Some(router) => router
                            .get_region(next_key(&mut x))
                            .await
                            .map(|found| (true, found.is_some()))
                            .map_err(|e| tonic::Status::unknown(e.to_string())),
                        None => Err(tonic::Status::internal("no router")),
                    },
                    Rpc::GetMembers => {
                        let req = pdpb::GetMembersRequest {
                            header: header.clone(),
                        };
                        pd.get_members(req).await.map(|r| {
                            let r = r.into_inner();
                            (r.header.and_then(|h| h.error).is_none(), r.leader.is_some())
                        })
                    }
                };
                match answer {
                    Ok((clean, found)) => {
                        let at = since_start();
                        recorder.record_at(at, t.elapsed().as_nanos() as u64);
                        gaps.success(at);
                        if !clean {
                            c.errors.fetch_add(1, Relaxed);
                        } else if !found {
                            c.misses.fetch_add(1, Relaxed);
                        }
                        c.lookups.fetch_add(1, Relaxed);
                    }
                    Err(_) => {
                        c.errors.fetch_add(1, Relaxed);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            gaps.finish((Instant::now().min(deadline) - run_start).as_nanos() as u64)
        });
    }
    let mut gaps = Vec::new();
    while let Some(r) = callers.join_next().await {
        gaps.push(r?);
    }
    Ok(gaps)
}

/// One QUIC stream's pipelined lookups: on the leader, or (`member`) on that member alone,
/// the stream marked as one whose routing reads a follower may answer.
async fn drive(
    mut target: TargetArgs,
    (depth, member): (usize, Option<usize>),
    seed: u64,
    (run_start, deadline): (Instant, Instant),
    c: Arc<Counters>,
) -> anyhow::Result<CallerGaps> {
    if let Some(i) = member {
        target.endpoints = vec![target.endpoints[i % target.endpoints.len()].clone()];
    }
    let client = target.connect().await?;
    let mut stream = client.open_stream().await?;
    if member.is_some() {
        match stream.call(&Request::AllowFollowerHandle).await? {
            Response::Ok(Reply::Done) => {}
            other => anyhow::bail!("marking a stream for follower reads: {other:?}"),
        }
    }
    let recorder = c.latencies.recorder();
    let since_start = || run_start.elapsed().as_nanos() as u64;
    let mut gaps = Gaps::starting_at(since_start());
    let mut x = seed | 1;
    let mut batch = Vec::with_capacity(depth);
    while Instant::now() < deadline {
        batch.clear();
        for _ in 0..depth {
            batch.push(Request::GetRegion {
                key: next_key(&mut x),
            });
        }
        let t = Instant::now();
        match stream.call_many(&batch).await {
            Ok(responses) => {
                let rtt = t.elapsed().as_nanos() as u64;
                let at = since_start();
                gaps.success(at);
                for r in responses {
                    recorder.record_at(at, rtt);
                    match r {
                        Response::Ok(Reply::Region(Some(_))) => {}
                        Response::Ok(Reply::Region(None)) => {
                            c.misses.fetch_add(1, Relaxed);
                        }
                        _ => {
                            c.errors.fetch_add(1, Relaxed);
                        }
                    }
                }
                c.lookups.fetch_add(batch.len() as u64, Relaxed);
            }
            Err(_) => {
                c.errors.fetch_add(batch.len() as u64, Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    Ok(vec![gaps.finish(
        (Instant::now().min(deadline) - run_start).as_nanos() as u64,
    )])
}

/// What every connection's thread runs with.
#[derive(Clone)]
struct Load {
    target: TargetArgs,
    protocol: Protocol,
    rpc: Rpc,
    follower_reads: bool,
    streams: usize,
    depth: usize,
    /// When the lookups started, and when they stop.
    window: (Instant, Instant),
    counters: Arc<Counters>,
}

impl Load {
    /// Connection `conn`: its streams, each with a key sequence of its own, until the
    /// deadline; returns each caller's gaps.
    async fn connection(self, conn: usize) -> anyhow::Result<CallerGaps> {
        let mut tasks = tokio::task::JoinSet::new();
        for s in 0..self.streams {
            let seed = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul((conn * self.streams + s + 1) as u64);
            let (target, c) = (self.target.clone(), self.counters.clone());
            match self.protocol {
                Protocol::Quic => {
                    let member = self.follower_reads.then_some(conn * self.streams + s);
                    tasks.spawn(drive(target, (self.depth, member), seed, self.window, c))
                }
                Protocol::Grpc => tasks.spawn(drive_grpc(
                    target,
                    (self.depth, self.rpc, self.follower_reads),
                    seed,
                    self.window,
                    c,
                )),
            };
        }
        let mut gaps = Vec::new();
        while let Some(r) = tasks.join_next().await {
            gaps.extend(r??);
        }
        Ok(gaps)
    }
}

pub async fn run(args: &RouteArgs) -> anyhow::Result<RouteReport> {
    if args.rpc != Rpc::GetRegion && args.protocol != Protocol::Grpc {
        anyhow::bail!(
            "--rpc get-members and --rpc query-region are gRPC calls: pass --protocol grpc"
        );
    }
    if let Some(path) = &args.plot {
        crate::plot::check_writable(path)?;
    }
    let c = Arc::new(Counters {
        lookups: AtomicU64::new(0),
        misses: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        latencies: Latencies::per_second(args.plot.is_some()),
    });
    let watch = match &args.plot {
        Some(_) => Some((args.target.endpoints.clone(), args.target.trust()?)),
        None => None,
    };
    let done = c.clone();
    let phase = Phase::start(args.duration, move || done.lookups.load(Relaxed), watch);
    let (started, deadline) = (phase.started, phase.deadline);
    let load = Load {
        target: args.target.clone(),
        protocol: args.protocol,
        rpc: args.rpc,
        follower_reads: args.follower_reads,
        streams: args.streams.max(1),
        depth: args.depth.max(1),
        window: (started, deadline),
        counters: c.clone(),
    };
    let connections = 0..args.connections.max(1);
    let gaps =
        crate::threads::per_connection(connections, move |conn| load.clone().connection(conn))
            .await?;
    let (elapsed, failovers) = phase.finish().await;
    let lookups = c.lookups.load(Relaxed);
    let latencies = c.latencies.merged();
    let report = RouteReport {
        duration_s: elapsed.as_secs_f64(),
        lookups,
        lookups_per_sec: lookups as f64 / elapsed.as_secs_f64().max(1e-9),
        misses: c.misses.load(Relaxed),
        latency_us: Latency::of(&latencies),
        errors: c.errors.load(Relaxed),
    };
    println!(
        "{} lookups in {:.1} s: {:.0}/s; latency (batch of {}) p50 {:.0} us, p99 {:.0} us; {} misses, {} errors",
        report.lookups, report.duration_s, report.lookups_per_sec, args.depth,
        report.latency_us.p50, report.latency_us.p99, report.misses, report.errors
    );
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    if let Some(path) = &args.plot {
        let (protocol, latency) = match args.protocol {
            Protocol::Quic => ("QUIC, batches of", "batch round trip"),
            Protocol::Grpc => ("gRPC, in flight", "latency"),
        };
        let run = crate::plot::Run {
            title: format!(
                "loadgen route: GetRegion over {protocol} {} on {}x{} streams",
                args.depth, args.connections, args.streams
            ),
            unit: "lookups",
            latency,
            duration_s: report.duration_s,
            buckets: crate::plot::buckets(&c.latencies.merged_seconds(), report.duration_s),
            stalls: crate::plot::stalls_s(&crate::stall::common(&gaps)),
            failovers,
            histogram: &latencies,
        };
        crate::plot::write(&run, path)?;
        println!("plot: {}", path.display());
    }
    Ok(report)
}

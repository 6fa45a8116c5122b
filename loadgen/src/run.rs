//! `loadgen tso`: closed-loop (or paced, with `--rate`) load through the real client, with the
//! checker on every reply and an HDR histogram of latencies.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use meridian::client::{BatchHook, Client, ClientOptions};
use meridian::proto::{Reply, Request, Response};

use crate::args::{Op, Protocol, TsoArgs};
use crate::checker::{count_duplicates, Checker};
use crate::grpc_tso::GrpcTso;
use crate::kept::Kept;
use crate::latency::Latencies;
use crate::pacer::{Pacer, Schedule};
use crate::phase::Phase;
use crate::report::Report;

struct WorkerResult {
    timestamps: Kept,
    errors: u64,
    ops: u64,
    /// This worker's stretches without a success.
    gaps: Vec<(u64, u64)>,
}

struct Shared {
    checker: Checker,
    latencies: Latencies,
    ops: AtomicU64,
    /// Timestamps each worker keeps for the duplicate check.
    record_quota: usize,
    /// Set once every connection is up, just before the workers start.
    deadline: OnceLock<Instant>,
    duration: Duration,
}

pub async fn run(args: &TsoArgs) -> anyhow::Result<Report> {
    if args.endpoints.is_empty() {
        anyhow::bail!("pass --endpoints HOST:PORT[,HOST:PORT..]");
    }
    if args.concurrency == 0 || args.connections == 0 {
        anyhow::bail!("--concurrency and --connections must be at least 1");
    }
    let trust = args.trust()?;
    if args.protocol == Protocol::Grpc && args.op != Op::Tso {
        anyhow::bail!("--protocol grpc drives --op tso only");
    }
    // Fail before the load, not after it, if the plot cannot be written.
    if let Some(path) = &args.plot {
        crate::plot::check_writable(path)?;
    }
    let shared = Arc::new(Shared {
        checker: Checker::default(),
        latencies: Latencies::per_second(args.plot.is_some()),
        ops: AtomicU64::new(0),
        record_quota: args.max_recorded / args.concurrency,
        deadline: OnceLock::new(),
        duration: args.duration,
    });

    // One thread per connection, each a single-threaded runtime holding its client and its
    // workers: a caller and the dispatcher that answers it never hop threads.
    let ready = Arc::new(Barrier::new(args.connections + 1));
    let go = Arc::new(Barrier::new(args.connections + 1));
    let mut threads = Vec::with_capacity(args.connections);
    for c in 0..args.connections {
        let workers = (c..args.concurrency).step_by(args.connections).count();
        let schedule = args.rate.map(|r| Schedule::new(c, args.connections, r));
        let mut opts = ClientOptions::new(args.endpoints.clone(), trust.clone());
        opts.tso_streams = args.streams;
        // Each batch raises the checker's mark once, before its callers wake (`checker.rs`).
        opts.tso_batch_hook = Some(BatchHook::new({
            let shared = shared.clone();
            move |first, count| {
                shared
                    .checker
                    // The batch's last; saturating, so a reply near u64::MAX cannot panic here.
                    .publish(
                        first
                            .as_u64()
                            .saturating_add(u64::from(count.saturating_sub(1))),
                    )
            }
        }));
        let (shared, ready, go, op) = (shared.clone(), ready.clone(), go.clone(), args.op);
        let protocol = args.protocol;
        let pin = !args.no_pin;
        threads.push(std::thread::spawn(move || {
            if pin {
                meridian::server::pin_to_cpu(c);
            }
            connection_thread(opts, protocol, op, workers, schedule, shared, &ready, &go)
        }));
    }
    tokio::task::spawn_blocking({
        let ready = ready.clone();
        move || ready.wait()
    })
    .await?;
    let watch = args
        .plot
        .as_ref()
        .map(|_| (args.endpoints.clone(), trust.clone()));
    let done = shared.clone();
    let phase = Phase::start(
        args.duration,
        move || done.ops.load(Ordering::Relaxed),
        watch,
    );
    let _ = shared.deadline.set(phase.deadline);
    tokio::task::spawn_blocking(move || go.wait()).await?;

    let results = crate::threads::join(threads).await;
    let (mut errors, mut ops, mut all, mut gaps) = (0, 0, Vec::new(), Vec::new());
    let results = match results {
        Ok(r) => r,
        Err(e) => {
            phase.finish().await;
            return Err(e);
        }
    };
    for r in results.into_iter().flatten() {
        errors += r.errors;
        ops += r.ops;
        r.timestamps.drain_into(&mut all);
        gaps.push(r.gaps);
    }
    let stalls = crate::stall::common(&gaps);
    let (elapsed, failovers) = phase.finish().await;
    let checked = all.len() as u64;
    let duplicates = tokio::task::spawn_blocking(move || count_duplicates(all)).await?;
    let latencies = shared.latencies.merged();
    let report = Report::new(
        args,
        elapsed,
        ops,
        errors,
        &latencies,
        shared.checker.order_violations(),
        duplicates,
        checked,
        crate::stall::summary(&stalls),
    );
    if let Some(path) = &args.plot {
        let protocol = match args.protocol {
            Protocol::Quic => "QUIC",
            Protocol::Grpc => "gRPC",
        };
        let run = crate::plot::Run {
            title: format!(
                "loadgen tso: {:?} over {protocol}, {} connections, concurrency {}{}",
                args.op,
                args.connections,
                args.concurrency,
                args.rate
                    .map(|r| format!(", offered {r}/s"))
                    .unwrap_or_default()
            ),
            unit: if args.op == Op::Ping {
                "pings"
            } else {
                "timestamps"
            },
            latency: "latency",
            duration_s: elapsed.as_secs_f64(),
            buckets: crate::plot::buckets(
                &shared.latencies.merged_seconds(),
                elapsed.as_secs_f64(),
            ),
            stalls: crate::plot::stalls_s(&stalls),
            failovers,
            histogram: &latencies,
        };
        crate::plot::write(&run, path)?;
        println!("plot: {}", path.display());
    }
    Ok(report)
}

/// What a worker calls: Meridian's client, or the PD-style gRPC one.
#[derive(Clone)]
enum TsoClient {
    Quic(Client),
    Grpc(GrpcTso),
}

/// One connection's thread: connect, wait for every other connection, run the workers.
#[allow(clippy::too_many_arguments)]
fn connection_thread(
    opts: ClientOptions,
    protocol: Protocol,
    op: Op,
    workers: usize,
    schedule: Option<Schedule>,
    shared: Arc<Shared>,
    ready: &Barrier,
    go: &Barrier,
) -> anyhow::Result<Vec<WorkerResult>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let setup = match &runtime {
        Ok(rt) => rt.block_on(async {
            if protocol == Protocol::Grpc {
                let client = GrpcTso::connect(opts.endpoints, opts.trust).await?;
                return anyhow::Ok((
                    TsoClient::Grpc(client),
                    (0..workers).map(|_| None).collect(),
                ));
            }
            let client = Client::connect(opts).await?;
            let mut streams = Vec::new();
            for _ in 0..workers {
                // Raw-stream workers open their streams before the clock starts.
                streams.push(match op {
                    Op::Tso => None,
                    Op::TsoRaw | Op::Ping => Some(client.open_stream().await?),
                });
            }
            anyhow::Ok((TsoClient::Quic(client), streams))
        }),
        Err(e) => Err(anyhow::anyhow!("building a runtime: {e}")),
    };
    // Reach both barriers even after a failure, so the other threads are not left waiting.
    ready.wait();
    go.wait();
    let (client, streams) = setup?;
    let runtime = runtime?;
    runtime.block_on(async move {
        let deadline = *shared
            .deadline
            .get()
            .expect("deadline is set before workers start");
        let start = deadline.checked_sub(shared.duration).unwrap_or(deadline);
        let pacer = schedule.map(|s| Pacer::start(s, start, deadline));
        let tasks: Vec<_> = streams
            .into_iter()
            .map(|stream| {
                let pace = pacer.clone();
                tokio::spawn(worker(op, client.clone(), stream, pace, shared.clone()))
            })
            .collect();
        let mut results = Vec::with_capacity(tasks.len());
        for t in tasks {
            results.push(t.await?);
        }
        anyhow::Ok(results)
    })
}

async fn worker(
    op: Op,
    client: TsoClient,
    mut stream: Option<meridian::client::RpcStream>,
    pace: Option<Arc<Pacer>>,
    shared: Arc<Shared>,
) -> WorkerResult {
    let mut timestamps = Kept::new(shared.record_quota);
    let (mut errors, mut ops, mut unflushed) = (0u64, 0u64, 0u64);
    // Workers never leave their connection's thread, so the thread's recorder is theirs.
    let latencies = shared.latencies.recorder();
    let deadline = *shared
        .deadline
        .get()
        .expect("deadline is set before workers start");
    let start = deadline - shared.duration;
    let mut gaps = crate::stall::Gaps::default();
    // One clock read per call: in a closed loop a call is sent when the one before is done
    // (the bookkeeping between them, a few tens of nanoseconds, counts in the latency).
    let mut now = Instant::now();
    loop {
        let scheduled = match &pace {
            Some(pacer) => match pacer.next().await {
                Some(at) => {
                    now = Instant::now();
                    Some(at)
                }
                None => break,
            },
            None => None,
        };
        let sent = now;
        if sent >= deadline {
            break;
        }
        let floor = shared.checker.floor();
        let result = match (op, stream.as_mut()) {
            (Op::Tso, _) => match &client {
                TsoClient::Quic(c) => c
                    .get_ts()
                    .await
                    .map(|ts| Some(ts.as_u64()))
                    .map_err(|e| e.to_string()),
                TsoClient::Grpc(c) => c.get_ts().await.map(Some).map_err(|e| e.to_string()),
            },
            (Op::TsoRaw, Some(s)) => match s.call(&Request::Tso { count: 1 }).await {
                Ok(Response::Ok(Reply::Tso { first, .. })) => Ok(Some(first)),
                Ok(other) => Err(format!("{other:?}")),
                Err(e) => Err(e.to_string()),
            },
            (Op::Ping, Some(s)) => match s.call(&Request::Ping).await {
                Ok(Response::Ok(Reply::Pong)) => Ok(None),
                Ok(other) => Err(format!("{other:?}")),
                Err(e) => Err(e.to_string()),
            },
            (_, None) => Err("no stream".to_string()),
        };
        let done = Instant::now();
        match result {
            Ok(ts) => {
                if let Some(ts) = ts {
                    // The QUIC client's batches went through the hook; other replies did not.
                    match (op, &client) {
                        (Op::Tso, TsoClient::Quic(_)) => shared.checker.check(floor, ts),
                        _ => shared.checker.observe(floor, ts),
                    };
                    timestamps.push(ts);
                }
                let from = scheduled.map_or(sent, |at| Schedule::latency_origin(at, sent));
                let at = (done - start).as_nanos() as u64;
                latencies.record_at(at, (done - from).as_nanos() as u64);
                gaps.success(at);
                now = done;
                ops += 1;
                unflushed += 1;
                if unflushed == 256 {
                    shared.ops.fetch_add(unflushed, Ordering::Relaxed);
                    unflushed = 0;
                }
            }
            Err(e) => {
                errors += 1;
                tracing::debug!("request failed: {e}");
                tokio::time::sleep(Duration::from_millis(1)).await;
                now = Instant::now();
            }
        }
    }
    shared.ops.fetch_add(unflushed, Ordering::Relaxed);
    WorkerResult {
        timestamps,
        errors,
        ops,
        gaps: gaps.finish((Instant::now().min(deadline) - start).as_nanos() as u64),
    }
}

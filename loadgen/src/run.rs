//! `loadgen tso`: closed-loop (or paced, with `--rate`) load through the real client, with the
//! checker on every reply and an HDR histogram of latencies.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use meridian::client::{Client, ClientOptions};
use meridian::proto::{Reply, Request, Response};
use meridian::tls::Trust;
use tokio::sync::mpsc;

use crate::checker::{count_duplicates, Checker};
use crate::pacer;
use crate::progress::Progress;
use crate::report::Report;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// `get_ts()` through the client's batching dispatcher.
    Tso,
    /// One `Tso{count: 1}` in flight per stream: no batching.
    TsoRaw,
    /// One `Ping` in flight per stream: the bare round trip of the same path.
    Ping,
}

#[derive(Debug, Clone, clap::Args)]
pub struct TsoArgs {
    /// Members' client addresses, host:port (`demo` sets its own).
    #[arg(long, value_delimiter = ',')]
    pub endpoints: Vec<String>,
    /// How long to run: 10s, 500ms, 1m.
    #[arg(long, default_value = "10s", value_parser = crate::duration::parse)]
    pub duration: Duration,
    /// Concurrent callers (tasks), spread over the connections.
    #[arg(long, default_value_t = 512)]
    pub concurrency: usize,
    /// Client connections (each a `Client` with its own dispatcher).
    #[arg(long, default_value_t = 2)]
    pub connections: usize,
    /// TSO requests in flight per connection (`--op tso`).
    #[arg(long, default_value_t = 2)]
    pub streams: usize,
    #[arg(long, value_enum, default_value_t = Op::Tso)]
    pub op: Op,
    /// Offer this many operations per second (open loop); latency counts from each operation's
    /// scheduled time, so a stall is not hidden.
    #[arg(long)]
    pub rate: Option<u64>,
    /// Write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The server's certificate or CA (DATA_DIR/tls/ca.pem of a self-signed server).
    #[arg(long, conflicts_with = "insecure")]
    pub ca: Option<PathBuf>,
    /// Skip certificate verification.
    #[arg(long)]
    pub insecure: bool,
    /// Keep at most this many timestamps for the duplicate check (8 bytes each).
    #[arg(long, default_value_t = 500_000_000)]
    pub max_recorded: usize,
}

impl TsoArgs {
    fn trust(&self) -> anyhow::Result<Trust> {
        match (&self.ca, self.insecure) {
            (Some(ca), false) => Ok(Trust::Ca(ca.clone())),
            (None, true) => Ok(Trust::Insecure),
            _ => anyhow::bail!("pass --ca FILE (the server's DATA_DIR/tls/ca.pem) or --insecure"),
        }
    }
}

struct WorkerResult {
    histogram: Histogram<u64>,
    timestamps: Vec<u64>,
    errors: u64,
    ops: u64,
}

struct Shared {
    checker: Checker,
    ops: AtomicU64,
    /// Timestamps each worker keeps for the duplicate check.
    record_quota: usize,
    deadline: Instant,
}

pub async fn run(args: &TsoArgs) -> anyhow::Result<Report> {
    if args.endpoints.is_empty() {
        anyhow::bail!("pass --endpoints HOST:PORT[,HOST:PORT..]");
    }
    if args.concurrency == 0 || args.connections == 0 {
        anyhow::bail!("--concurrency and --connections must be at least 1");
    }
    let trust = args.trust()?;
    let mut clients = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        let mut opts = ClientOptions::new(args.endpoints.clone(), trust.clone());
        opts.tso_streams = args.streams;
        clients.push(Client::connect(opts).await?);
    }
    // Raw-stream workers open their streams before the clock starts.
    let mut streams = Vec::new();
    if args.op != Op::Tso {
        for i in 0..args.concurrency {
            streams.push(Some(clients[i % clients.len()].open_stream().await?));
        }
    }
    let start = Instant::now();
    let shared = Arc::new(Shared {
        checker: Checker::default(),
        ops: AtomicU64::new(0),
        record_quota: args.max_recorded / args.concurrency,
        deadline: start + args.duration,
    });
    let (pace_txs, mut pace_rxs): (Vec<_>, Vec<_>) = match args.rate {
        Some(_) => {
            let (txs, rxs): (Vec<_>, Vec<_>) = (0..args.concurrency)
                .map(|_| mpsc::unbounded_channel())
                .unzip();
            (txs, rxs.into_iter().map(Some).collect())
        }
        None => (Vec::new(), (0..args.concurrency).map(|_| None).collect()),
    };
    let pacer = args
        .rate
        .map(|rate| pacer::spawn(rate, start, shared.deadline, pace_txs));
    let progress = Progress::start(args.duration, shared.clone_ops());

    let mut tasks = Vec::with_capacity(args.concurrency);
    for i in 0..args.concurrency {
        let client = clients[i % clients.len()].clone();
        let stream = streams.get_mut(i).and_then(Option::take);
        let pace = pace_rxs[i].take();
        let shared = shared.clone();
        let op = args.op;
        tasks.push(tokio::spawn(async move {
            worker(op, client, stream, pace, shared).await
        }));
    }
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let (mut errors, mut ops, mut all) = (0, 0, Vec::new());
    for t in tasks {
        let r = t.await?;
        histogram.add(&r.histogram)?;
        errors += r.errors;
        ops += r.ops;
        all.extend(r.timestamps);
    }
    let elapsed = start.elapsed();
    progress.finish();
    if let Some(p) = pacer {
        let _ = p.join();
    }
    let checked = all.len() as u64;
    let duplicates = tokio::task::spawn_blocking(move || count_duplicates(all)).await?;
    Ok(Report::new(
        args,
        elapsed,
        ops,
        errors,
        &histogram,
        shared.checker.order_violations(),
        duplicates,
        checked,
    ))
}

impl Shared {
    fn clone_ops(self: &Arc<Self>) -> Arc<dyn Fn() -> u64 + Send + Sync> {
        let s = self.clone();
        Arc::new(move || s.ops.load(Ordering::Relaxed))
    }
}

async fn worker(
    op: Op,
    client: Client,
    mut stream: Option<meridian::client::RpcStream>,
    mut pace: Option<mpsc::UnboundedReceiver<Instant>>,
    shared: Arc<Shared>,
) -> WorkerResult {
    let mut histogram =
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("static histogram bounds");
    let mut timestamps = Vec::new();
    let (mut errors, mut ops, mut unflushed) = (0u64, 0u64, 0u64);
    let record_ts = op != Op::Ping;
    loop {
        let scheduled = match pace.as_mut() {
            Some(rx) => match rx.recv().await {
                Some(at) => Some(at),
                None => break,
            },
            None => None,
        };
        let sent = Instant::now();
        if sent >= shared.deadline {
            break;
        }
        let floor = shared.checker.floor();
        let result = match (op, stream.as_mut()) {
            (Op::Tso, _) => client
                .get_ts()
                .await
                .map(|ts| Some(ts.as_u64()))
                .map_err(|e| e.to_string()),
            (Op::TsoRaw, Some(s)) => match s.call(&Request::Tso { count: 1 }).await {
                Ok(Response::Ok(Reply::Tso { first, .. })) => Ok(Some(first)),
                Ok(other) => Err(format!("{other:?}")),
                Err(e) => Err(e),
            },
            (Op::Ping, Some(s)) => match s.call(&Request::Ping).await {
                Ok(Response::Ok(Reply::Pong)) => Ok(None),
                Ok(other) => Err(format!("{other:?}")),
                Err(e) => Err(e),
            },
            (_, None) => Err("no stream".to_string()),
        };
        let done = Instant::now();
        match result {
            Ok(ts) => {
                if let Some(ts) = ts {
                    shared.checker.observe(floor, ts);
                    if record_ts && timestamps.len() < shared.record_quota {
                        timestamps.push(ts);
                    }
                }
                let from = scheduled.unwrap_or(sent).min(sent);
                let _ = histogram.record((done - from).as_nanos().max(1) as u64);
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
            }
        }
    }
    shared.ops.fetch_add(unflushed, Ordering::Relaxed);
    WorkerResult {
        histogram,
        timestamps,
        errors,
        ops,
    }
}

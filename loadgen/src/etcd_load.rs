//! `loadgen etcd`: open-loop etcd load against one etcd v3 endpoint over TLS with a client
//! certificate, either etcd itself or a Meridian node's etcd endpoint (its client address).
//! Puts and single-key ranges are offered at fixed rates under one key prefix, with one watch
//! on that prefix, and the report gives put, range and watch-delivery percentiles.
//!
//! Open loop: every operation is sent at its slot in the schedule whatever is still in flight
//! (each send is its own task on a multiplexed HTTP/2 channel), so a slow answer does not delay
//! the sends behind it. A send that starts more than `pacer::TIMER_SLACK` after its slot is
//! timed from the slot, so a stall of the client's runtime is counted rather than hidden.
//!
//! Watch delivery is the watch event's receipt minus the put's send: each put's value starts
//! with the send time, read back from the event. It includes the put's own trip to etcd's
//! commit, as a watcher sees it.
//!
//! The comparison of two endpoints (straight at etcd, and through a node on the same etcd) is
//! `scripts/bench-all ab-etcd-proxy`, which alternates runs of this mode; this module runs one.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use meridian::etcdpb::etcdserverpb::{
    kv_client::KvClient, watch_client::WatchClient, watch_request::RequestUnion, PutRequest,
    RangeRequest, WatchCreateRequest, WatchRequest,
};
use serde::Serialize;
use tokio::task::JoinSet;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

use crate::pacer::Schedule;
use crate::report::Latency;

#[derive(Debug, Clone, clap::Args)]
pub struct EtcdLoadArgs {
    /// The etcd v3 endpoint: etcd's client URL, or a Meridian node's client address
    /// (`https://host:port`).
    #[arg(long)]
    pub endpoint: String,
    /// The CA that signed the endpoint's certificate.
    #[arg(long)]
    pub ca: PathBuf,
    /// The client certificate presented (a `client` role for a Meridian node).
    #[arg(long)]
    pub cert: PathBuf,
    /// The key of --cert.
    #[arg(long)]
    pub key: PathBuf,
    /// The name the endpoint's certificate is checked against.
    #[arg(long, default_value = "localhost")]
    pub server_name: String,
    /// The key prefix written, read and watched; a fresh one per run keeps runs apart.
    #[arg(long, default_value = "/bench/")]
    pub prefix: String,
    /// Offered puts per second, each to one of --keys keys under the prefix.
    #[arg(long, default_value_t = 5_000)]
    pub puts_per_sec: u64,
    /// Offered single-key ranges per second.
    #[arg(long, default_value_t = 20_000)]
    pub ranges_per_sec: u64,
    /// Keys written and read.
    #[arg(long, default_value_t = 10_000)]
    pub keys: u64,
    /// Connections per operation kind, each with its share of the schedule.
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// How long the load is offered.
    #[arg(long, default_value = "10s", value_parser = crate::duration::parse)]
    pub duration: Duration,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EtcdLoadReport {
    pub endpoint: String,
    pub puts_per_sec: u64,
    pub ranges_per_sec: u64,
    pub duration_s: f64,
    /// Operations answered OK.
    pub puts: u64,
    pub ranges: u64,
    /// Watch events received for this run's puts.
    pub watch_events: u64,
    /// Failed or timed-out operations.
    pub errors: u64,
    pub put_us: Latency,
    pub range_us: Latency,
    /// Watch event receipt minus the put's send.
    pub watch_us: Latency,
}

/// How long one operation may take before it counts as an error: a bound, so that a stalled
/// endpoint ends the run instead of hanging it.
const OP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the watch is given, after the last put's answer, for the events still in flight.
const WATCH_DRAIN: Duration = Duration::from_millis(500);

async fn channel(args: &EtcdLoadArgs) -> anyhow::Result<Channel> {
    let read = |p: &PathBuf| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(&args.ca)?))
        .identity(Identity::from_pem(read(&args.cert)?, read(&args.key)?))
        .domain_name(args.server_name.clone());
    Channel::from_shared(args.endpoint.clone())?
        .tls_config(tls)?
        .tcp_nodelay(true)
        .connect()
        .await
        .with_context(|| format!("connecting to {}", args.endpoint))
}

fn histogram() -> Histogram<u64> {
    // 1 us to 60 s, three significant figures.
    Histogram::new_with_bounds(1_000, 60_000_000_000, 3).expect("constant bounds are valid")
}

/// One kind's results, shared by its in-flight operations.
struct Tally {
    latency: Mutex<Histogram<u64>>,
    errors: AtomicU64,
}

impl Tally {
    fn new() -> Arc<Tally> {
        Arc::new(Tally {
            latency: Mutex::new(histogram()),
            errors: AtomicU64::new(0),
        })
    }

    fn record(&self, ok: bool, origin: Instant) {
        if ok {
            let ns = (origin.elapsed().as_nanos() as u64).max(1_000);
            if let Ok(mut h) = self.latency.lock() {
                let _ = h.record(ns);
            }
        } else {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn histogram(&self) -> Histogram<u64> {
        self.latency
            .lock()
            .map(|h| h.clone())
            .unwrap_or_else(|_| histogram())
    }
}

/// Runs the load once and prints a line; writes the report to --json when given.
pub async fn run(args: &EtcdLoadArgs) -> anyhow::Result<EtcdLoadReport> {
    let prefix: Arc<[u8]> = args.prefix.as_bytes().into();
    let epoch = Instant::now();
    let watched = Tally::new();
    let watch_events = Arc::new(AtomicU64::new(0));
    let (watch_tx, watch_task) = watch(args, &prefix, epoch, &watched, &watch_events).await?;
    let started = Instant::now() + Duration::from_millis(100);
    let deadline = started + args.duration;
    let (puts, ranges) = (Tally::new(), Tally::new());
    let mut offers = JoinSet::new();
    for (kind, rate, tally) in [
        (Kind::Put, args.puts_per_sec, &puts),
        (Kind::Range, args.ranges_per_sec, &ranges),
    ] {
        if rate == 0 {
            continue;
        }
        for c in 0..args.connections.max(1) {
            let offer = Offer {
                kind,
                kv: KvClient::new(channel(args).await?),
                schedule: Schedule::new(c, args.connections.max(1), rate),
                stride: (c as u64, args.connections.max(1) as u64),
                prefix: prefix.clone(),
                keys: args.keys.max(1),
                tally: tally.clone(),
            };
            offers.spawn(offer.run(started, deadline, epoch));
        }
    }
    while let Some(done) = offers.join_next().await {
        done?;
    }
    tokio::time::sleep(WATCH_DRAIN).await;
    drop(watch_tx);
    watch_task.abort();
    let (puts_h, ranges_h, watch_h) = (puts.histogram(), ranges.histogram(), watched.histogram());
    let report = EtcdLoadReport {
        endpoint: args.endpoint.clone(),
        puts_per_sec: args.puts_per_sec,
        ranges_per_sec: args.ranges_per_sec,
        duration_s: args.duration.as_secs_f64(),
        puts: puts_h.len(),
        ranges: ranges_h.len(),
        watch_events: watch_events.load(Ordering::Relaxed),
        errors: puts.errors.load(Ordering::Relaxed) + ranges.errors.load(Ordering::Relaxed),
        put_us: Latency::of(&puts_h),
        range_us: Latency::of(&ranges_h),
        watch_us: Latency::of(&watch_h),
    };
    println!(
        "{}: {} puts p99 {:.0} us, {} ranges p99 {:.0} us, {} watch events p99 {:.0} us, {} errors",
        report.endpoint,
        report.puts,
        report.put_us.p99,
        report.ranges,
        report.range_us.p99,
        report.watch_events,
        report.watch_us.p99,
        report.errors
    );
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(report)
}

/// Opens the watch on the prefix and waits for its `created` answer, so that no put of the run
/// precedes it; the task records each event's delivery until it is aborted.
async fn watch(
    args: &EtcdLoadArgs,
    prefix: &[u8],
    epoch: Instant,
    watched: &Arc<Tally>,
    events: &Arc<AtomicU64>,
) -> anyhow::Result<(
    tokio::sync::mpsc::Sender<WatchRequest>,
    tokio::task::JoinHandle<()>,
)> {
    let (watch_tx, watch_rx) = tokio::sync::mpsc::channel(16);
    let mut range_end = prefix.to_vec();
    if let Some(last) = range_end.last_mut() {
        *last += 1;
    }
    // Sent before the call is awaited: etcd answers the call's headers with its first message.
    watch_tx
        .send(WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                key: prefix.to_vec(),
                range_end,
                ..Default::default()
            })),
        })
        .await?;
    let mut stream = WatchClient::new(channel(args).await?)
        .watch(tokio_stream::wrappers::ReceiverStream::new(watch_rx))
        .await?
        .into_inner();
    let created = stream.message().await?;
    anyhow::ensure!(
        created.is_some_and(|r| r.created),
        "the watch on {} was not created",
        args.prefix
    );
    let (watched, events) = (watched.clone(), events.clone());
    let task = tokio::spawn(async move {
        while let Ok(Some(reply)) = stream.message().await {
            let now = epoch.elapsed().as_nanos() as u64;
            for event in reply.events {
                let sent = event
                    .kv
                    .and_then(|kv| <[u8; 8]>::try_from(kv.value.get(..8)?).ok())
                    .map(u64::from_le_bytes);
                if let Some(sent) = sent {
                    events.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut h) = watched.latency.lock() {
                        let _ = h.record(now.saturating_sub(sent).max(1_000));
                    }
                }
            }
        }
    });
    Ok((watch_tx, task))
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Put,
    Range,
}

/// One connection's share of one kind's schedule.
struct Offer {
    kind: Kind,
    kv: KvClient<Channel>,
    schedule: Schedule,
    /// (this connection, connections): operation `k` here is the schedule's `k * n + c`.
    stride: (u64, u64),
    prefix: Arc<[u8]>,
    keys: u64,
    tally: Arc<Tally>,
}

impl Offer {
    /// Sends each slot's operation at its slot until `deadline`, then waits for every answer.
    async fn run(self, start: Instant, deadline: Instant, epoch: Instant) {
        let mut in_flight = JoinSet::new();
        for k in 0.. {
            let slot = self.schedule.slot(start, k);
            if slot >= deadline {
                break;
            }
            tokio::time::sleep_until(slot.into()).await;
            while in_flight.try_join_next().is_some() {}
            let origin = Schedule::latency_origin(slot, Instant::now());
            let (c, n) = self.stride;
            // Spread over the keys, so that puts and ranges do not walk them in step.
            let index = (k * n + c).wrapping_mul(2_654_435_761) % self.keys;
            let mut key = self.prefix.to_vec();
            key.extend_from_slice(format!("{index:08}").as_bytes());
            let mut kv = self.kv.clone();
            let tally = self.tally.clone();
            let kind = self.kind;
            in_flight.spawn(async move {
                let call = async {
                    match kind {
                        Kind::Put => {
                            let sent = epoch.elapsed().as_nanos() as u64;
                            let mut value = sent.to_le_bytes().to_vec();
                            value.resize(64, b'v');
                            kv.put(PutRequest {
                                key,
                                value,
                                ..Default::default()
                            })
                            .await
                            .is_ok()
                        }
                        Kind::Range => kv
                            .range(RangeRequest {
                                key,
                                ..Default::default()
                            })
                            .await
                            .is_ok(),
                    }
                };
                let ok = matches!(tokio::time::timeout(OP_TIMEOUT, call).await, Ok(true));
                tally.record(ok, origin);
            });
        }
        while in_flight.join_next().await.is_some() {}
    }
}

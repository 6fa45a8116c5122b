//! `loadgen etcd-proxy`: what Meridian's etcd endpoint costs a caller. One etcd with TLS and
//! client certificates, one Meridian node on it; the same open-loop load (puts and ranges at
//! offered rates, one watch on the written prefix) runs straight at etcd and through the
//! node's client address, alternated round by round, each path with TLS and a client
//! certificate. Reports each path's put, range and watch-delivery percentiles per round, the
//! medians, and the through-Meridian p99 minus the direct p99 for each.
//!
//! Latency is timed from each operation's slot in the schedule when the send starts late
//! (`pacer`), so a stall on either path is counted in full.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use meridian::etcdpb::etcdserverpb::{
    kv_client::KvClient, watch_client::WatchClient, watch_request::RequestUnion, PutRequest,
    RangeRequest, WatchCreateRequest, WatchRequest,
};
use meridian::harness::{EtcdProcess, ServerProcess};
use serde::Serialize;
use tokio::sync::Mutex;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

use crate::pacer::{Schedule, TIMER_SLACK};
use crate::report::Latency;

#[derive(Debug, Clone, clap::Args)]
pub struct EtcdProxyArgs {
    /// Offered puts per second (each to one of --keys keys under the prefix).
    #[arg(long, default_value_t = 5_000)]
    pub puts_per_sec: u64,
    /// Offered single-key ranges per second.
    #[arg(long, default_value_t = 20_000)]
    pub ranges_per_sec: u64,
    /// Keys written and read.
    #[arg(long, default_value_t = 10_000)]
    pub keys: u64,
    /// Callers per operation kind, each on its own channel.
    #[arg(long, default_value_t = 16)]
    pub callers: usize,
    /// Length of each path's run in a round.
    #[arg(long, default_value = "10s", value_parser = crate::duration::parse)]
    pub duration: Duration,
    /// Rounds; each runs both paths, the first path alternating.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One way to etcd (straight or through the node): its address and the TLS a caller presents on it.
#[derive(Clone)]
struct Way {
    name: &'static str,
    url: String,
    ca: Vec<u8>,
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl Way {
    fn read(
        name: &'static str,
        url: String,
        ca: &Path,
        cert: &Path,
        key: &Path,
    ) -> anyhow::Result<Way> {
        Ok(Way {
            name,
            url,
            ca: std::fs::read(ca)?,
            cert: std::fs::read(cert)?,
            key: std::fs::read(key)?,
        })
    }

    async fn channel(&self) -> anyhow::Result<Channel> {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca))
            .identity(Identity::from_pem(&self.cert, &self.key))
            .domain_name("localhost");
        Ok(Channel::from_shared(self.url.clone())?
            .tls_config(tls)?
            .tcp_nodelay(true)
            .connect()
            .await?)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PathRun {
    pub path: &'static str,
    pub round: usize,
    pub puts: u64,
    pub ranges: u64,
    pub errors: u64,
    pub put_us: Latency,
    pub range_us: Latency,
    pub watch_us: Latency,
}

#[derive(Debug, Clone, Serialize)]
pub struct EtcdProxyReport {
    pub puts_per_sec: u64,
    pub ranges_per_sec: u64,
    pub duration_s: f64,
    pub runs: Vec<PathRun>,
    /// Median over rounds of each path's p99, in microseconds.
    pub median_p99_us: std::collections::BTreeMap<String, f64>,
    /// Through Meridian minus direct, medians of the p99s, in microseconds.
    pub put_p99_delta_us: f64,
    pub range_p99_delta_us: f64,
    pub watch_p99_delta_us: f64,
}

/// Reads one kind's p99 out of a run.
type P99 = fn(&PathRun) -> f64;

pub async fn run(args: &EtcdProxyArgs) -> anyhow::Result<EtcdProxyReport> {
    let dir = tempfile::tempdir()?;
    let etcd = EtcdProcess::start_tls(&dir.path().join("etcd"))?;
    let files = etcd
        .tls()
        .ok_or_else(|| anyhow::anyhow!("etcd started without TLS"))?;
    let data = dir.path().join("node");
    let mut flags = vec!["--etcd".to_string(), etcd.endpoint()];
    flags.extend(files.serve_flags());
    let node = ServerProcess::start_with(
        &crate::demo::meridian_binary()?,
        &data,
        "127.0.0.1:0",
        &flags,
    )?;
    let grpc = node
        .grpc_addr
        .clone()
        .ok_or_else(|| anyhow::anyhow!("the node serves no gRPC"))?;
    let (bench_cert, bench_key) = files.client("bench")?;
    let direct = Way::read(
        "direct",
        etcd.endpoint(),
        &files.ca,
        &bench_cert,
        &bench_key,
    )?;
    let tls = data.join("tls");
    let proxied = Way::read(
        "meridian",
        format!("https://{grpc}"),
        &tls.join("ca.pem"),
        &tls.join("client.pem"),
        &tls.join("client-key.pem"),
    )?;
    let mut runs = Vec::new();
    for round in 0..args.rounds {
        let order = if round % 2 == 0 {
            [&direct, &proxied]
        } else {
            [&proxied, &direct]
        };
        for path in order {
            let r = run_path(path, round, args).await?;
            println!(
                "round {} {:>8}: put p99 {:>8.0} us, range p99 {:>8.0} us, watch p99 {:>8.0} us, errors {}",
                round + 1,
                r.path,
                r.put_us.p99,
                r.range_us.p99,
                r.watch_us.p99,
                r.errors
            );
            runs.push(r);
        }
    }
    node.stop()?;
    drop(etcd);
    let median = |path: &str, f: P99| {
        let mut v: Vec<f64> = runs.iter().filter(|r| r.path == path).map(f).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let kinds: [(&str, P99); 3] = [
        ("put", |r| r.put_us.p99),
        ("range", |r| r.range_us.p99),
        ("watch", |r| r.watch_us.p99),
    ];
    let mut median_p99_us = std::collections::BTreeMap::new();
    for path in ["direct", "meridian"] {
        for (kind, f) in kinds {
            median_p99_us.insert(format!("{path}_{kind}"), median(path, f));
        }
    }
    let delta = |kind: &str| {
        median_p99_us[&format!("meridian_{kind}")] - median_p99_us[&format!("direct_{kind}")]
    };
    let report = EtcdProxyReport {
        puts_per_sec: args.puts_per_sec,
        ranges_per_sec: args.ranges_per_sec,
        duration_s: args.duration.as_secs_f64(),
        put_p99_delta_us: delta("put"),
        range_p99_delta_us: delta("range"),
        watch_p99_delta_us: delta("watch"),
        median_p99_us,
        runs,
    };
    println!(
        "p99 through Meridian minus direct (medians): put {:+.0} us, range {:+.0} us, watch {:+.0} us",
        report.put_p99_delta_us, report.range_p99_delta_us, report.watch_p99_delta_us
    );
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(report)
}

fn histogram() -> Histogram<u64> {
    // 1 us to 60 s, three significant figures.
    Histogram::new_with_bounds(1_000, 60_000_000_000, 3).expect("constant bounds are valid")
}

/// One path's run: the watch opened first, then the paced puts and ranges for `duration`, then
/// the watch drained of the events still in flight.
async fn run_path(path: &Way, round: usize, args: &EtcdProxyArgs) -> anyhow::Result<PathRun> {
    let prefix = format!("/bench/{}/{round}/", path.name).into_bytes();
    let epoch = Instant::now();
    let (watch_tx, watch_rx) = tokio::sync::mpsc::channel(16);
    let mut range_end = prefix.clone();
    if let Some(last) = range_end.last_mut() {
        *last += 1;
    }
    // Sent before the call is awaited: etcd answers the call's headers with its first message.
    watch_tx
        .send(WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                key: prefix.clone(),
                range_end,
                ..Default::default()
            })),
        })
        .await?;
    let mut watch = WatchClient::new(path.channel().await?)
        .watch(tokio_stream::wrappers::ReceiverStream::new(watch_rx))
        .await?
        .into_inner();
    // The created event comes first.
    watch.message().await?;
    let watched = Arc::new(Mutex::new(histogram()));
    let watch_task = {
        let watched = watched.clone();
        tokio::spawn(async move {
            while let Ok(Some(reply)) = watch.message().await {
                let now = epoch.elapsed().as_nanos() as u64;
                let mut h = watched.lock().await;
                for event in reply.events {
                    let sent = event
                        .kv
                        .and_then(|kv| <[u8; 8]>::try_from(kv.value.get(..8)?).ok())
                        .map(u64::from_le_bytes);
                    if let Some(sent) = sent {
                        let _ = h.record(now.saturating_sub(sent).max(1_000));
                    }
                }
            }
        })
    };
    let started = Instant::now() + Duration::from_millis(100);
    let deadline = started + args.duration;
    let mut tasks = Vec::new();
    for (kind, rate) in [
        (Kind::Put, args.puts_per_sec),
        (Kind::Range, args.ranges_per_sec),
    ] {
        for caller in 0..args.callers {
            let kv = KvClient::new(path.channel().await?);
            let prefix = prefix.clone();
            let keys = args.keys.max(1);
            let schedule = Schedule::new(caller, args.callers, rate);
            tasks.push(tokio::spawn(async move {
                paced(kind, kv, schedule, started, deadline, epoch, &prefix, keys).await
            }));
        }
    }
    let (mut puts, mut ranges, mut errors) = (histogram(), histogram(), 0);
    for t in tasks {
        let (kind, h, e) = t.await?;
        errors += e;
        match kind {
            Kind::Put => puts.add(&h)?,
            Kind::Range => ranges.add(&h)?,
        }
    }
    // Events still on their way are given a moment, then the watch is closed.
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(watch_tx);
    watch_task.abort();
    let watched = watched.lock().await.clone();
    Ok(PathRun {
        path: path.name,
        round: round + 1,
        puts: puts.len(),
        ranges: ranges.len(),
        errors,
        put_us: Latency::of(&puts),
        range_us: Latency::of(&ranges),
        watch_us: Latency::of(&watched),
    })
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Put,
    Range,
}

/// One caller's share of the schedule until `deadline`: its latencies and errors.
#[allow(clippy::too_many_arguments)]
async fn paced(
    kind: Kind,
    mut kv: KvClient<Channel>,
    schedule: Schedule,
    start: Instant,
    deadline: Instant,
    epoch: Instant,
    prefix: &[u8],
    keys: u64,
) -> (Kind, Histogram<u64>, u64) {
    let mut h = histogram();
    let mut errors = 0;
    for k in 0.. {
        let slot = schedule.slot(start, k);
        if slot >= deadline {
            break;
        }
        tokio::time::sleep_until(slot.into()).await;
        let sent = Instant::now();
        let origin = if sent.duration_since(slot) <= TIMER_SLACK {
            sent
        } else {
            slot
        };
        let mut key = prefix.to_vec();
        key.extend_from_slice(format!("{:08}", k.wrapping_mul(2_654_435_761) % keys).as_bytes());
        let ok = match kind {
            Kind::Put => {
                let mut value = (epoch.elapsed().as_nanos() as u64).to_le_bytes().to_vec();
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
        };
        if ok {
            let _ = h.record((origin.elapsed().as_nanos() as u64).max(1_000));
        } else {
            errors += 1;
        }
    }
    (kind, h, errors)
}

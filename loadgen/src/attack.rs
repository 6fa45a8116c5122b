//! `loadgen attack`: the TSO's throughput while the node is under attack, next to a quiet run
//! against the same node in the same run. Each round runs the TSO load once quiet and
//! once beside each attack, in turn, so a noisy machine moves both sides alike; the report
//! gives the medians and their ratio, and what each attack did and how the node answered.
//!
//! The attackers run in this process, on the same machine: what they cost the client side is
//! part of the figure, as it would be for a node whose attacker shares its host.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use meridian::proto::{self, ErrorReply, FrameDecoder, Request, Response, MAX_FRAME_LEN};
use meridian::tls::Trust;

use crate::args::TsoArgs;
use crate::compare::median;
use crate::demo::DemoServer;
use crate::run;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attack {
    /// QUIC handshakes without a client certificate, back to back: each is refused.
    Handshakes,
    /// Authenticated connections opened and dropped back to back, up to 512 held at once.
    Connections,
    /// Every stream four connections may open, each holding a frame that never completes.
    Streams,
    /// GetRegion with keys 8x over the limit, pipelined, and frames over the frame limit.
    OversizedKeys,
    /// Idle TCP connections to the admin port and TLS connections trickling a header.
    Slowloris,
}

/// What one attack did and how the node answered, summed over its runs.
#[derive(Debug, Default, Serialize, Clone)]
pub struct Effect {
    /// Handshakes, connections, streams, requests or sockets the attacker started.
    pub attempts: u64,
    /// Of those, refused or cut off by the node (handshake failed, limit error, reset,
    /// connection closed by a timeout).
    pub refused: u64,
}

#[derive(Debug, Serialize)]
pub struct AttackReport {
    pub kind: Attack,
    pub tso_per_sec: Vec<f64>,
    pub median_tso_per_sec: f64,
    /// Median under attack over the quiet median.
    pub ratio: f64,
    /// The node's CPU use during each run, in cores (CPU seconds per second).
    pub server_cores: Vec<f64>,
    pub effect: Effect,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub quiet_tso_per_sec: Vec<f64>,
    pub median_quiet_tso_per_sec: f64,
    pub quiet_server_cores: Vec<f64>,
    pub attacks: Vec<AttackReport>,
    pub violations: u64,
    pub errors: u64,
}

#[derive(Default)]
struct Counters {
    attempts: AtomicU64,
    refused: AtomicU64,
}

impl Counters {
    fn attempt(&self) {
        self.attempts.fetch_add(1, Ordering::Relaxed);
    }
    fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }
}

/// Where the attackers aim.
struct Target {
    quic: std::net::SocketAddr,
    admin: String,
    /// The node's CA and the client certificate beside it (role `client`).
    trust: Trust,
    /// The CA alone: verifies the node, presents no certificate.
    stranger: Trust,
}

/// Runs `rounds` rounds against a local demo server: a quiet TSO run, then one beside each
/// of `kinds`.
pub async fn run(
    mut args: TsoArgs,
    demo: &DemoServer,
    kinds: &[Attack],
    rounds: usize,
) -> anyhow::Result<Report> {
    demo.target(&mut args);
    let bare = tempfile::tempdir()?;
    std::fs::copy(&demo.ca, bare.path().join("ca.pem"))?;
    let target = Arc::new(Target {
        quic: demo.server.client_addr.parse().context("client address")?,
        admin: demo.server.admin_addr.clone(),
        trust: Trust::Ca(demo.ca.clone()),
        stranger: Trust::Ca(bare.path().join("ca.pem")),
    });
    let pid = demo
        .server
        .pid()
        .context("the demo server is not running")?;
    let mut quiet = Vec::new();
    let mut quiet_cores = Vec::new();
    let mut under: Vec<(Vec<f64>, Vec<f64>, Effect)> = vec![Default::default(); kinds.len()];
    let (mut violations, mut errors) = (0, 0);
    for round in 1..=rounds.max(1) {
        let cpu = CpuMeter::start(pid);
        let r = run::run(&args).await?;
        let cores = cpu.cores();
        println!(
            "round {round}: quiet {:.0} ts/s, node {cores:.2} cores",
            r.tso_per_sec
        );
        quiet.push(r.tso_per_sec);
        quiet_cores.push(cores);
        violations += r.violations;
        errors += r.errors;
        for (i, kind) in kinds.iter().enumerate() {
            let counters = Arc::new(Counters::default());
            let (stop, stopped) = watch::channel(false);
            let attacker = tokio::spawn(attack(*kind, target.clone(), counters.clone(), stopped));
            // Let the attack reach its full weight before measuring.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let cpu = CpuMeter::start(pid);
            let r = run::run(&args).await;
            let cores = cpu.cores();
            let _ = stop.send(true);
            let _ = attacker.await;
            let r = r?;
            let effect = Effect {
                attempts: counters.attempts.load(Ordering::Relaxed),
                refused: counters.refused.load(Ordering::Relaxed),
            };
            println!(
                "round {round}: {kind:?} {:.0} ts/s, node {cores:.2} cores ({} attempts, {} refused)",
                r.tso_per_sec, effect.attempts, effect.refused
            );
            violations += r.violations;
            errors += r.errors;
            under[i].0.push(r.tso_per_sec);
            under[i].1.push(cores);
            under[i].2.attempts += effect.attempts;
            under[i].2.refused += effect.refused;
            // The node frees what the attack held before the next run.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let median_quiet = median(&quiet);
    let attacks = kinds
        .iter()
        .zip(under)
        .map(|(kind, (rates, server_cores, effect))| {
            let m = median(&rates);
            AttackReport {
                kind: *kind,
                median_tso_per_sec: m,
                ratio: if median_quiet > 0.0 {
                    m / median_quiet
                } else {
                    0.0
                },
                tso_per_sec: rates,
                server_cores,
                effect,
            }
        })
        .collect();
    Ok(Report {
        quiet_tso_per_sec: quiet,
        median_quiet_tso_per_sec: median_quiet,
        quiet_server_cores: quiet_cores,
        attacks,
        violations,
        errors,
    })
}

/// A process's CPU time over a stretch of wall time, from /proc/PID/stat.
struct CpuMeter {
    pid: u32,
    cpu: Option<f64>,
    at: std::time::Instant,
}

impl CpuMeter {
    fn start(pid: u32) -> CpuMeter {
        CpuMeter {
            pid,
            cpu: cpu_seconds(pid),
            at: std::time::Instant::now(),
        }
    }

    /// CPU seconds per wall second since `start` (NaN where /proc cannot be read).
    fn cores(&self) -> f64 {
        match (self.cpu, cpu_seconds(self.pid)) {
            (Some(a), Some(b)) => (b - a) / self.at.elapsed().as_secs_f64(),
            _ => f64::NAN,
        }
    }
}

/// User plus system time of `pid`: fields 14 and 15 of /proc/PID/stat, counted from the
/// command name's closing parenthesis (the name may hold spaces).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let utime: f64 = fields.nth(11)?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf reads a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((utime + stime) / ticks)
}

async fn attack(
    kind: Attack,
    target: Arc<Target>,
    counters: Arc<Counters>,
    stop: watch::Receiver<bool>,
) {
    let result = match kind {
        Attack::Handshakes => handshakes(&target, &counters, stop).await,
        Attack::Connections => connections(&target, &counters, stop).await,
        Attack::Streams => streams(&target, &counters, stop).await,
        Attack::OversizedKeys => oversized_keys(&target, &counters, stop).await,
        Attack::Slowloris => slowloris(&target, &counters, stop).await,
    };
    if let Err(e) = result {
        eprintln!("attack {kind:?} could not run: {e:#}");
    }
}

fn endpoint(trust: &Trust) -> anyhow::Result<quinn::Endpoint> {
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse()?)?;
    endpoint.set_default_client_config(meridian::tls::client_config(trust)?);
    Ok(endpoint)
}

async fn connect(
    endpoint: &quinn::Endpoint,
    to: std::net::SocketAddr,
) -> anyhow::Result<quinn::Connection> {
    Ok(endpoint.connect(to, "localhost")?.await?)
}

/// Spawns `tasks` copies of `each` and waits for all once `stop` is set.
async fn swarm<F, Fut>(tasks: usize, stop: watch::Receiver<bool>, each: F) -> anyhow::Result<()>
where
    F: Fn(watch::Receiver<bool>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let handles: Vec<_> = (0..tasks)
        .map(|_| tokio::spawn(each(stop.clone())))
        .collect();
    for h in handles {
        h.await??;
    }
    Ok(())
}

async fn handshakes(
    target: &Arc<Target>,
    counters: &Arc<Counters>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    swarm(32, stop, |stop| {
        let (target, counters) = (target.clone(), counters.clone());
        async move {
            // One socket per task: the kernel spreads their 4-tuples over the cores.
            let endpoint = endpoint(&target.stranger)?;
            while !*stop.borrow() {
                counters.attempt();
                match connect(&endpoint, target.quic).await {
                    Err(_) => counters.refused(),
                    // TLS 1.3 finishes the client's side first; the node's refusal of the
                    // missing certificate arrives as the connection's close.
                    Ok(conn) => {
                        if tokio::time::timeout(Duration::from_secs(2), conn.closed())
                            .await
                            .is_ok()
                        {
                            counters.refused();
                        }
                    }
                }
            }
            Ok(())
        }
    })
    .await
}

async fn connections(
    target: &Arc<Target>,
    counters: &Arc<Counters>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    const TASKS: usize = 8;
    const HELD: usize = 512;
    swarm(TASKS, stop, |stop| {
        let (target, counters) = (target.clone(), counters.clone());
        async move {
            let endpoint = endpoint(&target.trust)?;
            let mut held = std::collections::VecDeque::new();
            while !*stop.borrow() {
                counters.attempt();
                match connect(&endpoint, target.quic).await {
                    Ok(conn) => held.push_back(conn),
                    Err(_) => counters.refused(),
                }
                if held.len() > HELD / TASKS {
                    if let Some(old) = held.pop_front() {
                        old.close(0u32.into(), b"churn");
                    }
                }
            }
            Ok(())
        }
    })
    .await
}

async fn streams(
    target: &Arc<Target>,
    counters: &Arc<Counters>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    swarm(4, stop, |mut stop| {
        let (target, counters) = (target.clone(), counters.clone());
        async move {
            let endpoint = endpoint(&target.trust)?;
            let conn = connect(&endpoint, target.quic).await?;
            let mut held = Vec::new();
            // A header announcing a whole frame, then a little of it: the node buffers and
            // waits for the rest. Opening blocks once the stream limit is reached.
            let mut partial = (MAX_FRAME_LEN as u32).to_le_bytes().to_vec();
            partial.resize(4 + 1024, 0);
            loop {
                let opened = tokio::select! {
                    _ = stop.wait_for(|s| *s) => break,
                    opened = conn.open_bi() => opened,
                };
                counters.attempt();
                match opened {
                    Ok((mut send, recv)) => {
                        if send.write_all(&partial).await.is_err() {
                            counters.refused();
                        }
                        held.push((send, recv));
                    }
                    Err(_) => {
                        counters.refused();
                        break;
                    }
                }
            }
            drop(held);
            conn.close(0u32.into(), b"done");
            Ok(())
        }
    })
    .await
}

async fn oversized_keys(
    target: &Arc<Target>,
    counters: &Arc<Counters>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    const BATCH: usize = 16;
    swarm(8, stop, |stop| {
        let (target, counters) = (target.clone(), counters.clone());
        async move {
            let endpoint = endpoint(&target.trust)?;
            let conn = connect(&endpoint, target.quic).await?;
            let key = vec![b'k'; 8 * meridian::placement::Limits::default().max_key_len];
            let mut batch = Vec::new();
            let mut scratch = rkyv::util::AlignedVec::new();
            for _ in 0..BATCH {
                proto::encode(
                    &Request::GetRegion { key: key.clone() },
                    &mut scratch,
                    &mut batch,
                )?;
            }
            let mut round = 0u64;
            while !*stop.borrow() {
                round += 1;
                let (mut send, mut recv) = conn.open_bi().await?;
                if round % 8 == 0 {
                    // Over the frame limit: the node resets the stream without reading it.
                    counters.attempt();
                    let _ = send
                        .write_all(&(MAX_FRAME_LEN as u32 + 1).to_le_bytes())
                        .await;
                    let _ = send.finish();
                    if recv.read_to_end(64).await.is_err() {
                        counters.refused();
                    }
                    continue;
                }
                send.write_all(&batch).await?;
                send.finish()?;
                let mut decoder = FrameDecoder::new();
                let mut answered = 0;
                while answered < BATCH {
                    let Some(chunk) = recv.read_chunk(64 * 1024, true).await? else {
                        break;
                    };
                    decoder.extend(&chunk.bytes);
                    while let Some(r) = decoder.next_response()? {
                        answered += 1;
                        counters.attempt();
                        if matches!(r, Response::Err(ErrorReply::LimitExceeded(_))) {
                            counters.refused();
                        }
                    }
                }
            }
            Ok(())
        }
    })
    .await
}

async fn slowloris(
    target: &Arc<Target>,
    counters: &Arc<Counters>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    // More idle sockets than the admin listener admits, none starting TLS.
    let idle = swarm(300, stop.clone(), |stop| {
        let (target, counters) = (target.clone(), counters.clone());
        async move {
            while !*stop.borrow() {
                counters.attempt();
                let Ok(mut tcp) = tokio::net::TcpStream::connect(&target.admin).await else {
                    counters.refused();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let mut stop = stop.clone();
                let mut byte = [0u8; 1];
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => break,
                    // The node closes it after the handshake timeout.
                    _ = tokio::io::AsyncReadExt::read(&mut tcp, &mut byte) => counters.refused(),
                }
            }
            Ok(())
        }
    });
    let tls = Arc::new(meridian::tls::client_tls(
        meridian::tls::client_builder()?,
        &target.trust,
    )?);
    let trickle = swarm(8, stop, |stop| {
        let (target, counters, tls) = (target.clone(), counters.clone(), tls.clone());
        async move {
            while !*stop.borrow() {
                counters.attempt();
                let tcp = tokio::net::TcpStream::connect(&target.admin).await?;
                let name = rustls::pki_types::ServerName::try_from("localhost")?;
                let Ok(mut stream) = tokio_rustls::TlsConnector::from(tls.clone())
                    .connect(name, tcp)
                    .await
                else {
                    counters.refused();
                    continue;
                };
                let _ = stream
                    .write_all(b"GET /api/v1/members HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                    .await;
                // A byte every 500 ms until the header-read timeout cuts it off.
                while !*stop.borrow() {
                    if stream.write_all(b"a").await.is_err() || stream.flush().await.is_err() {
                        counters.refused();
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
            Ok(())
        }
    });
    let (a, b) = tokio::join!(idle, trickle);
    a.and(b)
}

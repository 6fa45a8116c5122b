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

pub use args::ClusterArgs;
pub use carry_out::{carry_out, elect, has_live_leader, healthy_voters, Applied, Change};
pub use fleet::Fleet;
pub use setup::{region_key, scan_all, setup};

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use meridian::client::Client;
use meridian::kvproto::pdpb::{self, pd_client::PdClient};
use meridian::placement::{Operator, Peer, Region, RegionStats, StoreStats};
use meridian::proto::{self, Reply, Request, Response};
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

/// A region's heartbeat frame, encoded once and kept until the region changes.
struct Encoder {
    scratch: rkyv::util::AlignedVec,
    stats: RegionStats,
}

impl Encoder {
    /// `region`'s heartbeat, reporting the peers `pending` names as still catching up.
    fn frame(&mut self, region: &Region, pending: impl IntoIterator<Item = u64>) -> Vec<u8> {
        let mut frame = Vec::new();
        let req = Request::RegionHeartbeat {
            region: region.clone(),
            stats: RegionStats {
                pending: RegionStats::pending_mask(region, pending),
                ..self.stats
            },
        };
        match proto::encode(&req, &mut self.scratch, &mut frame) {
            Ok(()) => frame,
            Err(_) => Vec::new(),
        }
    }
}

/// One stream's regions as it heartbeats them: each region's encoded frame (empty while the
/// region cannot report: no live voter quorum to lead it), and the regions to report first.
struct Share {
    regions: Vec<Region>,
    frames: Vec<Vec<u8>>,
    /// Regions a change was carried out on, reported in the next batch (TiKV reports a region
    /// at once after a conf change, a split or a leader change).
    urgent: Vec<usize>,
    /// New peers catching up: (region, peer, when it will have caught up), in that order.
    catching_up: VecDeque<(usize, u64, Instant)>,
    encoder: Encoder,
}

impl Share {
    fn changed(&mut self, i: usize, report_now: bool) {
        let pending = self
            .catching_up
            .iter()
            .filter(|(r, ..)| *r == i)
            .map(|&(_, peer, _)| peer);
        self.frames[i] = self.encoder.frame(&self.regions[i], pending);
        if report_now {
            self.urgent.push(i);
        }
    }

    /// The peers that have caught up by `now` are reported so from the next round on (TiKV
    /// reports it with the region's next heartbeat, not at once).
    fn catch_up(&mut self, now: Instant) {
        while let Some(&(i, _, at)) = self.catching_up.front() {
            if at > now {
                break;
            }
            self.catching_up.pop_front();
            self.changed(i, false);
        }
    }

    /// A store stopped: the regions it led elect a leader among their live voters, or fall
    /// silent without a quorum.
    fn elect_all(&mut self, fleet: &Fleet) {
        let live = |s: u64| fleet.is_live(s);
        for i in 0..self.regions.len() {
            if has_live_leader(&self.regions[i], &live) {
                continue;
            }
            let change = elect(&mut self.regions[i], &live);
            if change.is_some() {
                fleet.record(&change);
                self.changed(i, true);
            } else {
                self.frames[i].clear();
            }
        }
    }

    /// Carries out `op` on region `i` as TiKV would; a split asks the cluster for its ids.
    async fn carry_out(&mut self, i: usize, op: &Operator, fleet: &Fleet, client: &Client) {
        let applied = carry_out(&mut self.regions[i], op, &|s: u64| fleet.is_live(s));
        if let Some(v) = applied.violation {
            fleet.violation(v);
        }
        match applied.change {
            Change::None => {}
            Change::Split(keys) => {
                self.split(i, keys, client, Some(fleet)).await;
            }
            change => {
                fleet.record(&change);
                if let Change::Added(peer) = &change {
                    let at = Instant::now() + fleet.catch_up();
                    self.catching_up.push_back((i, peer.id, at));
                }
                self.changed(i, true);
            }
        }
    }
}

impl Share {
    /// Splits region `i` at `keys` as TiKV carries out a split, and reports every half at
    /// once; false when the cluster refused it.
    async fn split(
        &mut self,
        i: usize,
        keys: Vec<Vec<u8>>,
        client: &Client,
        fleet: Option<&Fleet>,
    ) -> bool {
        let made = split(client, &self.regions[i], &keys).await;
        self.split_made(i, keys, made, fleet)
    }

    /// Takes in a split of region `i` at `keys` (`made`, as `split` returned it): the parent
    /// keeps the rest, the new regions join the share, all reported at once.
    fn split_made(
        &mut self,
        i: usize,
        keys: Vec<Vec<u8>>,
        made: anyhow::Result<(Region, Vec<Region>)>,
        fleet: Option<&Fleet>,
    ) -> bool {
        match made {
            Ok((rest, new)) => {
                if let Some(fleet) = fleet {
                    fleet.record(&Change::Split(keys));
                    fleet.split_made(&new);
                }
                self.regions[i] = rest;
                self.changed(i, true);
                for r in new {
                    self.regions.push(r);
                    self.frames.push(Vec::new());
                    self.changed(self.regions.len() - 1, true);
                }
                true
            }
            Err(e) => {
                tracing::warn!(region = self.regions[i].id, "split failed: {e:#}");
                false
            }
        }
    }

    /// The next region in turn (from `next`) that has a leader and is not in `taken`, and the
    /// key just past its start (the smallest key inside it).
    fn next_to_split(&self, next: &mut usize, taken: &[usize]) -> Option<(usize, Vec<u8>)> {
        let n = self.regions.len();
        for _ in 0..n {
            let i = *next % n;
            *next = (i + 1) % n;
            let region = &self.regions[i];
            let key = [region.start_key.as_slice(), &[0]].concat();
            let inside = region.end_key.is_empty() || key < region.end_key;
            if !self.frames[i].is_empty() && inside && !taken.contains(&i) {
                return Some((i, key));
            }
        }
        None
    }

    /// Starts `due` splits, each on a task of its own (a split is acknowledged once it is
    /// durable, which takes far longer than a heartbeat's round trip); a region being split
    /// is not heartbeated until its split is taken in (`take_splits`). Returns how many could
    /// not start (no region left to split).
    fn start_splits(
        &mut self,
        due: usize,
        next: &mut usize,
        client: &Client,
        tasks: &mut SplitTasks,
    ) -> u64 {
        for started in 0..due {
            let Some((i, key)) = self.next_to_split(next, &[]) else {
                return (due - started) as u64;
            };
            self.frames[i].clear();
            let (client, region) = (client.clone(), self.regions[i].clone());
            tasks.spawn(async move {
                let made = split(&client, &region, std::slice::from_ref(&key)).await;
                (i, key, made)
            });
        }
        0
    }

    /// Takes in the splits that are done (all of them, waiting, when `wait`): how many were
    /// made and how many refused. A refused split's region reports again as it was.
    async fn take_splits(
        &mut self,
        tasks: &mut SplitTasks,
        wait: bool,
        fleet: Option<&Fleet>,
    ) -> (u64, u64) {
        let (mut made, mut refused) = (0, 0);
        loop {
            let done = if wait {
                tasks.join_next().await
            } else {
                tasks.try_join_next()
            };
            let Some(done) = done else {
                return (made, refused);
            };
            let Ok((i, key, result)) = done else {
                refused += 1;
                continue;
            };
            if self.split_made(i, vec![key], result, fleet) {
                made += 1;
            } else {
                self.changed(i, false);
                refused += 1;
            }
        }
    }
}

/// Splits on their way: the region, the key, and what the cluster answered.
type SplitTasks = tokio::task::JoinSet<(usize, Vec<u8>, anyhow::Result<(Region, Vec<Region>)>)>;

/// Splits `region` at `keys` (inside it, in order) as TiKV does: new ids from the cluster,
/// each new region takes the range left of its key with the parent's stores and roles, the
/// parent keeps the rest; the split is reported. Returns the parent after the split and the
/// new regions.
async fn split(
    client: &Client,
    region: &Region,
    keys: &[Vec<u8>],
) -> anyhow::Result<(Region, Vec<Region>)> {
    let count = keys.len() as u64;
    let ids = client
        .ask_batch_split(region.clone(), keys.len() as u32)
        .await?;
    anyhow::ensure!(
        ids.len() == keys.len(),
        "{} ids for {} splits",
        ids.len(),
        keys.len()
    );
    let mut rest = region.clone();
    rest.epoch.version += count;
    let mut new = Vec::with_capacity(keys.len());
    for (key, s) in keys.iter().zip(ids) {
        anyhow::ensure!(
            s.peer_ids.len() == region.peers.len(),
            "{} peer ids for {} peers",
            s.peer_ids.len(),
            region.peers.len()
        );
        let peers: Vec<Peer> = region
            .peers
            .iter()
            .zip(&s.peer_ids)
            .map(|(p, id)| Peer {
                id: *id,
                ..p.clone()
            })
            .collect();
        let leader = region
            .peers
            .iter()
            .position(|p| Some(p.id) == region.leader)
            .map(|at| peers[at].id);
        new.push(Region {
            id: s.region_id,
            start_key: std::mem::replace(&mut rest.start_key, key.clone()),
            end_key: key.clone(),
            epoch: rest.epoch,
            peers,
            leader,
        });
    }
    let mut report = new.clone();
    report.push(rest.clone());
    client.report_batch_split(report).await?;
    Ok((rest, new))
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
    let mut encoder = Encoder {
        scratch: rkyv::util::AlignedVec::new(),
        stats: RegionStats {
            approximate_size: 96 << 20,
            approximate_keys: 1_000_000,
            written_bytes: 4096,
            written_keys: 16,
            pending: 0,
        },
    };
    let frames = regions.iter().map(|r| encoder.frame(r, [])).collect();
    let mut share = Share {
        regions,
        frames,
        urgent: Vec::new(),
        catching_up: VecDeque::new(),
        encoder,
    };
    let mut batch = Vec::with_capacity(depth * 200);
    // Which region each frame of the batch is.
    let mut picked: Vec<usize> = Vec::with_capacity(depth);
    let mut stops_seen = 0;
    let (mut splits, mut split_at) = (0u64, 0usize);
    let mut in_flight = SplitTasks::new();
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
        while picked.len() < depth {
            let Some(i) = share.urgent.pop() else { break };
            if !share.frames[i].is_empty() {
                batch.extend_from_slice(&share.frames[i]);
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
                batch.extend_from_slice(&share.frames[i]);
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
    for (sent, req) in requests.iter().cycle().enumerate() {
        if Instant::now() >= deadline {
            break;
        }
        if let Some(rate) = per_sec {
            let due = start + Duration::from_secs_f64(sent as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
        }
        // The channel is bounded and HTTP/2 flow control stands behind it: the sender waits
        // for the server instead of queueing without end.
        if tx.send(req.clone()).await.is_err() {
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

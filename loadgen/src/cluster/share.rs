//! One heartbeat stream's share of the simulated regions: each region's encoded frame, the
//! regions to report at once after a change, the peers still catching up, and the splits
//! this share carries out as TiKV does (ids asked of the cluster, the split reported). Owns
//! the share's regions; the stream loop that sends the frames and the fleet's stores are
//! `cluster`'s.

use std::collections::VecDeque;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use meridian::client::Client;
use meridian::placement::{Operator, Peer, Region, RegionStats, TimeInterval};
use meridian::proto::{self, Request};

use super::carry_out::{carry_out, elect, has_live_leader, Change};
use super::fleet::Fleet;

/// One region in this many writes hot: as in a real cluster, a few regions take most writes.
const HOT_ONE_IN: usize = 100;

/// What a region reports written since its last report. A hot region's report is over PD's
/// least hot rate (1 KiB/s) for any interval up to 17 min, a cold one's under it for any
/// interval of 3 s or more (shorter ones are not measured): which regions are hot does not
/// depend on when each is reported, so neither does the server's hot cache.
fn written(region: &Region) -> (u64, u64) {
    if meridian::placement::owner(region.id, HOT_ONE_IN) == 0 {
        (1 << 20, 1024)
    } else {
        (256, 16)
    }
}

/// The interval every frame is encoded with: a mark no other field of a heartbeat holds,
/// found once in the frame so that each report's own interval is written over it as the frame
/// goes out, without encoding the frame again.
const MARK: TimeInterval = TimeInterval {
    start_s: 0x4d65_7269_6469_616e,
    end_s: 0x496e_7465_7276_616c,
};

/// Now in Unix seconds, as TiKV stamps a report's interval.
pub(super) fn unix_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A region's heartbeat frame, encoded once and kept until the region changes.
struct Encoder {
    scratch: rkyv::util::AlignedVec,
    stats: RegionStats,
}

impl Encoder {
    /// `region`'s heartbeat, reporting the peers `pending` names as still catching up, and
    /// where in it the interval lies (None if the mark is not found: the frame then gives no
    /// interval, and the server takes the time between arrivals).
    fn frame(
        &mut self,
        region: &Region,
        pending: impl IntoIterator<Item = u64>,
    ) -> (Vec<u8>, Option<usize>) {
        let (written_bytes, written_keys) = written(region);
        let stats = RegionStats {
            pending: RegionStats::pending_mask(region, pending),
            written_bytes,
            written_keys,
            ..self.stats
        };
        let marked = self.encode(
            region,
            RegionStats {
                interval: MARK,
                ..stats
            },
        );
        let mut mark = MARK.start_s.to_le_bytes().to_vec();
        mark.extend_from_slice(&MARK.end_s.to_le_bytes());
        match marked
            .windows(mark.len())
            .position(|w| w == mark.as_slice())
        {
            Some(at) => (marked, Some(at)),
            None => (self.encode(region, stats), None),
        }
    }

    fn encode(&mut self, region: &Region, stats: RegionStats) -> Vec<u8> {
        let mut frame = Vec::new();
        let req = Request::RegionHeartbeat {
            region: region.clone(),
            stats,
        };
        match proto::encode(&req, &mut self.scratch, &mut frame) {
            Ok(()) => frame,
            Err(_) => Vec::new(),
        }
    }
}

/// Writes `interval` over the mark at `at` in `frame`.
fn stamp(frame: &mut [u8], at: usize, interval: TimeInterval) {
    if let Some(slot) = frame.get_mut(at..at + 16) {
        slot[..8].copy_from_slice(&interval.start_s.to_le_bytes());
        slot[8..].copy_from_slice(&interval.end_s.to_le_bytes());
    }
}

/// One stream's regions as it heartbeats them: each region's encoded frame (empty while the
/// region cannot report: no live voter quorum to lead it), and the regions to report first.
pub(super) struct Share {
    pub(super) regions: Vec<Region>,
    pub(super) frames: Vec<Vec<u8>>,
    /// Where each frame holds its interval.
    interval_at: Vec<Option<usize>>,
    /// When each region was last reported (Unix seconds, 0 for never: its first report
    /// covers the time since this share started, as TiKV's since its store started).
    reported_s: Vec<u64>,
    started_s: u64,
    /// Regions a change was carried out on, reported in the next batch (TiKV reports a region
    /// at once after a conf change, a split or a leader change).
    pub(super) urgent: Vec<usize>,
    /// New peers catching up: (region, peer, when it will have caught up), in that order.
    catching_up: VecDeque<(usize, u64, Instant)>,
    encoder: Encoder,
}

impl Share {
    /// `regions`, each with its heartbeat encoded once, as a store reports it: sizes and
    /// write rates fixed (a few regions hot), nobody catching up.
    pub(super) fn new(regions: Vec<Region>) -> Share {
        let mut encoder = Encoder {
            scratch: rkyv::util::AlignedVec::new(),
            stats: RegionStats {
                approximate_size: 96 << 20,
                approximate_keys: 1_000_000,
                written_bytes: 0,
                written_keys: 0,
                pending: 0,
                interval: TimeInterval::default(),
            },
        };
        let (frames, interval_at) = regions.iter().map(|r| encoder.frame(r, [])).unzip();
        Share {
            reported_s: vec![0; regions.len()],
            started_s: unix_s(),
            regions,
            frames,
            interval_at,
            urgent: Vec::new(),
            catching_up: VecDeque::new(),
            encoder,
        }
    }

    /// Appends region `i`'s heartbeat to `batch`, its interval stamped as TiKV stamps it:
    /// from the region's last report (or this share's start) to `now_s`.
    pub(super) fn send(&mut self, i: usize, batch: &mut Vec<u8>, now_s: u64) {
        let from = batch.len();
        batch.extend_from_slice(&self.frames[i]);
        if let Some(at) = self.interval_at[i] {
            let start_s = match self.reported_s[i] {
                0 => self.started_s,
                s => s,
            };
            let interval = TimeInterval {
                start_s,
                end_s: now_s.max(start_s),
            };
            stamp(&mut batch[from..], at, interval);
        }
        self.reported_s[i] = now_s;
    }

    pub(super) fn changed(&mut self, i: usize, report_now: bool) {
        let pending = self
            .catching_up
            .iter()
            .filter(|(r, ..)| *r == i)
            .map(|&(_, peer, _)| peer);
        (self.frames[i], self.interval_at[i]) = self.encoder.frame(&self.regions[i], pending);
        if report_now {
            self.urgent.push(i);
        }
    }

    /// The peers that have caught up by `now` are reported so from the next round on (TiKV
    /// reports it with the region's next heartbeat, not at once).
    pub(super) fn catch_up(&mut self, now: Instant) {
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
    pub(super) fn elect_all(&mut self, fleet: &Fleet) {
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
    pub(super) async fn carry_out(
        &mut self,
        i: usize,
        op: &Operator,
        fleet: &Fleet,
        client: &Client,
    ) {
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
    pub(super) async fn split(
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
    pub(super) fn split_made(
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
                    self.interval_at.push(None);
                    self.reported_s.push(0);
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
    pub(super) fn start_splits(
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
    pub(super) async fn take_splits(
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
pub(super) type SplitTasks =
    tokio::task::JoinSet<(usize, Vec<u8>, anyhow::Result<(Region, Vec<Region>)>)>;

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

#[cfg(test)]
mod tests {
    use super::*;
    use meridian::proto::{decode, FRAME_HEADER_LEN};

    /// The interval each heartbeat of `batch` carries.
    fn intervals(mut batch: &[u8]) -> Vec<TimeInterval> {
        let mut seen = Vec::new();
        while batch.len() > FRAME_HEADER_LEN {
            let mut len = [0u8; 4];
            len.copy_from_slice(&batch[..4]);
            let end = FRAME_HEADER_LEN + u32::from_le_bytes(len) as usize;
            match decode::<Request>(&batch[FRAME_HEADER_LEN..end]).expect("a heartbeat") {
                Request::RegionHeartbeat { stats, .. } => seen.push(stats.interval),
                other => panic!("not a heartbeat: {other:?}"),
            }
            batch = &batch[end..];
        }
        seen
    }

    /// A region's heartbeats go out stamped as TiKV stamps them: the first from the share's
    /// start, each next one from the one before, whatever the frame was encoded with.
    #[test]
    fn each_heartbeat_carries_the_interval_since_the_last() {
        let mut share = Share::new(vec![Region::bootstrap(2, 3, 1)]);
        share.started_s = 1_700_000_000;
        let mut batch = Vec::new();
        share.send(0, &mut batch, 1_700_000_060);
        share.send(0, &mut batch, 1_700_000_075);
        let at = |start_s, end_s| TimeInterval { start_s, end_s };
        assert_eq!(
            intervals(&batch),
            vec![
                at(1_700_000_000, 1_700_000_060),
                at(1_700_000_060, 1_700_000_075)
            ]
        );
        // The frame kept for the next round still holds the mark, not a stamp.
        assert_eq!(intervals(&share.frames[0]), vec![MARK]);
    }
}

//! The hot write load: which regions run it, what each leader reports written with every
//! heartbeat (TiKV's `bytes_written`, `keys_written` and `interval`: from the leader's store's
//! last report of the region, or from that store's start, to now, in Unix seconds), PD's hot
//! cache fed those reports as the server's shards feed it, and whether the stores' write flow
//! is as balanced as PD's hot scheduler balances it.
//!
//! Must not: decide a move (the scheduler's), or carry one out (`tikv`'s).

use meridian::placement::schedule::{Cluster, WriteFlow};
use meridian::placement::{RegionStats, TimeInterval};

use super::Sim;
use crate::report::HotFlow;

/// Bytes per key the hot load writes: its keys per second follow its bytes.
const KEY_BYTES: u64 = 1024;

/// The simulated clock's 0 in Unix seconds: the reported intervals read as TiKV's, and one
/// from 0 is not taken for none given (0/0).
const UNIX_START_S: u64 = 1_700_000_000;

impl Sim {
    /// The first `regions` regions (in key order) whose leader is on one of `leaders_on`
    /// write `bytes_per_s` each from now on: a hot key range served by a few stores. The
    /// scheduler may act only once the regions have been hot for its cache-hits threshold
    /// of full report intervals: that is the floor.
    pub(super) fn start_hot_write(&mut self, leaders_on: &[u64], regions: u64, bytes_per_s: u64) {
        let mut picked = 0;
        for i in 0..self.regions.len() {
            if picked >= regions {
                break;
            }
            let r = &mut self.regions[i];
            let led_there = r
                .region
                .leader_peer()
                .is_some_and(|p| leaders_on.contains(&p.store_id));
            if r.gone || !led_there || r.write_bps > 0 {
                continue;
            }
            r.write_bps = bytes_per_s;
            self.hot_regions.push(i);
            picked += 1;
        }
        let threshold = u64::try_from(self.cfg.hot_region_cache_hits_threshold).unwrap_or(0);
        self.floor_s = (threshold * self.scn.timing.region_heartbeat_ms) as f64 / 1000.0;
    }

    /// Region `i`'s leader reports what its peer applied since its store's last report of
    /// the region, or since the store started (TiKV keeps both per store, in memory), with
    /// that interval in whole Unix seconds as TiKV stamps it; PD's hot cache takes it in. A
    /// peer applies every write, as a follower too, so a new leader's first report covers
    /// the whole interval. Simplified: a store that led the region before another did counts
    /// from its start, not from its own last report.
    pub(super) fn report_flow(&mut self, i: usize) {
        let Some(leader) = self.regions[i].region.leader_peer().map(|p| p.store_id) else {
            return;
        };
        let started_ms = self.stores[(leader - 1) as usize].started_ms;
        let r = &mut self.regions[i];
        let from_ms = if r.reported_by == leader && r.reported_ms >= started_ms {
            r.reported_ms
        } else {
            started_ms
        };
        let bytes = r.write_bps * self.now.saturating_sub(from_ms) / 1000;
        (r.reported_ms, r.reported_by) = (self.now, leader);
        let stats = RegionStats {
            written_bytes: bytes,
            written_keys: bytes / KEY_BYTES,
            interval: TimeInterval {
                start_s: UNIX_START_S + from_ms / 1000,
                end_s: UNIX_START_S + self.now / 1000,
            },
            ..RegionStats::default()
        };
        let flow = WriteFlow::reported(&stats, None);
        let c = Cluster {
            cfg: &self.cfg,
            stores: &self.view,
            in_flight: &self.in_flight,
            now_ms: self.now,
        };
        self.hot.observe(&c, &self.regions[i].region, flow);
    }

    /// Region `i` is gone from PD's region map: its flow leaves the stores.
    pub(super) fn forget_flow(&mut self, i: usize) {
        let c = Cluster {
            cfg: &self.cfg,
            stores: &self.view,
            in_flight: &self.in_flight,
            now_ms: self.now,
        };
        self.hot.forget(&c, self.regions[i].region.id);
    }

    /// Each store's write flow (bytes per second) from the hot regions, as leader and as
    /// any peer; the live stores (by index); the hottest region's rate.
    fn flows(&self) -> (Vec<u64>, Vec<u64>, Vec<usize>, u64) {
        let n = self.stores.len();
        let (mut leader, mut peer) = (vec![0u64; n], vec![0u64; n]);
        let mut top = 0;
        for &i in &self.hot_regions {
            let r = &self.regions[i];
            if r.gone {
                continue;
            }
            top = top.max(r.write_bps);
            if let Some(l) = r.region.leader_peer() {
                leader[(l.store_id - 1) as usize] += r.write_bps;
            }
            for p in &r.region.peers {
                peer[(p.store_id - 1) as usize] += r.write_bps;
            }
        }
        let live = (0..n)
            .filter(|&s| {
                let st = &self.stores[s];
                st.alive && st.joined && !st.decommissioned
            })
            .collect();
        (leader, peer, live, top)
    }

    /// Every live store's write flow, as any peer (the bytes written to all its peers, what
    /// TiKV's store heartbeat reports) and as leader, is within the hot scheduler's source
    /// tolerance of the mean, or within one hot region's rate of it: whole regions move, and
    /// a store above the mean by less than one region cannot shed it without the target
    /// ending hotter than it was.
    pub(super) fn hot_balanced(&self) -> bool {
        let (leader, peer, live, top) = self.flows();
        let within = |f: &[u64]| {
            let mean = live.iter().map(|&s| f[s]).sum::<u64>() as f64 / live.len().max(1) as f64;
            let bound = (mean * self.cfg.hot_src_tolerance_ratio).max(mean + top as f64);
            live.iter().all(|&s| f[s] as f64 <= bound)
        };
        within(&peer) && within(&leader)
    }

    /// The hottest live store's write flow over the mean, as any peer and as leader, once a
    /// hot write load runs.
    pub(super) fn hot_flow(&self) -> Option<HotFlow> {
        if self.hot_regions.is_empty() {
            return None;
        }
        let (leader, peer, live, top) = self.flows();
        let over = |f: &[u64]| {
            let mean = live.iter().map(|&s| f[s]).sum::<u64>() as f64 / live.len().max(1) as f64;
            let max = live.iter().map(|&s| f[s]).max().unwrap_or(0) as f64;
            if mean > 0.0 {
                max / mean
            } else {
                0.0
            }
        };
        Some(HotFlow {
            region_bytes_per_s: top,
            max_over_mean: over(&peer),
            max_leader_over_mean: over(&leader),
        })
    }
}

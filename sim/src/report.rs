//! The report of one run, as `loadgen sim --json` writes it. Every field but `wall_s` is a
//! function of the scenario and the seed alone.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub seed: u64,
    pub stores: u64,
    pub regions: u64,
    /// Whether the scenario's predicate held, with no operator started for a patrol period,
    /// before the run's end.
    pub converged: bool,
    /// Simulated seconds from the trigger until then.
    pub converged_after_s: Option<f64>,
    /// The bound the limits allow: peers to place / (stores that may receive them x the add
    /// limit per minute). For a merge: the merges needed / the merges the cap lets run at
    /// once x one merge's least duration, plus what is left of split-merge-interval.
    pub floor_s: f64,
    /// Peers added and promoted (a move is one add with its remove).
    pub moves: u64,
    pub min_moves: u64,
    pub leader_transfers: u64,
    pub operators: u64,
    pub violations: u64,
    /// The first few violations, described.
    pub violation_samples: Vec<String>,
    /// Operators stuck: timed out though every store they name kept serving (`liveness`).
    pub stuck_operators: u64,
    /// The first few, described.
    pub stuck_samples: Vec<String>,
    /// Rolling restart: the longest time a store took to lead nothing after evict-leader.
    pub longest_evict_s: Option<f64>,
    /// Zone loss: peers added while the zone was down.
    pub repairs_during_loss: u64,
    /// Regions left at the end (merges take them away), and merges made.
    pub regions_at_end: u64,
    pub merges: u64,
    /// Where the run stopped.
    pub simulated_s: f64,
    /// A hot write load: how far the hottest store's write flow was above the mean at the end.
    pub hot_flow: Option<HotFlow>,
    /// Peers and leaders per store over time.
    pub series: Series,
    pub wall_s: f64,
}

/// Once a simulated minute: each store's peers and leaders (by store id - 1). A store added
/// during the run appears from the first sample after it; `zones` holds each store's zone
/// (index into the scenario's zones), as of the last sample.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Series {
    pub at_s: Vec<u64>,
    pub peers: Vec<Vec<u64>>,
    pub leaders: Vec<Vec<u64>>,
    pub zones: Vec<u32>,
}

impl Series {
    /// `stores` gives each store's (peers, leaders, zone), in store id order.
    pub fn sample(&mut self, now_ms: u64, stores: impl Iterator<Item = (u64, u64, u32)>) {
        let (mut p, mut l, mut z) = (Vec::new(), Vec::new(), Vec::new());
        for (peers, leaders, zone) in stores {
            p.push(peers);
            l.push(leaders);
            z.push(zone);
        }
        self.at_s.push(now_ms / 1000);
        self.peers.push(p);
        self.leaders.push(l);
        self.zones = z;
    }
}

/// The stores' write flow from the hot regions at the end of a run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct HotFlow {
    /// One hot region's write rate.
    pub region_bytes_per_s: u64,
    /// The hottest store's write flow (the bytes written to all its peers) over the mean.
    pub max_over_mean: f64,
    /// The same for the flow as leader.
    pub max_leader_over_mean: f64,
}

//! What scheduling may do, as PD's `[schedule]` and `[replication]` settings have it: replica
//! count, location labels and isolation, the cluster-wide caps on operators in flight, the
//! per-store rates, the store-state timeouts and the patrol's pace. Data and defaults only.

use crate::placement::operator::OpKind;

#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScheduleConfig {
    /// Voters each region keeps (PD's `max-replicas`).
    pub max_replicas: usize,
    /// The least leader-count gap between two stores that moves a leader; the gap that moves
    /// one is the larger of this and `tolerant_ratio` of the mean.
    pub leader_balance_threshold: u64,
    /// Leader transfers (balance-leader, evict-leader) in flight, cluster-wide.
    pub leader_schedule_limit: usize,
    /// Repairs (missing, down or offline replicas, isolation) in flight, cluster-wide.
    pub replica_schedule_limit: usize,
    /// balance-region moves in flight, cluster-wide.
    pub region_schedule_limit: usize,
    /// Merges in flight, cluster-wide.
    pub merge_schedule_limit: usize,
    /// Hot-region moves in flight, cluster-wide (PD's `hot-region-schedule-limit`).
    pub hot_region_schedule_limit: usize,
    /// Full report intervals a region must stay hot before the stores count its flow and
    /// the hot scheduler moves it (PD's `hot-region-cache-hits-threshold`).
    pub hot_region_cache_hits_threshold: i32,
    /// A store is a hot source when its write byte rate is above this times the mean (PD's
    /// hot scheduler `src-tolerance-ratio`).
    pub hot_src_tolerance_ratio: f64,
    /// A store takes hot flow only while its write byte rate times this is below the mean
    /// (PD's `dst-tolerance-ratio`).
    pub hot_dst_tolerance_ratio: f64,
    /// Of a store's hot peers, as leader and as peer, only this many of the hottest are
    /// candidates for a hot move off it (PD's hot scheduler `max-peer-number`).
    pub hot_max_peer_number: usize,
    /// A region this small (MiB) and with at most `max_merge_region_keys` keys is merged
    /// into a neighbour (PD's `max-merge-region-size`; 0 turns merging off).
    pub max_merge_region_size_mib: u64,
    pub max_merge_region_keys: u64,
    /// No merge within this of a region's split, nor of the scheduler's start (PD's
    /// `split-merge-interval`).
    pub split_merge_interval_ms: u64,
    /// A region merges only into the next one (PD's `enable-one-way-merge`).
    pub enable_one_way_merge: bool,
    /// Peers added to one store per minute (PD's store limit `add-peer`).
    pub store_limit_add_per_min: f64,
    /// Peers removed from one serving store per minute (`remove-peer`); removals from a Down or
    /// Offline store are not charged.
    pub store_limit_remove_per_min: f64,
    /// A pending operator not seen done within this is dropped (and may be decided again).
    pub operator_timeout_ms: u64,
    /// A store silent this long is Down, and its peers are replaced.
    pub max_store_down_time_ms: u64,
    /// A store silent this long is Disconnected: not a target (PD's 20 s).
    pub store_disconnect_ms: u64,
    /// Label keys from the widest failure domain to the narrowest (PD's `location-labels`).
    pub location_labels: Vec<String>,
    /// No two replicas of a region share a value of this label (PD's `isolation-level`); empty
    /// for none.
    pub isolation_level: String,
    /// How much a store's count may exceed another's, as a share of the mean, before balance
    /// moves a region or a leader between them.
    pub tolerant_ratio: f64,
    /// The patrol checks at least this many regions of a shard per tick.
    pub patrol_batch: usize,
    /// Between two patrol ticks.
    pub patrol_interval_ms: u64,
    /// The patrol passes over every region within this.
    pub patrol_period_ms: u64,
    /// A membership change of more than one peer goes through joint consensus
    /// (`ChangePeerV2`), as PD's `enable-joint-consensus` (on by default), where the cluster
    /// version is 5.0 or later; off, or below 5.0, it is made one peer at a time.
    pub enable_joint_consensus: bool,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            max_replicas: 3,
            leader_balance_threshold: 2,
            leader_schedule_limit: 4,
            replica_schedule_limit: 64,
            region_schedule_limit: 2048,
            merge_schedule_limit: 8,
            hot_region_schedule_limit: 4,
            hot_region_cache_hits_threshold: 3,
            hot_src_tolerance_ratio: 1.05,
            hot_dst_tolerance_ratio: 1.05,
            hot_max_peer_number: 1000,
            max_merge_region_size_mib: 54,
            max_merge_region_keys: 540_000,
            split_merge_interval_ms: 60 * 60 * 1000,
            enable_one_way_merge: false,
            store_limit_add_per_min: 15.0,
            store_limit_remove_per_min: 15.0,
            operator_timeout_ms: 10 * 60 * 1000,
            max_store_down_time_ms: 30 * 60 * 1000,
            store_disconnect_ms: 20_000,
            location_labels: Vec::new(),
            isolation_level: String::new(),
            tolerant_ratio: 0.02,
            patrol_batch: 64,
            patrol_interval_ms: 100,
            patrol_period_ms: 10_000,
            enable_joint_consensus: true,
        }
    }
}

impl ScheduleConfig {
    /// The cap on operators of `kind` in flight.
    pub fn cap(&self, kind: OpKind) -> usize {
        match kind {
            OpKind::Leader => self.leader_schedule_limit,
            OpKind::Replica => self.replica_schedule_limit,
            OpKind::Region => self.region_schedule_limit,
            OpKind::Merge => self.merge_schedule_limit,
            OpKind::Hot => self.hot_region_schedule_limit,
            // PD counts admin operators but caps them by no schedule limit.
            OpKind::Admin => usize::MAX,
        }
    }

    /// Regions to check per patrol tick in a shard of `regions`, so that a pass takes at most
    /// `patrol_period_ms`.
    pub fn patrol_batch_for(&self, regions: usize) -> usize {
        let ticks = (self.patrol_period_ms / self.patrol_interval_ms.max(1)).max(1) as usize;
        regions.div_ceil(ticks).max(self.patrol_batch)
    }

    /// The position of the isolation label among the location labels, if one is set.
    pub fn isolation_index(&self) -> Option<usize> {
        self.location_labels
            .iter()
            .position(|l| *l == self.isolation_level)
    }
}

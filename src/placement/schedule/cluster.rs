//! What every decision reads: the configuration, the stores, the operators in flight and the
//! time, and the region as its leader last reported it. Borrowed, never owned: the server's
//! shards and the simulator each hold these their own way and lend them for one call.

use super::budget::InFlight;
use super::config::ScheduleConfig;
use super::view::{Health, StoreLoad, StoreView};
use crate::placement::region::{Peer, PeerRole, Region};

pub struct Cluster<'a> {
    pub cfg: &'a ScheduleConfig,
    pub stores: &'a StoreView,
    pub in_flight: &'a InFlight,
    pub now_ms: u64,
}

impl Cluster<'_> {
    pub fn health(&self, store_id: u64) -> Health {
        self.stores.health(store_id, self.now_ms, self.cfg)
    }

    pub fn store(&self, id: u64) -> Option<&StoreLoad> {
        self.stores.get(id)
    }

    /// Whether a membership change of several peers goes through joint consensus: PD's
    /// builder uses it only when `enable-joint-consensus` is on and the cluster version takes
    /// `ChangePeerV2` (below 5.0 TiKV cannot enter a joint state).
    pub fn use_joint_consensus(&self) -> bool {
        self.cfg.enable_joint_consensus && self.stores.conf_change_v2()
    }

    /// Peers per minute `store` may gain (`add`) or lose.
    pub fn rate(&self, store: u64, add: bool) -> f64 {
        self.stores.rate(store, add, self.cfg)
    }
}

/// One region as its leader reported it.
#[derive(Clone, Copy)]
pub struct RegionInput<'a> {
    pub region: &'a Region,
    /// Peers still catching up (TiKV's `pending_peers`).
    pub pending_peers: &'a [u64],
    pub size_mib: u64,
    /// Its write rates, if the caller's hot cache (`hot_cache`) holds it as hot.
    pub hot: Option<HotStat>,
}

impl<'a> RegionInput<'a> {
    pub fn voters(&self) -> impl Iterator<Item = &'a Peer> {
        self.region
            .peers
            .iter()
            .filter(|p| p.role == PeerRole::Voter)
    }

    pub fn leader(&self) -> Option<&'a Peer> {
        let id = self.region.leader?;
        self.region.peers.iter().find(|p| p.id == id)
    }

    /// A voter (of either configuration, in a joint state) that serves and has caught up.
    pub fn is_healthy(&self, c: &Cluster, p: &Peer) -> bool {
        p.role != PeerRole::Learner
            && c.health(p.store_id).is_serving()
            && !self.pending_peers.contains(&p.id)
    }

    pub fn healthy_voters(&self, c: &Cluster) -> usize {
        self.voters().filter(|p| self.is_healthy(c, p)).count()
    }

    pub fn has_store(&self, store_id: u64) -> bool {
        self.region.peers.iter().any(|p| p.store_id == store_id)
    }
}

/// A hot region's write rates as the caller's hot cache (`hot_cache`) holds them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HotStat {
    pub byte_rate: f64,
    pub key_rate: f64,
    /// PD's hot degree: full intervals in a row at a hot rate, less the cold ones since.
    pub degree: i32,
    /// PD's `max-peer-number`: whether the region is among the `hot_max_peer_number` hottest
    /// its leader's store leads, as the cache last ranked them (`HotCache::rank`); only those
    /// are candidates for a leader move off that store.
    pub top_leader: bool,
    /// The same per peer: bit `i` is set while the region is among the hottest hot peers of
    /// the store of the region's `peers[i]` (as `HotCache::get` was asked about it); only
    /// those are candidates for a peer move off that store.
    pub top_peers: u16,
    /// When the cache last saw its leader change stores (PD's `lastTransferLeaderTime`).
    pub leader_moved_ms: Option<u64>,
    /// When its last hot-region operator ended (done, cancelled or timed out), and which
    /// flow it moved (PD keeps the region in `regionPendings` for a while after).
    pub hot_op_ended: Option<(HotMove, u64)>,
}

impl HotStat {
    /// Whether the region's peer at `i` in its `peers` is among its store's hottest.
    pub fn top_peer(&self, i: usize) -> bool {
        i >= 16 || self.top_peers & (1 << i) != 0
    }
}

/// Which flow a hot-region operator moves, as PD's write resource types: a leader transfer
/// moves the flow as leader (`writeLeader`); an operator that moves a peer, with or without
/// its lead, the flow as peer (`writePeer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HotMove {
    Leader,
    Peer,
}

//! For tests: a cluster that owns what [`Cluster`] borrows (configuration, the stores' view,
//! operators in flight), as the server's shards and the simulator own it, and lends it for
//! one call at a given time, and the plain stores and regions most tests build it from. Must not touch:
//! anything a decision reads beyond those three.

use super::budget::InFlight;
use super::cluster::Cluster;
use super::config::ScheduleConfig;
use super::view::StoreView;
use crate::placement::region::Region;
use crate::placement::test_region::{self, Keys, PeerIds};
use crate::placement::{Store, StoreDetails, StoreMap, StoreState, StoreStats};

pub(crate) struct TestCluster {
    pub cfg: ScheduleConfig,
    pub view: StoreView,
    pub in_flight: InFlight,
}

/// Stores up at `s{id}:1` without labels, each with its first heartbeat (`stats`) at time 0.
pub fn up_stores(stores: impl IntoIterator<Item = (u64, StoreStats)>) -> StoreMap {
    up_stores_at(stores, 0)
}

/// What a test store reports of itself: a version that takes `ChangePeerV2`, as every release
/// since 5.0 does.
pub(crate) fn details() -> std::sync::Arc<StoreDetails> {
    std::sync::Arc::new(StoreDetails {
        version: "8.5.0".into(),
        ..StoreDetails::default()
    })
}

/// [`up_stores`], the first heartbeats at `at_ms`.
fn up_stores_at(stores: impl IntoIterator<Item = (u64, StoreStats)>, at_ms: u64) -> StoreMap {
    let mut map = StoreMap::new();
    for (id, stats) in stores {
        let store = Store {
            id,
            address: format!("s{id}:1"),
            labels: vec![],
            state: StoreState::Up,
            details: details(),
        };
        map.put(store, 0).unwrap();
        map.heartbeat(id, stats, at_ms).unwrap();
    }
    map
}

impl TestCluster {
    /// Stores `ids` up and idle ([`up_stores`]) under the default configuration.
    pub fn up(ids: &[u64]) -> TestCluster {
        let map = up_stores(ids.iter().map(|&id| (id, StoreStats::default())));
        TestCluster::new(&map, ScheduleConfig::default())
    }

    /// Stores `ids` up and idle under the default configuration, heartbeating and seen at
    /// `now_ms`.
    pub fn up_at(ids: &[u64], now_ms: u64) -> TestCluster {
        let map = up_stores_at(ids.iter().map(|&id| (id, StoreStats::default())), now_ms);
        let cfg = ScheduleConfig::default();
        TestCluster {
            view: StoreView::of(&map, &cfg, &StoreView::default(), now_ms),
            cfg,
            in_flight: InFlight::default(),
        }
    }

    /// The stores of `map` as seen at time 0 under `cfg`, with nothing in flight.
    pub fn new(map: &StoreMap, cfg: ScheduleConfig) -> TestCluster {
        TestCluster {
            view: StoreView::of(map, &cfg, &StoreView::default(), 0),
            cfg,
            in_flight: InFlight::default(),
        }
    }

    pub fn at(&self, now_ms: u64) -> Cluster<'_> {
        Cluster {
            cfg: &self.cfg,
            stores: &self.view,
            in_flight: &self.in_flight,
            now_ms,
        }
    }
}

/// Region `id` over `[b'a' + id, b'a' + id + 1)` with voters on `stores` (peer ids
/// `id*10 + store`), led by the first.
pub(crate) fn region(id: u64, stores: &[u64]) -> Region {
    test_region::build(id, stores, PeerIds::Tens, Keys::Letter)
}

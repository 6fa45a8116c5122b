//! For tests: a cluster that owns what [`Cluster`] borrows (configuration, the stores' view,
//! operators in flight), as the server's shards and the simulator own it, and lends it for
//! one call at a given time. Must not touch: anything a decision reads beyond those three.

use super::budget::InFlight;
use super::cluster::Cluster;
use super::config::ScheduleConfig;
use super::view::StoreView;
use crate::placement::StoreMap;

pub(crate) struct TestCluster {
    pub cfg: ScheduleConfig,
    pub view: StoreView,
    pub in_flight: InFlight,
}

impl TestCluster {
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

//! What every core shares for placement: the range index, the stores, the id service, the
//! queues to each core's shard and to the persister, and whether this node serves placement
//! (leader, and everything loaded).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, Notify};

use super::dirty::DirtySet;
use super::messages::{PersistOp, ShardMsg};
use super::resource_groups::ResourceGroups;
use crate::admin::{Metrics, PlacementGauges, StoreCounts};
use crate::clock::WallClock;
use crate::gc::SafePoints;
use crate::global_config::GlobalConfig;
use crate::meta::Keys;
use crate::placement::schedule::Groups;
use crate::placement::{
    BucketsMap, Cluster, ClusterMeta, IdAllocator, InFlight, Limits, RangeIndex, ResolvedTs,
    ScheduleConfig, StoreMap, StoreView,
};

/// Ids per persisted block; a new block is persisted when half of one is left.
pub const ID_BLOCK: u64 = 100_000;

/// The longest a region write waits for a term's reconciliation before it is refused
/// `Unavailable` (the store retries): reading 1M regions from etcd takes about a second.
pub const RECONCILE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Why a region write is refused while the term reconciles its copy.
pub const RECONCILING: &str = "placement is reconciling its synced copy with the store; retry";

pub struct PlacementState {
    pub index: RangeIndex,
    stores: Mutex<StoreMap>,
    /// The stores as scheduling reads them, republished on every store change.
    pub view: ArcSwap<StoreView>,
    /// Operators in flight by kind, across every core's shard.
    pub in_flight: InFlight,
    pub ids: IdService,
    ready: AtomicBool,
    /// False while a term that took over its syncer's copy reconciles it with the store:
    /// routing is served from the copy meanwhile, and region writes wait (`writes_open`).
    reconciled: AtomicBool,
    pub bootstrapped: AtomicBool,
    /// One bounded queue per core's shard.
    pub shards: Vec<mpsc::Sender<ShardMsg>>,
    /// Writes a request waits for (bootstrap, store registration, GC safe points); bounded, so
    /// a stalled persister makes requests wait (and time out) instead of queueing without end.
    pub persist: mpsc::Sender<PersistOp>,
    pub persist_rx: tokio::sync::Mutex<mpsc::Receiver<PersistOp>>,
    /// Regions and stores changed and not yet durable.
    pub dirty: DirtySet,
    pub cfg: ScheduleConfig,
    /// Sizes and counts requests may carry; checked by the handler where they enter.
    pub limits: Limits,
    pub clock: Arc<WallClock>,
    pub keys: Keys,
    /// Serializes bootstrap attempts and store registrations (each checks the cluster version
    /// the one before left).
    pub bootstrap_lock: tokio::sync::Mutex<()>,
    /// GC safe points, loaded with the term. Held across the durable write of an update, so
    /// updates are persisted in the order they were decided and no reader sees a value that
    /// is not durable yet.
    pub gc: tokio::sync::Mutex<SafePoints>,
    /// Each store's min resolved ts and the cluster's (`resolved_ts.rs`).
    pub(super) resolved_ts: Mutex<ResolvedTs>,
    pub cluster_id: u64,
    /// The cluster's record, loaded with the term (`cluster_config.rs`); `None` when not
    /// bootstrapped. Held across the durable write of a change.
    pub(super) cluster_meta: tokio::sync::Mutex<Option<ClusterMeta>>,
    /// The external timestamp as stored (`external_ts.rs`), loaded with the term. Held across
    /// the durable write of a new value.
    pub(super) external_ts: tokio::sync::Mutex<u64>,
    /// The latest buckets of each region (`buckets.rs`), in memory only.
    pub(super) buckets: Mutex<BucketsMap>,
    /// Global config items, revision and recent changes (`global_config.rs`), loaded with the
    /// term; `None` when this node holds no term. Held across the durable write of a change.
    pub(super) global_config: tokio::sync::Mutex<Option<GlobalConfig>>,
    /// Wakes watchers after a change or a term change.
    pub(super) global_config_changed: Notify,
    /// Which certificate owns which store (bind-store-identity), loaded with the term.
    pub bindings: super::store_bindings::StoreBindings,
    /// Placement rules and region label rules (`rules.rs`), loaded with the term; `None` when
    /// this node holds no term. Held across the durable write of a change.
    pub(super) rules: tokio::sync::Mutex<Option<crate::placement_rules::Rules>>,
    /// Evict-leader's stores and per-store limits (`scheduling.rs`), loaded with the term;
    /// `None` when this node holds no term. Held across the durable write of a change.
    pub(super) schedule_settings: tokio::sync::Mutex<Option<crate::placement::schedule::Settings>>,
    /// The region heartbeat streams operators are pushed to (`push.rs`).
    pub pushes: Arc<super::push::Pushes>,
    /// Where this member's copy of the index stands against the leader's (followers).
    pub sync: super::sync_status::SyncStatus,
    /// Resource groups and their token buckets (`resource_groups.rs`), loaded with the term.
    resource_groups: ResourceGroups,
    /// The scatterer's picks per group (ScatterRegion), in memory only, as PD keeps them;
    /// taken by a shard for one region's scatter at a time.
    scatter: Mutex<Groups>,
    metrics: Arc<Metrics>,
}

/// Capacity of each shard's queue; a full queue makes the sender wait (backpressure).
pub const SHARD_QUEUE: usize = 8192;

/// Capacity of the persister's queue of waiting writes. Each is one request waiting for its
/// write, and the persister takes them all in one batch, so this bounds only a stall.
pub const PERSIST_QUEUE: usize = 1024;

impl PlacementState {
    /// The state and each core's shard queue receiver.
    pub fn new(
        cluster_id: u64,
        cores: usize,
        cfg: ScheduleConfig,
        limits: Limits,
        clock: Arc<WallClock>,
        keys: Keys,
        metrics: Arc<Metrics>,
    ) -> (Arc<PlacementState>, Vec<mpsc::Receiver<ShardMsg>>) {
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..cores).map(|_| mpsc::channel(SHARD_QUEUE)).unzip();
        let (persist, persist_rx) = mpsc::channel(PERSIST_QUEUE);
        let resource_groups = ResourceGroups::new(persist.clone());
        let state = PlacementState {
            index: RangeIndex::new(),
            stores: Mutex::new(StoreMap::new()),
            view: ArcSwap::from_pointee(StoreView::default()),
            in_flight: InFlight::default(),
            ids: IdService::default(),
            ready: AtomicBool::new(false),
            reconciled: AtomicBool::new(true),
            bootstrapped: AtomicBool::new(false),
            shards: senders,
            persist,
            persist_rx: tokio::sync::Mutex::new(persist_rx),
            dirty: DirtySet::default(),
            cfg,
            limits,
            clock,
            keys,
            bootstrap_lock: tokio::sync::Mutex::new(()),
            gc: tokio::sync::Mutex::new(SafePoints::default()),
            resolved_ts: Mutex::new(ResolvedTs::default()),
            cluster_id,
            cluster_meta: tokio::sync::Mutex::new(None),
            external_ts: tokio::sync::Mutex::new(0),
            buckets: Mutex::new(BucketsMap::default()),
            global_config: tokio::sync::Mutex::new(None),
            global_config_changed: Notify::new(),
            bindings: Default::default(),
            rules: tokio::sync::Mutex::new(None),
            schedule_settings: tokio::sync::Mutex::new(None),
            pushes: Arc::default(),
            sync: Default::default(),
            resource_groups,
            scatter: Mutex::new(Groups::default()),
            metrics,
        };
        (Arc::new(state), receivers)
    }

    /// The term's resource groups (nothing held outside a term).
    pub fn resource_groups(&self) -> &ResourceGroups {
        &self.resource_groups
    }

    /// The scatterer's picks per group.
    pub fn scatter_groups(&self) -> MutexGuard<'_, Groups> {
        // Each scatter updates the picks in one call that leaves them valid.
        self.scatter.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Whether requests that need a bootstrapped cluster are served right now: the batched
    /// paths go around the one-by-one handler only then, and otherwise let it say why not.
    pub fn serves_bootstrapped(&self) -> bool {
        self.is_ready() && self.bootstrapped.load(Ordering::Acquire)
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Whether this term's index holds what the store holds (always, but while a term that
    /// took over its syncer's copy reconciles it).
    pub fn is_reconciled(&self) -> bool {
        self.reconciled.load(Ordering::Acquire)
    }

    pub fn set_reconciled(&self, done: bool) {
        self.reconciled.store(done, Ordering::Release);
    }

    /// Waits, up to [`RECONCILE_WAIT`], until region writes are open. A heartbeat or split
    /// applied to a copy the store's regions are not in yet would mix two states into one no
    /// leader held (a split's right half moved on, its left half not there: a gap).
    pub async fn writes_open(&self) -> bool {
        let deadline = tokio::time::Instant::now() + RECONCILE_WAIT;
        while !self.is_reconciled() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        true
    }

    /// The shard owning region `id`.
    pub fn shard_of(&self, id: u64) -> &mpsc::Sender<ShardMsg> {
        &self.shards[crate::placement::owner(id, self.shards.len())]
    }

    pub fn stores(&self) -> MutexGuard<'_, StoreMap> {
        // Store edits are single calls on the pure map that leave it valid even if a
        // panic interrupted the caller afterwards.
        self.stores.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This core's counters (the patrol's).
    pub fn core_metrics(&self, core: usize) -> &crate::admin::CoreMetrics {
        self.metrics.core(core)
    }

    /// Publishes the counts the metrics show: regions, stores (with what each reported), and
    /// `backlog` changes not yet persisted.
    pub fn publish_gauges(&self, backlog: usize) {
        let per_store: Vec<StoreCounts> = self
            .stores()
            .iter()
            .map(|s| StoreCounts {
                id: s.store.id,
                regions: s.stats.region_count,
                leaders: s.stats.leader_count,
            })
            .collect();
        self.metrics.set_placement(PlacementGauges {
            regions: self.index.len() as u64,
            stores: per_store.len() as u64,
            persist_backlog: backlog as u64,
            per_store,
        });
    }

    /// Republishes the scheduler's view after a store change, keeping the stores' budgets.
    pub fn publish_stores(&self, stores: &StoreMap) {
        let prev = self.view.load();
        let next = StoreView::of(stores, &self.cfg, &prev, self.clock.now_ms());
        self.view.store(Arc::new(next));
    }

    /// What a scheduling decision reads, at `now_ms`.
    pub fn cluster<'a>(&'a self, view: &'a StoreView, now_ms: u64) -> Cluster<'a> {
        Cluster {
            cfg: &self.cfg,
            stores: view,
            in_flight: &self.in_flight,
            now_ms,
        }
    }
}

/// Ids for the request path: taken from the persisted block without waiting; the persister
/// persists the next block when one runs low.
#[derive(Default)]
pub struct IdService {
    alloc: Mutex<Option<IdAllocator>>,
    /// Every id below this may have been handed out (read on every heartbeat, lock-free).
    below: AtomicU64,
    /// Wakes the persister to persist a block.
    pub want_block: Notify,
    /// Wakes requests waiting for a block.
    pub block_ready: Notify,
}

impl IdService {
    fn lock(&self) -> MutexGuard<'_, Option<IdAllocator>> {
        self.alloc.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An id now, or `None` while the next block is being persisted.
    pub fn try_alloc(&self) -> Option<u64> {
        let mut guard = self.lock();
        let alloc = guard.as_mut()?;
        let id = alloc.alloc();
        if let Some(id) = id {
            self.below.fetch_max(id + 1, Ordering::Release);
        }
        if alloc.remaining() < ID_BLOCK / 2 {
            self.want_block.notify_one();
        }
        id
    }

    /// An id, waiting up to `wait` for a block to be persisted.
    pub async fn alloc(&self, wait: Duration) -> Option<u64> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let ready = self.block_ready.notified();
            if let Some(id) = self.try_alloc() {
                return Some(id);
            }
            if tokio::time::timeout_at(deadline, ready).await.is_err() {
                return None;
            }
        }
    }

    /// Whether `id` may have been handed out; a report naming one that was not is malformed.
    pub fn may_exist(&self, id: u64) -> bool {
        id != 0 && id < self.below.load(Ordering::Acquire)
    }

    /// Starts above `persisted_end` (a new term), or stops handing out ids (`None`).
    pub fn reset(&self, persisted_end: Option<Option<u64>>) {
        let mut guard = self.lock();
        *guard = persisted_end.map(|end| IdAllocator::new(end, ID_BLOCK));
        // A previous leader may have handed out anything below its persisted end.
        let below = persisted_end.flatten().unwrap_or(0);
        self.below.store(below, Ordering::Release);
    }

    /// The end to persist next, if a block is wanted.
    pub fn plan(&self) -> Option<u64> {
        self.lock()
            .as_ref()
            .filter(|a| a.remaining() < ID_BLOCK / 2)
            .map(|a| a.plan_block())
    }

    pub fn install(&self, end: u64) {
        if let Some(a) = self.lock().as_mut() {
            a.install(end);
        }
        self.block_ready.notify_waiters();
    }
}

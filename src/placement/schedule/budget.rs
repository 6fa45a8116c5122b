//! What scheduling may still start: per-store token buckets for adding and removing peers
//! (PD's store limit: 1,000 units of influence per region, 200 for a small one, nothing for an
//! empty one, refilled at the configured rate per minute, holding at most one region's worth or
//! one second's, whichever is larger), each store's operators in flight and done since its
//! last heartbeat (so targets count them), and the cluster-wide count of operators in flight by
//! kind. Shared across cores: atomics, and one small lock per store taken only when an operator
//! starts. Owns no decision of what to schedule.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::config::ScheduleConfig;
use crate::placement::operator::OpKind;

/// A region's influence on a store limit (PD's `influence`).
pub const REGION_INFLUENCE: f64 = 1000.0;
/// A small region's (PD's `smallInfluence`).
pub const SMALL_REGION_INFLUENCE: f64 = 200.0;
/// A region at most this large (MiB) is small (PD's `SmallRegionThreshold`).
pub const SMALL_REGION_MIB: u64 = 20;
/// A region at most this large (MiB) is empty (PD's `EmptyRegionApproximateSize`, which is
/// also what PD records for a region under 1 MiB).
pub const EMPTY_REGION_MIB: u64 = 1;

/// What adding or removing one peer of a region of `size_mib` costs a store limit, as PD's
/// `AdjustStepCost` charges it: a full region's influence above [`SMALL_REGION_MIB`], a small
/// one's above [`EMPTY_REGION_MIB`], and nothing for an empty region (such a step is not
/// limited by the store's rate, only by its store being a target at all).
pub fn influence(size_mib: u64) -> f64 {
    if size_mib > SMALL_REGION_MIB {
        REGION_INFLUENCE
    } else if size_mib > EMPTY_REGION_MIB {
        SMALL_REGION_INFLUENCE
    } else {
        0.0
    }
}

/// The most a bucket holds at `per_min`, in units of influence (PD's `limit.Reset`).
pub fn capacity(per_min: f64) -> f64 {
    let per_sec = per_min / 60.0;
    if per_sec > 1.0 {
        per_sec * REGION_INFLUENCE
    } else {
        REGION_INFLUENCE
    }
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at_ms: u64,
}

impl Bucket {
    fn full(per_min: f64, now_ms: u64) -> Bucket {
        Bucket {
            tokens: capacity(per_min),
            at_ms: now_ms,
        }
    }

    fn refill(&mut self, per_min: f64, now_ms: u64) {
        let elapsed = now_ms.saturating_sub(self.at_ms) as f64;
        self.tokens =
            (self.tokens + elapsed * per_min / 60_000.0 * REGION_INFLUENCE).min(capacity(per_min));
        self.at_ms = self.at_ms.max(now_ms);
    }
}

/// Signed counts of peers or leaders a store gains (+) or loses (-).
#[derive(Debug, Default)]
pub struct Delta {
    pub regions: AtomicI64,
    pub leaders: AtomicI64,
}

impl Delta {
    fn read(&self) -> (i64, i64) {
        (
            self.regions.load(Ordering::Relaxed),
            self.leaders.load(Ordering::Relaxed),
        )
    }

    fn clear(&self) {
        self.regions.store(0, Ordering::Relaxed);
        self.leaders.store(0, Ordering::Relaxed);
    }
}

/// A store's write flow (bytes and keys per second) as the hot regions put it there
/// (`hot_cache`), as its leader and as any peer, and what hot-region operators in flight
/// move to (+) or from (-) it (PD's pending influence).
#[derive(Debug, Default)]
pub struct Flow {
    leader: FlowSide,
    peer: FlowSide,
}

/// One side of a store's flow: as leader, or as any peer.
#[derive(Debug, Default)]
struct FlowSide {
    bytes: AtomicI64,
    keys: AtomicI64,
    pending_bytes: AtomicI64,
}

impl Flow {
    fn side(&self, leader: bool) -> &FlowSide {
        if leader {
            &self.leader
        } else {
            &self.peer
        }
    }

    /// Moves the leader (`leader`) or peer sums by `bytes` and `keys` per second.
    pub fn add(&self, leader: bool, bytes: i64, keys: i64) {
        let side = self.side(leader);
        side.bytes.fetch_add(bytes, Ordering::Relaxed);
        side.keys.fetch_add(keys, Ordering::Relaxed);
    }

    /// Moves what operators in flight bring (+) or take (-), in bytes per second.
    pub fn add_pending(&self, leader: bool, bytes: i64) {
        self.side(leader)
            .pending_bytes
            .fetch_add(bytes, Ordering::Relaxed);
    }

    /// The write byte rate the store's hot regions put on it as leader (or as any peer).
    pub fn bytes(&self, leader: bool) -> i64 {
        self.side(leader).bytes.load(Ordering::Relaxed)
    }

    pub fn keys(&self, leader: bool) -> i64 {
        self.side(leader).keys.load(Ordering::Relaxed)
    }

    /// What operators in flight bring (+) or take (-), in bytes per second.
    pub fn pending_bytes(&self, leader: bool) -> i64 {
        self.side(leader).pending_bytes.load(Ordering::Relaxed)
    }
}

/// One store's limits and what operators do to it.
#[derive(Debug)]
pub struct StoreBudget {
    add: Mutex<Bucket>,
    remove: Mutex<Bucket>,
    /// Operators in flight.
    pub pending: Delta,
    /// Operators done since the store's last heartbeat, whose effect its counts do not show yet.
    pub settled: Delta,
    /// Its write flow, for the hot-write scheduler.
    pub flow: Flow,
}

impl StoreBudget {
    pub fn new(cfg: &ScheduleConfig, now_ms: u64) -> StoreBudget {
        StoreBudget {
            add: Mutex::new(Bucket::full(cfg.store_limit_add_per_min, now_ms)),
            remove: Mutex::new(Bucket::full(cfg.store_limit_remove_per_min, now_ms)),
            pending: Delta::default(),
            settled: Delta::default(),
            flow: Flow::default(),
        }
    }

    fn bucket(&self, add: bool) -> std::sync::MutexGuard<'_, Bucket> {
        // A bucket is two numbers written together; a panic cannot leave it half-written.
        let m = if add { &self.add } else { &self.remove };
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes `cost` from the add (or remove) bucket if it holds that much.
    pub fn take(&self, add: bool, cost: f64, per_min: f64, now_ms: u64) -> bool {
        let mut b = self.bucket(add);
        b.refill(per_min, now_ms);
        if b.tokens >= cost {
            b.tokens -= cost;
            true
        } else {
            false
        }
    }

    /// Gives back what [`take`](Self::take) took for an operator that did not start.
    pub fn refund(&self, add: bool, cost: f64, per_min: f64) {
        let mut b = self.bucket(add);
        b.tokens = (b.tokens + cost).min(capacity(per_min));
    }

    /// Whether `cost` could be taken now.
    pub fn has(&self, add: bool, cost: f64, per_min: f64, now_ms: u64) -> bool {
        let mut b = self.bucket(add);
        b.refill(per_min, now_ms);
        b.tokens >= cost
    }

    /// Peers and leaders this store gains by operators in flight or done since its heartbeat.
    pub fn delta(&self) -> (i64, i64) {
        let (a, b) = self.pending.read();
        let (c, d) = self.settled.read();
        (a + c, b + d)
    }

    /// The store heartbeated: its counts now show what settled before.
    pub fn heartbeat(&self) {
        self.settled.clear();
    }
}

/// Operators in flight by kind, cluster-wide.
#[derive(Debug, Default)]
pub struct InFlight {
    by_kind: [AtomicUsize; OpKind::ALL.len()],
}

impl InFlight {
    pub fn get(&self, kind: OpKind) -> usize {
        self.by_kind[kind.index()].load(Ordering::Acquire)
    }

    /// Counts one more of `kind` if that stays within `cap`.
    pub fn try_start(&self, kind: OpKind, cap: usize) -> bool {
        self.by_kind[kind.index()]
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cap).then_some(n + 1)
            })
            .is_ok()
    }

    pub fn finish(&self, kind: OpKind) {
        let _ = self.by_kind[kind.index()].fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            Some(n.saturating_sub(1))
        });
    }

    /// Forgets everything (a new term: no operator of the last one is tracked).
    pub fn reset(&self) {
        for k in &self.by_kind {
            k.store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_holds_one_region_and_refills_at_the_rate() {
        let cfg = ScheduleConfig::default();
        let b = StoreBudget::new(&cfg, 0);
        let rate = cfg.store_limit_add_per_min;
        assert!(b.take(true, REGION_INFLUENCE, rate, 0));
        assert!(!b.take(true, REGION_INFLUENCE, rate, 0));
        // 15 a minute: one every 4 s.
        assert!(!b.take(true, REGION_INFLUENCE, rate, 3_999));
        assert!(b.take(true, REGION_INFLUENCE, rate, 4_000));
        // Small regions cost a fifth.
        assert!(!b.has(true, SMALL_REGION_INFLUENCE, rate, 4_700));
        assert!(b.has(true, SMALL_REGION_INFLUENCE, rate, 4_800));
        // Idle for an hour: still one region's worth.
        assert!(b.take(true, REGION_INFLUENCE, rate, 3_600_000));
        assert!(!b.take(true, SMALL_REGION_INFLUENCE, rate, 3_600_000));
    }

    /// PD's `AdjustStepCost` on each side of its two thresholds (`regionSize >
    /// SmallRegionThreshold`, then `> EmptyRegionApproximateSize`).
    #[test]
    fn a_step_costs_by_region_size_as_pd_charges_it() {
        for (size, cost) in [
            (0, 0.0),
            (1, 0.0),
            (2, 200.0),
            (19, 200.0),
            (20, 200.0),
            (21, 1000.0),
            (96, 1000.0),
            (u64::MAX, 1000.0),
        ] {
            assert_eq!(influence(size), cost, "{size} MiB");
        }
    }

    #[test]
    fn in_flight_stays_within_its_cap() {
        let f = InFlight::default();
        assert!(f.try_start(OpKind::Leader, 2));
        assert!(f.try_start(OpKind::Leader, 2));
        assert!(!f.try_start(OpKind::Leader, 2));
        f.finish(OpKind::Leader);
        assert!(f.try_start(OpKind::Leader, 2));
        assert_eq!(f.get(OpKind::Replica), 0);
    }
}

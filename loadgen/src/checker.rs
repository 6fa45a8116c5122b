//! The correctness checker. Online: a request sent after another request's reply arrived must
//! get a larger timestamp (linearizability of the oracle), checked against a high-water mark of
//! replies seen so far. Offline: every timestamp recorded by every worker, over all streams and
//! connections, sorted once at the end to count duplicates.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Checker {
    high_water: AtomicU64,
    order_violations: AtomicU64,
}

impl Checker {
    /// What every reply arriving after this call must exceed.
    #[inline]
    pub fn floor(&self) -> u64 {
        self.high_water.load(Ordering::Acquire)
    }

    /// Checks a reply against the floor taken before its request was sent, then raises the mark.
    #[inline]
    pub fn observe(&self, floor: u64, ts: u64) -> bool {
        let ok = ts > floor;
        if !ok {
            self.order_violations.fetch_add(1, Ordering::Relaxed);
        }
        self.high_water.fetch_max(ts, Ordering::AcqRel);
        ok
    }

    pub fn order_violations(&self) -> u64 {
        self.order_violations.load(Ordering::Relaxed)
    }
}

/// Counts values that occur more than once (each extra occurrence is one duplicate).
pub fn count_duplicates(mut all: Vec<u64>) -> u64 {
    all.sort_unstable();
    all.windows(2).filter(|w| w[0] == w[1]).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_violation_is_counted_and_mark_never_drops() {
        let c = Checker::default();
        let f = c.floor();
        assert!(c.observe(f, 10));
        let f = c.floor();
        assert!(!c.observe(f, 10));
        assert!(!c.observe(f, 5));
        assert_eq!(c.floor(), 10);
        assert_eq!(c.order_violations(), 2);
    }

    #[test]
    fn duplicates_across_workers_are_counted() {
        assert_eq!(count_duplicates(vec![3, 1, 2, 3, 3, 9]), 2);
        assert_eq!(count_duplicates(vec![1, 2, 3]), 0);
    }
}

//! The correctness checker. Online: a request sent after another request's reply arrived must
//! get a larger timestamp (linearizability of the oracle), checked against the high-water mark
//! of all replies seen so far. Offline: every timestamp recorded by every worker, over all
//! streams and connections, sorted once at the end to count duplicates.
//!
//! The high-water mark is kept per thread (each thread writes only its own cache line) and the
//! floor is the maximum over the threads' marks: the same value a single shared atomic would
//! hold, without every reply on every thread bouncing one line between the cores.
//!
//! A client that reports each batch as it arrives (`meridian::client::BatchHook`) raises the
//! mark once per batch, to the batch's last timestamp, before any caller of the batch wakes:
//! every timestamp a caller holds is then under the mark already, so its call only checks
//! ([`Checker::check`]). The floor a call compares with is never lower than with a raise per
//! reply (it also covers the batch-mates not yet woken, whose requests were answered before
//! this one was sent), and the other thread's line changes once per batch instead of once per
//! call: that line's traffic was the largest cost of a checked call.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SLOTS: usize = 64;

#[repr(align(128))]
#[derive(Default)]
struct Slot(AtomicU64);

pub struct Checker {
    slots: Box<[Slot]>,
    /// Slots handed to threads so far; `floor` reads only these.
    used: AtomicUsize,
    order_violations: AtomicU64,
}

impl Default for Checker {
    fn default() -> Self {
        Checker {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            used: AtomicUsize::new(0),
            order_violations: AtomicU64::new(0),
        }
    }
}

thread_local! {
    /// This thread's slot index, per checker address (a thread may serve two checkers in tests).
    static SLOT: Cell<(usize, usize)> = const { Cell::new((0, usize::MAX)) };
}

impl Checker {
    fn my_slot(&self) -> (usize, &AtomicU64) {
        let me = self as *const Checker as usize;
        let (owner, index) = SLOT.with(Cell::get);
        let index = if owner == me && index != usize::MAX {
            index
        } else {
            let index = self.used.fetch_add(1, Ordering::AcqRel).min(SLOTS - 1);
            SLOT.with(|s| s.set((me, index)));
            index
        };
        (index, &self.slots[index].0)
    }

    /// What every reply arriving after this call must exceed.
    #[inline]
    pub fn floor(&self) -> u64 {
        let used = self.used.load(Ordering::Acquire).min(SLOTS);
        self.slots[..used]
            .iter()
            .map(|s| s.0.load(Ordering::Acquire))
            .max()
            .unwrap_or(0)
    }

    /// Checks a reply against the floor taken before its request was sent, then raises the mark.
    #[inline]
    pub fn observe(&self, floor: u64, ts: u64) -> bool {
        let ok = self.check(floor, ts);
        self.publish(ts);
        ok
    }

    /// Checks a reply whose mark was raised already (its batch went through [`publish`]).
    ///
    /// [`publish`]: Checker::publish
    #[inline]
    pub fn check(&self, floor: u64, ts: u64) -> bool {
        let ok = ts > floor;
        if !ok {
            self.order_violations.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Raises this thread's mark to `ts`: every call whose floor is read after this sees it.
    #[inline]
    pub fn publish(&self, ts: u64) {
        let (index, slot) = self.my_slot();
        if ts > slot.load(Ordering::Relaxed) {
            if index < SLOTS - 1 {
                // This thread is the slot's only writer: a plain store cannot lose a raise.
                slot.store(ts, Ordering::Release);
            } else {
                // Threads beyond SLOTS share the last slot.
                slot.fetch_max(ts, Ordering::AcqRel);
            }
        }
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
    use std::sync::Arc;

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
    fn a_reply_seen_on_another_thread_raises_the_floor_here() {
        let c = Arc::new(Checker::default());
        let c2 = c.clone();
        std::thread::spawn(move || assert!(c2.observe(0, 100)))
            .join()
            .unwrap();
        assert_eq!(c.floor(), 100);
        assert!(!c.observe(c.floor(), 99));
        assert_eq!(c.order_violations(), 1);
    }

    #[test]
    fn a_published_batch_raises_the_floor_for_every_call_after_it() {
        let c = Arc::new(Checker::default());
        // Another thread's batch 100..=163 arrives; none of its callers has run yet.
        let c2 = c.clone();
        std::thread::spawn(move || c2.publish(163)).join().unwrap();
        let f = c.floor();
        assert_eq!(f, 163);
        // A call started now must get more than the whole batch.
        assert!(!c.check(f, 150));
        assert!(c.check(f, 164));
        // Checking raises nothing: only the batch's arrival does.
        assert_eq!(c.floor(), 163);
        c.publish(120);
        assert_eq!(c.floor(), 163, "a mark never drops");
        assert_eq!(c.order_violations(), 1);
    }

    #[test]
    fn duplicates_across_workers_are_counted() {
        assert_eq!(count_duplicates(vec![3, 1, 2, 3, 3, 9]), 2);
        assert_eq!(count_duplicates(vec![1, 2, 3]), 0);
    }
}

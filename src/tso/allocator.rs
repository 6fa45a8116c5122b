//! The lock-free TSO allocator: one packed `AtomicU64` holding the next timestamp to hand out.
//!
//! A request costs one `fetch_add(count)`; the range it returns is `[first, first + count)`.
//! Because the state is the packed timestamp itself, a logical overflow carries into the physical
//! part by plain addition (invariant T5's carry). A second atomic, the *ceiling*, bounds the state:
//! it is the smaller of the persisted window limit (T2) and `now + max_lead` (T5), and zero while
//! this node must not serve. The control thread moves the physical part with the clock (`tick`)
//! and raises the ceiling after the shell persisted a new limit; it owns no I/O and reads no clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::{Timestamp, LOGICAL_BITS, MAX_COUNT};

/// Keeps the hot atomic on its own cache line so control writes to the ceiling do not bounce it.
#[repr(align(128))]
struct CacheLine<T>(T);

/// A contiguous range of timestamps handed out by one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TsRange {
    pub first: Timestamp,
    pub count: u32,
}

impl TsRange {
    /// The largest timestamp of the range.
    pub fn last(&self) -> Timestamp {
        Timestamp::from_u64(self.first.as_u64() + u64::from(self.count) - 1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// `count` outside `1..=2^18` (T6).
    #[error("count must be within 1..={MAX_COUNT}")]
    InvalidCount,
    /// This node holds no window: not started, not the leader, or lease lost.
    #[error("not serving timestamps")]
    NotServing,
    /// The window or the allowed lead over the clock is used up; retry after the next tick or
    /// renewal. Nothing was handed out.
    #[error("timestamp window exhausted")]
    Exhausted,
}

pub struct Allocator {
    next: CacheLine<AtomicU64>,
    /// Exclusive bound on `next`, packed; 0 while not serving.
    ceiling: CacheLine<AtomicU64>,
    control: Mutex<Control>,
    max_lead_ms: u64,
    /// The highest end of a range handed out, for `allocate`'s check of T1. Touched only in
    /// debug builds: a release build pays nothing for it on the hot path.
    handed_out_end: AtomicU64,
}

/// State only the control operations touch; the mutex serialises them so a `suspend` can never be
/// undone by a concurrent `tick` that read the old limit.
struct Control {
    window_limit_ms: u64,
    now_ms: u64,
    /// Where `begin` started: a new leader may start ahead of its clock (T3) without waiting,
    /// so the lead bound counts from the later of this and the clock.
    start_ms: u64,
}

impl Allocator {
    /// A non-serving allocator; `begin` starts it.
    pub fn new(max_lead_ms: u64) -> Self {
        Allocator {
            next: CacheLine(AtomicU64::new(0)),
            ceiling: CacheLine(AtomicU64::new(0)),
            control: Mutex::new(Control {
                window_limit_ms: 0,
                now_ms: 0,
                start_ms: 0,
            }),
            max_lead_ms,
            handed_out_end: AtomicU64::new(0),
        }
    }

    /// Hands out `count` consecutive timestamps. Any thread may call it; it never blocks.
    #[inline]
    pub fn allocate(&self, count: u32) -> Result<TsRange, AllocError> {
        if count == 0 || count > MAX_COUNT {
            return Err(AllocError::InvalidCount);
        }
        let ceiling = self.ceiling.0.load(Ordering::Acquire);
        if ceiling == 0 {
            return Err(AllocError::NotServing);
        }
        // Read before the `fetch_add`: every range recorded by then was taken by an earlier
        // `fetch_add`, so ours must start at or above its end.
        let handed_out = if cfg!(debug_assertions) {
            self.handed_out_end.load(Ordering::Acquire)
        } else {
            0
        };
        let first = self.next.0.fetch_add(u64::from(count), Ordering::AcqRel);
        if first + u64::from(count) > ceiling {
            // The overshoot is a gap, never a duplicate; callers wait with `can_fit` before
            // retrying so a stalled window does not push the state far ahead.
            return Err(AllocError::Exhausted);
        }
        if cfg!(debug_assertions) {
            // T1: strictly above every range handed out before (`next` only ever grows).
            debug_assert!(
                first >= handed_out,
                "T1: a range starting at {first} handed out after one ending at {handed_out}"
            );
            self.handed_out_end
                .fetch_max(first + u64::from(count), Ordering::AcqRel);
        }
        Ok(TsRange {
            first: Timestamp::from_u64(first),
            count,
        })
    }

    /// Whether a request of `count` would fit under the ceiling right now (no side effect).
    pub fn can_fit(&self, count: u32) -> bool {
        let ceiling = self.ceiling.0.load(Ordering::Acquire);
        ceiling != 0 && self.next.0.load(Ordering::Acquire) + u64::from(count) <= ceiling
    }

    /// Starts serving from `start_ms` under the persisted `window_limit_ms` (T3). The state never
    /// moves backwards, even if `start_ms` is below what was handed out before.
    pub fn begin(&self, start_ms: u64, window_limit_ms: u64, now_ms: u64) {
        let mut control = self.lock();
        self.next
            .0
            .fetch_max(start_ms << LOGICAL_BITS, Ordering::AcqRel);
        control.window_limit_ms = window_limit_ms;
        control.now_ms = now_ms;
        control.start_ms = start_ms;
        self.advance(&control);
    }

    /// Moves the physical part up to the clock and recomputes the lead bound. A clock that went
    /// backwards moves nothing.
    pub fn tick(&self, now_ms: u64) {
        let mut control = self.lock();
        control.now_ms = now_ms;
        self.advance(&control);
    }

    /// Raises the window limit after the shell persisted it. A lower limit is ignored.
    pub fn raise_limit(&self, window_limit_ms: u64) {
        let mut control = self.lock();
        if control.window_limit_ms == 0 {
            // Suspended: only `begin` may start serving again.
            return;
        }
        control.window_limit_ms = control.window_limit_ms.max(window_limit_ms);
        self.advance(&control);
    }

    /// Stops serving at once: every allocation after this returns `NotServing`.
    pub fn suspend(&self) {
        let mut control = self.lock();
        control.window_limit_ms = 0;
        self.ceiling.0.store(0, Ordering::Release);
    }

    /// The next timestamp that would be handed out.
    pub fn current(&self) -> Timestamp {
        Timestamp::from_u64(self.next.0.load(Ordering::Acquire))
    }

    pub fn is_serving(&self) -> bool {
        self.ceiling.0.load(Ordering::Acquire) != 0
    }

    fn advance(&self, control: &Control) {
        if control.window_limit_ms == 0 {
            self.ceiling.0.store(0, Ordering::Release);
            return;
        }
        let physical = control
            .now_ms
            .min(control.window_limit_ms.saturating_sub(1));
        self.next
            .0
            .fetch_max(physical << LOGICAL_BITS, Ordering::AcqRel);
        let lead_bound = control
            .now_ms
            .max(control.start_ms)
            .saturating_add(self.max_lead_ms + 1);
        let ceiling_ms = control.window_limit_ms.min(lead_bound);
        self.ceiling
            .0
            .store(ceiling_ms << LOGICAL_BITS, Ordering::Release);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Control> {
        // The guarded data is three integers, each stored whole, and `advance` needs no relation
        // between them; a panic while holding the lock cannot leave them half-written, so
        // poisoning carries no information.
        self.control.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The T1 check fires on a state that moved back, as a bug in `begin` or `advance` would
    /// move it (debug builds only: a release build does not check).
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "T1")]
    fn a_range_below_one_already_handed_out_is_caught() {
        let a = Allocator::new(1_000);
        a.begin(100, 10_000, 100);
        let first = a.allocate(10).unwrap();
        a.next.0.store(first.first.as_u64(), Ordering::Release);
        let _ = a.allocate(1);
    }
}

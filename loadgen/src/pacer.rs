//! Open-loop pacing for `--rate`: a token bucket per connection. Connection `c` of `n` owns
//! every `n`-th slot of the global schedule; a ticker task on the connection's own thread
//! releases the slots that have come due as semaphore permits each millisecond, and a worker
//! takes a permit (and with it the next slot) before each send. No timer per operation, no
//! thread between the schedule and the send.
//!
//! Latency origin: a tick may come up to a millisecond after a slot through no fault of the
//! server. A send that starts within `TIMER_SLACK` of its slot is timed from the send; a later
//! one (no worker was free: the system fell behind) is timed from its slot, so a stall of the
//! system under test is counted in full rather than hidden (coordinated omission).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

/// How late a tick may fire on its own account.
pub const TIMER_SLACK: Duration = Duration::from_millis(2);

#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// This connection's first slot, relative to the start.
    offset: Duration,
    /// Time between this connection's slots.
    interval: Duration,
}

impl Schedule {
    pub fn new(connection: usize, connections: usize, rate_per_sec: u64) -> Schedule {
        let slot = 1.0 / rate_per_sec.max(1) as f64;
        Schedule {
            offset: Duration::from_secs_f64(slot * connection as f64),
            interval: Duration::from_secs_f64(slot * connections.max(1) as f64),
        }
    }

    /// When this connection's `k`-th operation is due.
    pub fn slot(&self, start: Instant, k: u64) -> Instant {
        start + self.offset + self.interval.mul_f64(k as f64)
    }

    /// How many of this connection's slots are due at `now`.
    pub fn due(&self, start: Instant, now: Instant) -> u64 {
        match now.checked_duration_since(start + self.offset) {
            None => 0,
            Some(elapsed) => (elapsed.as_secs_f64() / self.interval.as_secs_f64()) as u64 + 1,
        }
    }

    /// Where an operation's latency is measured from.
    pub fn latency_origin(scheduled: Instant, sent: Instant) -> Instant {
        if sent.saturating_duration_since(scheduled) > TIMER_SLACK {
            scheduled
        } else {
            sent
        }
    }
}

/// One connection's token bucket.
pub struct Pacer {
    schedule: Schedule,
    start: Instant,
    permits: Semaphore,
    taken: AtomicU64,
}

impl Pacer {
    /// Starts the ticker on the current (the connection's) runtime.
    pub fn start(schedule: Schedule, start: Instant, deadline: Instant) -> Arc<Pacer> {
        let pacer = Arc::new(Pacer {
            schedule,
            start,
            permits: Semaphore::new(0),
            taken: AtomicU64::new(0),
        });
        let p = pacer.clone();
        tokio::spawn(async move {
            let mut released = 0u64;
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                let now = Instant::now().min(deadline);
                let due = p.schedule.due(p.start, now);
                if due > released {
                    p.permits
                        .add_permits((due - released).min(Semaphore::MAX_PERMITS as u64) as usize);
                    released = due;
                }
                if now >= deadline {
                    p.permits.close();
                    return;
                }
            }
        });
        pacer
    }

    /// Waits for the next slot; `None` once the run is over.
    pub async fn next(&self) -> Option<Instant> {
        self.permits.acquire().await.ok()?.forget();
        let k = self.taken.fetch_add(1, Ordering::Relaxed);
        Some(self.schedule.slot(self.start, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_interleave_to_the_global_rate() {
        let start = Instant::now();
        let (a, b) = (Schedule::new(0, 2, 1000), Schedule::new(1, 2, 1000));
        assert_eq!(a.slot(start, 0), start);
        assert_eq!(b.slot(start, 0), start + Duration::from_millis(1));
        assert_eq!(a.slot(start, 1), start + Duration::from_millis(2));
        assert_eq!(a.due(start, start + Duration::from_micros(4_500)), 3);
        assert_eq!(b.due(start, start + Duration::from_micros(500)), 0);
    }

    #[test]
    fn a_stalled_send_is_timed_from_its_slot() {
        let slot = Instant::now();
        let on_time = slot + Duration::from_micros(900);
        assert_eq!(Schedule::latency_origin(slot, on_time), on_time);
        let stalled = slot + Duration::from_millis(50);
        assert_eq!(Schedule::latency_origin(slot, stalled), slot);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn releases_slots_as_they_come_due() {
        let start = Instant::now();
        let pacer = Pacer::start(
            Schedule::new(0, 1, 1000),
            start,
            start + Duration::from_secs(1),
        );
        assert_eq!(pacer.next().await, Some(start));
        assert_eq!(pacer.next().await, Some(start + Duration::from_millis(1)));
    }
}

//! The wall clock the TSO control loop reads, with an offset a test can shift at run time
//! (`[debug] clock_injection = true` exposes it on the admin API) to play a clock that jumps.
//! Its source is the system clock, or (for a simulation) tokio's clock counted from a chosen
//! epoch, which a paused or simulated runtime drives. Owns the reading only; who acts on it is
//! the control loop's business.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where the unshifted reading comes from.
#[derive(Debug, Default)]
enum Source {
    /// `SystemTime::now()`: what every real node reads.
    #[default]
    System,
    /// `epoch_ms` plus the tokio clock's time since `start`: simulated time in a paused
    /// runtime, so a simulation's wall clock moves only as its time does.
    Tokio {
        epoch_ms: u64,
        start: tokio::time::Instant,
    },
}

#[derive(Debug, Default)]
pub struct WallClock {
    source: Source,
    offset_ms: AtomicI64,
}

impl WallClock {
    /// A clock that reads `epoch_ms` now and then moves with tokio's clock (a simulated one in
    /// a paused runtime). Must be called inside the runtime whose clock it follows.
    pub fn tokio(epoch_ms: u64) -> WallClock {
        WallClock {
            source: Source::Tokio {
                epoch_ms,
                start: tokio::time::Instant::now(),
            },
            offset_ms: AtomicI64::new(0),
        }
    }

    /// Milliseconds since the Unix epoch, shifted by the injected offset.
    pub fn now_ms(&self) -> u64 {
        let real = match &self.source {
            Source::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0),
            Source::Tokio { epoch_ms, start } => {
                epoch_ms.saturating_add(start.elapsed().as_millis() as u64) as i64
            }
        };
        real.saturating_add(self.offset_ms.load(Ordering::Relaxed))
            .max(0) as u64
    }

    /// Moves the clock by `delta_ms` (negative: back in time).
    pub fn shift(&self, delta_ms: i64) {
        self.offset_ms.fetch_add(delta_ms, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shift_moves_the_reading() {
        let c = WallClock::default();
        let before = c.now_ms();
        c.shift(-10_000);
        let after = c.now_ms();
        assert!(
            before >= after + 9_900 && before <= after + 10_100,
            "{before} {after}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_tokio_clock_moves_only_with_tokio_time() {
        let c = WallClock::tokio(1_000_000);
        assert_eq!(c.now_ms(), 1_000_000);
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(c.now_ms(), 1_000_000, "real time passing moves nothing");
        tokio::time::sleep(std::time::Duration::from_millis(1_234)).await;
        assert_eq!(c.now_ms(), 1_001_234);
        c.shift(-500);
        assert_eq!(c.now_ms(), 1_000_734);
    }
}

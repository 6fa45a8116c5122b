//! The wall clock the TSO control loop reads, with an offset a test can shift at run time
//! (`[debug] clock_injection = true` exposes it on the admin API) to play a clock that jumps.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Default)]
pub struct WallClock {
    offset_ms: AtomicI64,
}

impl WallClock {
    /// Milliseconds since the Unix epoch, shifted by the injected offset.
    pub fn now_ms(&self) -> u64 {
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
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
}

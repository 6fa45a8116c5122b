//! How many QUIC handshakes one core starts per second: a token bucket, refilled at the
//! configured rate and holding at most one second's worth. A handshake costs the core a
//! signature and a certificate check, on the thread that also answers TSO requests; past the
//! rate a new connection is refused before any cryptography is done (the client backs off and
//! tries again), so a handshake flood takes a bounded share of the core.
//!
//! Pure: the caller passes the time in.

use std::time::Instant;

pub struct HandshakeRate {
    per_sec: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl HandshakeRate {
    /// `per_sec` 0 means no limit.
    pub fn new(per_sec: u32) -> HandshakeRate {
        HandshakeRate {
            per_sec: per_sec as f64,
            tokens: per_sec as f64,
            last: None,
        }
    }

    /// Whether a handshake may start at `now`; takes a token if so.
    pub fn admit(&mut self, now: Instant) -> bool {
        if self.per_sec == 0.0 {
            return true;
        }
        if let Some(last) = self.last {
            let earned = now.saturating_duration_since(last).as_secs_f64() * self.per_sec;
            self.tokens = (self.tokens + earned).min(self.per_sec);
        }
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_burst_of_one_second_then_the_rate() {
        let t0 = Instant::now();
        let mut r = HandshakeRate::new(100);
        assert_eq!((0..150).filter(|_| r.admit(t0)).count(), 100);
        // 50 ms later: five more.
        let t1 = t0 + Duration::from_millis(50);
        assert_eq!((0..20).filter(|_| r.admit(t1)).count(), 5);
        // A long quiet spell earns no more than one second's worth.
        let t2 = t1 + Duration::from_secs(60);
        assert_eq!((0..1000).filter(|_| r.admit(t2)).count(), 100);
    }

    #[test]
    fn zero_is_no_limit() {
        let mut r = HandshakeRate::new(0);
        let t0 = Instant::now();
        assert!((0..100_000).all(|_| r.admit(t0)));
    }

    proptest! {
        /// Over any schedule of attempts, what is admitted never exceeds the burst plus the
        /// rate times the elapsed time.
        #[test]
        fn admitted_never_exceeds_burst_plus_rate(
            rate in 1u32..10_000,
            gaps_us in proptest::collection::vec(0u64..20_000, 1..2_000),
        ) {
            let t0 = Instant::now();
            let mut r = HandshakeRate::new(rate);
            let mut now = t0;
            let mut admitted = 0u64;
            for gap in gaps_us {
                now += Duration::from_micros(gap);
                admitted += u64::from(r.admit(now));
            }
            let bound = rate as f64 * (1.0 + (now - t0).as_secs_f64());
            prop_assert!(admitted as f64 <= bound + 1e-6, "{admitted} > {bound}");
        }
    }
}

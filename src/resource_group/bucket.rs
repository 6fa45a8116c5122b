//! One group's token bucket: request units accrue at the fill rate up to the capacity, and a
//! request is granted by PD's rule (`loan`): in full from what the bucket holds, else what it
//! holds plus a loan against the fill to come, delivered over a trickle time
//! (`trickle_time_ms`) so the client spends it no faster than the fill.
//!
//! The promise, checked by property tests: over any window a limited group is granted at most
//! `rate * window + capacity + debt`, where `debt` is what the bucket owes at the window's end
//! (the loan), and a request never takes the debt past PD's last loan threshold by more than
//! PD's reserve (half a period of fill) unless it was already past it. PD's rule has no
//! ceiling on the debt for a client that asks again and again without waiting: each such
//! request gets the reserve. A change of settings forgives the debt at the next request that
//! finds the bucket at or below zero (PD's `settingChanged`), so the bound holds between
//! changes. An unlimited group is never refused. Pure: time is an argument
//! (any monotonic origin), no I/O.

use std::time::Duration;

use super::limit::Limit;
use super::loan;

/// The longest target period a bucket takes from a client (the client's default is 5 s): a
/// longer one is taken as this, so a client cannot size its own loan (PD takes any).
pub const MAX_TRICKLE_MS: u64 = 60_000;

/// What one request is granted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grant {
    pub tokens: f64,
    /// Over how long the client should spend `tokens` (0: at once).
    pub trickle_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    limit: Limit,
    tokens: f64,
    /// When the bucket last accrued; time before it is never counted twice.
    last: Duration,
    /// The settings changed and the debt has not been forgiven since (PD's `settingChanged`):
    /// the next request that finds the bucket at or below zero starts it from zero.
    changed: bool,
}

/// A request for `required` tokens as a bucket reads it: anything but a finite, non-negative
/// number (a client's bytes decoded as a float) asks for nothing.
fn sane(required: f64) -> f64 {
    if required.is_finite() && required > 0.0 {
        required
    } else {
        0.0
    }
}

impl TokenBucket {
    /// A bucket holding `tokens` (at most its capacity) at `now`.
    pub fn new(limit: Limit, tokens: f64, now: Duration) -> TokenBucket {
        let mut bucket = TokenBucket {
            limit,
            tokens: 0.0,
            last: now,
            changed: false,
        };
        bucket.add(tokens);
        bucket
    }

    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// What the bucket holds as of its last request or change.
    pub fn tokens(&self) -> f64 {
        self.tokens
    }

    /// Adds `delta` (a non-finite one is ignored), keeping at most the capacity.
    fn add(&mut self, delta: f64) {
        if !delta.is_finite() {
            return;
        }
        self.tokens += delta;
        if let Limit::Limited { capacity, .. } = self.limit {
            self.tokens = self.tokens.min(capacity);
        }
    }

    /// Accrues the fill since the last accrual, up to the capacity. A clock that went back
    /// accrues nothing, and the time it went back is not counted again.
    fn accrue(&mut self, now: Duration) {
        let Some(elapsed) = now.checked_sub(self.last) else {
            return;
        };
        self.last = now;
        if let Limit::Limited { rate, capacity } = self.limit {
            if self.tokens < capacity {
                self.tokens = (self.tokens + rate * elapsed.as_secs_f64()).min(capacity);
            }
        }
    }

    /// Brings the tokens up to `now`, so `tokens()` is what the bucket holds then.
    pub fn settle(&mut self, now: Duration) {
        self.accrue(now);
    }

    /// Accrues `idle` more time's fill: the time between a persisted state and its load, when
    /// no node held the bucket.
    pub fn resume(&mut self, idle: Duration) {
        if let Limit::Limited { rate, .. } = self.limit {
            self.add(rate * idle.as_secs_f64());
        }
    }

    /// New settings from `now` on (what accrued before is accrued under the old ones), with
    /// `delta` tokens added, as PD's ModifyResourceGroup patches a bucket.
    pub fn reconfigure(&mut self, limit: Limit, delta: f64, now: Duration) {
        self.accrue(now);
        self.limit = limit;
        self.add(delta);
        self.changed = true;
    }

    /// Grants up to `required` tokens at `now`; `target_period_ms` is how often the client
    /// means to ask.
    pub fn request(&mut self, now: Duration, required: f64, target_period_ms: u64) -> Grant {
        let required = sane(required);
        self.accrue(now);
        if self.changed && self.tokens <= 0.0 {
            self.changed = false;
            self.tokens = 0.0;
        }
        let Limit::Limited { rate, capacity } = self.limit else {
            return Grant {
                tokens: required,
                trickle_ms: 0,
            };
        };
        let (tokens, trickle_ms) = loan::assign(
            &mut self.tokens,
            required,
            rate,
            capacity,
            target_period_ms.min(MAX_TRICKLE_MS),
        );
        Grant { tokens, trickle_ms }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn limited(rate: f64, capacity: f64) -> Limit {
        Limit::Limited { rate, capacity }
    }

    #[test]
    fn grants_what_it_holds_then_lends_as_pd_does() {
        let mut b = TokenBucket::new(limited(100.0, 50.0), 1e9, ms(0));
        assert_eq!(b.tokens(), 50.0, "never more than the capacity");
        assert_eq!(
            b.request(ms(0), 30.0, 5000),
            Grant {
                tokens: 30.0,
                trickle_ms: 0
            }
        );
        // 20 held and 10 lent; trickled over 30 / 100 s.
        assert_eq!(
            b.request(ms(0), 30.0, 5000),
            Grant {
                tokens: 30.0,
                trickle_ms: 300
            }
        );
        assert_eq!(b.tokens(), -10.0);
        // 100 ms at 100/s repays the debt; then one round of 5 s at 100/s, all of it.
        let g = b.request(ms(100), 1000.0, 5000);
        assert!((g.tokens - 500.0).abs() < 1e-9, "{g:?}");
        assert_eq!(g.trickle_ms, 5000);
        // An idle minute fills to the capacity, not beyond.
        b.request(ms(60_000), 0.0, 5000);
        assert_eq!(b.tokens(), 50.0);
        // A target period past the longest is taken as the longest.
        let mut b = TokenBucket::new(limited(10.0, 10.0), 0.0, ms(0));
        let g = b.request(ms(0), 1e9, u64::MAX);
        assert_eq!(g.tokens, 10.0 * MAX_TRICKLE_MS as f64 / 1000.0);
    }

    #[test]
    fn bad_requests_ask_for_nothing_and_clocks_going_back_accrue_nothing() {
        let mut b = TokenBucket::new(limited(1000.0, 1000.0), 0.0, ms(1000));
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -5.0] {
            assert_eq!(b.request(ms(1000), bad, 10).tokens, 0.0);
        }
        b.request(ms(500), 0.0, 10);
        assert_eq!(b.tokens(), 0.0);
        b.request(ms(1001), 0.0, 10);
        assert!((b.tokens() - 1.0).abs() < 1e-9, "{b:?}");
        let mut u = TokenBucket::new(Limit::Unlimited, 0.0, ms(0));
        assert_eq!(u.request(ms(0), f64::NAN, 10).tokens, 0.0);
        assert_eq!(u.request(ms(0), 1e12, 10).tokens, 1e12);
    }

    #[test]
    fn reconfiguring_keeps_the_capacity_and_applies_the_delta() {
        let mut b = TokenBucket::new(limited(10.0, 100.0), 100.0, ms(0));
        b.reconfigure(limited(10.0, 20.0), 0.0, ms(0));
        assert_eq!(b.tokens(), 20.0);
        b.reconfigure(limited(10.0, 20.0), -30.0, ms(0));
        assert_eq!(b.tokens(), -10.0);
        b.reconfigure(limited(10.0, 20.0), f64::NAN, ms(500));
        assert_eq!(b.tokens(), -5.0);
        // As PD, the first request after a change that finds the bucket in debt forgives it,
        // and only that one.
        assert_eq!(b.request(ms(500), 0.0, 10).tokens, 0.0);
        assert_eq!(b.tokens(), 0.0);
        let g = b.request(ms(500), 0.1, 1000);
        assert_eq!((g.tokens, b.tokens()), (0.1, -0.1));
        b.request(ms(500), 1.0, 1000);
        assert!(b.tokens() < -0.1, "{b:?}");
    }

    /// One request: the time since the one before, and what it asks for.
    fn requests() -> impl Strategy<Value = Vec<(u64, f64)>> {
        prop::collection::vec(
            (
                prop_oneof![Just(0u64), 0u64..50, 0u64..5_000],
                prop_oneof![0.0f64..10.0, 0.0f64..10_000.0, Just(f64::NAN), Just(-1.0)],
            ),
            1..200,
        )
    }

    proptest! {
        #[test]
        fn a_limited_group_gets_at_most_rate_times_window_plus_capacity_plus_its_debt(
            rate in 1u64..100_000,
            burst in prop_oneof![Just(0i64), Just(-2i64), 1i64..1_000_000],
            initial in 0.0f64..2_000_000.0,
            period in prop_oneof![Just(5000u64), 1u64..10_000],
            reqs in requests(),
        ) {
            let limit = Limit::of(rate, burst);
            let Limit::Limited { rate, capacity } = limit else {
                return Err(TestCaseError::fail("limited settings gave an unlimited bucket"));
            };
            let period_s = period as f64 / 1000.0;
            let ceiling = super::loan::loan_ceiling(rate, capacity, period_s);
            let reserve = super::loan::reserve(rate, period_s);
            let mut b = TokenBucket::new(limit, initial, ms(0));
            let mut now = 0u64;
            // (when, granted, the debt after it)
            let mut grants = Vec::new();
            for (dt, required) in reqs {
                now += dt;
                let debt_before = (-b.tokens()).max(0.0);
                let g = b.request(ms(now), required, period);
                prop_assert!(g.tokens >= 0.0 && g.tokens.is_finite());
                prop_assert!(g.tokens <= super::sane(required) * (1.0 + 1e-12));
                prop_assert!(g.trickle_ms >= 0 && g.trickle_ms as u64 <= period);
                let debt = (-b.tokens()).max(0.0);
                let tol = 1e-9 * (ceiling + reserve + debt_before) + 1e-6;
                prop_assert!(
                    debt <= debt_before.max(ceiling) + reserve + tol,
                    "debt {} after {} (ceiling {}, reserve {})", debt, debt_before, ceiling, reserve
                );
                grants.push((now, g.tokens, debt));
            }
            // Every window [grants[i].0, grants[j].0], both ends included.
            for i in 0..grants.len() {
                let mut sum = 0.0;
                for (t, tokens, debt) in &grants[i..] {
                    sum += tokens;
                    let window = (t - grants[i].0) as f64 / 1000.0;
                    let bound = rate * window + capacity + debt;
                    prop_assert!(
                        sum <= bound * (1.0 + 1e-9) + 1e-6,
                        "{} granted over {}s, bound {}", sum, window, bound
                    );
                }
            }
        }

        #[test]
        fn an_unlimited_group_is_never_refused(
            rate in any::<u64>(),
            initial in any::<f64>(),
            reqs in prop::collection::vec((0u64..10_000, 0.0f64..1e15), 1..100),
        ) {
            let mut b = TokenBucket::new(Limit::of(rate, -1), initial, ms(0));
            let mut now = 0u64;
            for (dt, required) in reqs {
                now += dt;
                let g = b.request(ms(now), required, 5000);
                prop_assert_eq!(g, Grant { tokens: required, trickle_ms: 0 });
            }
        }
    }
}

//! What a group's token settings (`fill_rate`, `burst_limit`) mean for its bucket, by PD's
//! burstable modes (`token_buckets.go`, `getBurstableMode`): `-1` is unlimited (the fill rate
//! is ignored), `-2` is moderated (PD adds a fixed 10,000 RU/s to the fill rate and caps the
//! bucket at one second of that), a positive value is the bucket's capacity. A fill rate of 0
//! is PD's default refill rate, as PD's bucket sets it on first use.
//!
//! One deliberate difference: PD gives a burst limit of 0 ("rate-controlled") an unbounded
//! capacity that never fills, so its clients live on loans alone. Here its capacity is one
//! second of fill, as a positive burst limit of the fill rate would be. Pure: no I/O, no clock.

/// PD's `UnlimitedRate` (`math.MaxInt32`): the `default` group's fill rate.
pub const UNLIMITED_RATE: u64 = i32::MAX as u64;
/// PD's `UnlimitedBurstLimit`.
pub const UNLIMITED_BURST: i64 = -1;
/// PD's burst limit for a moderated group.
pub const MODERATED_BURST: i64 = -2;
/// PD's `defaultRefillRate`: the fill rate of a group configured with 0.
pub const DEFAULT_REFILL_RATE: u64 = 10_000;
/// PD's `defaultModeratedBurstRate`: what a moderated group may run above its fill rate.
pub const MODERATED_EXTRA_RATE: u64 = 10_000;

/// How a bucket fills and how much it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// Every request is granted in full.
    Unlimited,
    /// `rate` RU per second, at most `capacity` RU held.
    Limited { rate: f64, capacity: f64 },
}

impl Limit {
    /// The limit PD's settings describe.
    pub fn of(fill_rate: u64, burst_limit: i64) -> Limit {
        let rate = if fill_rate == 0 {
            DEFAULT_REFILL_RATE
        } else {
            fill_rate
        };
        match burst_limit {
            UNLIMITED_BURST => Limit::Unlimited,
            MODERATED_BURST => {
                let rate = rate
                    .saturating_add(MODERATED_EXTRA_RATE)
                    .min(UNLIMITED_RATE) as f64;
                Limit::Limited {
                    rate,
                    capacity: rate,
                }
            }
            burst if burst > 0 => Limit::Limited {
                rate: rate as f64,
                capacity: burst as f64,
            },
            // Rate-controlled (0), and the negative values PD treats as limited: one
            // second of fill.
            _ => Limit::Limited {
                rate: rate as f64,
                capacity: rate as f64,
            },
        }
    }

    /// The burst limit a grant tells the client (PD's slot burst limit): the moderated mode's
    /// is its capacity, every other is the setting itself.
    pub fn granted_burst(fill_rate: u64, burst_limit: i64) -> i64 {
        match (burst_limit, Limit::of(fill_rate, burst_limit)) {
            (MODERATED_BURST, Limit::Limited { capacity, .. }) => capacity as i64,
            _ => burst_limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pds_burstable_modes() {
        assert_eq!(Limit::of(UNLIMITED_RATE, -1), Limit::Unlimited);
        assert_eq!(Limit::of(5, -1), Limit::Unlimited);
        assert_eq!(
            Limit::of(100, 500),
            Limit::Limited {
                rate: 100.0,
                capacity: 500.0
            }
        );
        assert_eq!(
            Limit::of(100, -2),
            Limit::Limited {
                rate: 10_100.0,
                capacity: 10_100.0
            }
        );
        assert_eq!(
            Limit::of(UNLIMITED_RATE, -2),
            Limit::Limited {
                rate: UNLIMITED_RATE as f64,
                capacity: UNLIMITED_RATE as f64
            }
        );
        assert_eq!(
            Limit::of(0, 0),
            Limit::Limited {
                rate: 10_000.0,
                capacity: 10_000.0
            }
        );
        assert_eq!(Limit::granted_burst(100, -2), 10_100);
        assert_eq!(Limit::granted_burst(100, 7), 7);
        assert_eq!(Limit::granted_burst(100, -1), -1);
    }
}

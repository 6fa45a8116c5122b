//! Whether a persisted window limit read back from the meta store can be trusted before a new
//! leader starts above it (T3). Nothing else guards that value: a corrupt one would either
//! overflow (`limit + 1`, or `physical << 18` silently dropping high bits so timestamps go
//! backwards) or make every timestamp jump years ahead, for good. Pure arithmetic: the clock
//! reading is passed in.

use super::window::WindowConfig;
use super::LOGICAL_BITS;

/// The largest physical time a timestamp can carry: 46 bits of milliseconds, the year 4199.
pub const MAX_PHYSICAL_MS: u64 = (1 << (64 - LOGICAL_BITS)) - 1;

/// How far ahead of this node's clock a persisted limit may lie: one day (or two windows, if a
/// window is configured longer than that). A limit is written at most `window_ms` ahead of the
/// writer's clock, so this leaves room for a day of skew between members; a limit further out
/// is corrupt, or this node's clock is far wrong, and either way starting above it would move
/// every timestamp by that much.
pub const MAX_LIMIT_AHEAD_MS: u64 = 24 * 60 * 60 * 1000;

/// Why a persisted limit is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error(
        "past the largest physical time a timestamp holds ({MAX_PHYSICAL_MS} ms) once a \
         {window_ms} ms window is added"
    )]
    TooLarge { window_ms: u64 },
    #[error(
        "{ahead_ms} ms ahead of this node's clock ({now_ms} ms), more than the {allowed_ms} ms \
         a limit may lead: the value is corrupt or this clock is far behind"
    )]
    TooFarAhead {
        ahead_ms: u64,
        now_ms: u64,
        allowed_ms: u64,
    },
}

impl WindowConfig {
    /// How far ahead of the clock a persisted limit may be (see [`MAX_LIMIT_AHEAD_MS`]).
    pub fn max_limit_ahead_ms(&self) -> u64 {
        MAX_LIMIT_AHEAD_MS.max(self.window_ms.saturating_mul(2))
    }

    /// `last_limit_ms` if a new term may start above it at `now_ms`: `plan_start` and the
    /// allocator then stay within [`MAX_PHYSICAL_MS`] and no timestamp jumps further ahead
    /// than [`Self::max_limit_ahead_ms`].
    pub fn check_last_limit(&self, last_limit_ms: u64, now_ms: u64) -> Result<u64, LimitError> {
        // The first term starts at last + 1 and persists start + window.
        let fits = last_limit_ms
            .checked_add(1)
            .and_then(|start| start.checked_add(self.window_ms))
            .is_some_and(|limit| limit <= MAX_PHYSICAL_MS);
        if !fits {
            return Err(LimitError::TooLarge {
                window_ms: self.window_ms,
            });
        }
        let allowed_ms = self.max_limit_ahead_ms();
        let ahead_ms = last_limit_ms.saturating_sub(now_ms);
        if ahead_ms > allowed_ms {
            return Err(LimitError::TooFarAhead {
                ahead_ms,
                now_ms,
                allowed_ms,
            });
        }
        Ok(last_limit_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tso::Timestamp;
    use proptest::prelude::*;

    /// 2024-01-01, a realistic clock reading.
    const NOW: u64 = 1_704_067_200_000;

    #[test]
    fn the_bound_is_the_timestamp_layout() {
        assert_eq!(MAX_PHYSICAL_MS, (1 << 46) - 1);
        // The largest physical time survives the shift into a timestamp.
        assert_eq!(
            Timestamp::new(MAX_PHYSICAL_MS, 0).physical_ms(),
            MAX_PHYSICAL_MS
        );
    }

    #[test]
    fn limits_in_the_past_or_a_window_ahead_are_accepted() {
        let cfg = WindowConfig::default();
        for last in [
            0,
            1,
            NOW - 86_400_000,
            NOW,
            NOW + cfg.window_ms,
            NOW + 3_600_000,
        ] {
            assert_eq!(cfg.check_last_limit(last, NOW), Ok(last), "{last}");
        }
        assert_eq!(
            cfg.check_last_limit(NOW + MAX_LIMIT_AHEAD_MS, NOW),
            Ok(NOW + MAX_LIMIT_AHEAD_MS)
        );
    }

    #[test]
    fn corrupt_limits_are_refused_not_overflowed() {
        let cfg = WindowConfig::default();
        for last in [u64::MAX, u64::MAX - 1, 1 << 50, MAX_PHYSICAL_MS] {
            assert_eq!(
                cfg.check_last_limit(last, NOW),
                Err(LimitError::TooLarge {
                    window_ms: cfg.window_ms
                }),
                "{last}"
            );
        }
        assert!(matches!(
            cfg.check_last_limit(NOW + MAX_LIMIT_AHEAD_MS + 1, NOW),
            Err(LimitError::TooFarAhead { ahead_ms, .. }) if ahead_ms == MAX_LIMIT_AHEAD_MS + 1
        ));
        // A clock reading past the layout cannot make a too-large limit pass.
        assert!(cfg.check_last_limit(MAX_PHYSICAL_MS, u64::MAX).is_err());
    }

    #[test]
    fn a_long_window_widens_the_lead_allowed() {
        let cfg = WindowConfig {
            window_ms: 2 * MAX_LIMIT_AHEAD_MS,
            ..WindowConfig::default()
        };
        assert_eq!(cfg.max_limit_ahead_ms(), 4 * MAX_LIMIT_AHEAD_MS);
        assert!(cfg
            .check_last_limit(NOW + 3 * MAX_LIMIT_AHEAD_MS, NOW)
            .is_ok());
    }

    proptest! {
        /// Whatever is stored: either it is refused, or a term started above it stays within
        /// the layout (no shift drops bits) and within the allowed lead of the clock.
        #[test]
        fn an_accepted_limit_starts_a_term_that_fits(
            last in prop_oneof![any::<u64>(), 0u64..(1 << 47), (NOW - 1_000)..(NOW + 2 * MAX_LIMIT_AHEAD_MS)],
            now in prop_oneof![Just(NOW), 0u64..(1 << 46)],
            window_ms in 10u64..100_000,
        ) {
            let cfg = WindowConfig { window_ms, renew_below_ms: window_ms / 2 + 1, max_lead_ms: 1_000 };
            match cfg.check_last_limit(last, now) {
                Ok(l) => {
                    prop_assert_eq!(l, last);
                    let plan = cfg.plan_start(now.min(MAX_PHYSICAL_MS - window_ms), Some(l));
                    prop_assert!(plan.limit_ms <= MAX_PHYSICAL_MS);
                    let ts = Timestamp::new(plan.start_ms, 0);
                    prop_assert_eq!(ts.physical_ms(), plan.start_ms);
                    prop_assert!(last.saturating_sub(now) <= cfg.max_limit_ahead_ms());
                }
                Err(LimitError::TooLarge { .. }) => {
                    prop_assert!(last >= MAX_PHYSICAL_MS - window_ms);
                }
                Err(LimitError::TooFarAhead { ahead_ms, .. }) => {
                    prop_assert_eq!(ahead_ms, last - now);
                    prop_assert!(ahead_ms > cfg.max_limit_ahead_ms());
                }
            }
        }
    }
}

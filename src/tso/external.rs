//! The external timestamp, as PD rules it: a timestamp another system (TiDB's
//! `tidb_external_ts`) sets on the cluster, which readers read at. A new value must not be
//! above a timestamp the oracle just handed out (no one may read at a time the cluster has not
//! reached), the cluster must be bootstrapped, and the value only ever increases, strictly.
//! The checks are made in PD's order, so a request that breaks several gets PD's answer. Pure:
//! the shell hands out the fresh timestamp and persists what passes.

/// Why a new external timestamp is refused; it changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ExternalTsError {
    #[error("the external timestamp is above the timestamp just handed out")]
    AboveTso,
    #[error("the cluster is not bootstrapped")]
    NotBootstrapped,
    #[error("the external timestamp is not above the current one")]
    NotIncreasing,
}

/// Whether `proposed` may replace `current`, given `now`, a timestamp handed out for this
/// check. (Packed timestamps order as their physical then logical parts, PD's
/// `CompareTimestampUint64`.)
pub fn check_external_ts(
    proposed: u64,
    now: u64,
    bootstrapped: bool,
    current: u64,
) -> Result<(), ExternalTsError> {
    if proposed > now {
        return Err(ExternalTsError::AboveTso);
    }
    if !bootstrapped {
        return Err(ExternalTsError::NotBootstrapped);
    }
    if proposed <= current {
        return Err(ExternalTsError::NotIncreasing);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn pds_order_of_refusals() {
        assert_eq!(check_external_ts(10, 20, true, 5), Ok(()));
        assert_eq!(
            check_external_ts(20, 20, true, 5),
            Ok(()),
            "equal to now is allowed"
        );
        assert_eq!(
            check_external_ts(21, 20, false, 30),
            Err(ExternalTsError::AboveTso)
        );
        assert_eq!(
            check_external_ts(10, 20, false, 30),
            Err(ExternalTsError::NotBootstrapped)
        );
        assert_eq!(
            check_external_ts(5, 20, true, 5),
            Err(ExternalTsError::NotIncreasing)
        );
    }

    proptest! {
        /// Whatever is proposed in whatever order, the accepted values increase strictly and
        /// none is above the timestamp it was checked against.
        #[test]
        fn accepted_values_increase_and_stay_below_the_oracle(
            steps in prop::collection::vec((0u64..1000, 0u64..1000), 1..50)
        ) {
            let mut current = 0;
            for (proposed, now) in steps {
                if check_external_ts(proposed, now, true, current).is_ok() {
                    prop_assert!(proposed > current && proposed <= now);
                    current = proposed;
                }
            }
        }
    }
}

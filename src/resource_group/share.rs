//! How a group's fill is split among the clients that ask it at once (PD's
//! `balanceSlotTokens`, `token_buckets.go`): each client first gets an even share (the fill
//! over the number of clients), or its own demand when that is smaller; what is left goes to
//! the clients that want more than the even share, in proportion to how much more, or, when
//! none does, evenly to all. A client whose demand is not known yet gets the even share, so a
//! new client is never starved. Owns the arithmetic of one split; who the clients are and what
//! they hold is the bucket's. Pure.

/// Each client's share of `rate`, in the order of `demands` (each client's RU/s, `None` while
/// not known). The shares add up to `rate`.
pub fn split(rate: f64, demands: &[Option<f64>]) -> Vec<f64> {
    if demands.is_empty() {
        return Vec::new();
    }
    let even = rate / demands.len() as f64;
    let mut shares = Vec::with_capacity(demands.len());
    // How much more than the even share each client wants (0 for none).
    let mut extra = Vec::with_capacity(demands.len());
    for d in demands {
        match d {
            Some(d) if *d > even => {
                extra.push(d - even);
                shares.push(even);
            }
            Some(d) => {
                extra.push(0.0);
                shares.push(d.max(0.0));
            }
            None => {
                extra.push(0.0);
                shares.push(even);
            }
        }
    }
    let left = rate - shares.iter().sum::<f64>();
    let wanted: f64 = extra.iter().sum();
    if left > 0.0 {
        if wanted > 0.0 {
            for (s, e) in shares.iter_mut().zip(&extra) {
                *s += left * (e / wanted);
            }
        } else {
            let each = left / demands.len() as f64;
            for s in &mut shares {
                *s += each;
            }
        }
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Worked by hand from PD's `balanceSlotTokens`.
    #[test]
    fn pds_split_by_hand() {
        // Even share 100; the first wants 250 (150 more), the second 50, the third 150 (50
        // more): 50 is left, split 3:1 between the two that want more.
        assert_eq!(
            split(300.0, &[Some(250.0), Some(50.0), Some(150.0)]),
            vec![137.5, 50.0, 112.5]
        );
        // Nobody wants more than the even share: what is left goes evenly to all.
        assert_eq!(split(300.0, &[Some(10.0), Some(20.0)]), vec![145.0, 155.0]);
        // A client not measured yet gets the even share.
        assert_eq!(
            split(300.0, &[None, Some(0.0), Some(1e9)]),
            vec![100.0, 0.0, 200.0]
        );
        assert!(split(300.0, &[]).is_empty());
    }

    proptest! {
        #[test]
        fn shares_add_up_and_follow_pds_rule(
            rate in 1.0f64..1e7,
            demands in prop::collection::vec(prop::option::of(0.0f64..1e7), 1..32),
        ) {
            let shares = split(rate, &demands);
            prop_assert_eq!(shares.len(), demands.len());
            let total: f64 = shares.iter().sum();
            prop_assert!((total - rate).abs() <= 1e-9 * rate, "{} of {}", total, rate);
            let even = rate / demands.len() as f64;
            let anyone_wants_more = demands.iter().any(|d| d.is_some_and(|d| d > even));
            for (s, d) in shares.iter().zip(&demands) {
                prop_assert!(*s >= 0.0);
                match d {
                    // At least the even share, more only in proportion to its extra demand.
                    Some(d) if *d > even => prop_assert!(*s >= even * (1.0 - 1e-12)),
                    // What it wants, and more only when nobody wants more than the even share.
                    Some(d) if anyone_wants_more => prop_assert!((s - d).abs() <= 1e-9 * rate),
                    Some(d) => prop_assert!(*s >= *d),
                    None if anyone_wants_more => prop_assert!((s - even).abs() <= 1e-9 * rate),
                    None => prop_assert!(*s >= even * (1.0 - 1e-12)),
                }
            }
            // The same demand everywhere: the same share everywhere.
            let same = split(rate, &vec![demands[0]; demands.len()]);
            for s in &same {
                prop_assert!((s - even).abs() <= 1e-9 * rate, "{} vs {}", s, even);
            }
        }
    }
}

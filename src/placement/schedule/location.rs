//! Location rules, as PD has them: the distinct score of a store against a region's other
//! stores (`core.DistinctScore`: 100^(labels - i - 1) for each other store whose location
//! first differs at label i), and the isolation filter (no two replicas share a value of the
//! isolation label). Locations are label values widest first.

/// PD's `replicaBaseScore`.
const BASE: f64 = 100.0;

/// The index of the first label at which two locations differ, if any.
fn first_difference(a: &[String], b: &[String]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// How well `other` is separated from `stores` (higher is better).
pub fn distinct_score<'a>(stores: impl IntoIterator<Item = &'a [String]>, other: &[String]) -> f64 {
    let n = other.len();
    stores
        .into_iter()
        .filter_map(|s| first_difference(s, other))
        .map(|i| BASE.powi((n - i - 1) as i32))
        .sum()
}

/// Whether `other` shares the isolation label's value (and every wider one) with none of
/// `stores`. With no isolation level, always.
pub fn isolated<'a>(
    stores: impl IntoIterator<Item = &'a [String]>,
    other: &[String],
    level: Option<usize>,
) -> bool {
    let Some(level) = level else { return true };
    stores
        .into_iter()
        .all(|s| s.get(..=level) != other.get(..=level))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(z: &str, h: &str) -> Vec<String> {
        vec![z.to_string(), h.to_string()]
    }

    #[test]
    fn scores_and_isolation_follow_pd() {
        let a = loc("z1", "h1");
        let b = loc("z2", "h2");
        let others: Vec<&[String]> = vec![&a, &b];
        // Another zone from both: 100 each.
        assert_eq!(distinct_score(others.clone(), &loc("z3", "h3")), 200.0);
        // Same zone as one, another host: 1 + 100.
        assert_eq!(distinct_score(others.clone(), &loc("z1", "h9")), 101.0);
        // Same host as one: 0 + 100.
        assert_eq!(distinct_score(others.clone(), &loc("z1", "h1")), 100.0);
        assert!(isolated(others.clone(), &loc("z3", "h1"), Some(0)));
        assert!(!isolated(others.clone(), &loc("z1", "h5"), Some(0)));
        assert!(isolated(others.clone(), &loc("z1", "h5"), Some(1)));
        assert!(isolated(others, &loc("z1", "h1"), None));
    }
}

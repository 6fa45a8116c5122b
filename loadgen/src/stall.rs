//! Unavailability as the client saw it: the time during which no worker completed a request.
//! Each worker keeps its own gaps (no success for longer than `THRESHOLD`), without any shared
//! state on the hot path; the run intersects them at the end, since the service was
//! unavailable exactly when every worker was waiting.

use std::time::Duration;

/// Gaps shorter than this are ordinary latency, not unavailability.
pub const THRESHOLD: Duration = Duration::from_millis(10);

/// One worker's gaps, as `[from, to)` nanoseconds since the run's start.
#[derive(Debug, Default, Clone)]
pub struct Gaps {
    last_ns: u64,
    intervals: Vec<(u64, u64)>,
}

impl Gaps {
    /// A worker that starts at `at_ns` (after connecting, say): the time before is not its gap.
    pub fn starting_at(at_ns: u64) -> Gaps {
        Gaps {
            last_ns: at_ns,
            intervals: Vec::new(),
        }
    }

    /// A request completed successfully at `at_ns`.
    pub fn success(&mut self, at_ns: u64) {
        if at_ns.saturating_sub(self.last_ns) >= THRESHOLD.as_nanos() as u64 {
            self.intervals.push((self.last_ns, at_ns));
        }
        self.last_ns = self.last_ns.max(at_ns);
    }

    /// The worker stopped at `end_ns`: a trailing gap counts too.
    pub fn finish(mut self, end_ns: u64) -> Vec<(u64, u64)> {
        self.success(end_ns);
        self.intervals
    }
}

/// Intersection of sorted, disjoint interval lists.
fn intersect(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let from = a[i].0.max(b[j].0);
        let to = a[i].1.min(b[j].1);
        if from < to {
            out.push((from, to));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// The stretches during which no worker succeeded, at least `THRESHOLD` long.
pub fn common(workers: &[Vec<(u64, u64)>]) -> Vec<(u64, u64)> {
    let Some((first, rest)) = workers.split_first() else {
        return Vec::new();
    };
    let mut acc = first.clone();
    for w in rest {
        acc = intersect(&acc, w);
    }
    acc.retain(|(a, b)| b - a >= THRESHOLD.as_nanos() as u64);
    acc
}

/// Total and longest stall in milliseconds.
pub fn summary(stalls: &[(u64, u64)]) -> (f64, f64) {
    let ms = |ns: u64| ns as f64 / 1e6;
    let total = stalls.iter().map(|(a, b)| b - a).sum();
    let longest = stalls.iter().map(|(a, b)| b - a).max().unwrap_or(0);
    (ms(total), ms(longest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    fn gaps(successes: &[u64], end: u64) -> Vec<(u64, u64)> {
        let mut g = Gaps::default();
        for &s in successes {
            g.success(s);
        }
        g.finish(end)
    }

    #[test]
    fn a_stall_counts_only_when_every_worker_waits() {
        // A success every millisecond but for a worker's own stall.
        let busy = |stall: (u64, u64)| -> Vec<u64> {
            (0..=500)
                .filter(|ms| *ms <= stall.0 || *ms >= stall.1)
                .map(|ms| ms * MS)
                .collect()
        };
        // Worker a stalls 100-300 ms, worker b 200-400 ms: nobody succeeds in 200-300 ms.
        let a = gaps(&busy((100, 300)), 500 * MS);
        let b = gaps(&busy((200, 400)), 500 * MS);
        let both = common(&[a.clone(), b]);
        assert_eq!(both, vec![(200 * MS, 300 * MS)]);
        assert_eq!(summary(&both), (100.0, 100.0));
        // One worker alone: its own stall; a trailing silence counts.
        assert_eq!(common(&[a]), vec![(100 * MS, 300 * MS)]);
        assert_eq!(
            common(&[gaps(&busy((0, 0)), 520 * MS)]),
            vec![(500 * MS, 520 * MS)]
        );
        assert_eq!(common(&[]), vec![]);
        // A worker that started late has no gap before its start.
        let mut late = Gaps::starting_at(200 * MS);
        late.success(205 * MS);
        assert_eq!(late.finish(230 * MS), vec![(205 * MS, 230 * MS)]);
    }

    proptest! {
        /// Against a brute force over 1 ms slots: a slot of at least one stall is a slot in
        /// which no worker succeeded.
        #[test]
        fn stalls_are_the_slots_nobody_succeeded_in(
            workers in proptest::collection::vec(
                proptest::collection::btree_set(0u64..400, 0..40), 1..5),
        ) {
            let end = 400 * MS;
            let lists: Vec<Vec<(u64, u64)>> = workers
                .iter()
                .map(|w| gaps(&w.iter().map(|s| s * MS).collect::<Vec<_>>(), end))
                .collect();
            let stalls = common(&lists);
            for slot in 0..400u64 {
                let (a, b) = (slot * MS, slot * MS + MS);
                let inside = stalls.iter().any(|&(f, t)| f <= a && b <= t);
                if inside {
                    // Nobody succeeded strictly inside the slot.
                    for w in &workers {
                        prop_assert!(!w.iter().any(|&s| s * MS > a && s * MS < b));
                    }
                }
            }
            // And every stretch of >= 10 empty slots with no success by anyone is covered.
            let mut all: Vec<u64> = workers.iter().flatten().copied().collect();
            all.push(0);
            all.push(400);
            all.sort_unstable();
            for w in all.windows(2) {
                if w[1] - w[0] >= 10 {
                    let (a, b) = (w[0] * MS, w[1] * MS);
                    prop_assert!(
                        stalls.iter().any(|&(f, t)| f <= a && b <= t),
                        "{a}-{b} not in {stalls:?}"
                    );
                }
            }
        }
    }
}

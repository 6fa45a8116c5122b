//! Leader election of the operator's replicas on a `coordination.k8s.io` Lease, the decision
//! half: from the Lease as read and the time, whether to take it, renew it or follow its
//! holder. The shell writes with the Lease's resourceVersion, so two replicas that both decide
//! to take it cannot both succeed.

/// The Lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub holder: Option<String>,
    /// Last renewal, in Unix milliseconds.
    pub renewed_ms: i64,
    pub duration_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No Lease yet, or it expired or was released: take it (a new holder).
    Acquire,
    /// This replica holds it: renew.
    Renew,
    /// Another replica holds it: do nothing until it expires.
    Follow { holder: String, expires_in_ms: i64 },
}

pub fn decide(lease: Option<&Observed>, me: &str, now_ms: i64) -> Step {
    let Some(l) = lease else {
        return Step::Acquire;
    };
    match l.holder.as_deref() {
        Some(h) if h == me => Step::Renew,
        None | Some("") => Step::Acquire,
        Some(h) => {
            let expires_in_ms = l.renewed_ms + l.duration_ms - now_ms;
            if expires_in_ms <= 0 {
                Step::Acquire
            } else {
                Step::Follow {
                    holder: h.to_string(),
                    expires_in_ms,
                }
            }
        }
    }
}

/// Whether a holder whose last successful renewal was at `renewed_ms` must stop acting now:
/// it stops a third of the duration before others may take over, so a slow step cannot overlap
/// the next holder's first.
pub fn must_stop(renewed_ms: i64, duration_ms: i64, now_ms: i64) -> bool {
    now_ms >= renewed_ms + duration_ms - duration_ms / 3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, renewed_ms: i64) -> Observed {
        Observed {
            holder: holder.map(str::to_string),
            renewed_ms,
            duration_ms: 15_000,
        }
    }

    #[test]
    fn table() {
        let cases = [
            ("no lease", None, Step::Acquire),
            ("mine", Some(lease(Some("a"), 1_000)), Step::Renew),
            (
                "mine even if expired (renewing is how it stays mine)",
                Some(lease(Some("a"), -100_000)),
                Step::Renew,
            ),
            ("released", Some(lease(None, 9_000)), Step::Acquire),
            ("empty holder", Some(lease(Some(""), 9_000)), Step::Acquire),
            (
                "held by b",
                Some(lease(Some("b"), 5_000)),
                Step::Follow {
                    holder: "b".into(),
                    expires_in_ms: 10_000,
                },
            ),
            ("b expired", Some(lease(Some("b"), -5_000)), Step::Acquire),
            (
                "b expires now",
                Some(lease(Some("b"), -10_000)),
                Step::Acquire,
            ),
        ];
        for (name, l, want) in cases {
            assert_eq!(decide(l.as_ref(), "a", 10_000), want, "{name}");
        }
    }

    #[test]
    fn a_holder_stops_before_anyone_may_take_over() {
        assert!(!must_stop(0, 15_000, 9_999));
        assert!(must_stop(0, 15_000, 10_000));
        // Others take over at 15 000; the holder stopped 5 s earlier.
        assert_eq!(
            decide(Some(&lease(Some("b"), 0)), "a", 15_000),
            Step::Acquire
        );
    }
}

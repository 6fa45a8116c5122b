//! How long this node can prove it still holds its etcd lease (invariant T4).
//!
//! A keepalive acknowledged with `ttl` proves the lease alive until `sent + ttl`, where `sent`
//! is when the keepalive was *sent*: etcd may have renewed it any time after that, and timing
//! from the acknowledgement would credit the round trip twice. A safety margin covers clock
//! rate drift between this node and etcd. Pure: times are milliseconds of a monotonic clock
//! the shell passes in.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseProof {
    margin_ms: u64,
    /// Until when (exclusive) the lease is proven held; `None` before the first proof.
    valid_until_ms: Option<u64>,
}

impl LeaseProof {
    pub fn new(margin_ms: u64) -> Self {
        LeaseProof {
            margin_ms,
            valid_until_ms: None,
        }
    }

    /// A grant or keepalive sent at `sent_ms` came back with `ttl_ms` left. An acknowledgement
    /// of an older keepalive never shortens what a newer one proved.
    pub fn acknowledged(&mut self, sent_ms: u64, ttl_ms: u64) {
        let until = (sent_ms + ttl_ms).saturating_sub(self.margin_ms);
        self.valid_until_ms = Some(self.valid_until_ms.map_or(until, |u| u.max(until)));
    }

    /// Whether the lease is provably held at `now_ms`.
    pub fn holds(&self, now_ms: u64) -> bool {
        self.valid_until_ms.is_some_and(|until| now_ms < until)
    }

    /// Forget every proof (lease revoked, or resigned).
    pub fn revoke(&mut self) {
        self.valid_until_ms = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn timed_from_the_send_minus_the_margin() {
        let mut p = LeaseProof::new(500);
        assert!(!p.holds(0));
        p.acknowledged(1_000, 3_000);
        assert!(p.holds(3_499));
        assert!(!p.holds(3_500));
        p.revoke();
        assert!(!p.holds(1_001));
    }

    proptest! {
        /// Whatever order acknowledgements arrive in, the lease is never held past the newest
        /// send plus its ttl minus the margin, and never less than that.
        #[test]
        fn never_beyond_the_latest_proof(acks in proptest::collection::vec((0u64..100_000, 1u64..10_000), 1..20),
                                         margin in 0u64..1_000, probe in 0u64..120_000) {
            let mut p = LeaseProof::new(margin);
            for &(sent, ttl) in &acks {
                p.acknowledged(sent, ttl);
            }
            let best = acks.iter().map(|&(s, t)| (s + t).saturating_sub(margin)).max().unwrap();
            prop_assert_eq!(p.holds(probe), probe < best);
        }
    }
}

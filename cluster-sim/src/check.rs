//! The promises checked while a seed runs, as a pure recorder of observations: timestamps are
//! strictly increasing across members and terms (a request that starts after another ended
//! gets a larger one), no timestamp is handed out at or above the limit persisted in etcd at
//! that moment (T2), no id is handed out twice by any members, at most one member serves TSO
//! at any instant of simulated time, a leader serves within the liveness bound once faults
//! stop, and no store registration or split a member acknowledged is missing from a leader
//! that answers for it later. Owns the verdicts only; the driver and the clients decide when
//! to observe.

use std::collections::BTreeMap;

/// What the checks have seen, and every violation found.
#[derive(Debug, Default)]
pub struct Checker {
    last: Option<(u64, String, u64)>,
    pub handed_out: u64,
    pub violations: Vec<String>,
    /// When the nemesis stopped, and when a member first served after that.
    quiet_at: Option<u64>,
    served_after_quiet: Option<u64>,
    /// The members serving at once after the last step, if more than one.
    overlap: Vec<String>,
    /// Every id handed out: who handed it out, and when.
    ids: BTreeMap<u64, (String, u64)>,
    pub ids_handed_out: u64,
    /// Every store whose registration a member acknowledged: who acknowledged it, and when.
    stores: BTreeMap<u64, (String, u64)>,
    /// Every region a member acknowledged a split for: the highest epoch version
    /// acknowledged, who acknowledged it, and when.
    regions: BTreeMap<u64, (u64, String, u64)>,
    /// Acknowledged registrations and splits, and reads of them checked since.
    pub placement_acknowledged: u64,
    pub placement_reads: u64,
}

impl Checker {
    /// A timestamp `ts` that `member` handed out at `at_ms`, with the members (other than
    /// it) whose allocators serve at that same instant.
    pub fn handed_out(&mut self, at_ms: u64, member: &str, ts: u64, others_serving: &[String]) {
        self.handed_out += 1;
        if let Some((prev_at, prev_member, prev)) = &self.last {
            if ts <= *prev {
                self.violations.push(format!(
                    "at {at_ms} ms {member} handed out {ts}, not above {prev} from {prev_member} at {prev_at} ms"
                ));
            }
        }
        if !others_serving.is_empty() {
            self.violations.push(format!(
                "at {at_ms} ms {member} handed out a timestamp while {} also served",
                others_serving.join(",")
            ));
        }
        if self.last.as_ref().is_none_or(|(_, _, prev)| ts > *prev) {
            self.last = Some((at_ms, member.to_string(), ts));
        }
        if let Some(quiet) = self.quiet_at {
            if at_ms >= quiet && self.served_after_quiet.is_none() {
                self.served_after_quiet = Some(at_ms);
            }
        }
    }

    /// T2: a timestamp whose physical part is `physical_ms`, handed out by `member` at
    /// `at_ms`, when etcd held `persisted_limit_ms` (`None`: no limit persisted at all). The
    /// allocator's ceiling is exclusive, so the physical part must lie below the limit.
    pub fn within_limit(
        &mut self,
        at_ms: u64,
        member: &str,
        physical_ms: u64,
        persisted_limit_ms: Option<u64>,
    ) {
        match persisted_limit_ms {
            Some(limit) if physical_ms < limit => {}
            Some(limit) => self.violations.push(format!(
                "at {at_ms} ms {member} handed out physical {physical_ms} ms, not below the persisted limit {limit} ms"
            )),
            None => self.violations.push(format!(
                "at {at_ms} ms {member} handed out physical {physical_ms} ms with no limit persisted"
            )),
        }
    }

    /// An id `member` handed out at `at_ms`: no member may ever hand it out again.
    pub fn id(&mut self, at_ms: u64, member: &str, id: u64) {
        self.ids_handed_out += 1;
        if let Some((first_member, first_at)) = self.ids.get(&id) {
            self.violations.push(format!(
                "at {at_ms} ms {member} handed out id {id}, already handed out by {first_member} at {first_at} ms"
            ));
        } else {
            self.ids.insert(id, (member.to_string(), at_ms));
        }
    }

    /// `member` acknowledged at `at_ms` that store `id` is registered.
    pub fn store_acknowledged(&mut self, at_ms: u64, member: &str, id: u64) {
        self.placement_acknowledged += 1;
        self.stores
            .entry(id)
            .or_insert_with(|| (member.to_string(), at_ms));
    }

    /// `member` acknowledged at `at_ms` a split (or the bootstrap) that left region `id` at
    /// epoch version `version`.
    pub fn region_acknowledged(&mut self, at_ms: u64, member: &str, id: u64, version: u64) {
        self.placement_acknowledged += 1;
        let known = self.regions.entry(id).or_insert((0, String::new(), 0));
        if version > known.0 {
            *known = (version, member.to_string(), at_ms);
        }
    }

    /// The store ids acknowledged so far, in id order.
    pub fn acknowledged_stores(&self) -> Vec<u64> {
        self.stores.keys().copied().collect()
    }

    /// The region ids acknowledged so far, in id order.
    pub fn acknowledged_regions(&self) -> Vec<u64> {
        self.regions.keys().copied().collect()
    }

    /// `member`, answering as leader at `at_ms`, has store `id` (`found`) or not: an
    /// acknowledged registration must never be missing.
    pub fn store_read(&mut self, at_ms: u64, member: &str, id: u64, found: bool) {
        let Some((by, when)) = self.stores.get(&id) else {
            return;
        };
        self.placement_reads += 1;
        if !found {
            self.violations.push(format!(
                "at {at_ms} ms {member} has no store {id}, whose registration {by} acknowledged at {when} ms"
            ));
        }
    }

    /// `member`, answering as leader at `at_ms`, has region `id` at epoch version `found`
    /// (`None`: not at all): an acknowledged split must never be missing or undone.
    pub fn region_read(&mut self, at_ms: u64, member: &str, id: u64, found: Option<u64>) {
        let Some((version, by, when)) = self.regions.get(&id) else {
            return;
        };
        self.placement_reads += 1;
        match found {
            Some(v) if v >= *version => {}
            Some(v) => self.violations.push(format!(
                "at {at_ms} ms {member} has region {id} at version {v}, below version {version} that {by} acknowledged at {when} ms"
            )),
            None => self.violations.push(format!(
                "at {at_ms} ms {member} has no region {id}, whose split {by} acknowledged at {when} ms"
            )),
        }
    }

    /// The members whose allocators serve at `at_ms` (checked after every step).
    pub fn serving(&mut self, at_ms: u64, serving: &[String]) {
        // One violation per overlap, when it starts (not one per millisecond it lasts).
        let overlap = if serving.len() > 1 {
            serving.to_vec()
        } else {
            Vec::new()
        };
        if overlap == self.overlap {
            return;
        }
        self.overlap = overlap;
        if serving.len() > 1 {
            self.violations.push(format!(
                "at {at_ms} ms {} members served at once: {}",
                serving.len(),
                serving.join(",")
            ));
        }
    }

    /// The nemesis stopped at `at_ms`: every fault repaired, every member up.
    pub fn quiet(&mut self, at_ms: u64) {
        self.quiet_at = Some(at_ms);
    }

    /// When a member first served after the faults stopped, if one has.
    pub fn served_after_quiet(&self) -> Option<u64> {
        self.served_after_quiet
    }

    /// At the end of a seed: a leader must have served within `bound_ms` of the quiet.
    pub fn finish(&mut self, bound_ms: u64) {
        let Some(quiet) = self.quiet_at else {
            return;
        };
        match self.served_after_quiet {
            Some(at) if at <= quiet + bound_ms => {}
            Some(at) => self.violations.push(format!(
                "liveness: faults stopped at {quiet} ms, the first timestamp came at {at} ms (bound {bound_ms} ms)"
            )),
            None => self.violations.push(format!(
                "liveness: faults stopped at {quiet} ms and no member served since (bound {bound_ms} ms)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timestamp_not_above_the_last_is_a_violation() {
        let mut c = Checker::default();
        c.handed_out(1, "m1", 10, &[]);
        c.handed_out(2, "m2", 11, &[]);
        assert!(c.violations.is_empty());
        c.handed_out(3, "m3", 11, &[]);
        assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
    }

    #[test]
    fn two_serving_members_are_a_violation() {
        let mut c = Checker::default();
        c.serving(5, &["m1".into()]);
        assert!(c.violations.is_empty());
        c.serving(6, &["m1".into(), "m2".into()]);
        c.serving(7, &["m1".into(), "m2".into()]);
        c.handed_out(7, "m1", 1, &["m2".into()]);
        assert_eq!(c.violations.len(), 2, "one per overlap: {:?}", c.violations);
        c.serving(8, &["m2".into()]);
        c.serving(9, &["m1".into(), "m2".into()]);
        assert_eq!(c.violations.len(), 3, "a new overlap: {:?}", c.violations);
    }

    #[test]
    fn a_timestamp_at_or_above_the_persisted_limit_is_a_violation() {
        let mut c = Checker::default();
        c.within_limit(1, "m1", 999, Some(1_000));
        assert!(c.violations.is_empty());
        c.within_limit(2, "m1", 1_000, Some(1_000));
        c.within_limit(3, "m1", 5, None);
        assert_eq!(c.violations.len(), 2, "{:?}", c.violations);
    }

    #[test]
    fn an_id_handed_out_twice_is_a_violation() {
        let mut c = Checker::default();
        c.id(1, "m1", 7);
        c.id(2, "m2", 8);
        assert!(c.violations.is_empty());
        c.id(3, "m2", 7);
        assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
        assert!(c.violations[0].contains("already handed out by m1"));
    }

    #[test]
    fn an_acknowledged_store_or_split_missing_later_is_a_violation() {
        let mut c = Checker::default();
        c.store_read(1, "m1", 9, false);
        c.region_read(1, "m1", 9, None);
        assert!(
            c.violations.is_empty(),
            "never acknowledged: {:?}",
            c.violations
        );
        c.store_acknowledged(2, "m1", 4);
        c.region_acknowledged(2, "m1", 5, 2);
        c.region_acknowledged(3, "m1", 5, 3);
        c.region_acknowledged(3, "m1", 6, 3);
        c.store_read(4, "m2", 4, true);
        c.region_read(4, "m2", 5, Some(3));
        c.region_read(4, "m2", 6, Some(4));
        assert!(c.violations.is_empty(), "{:?}", c.violations);
        assert_eq!(c.acknowledged_stores(), vec![4]);
        assert_eq!(c.acknowledged_regions(), vec![5, 6]);
        c.store_read(5, "m2", 4, false);
        c.region_read(5, "m2", 5, Some(2));
        c.region_read(5, "m2", 6, None);
        assert_eq!(c.violations.len(), 3, "{:?}", c.violations);
        assert!(c.violations[0].contains("no store 4"), "{:?}", c.violations);
        assert!(
            c.violations[1].contains("below version 3"),
            "{:?}",
            c.violations
        );
        assert!(
            c.violations[2].contains("no region 6"),
            "{:?}",
            c.violations
        );
    }

    #[test]
    fn liveness_holds_only_within_the_bound() {
        let mut c = Checker::default();
        c.quiet(1_000);
        c.handed_out(5_500, "m1", 1, &[]);
        c.finish(4_000);
        assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
        let mut c = Checker::default();
        c.quiet(1_000);
        c.handed_out(4_900, "m1", 1, &[]);
        c.finish(4_000);
        assert!(c.violations.is_empty());
        let mut c = Checker::default();
        c.quiet(1_000);
        c.finish(4_000);
        assert_eq!(c.violations.len(), 1);
    }
}

//! Scaling, one member at a time. Out: grow the StatefulSet by one once every member serves
//! (the new member joins through the live member list), deleting a PVC left by an earlier
//! scale-in at that ordinal first. In: never below one member without `force`; move the
//! leadership off the highest ordinal if it leads (to the lowest ordinal that stays, so it
//! moves at most once), delete that member through the members API, then shrink the
//! StatefulSet by one and mark its PVC for deferred deletion.

/// What the shell observed for a scaling decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// `spec.replicas`.
    pub desired: u32,
    /// The StatefulSet's `spec.replicas`.
    pub current: u32,
    /// Members' names by ordinal (`members[i]` is ordinal i) still registered in the cluster.
    pub registered: Vec<String>,
    /// Ordinals whose pod is Ready and whose member is healthy.
    pub serving: Vec<u32>,
    /// The leader's ordinal, if known.
    pub leader: Option<u32>,
    /// Ordinals with a PVC marked for deferred deletion.
    pub deferred_pvcs: Vec<u32>,
    pub force: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Replicas match.
    Steady,
    Wait(String),
    /// Refused, with the reason (an event; the spec is not acted on).
    Refuse(String),
    /// Delete the PVC of this ordinal before the StatefulSet reuses it.
    DeletePvc(u32),
    SetReplicas(u32),
    TransferLeader {
        from: u32,
        to: u32,
    },
    /// Remove this member from the cluster through the members API.
    DeleteMember(String),
    /// Mark this ordinal's PVC for deferred deletion (done before shrinking).
    MarkPvc(u32),
}

pub fn next_step(o: &Observed) -> Step {
    if o.desired == o.current {
        return Step::Steady;
    }
    if o.desired > o.current {
        let next = o.current;
        if (0..o.current).any(|i| !o.serving.contains(&i)) && !o.force {
            return Step::Wait("every member must serve before the next joins".into());
        }
        if o.deferred_pvcs.contains(&next) {
            return Step::DeletePvc(next);
        }
        return Step::SetReplicas(o.current + 1);
    }
    if o.desired == 0 && !o.force {
        return Step::Refuse("refusing to scale to 0 members without meridian.io/force".into());
    }
    let last = o.current - 1;
    if o.leader == Some(last) {
        // To the lowest serving ordinal that stays (as TiDB Operator does): the leadership
        // then moves once however many members go. Only when none stays (a forced scale to
        // zero) to any serving one below.
        let to = (0..o.desired.min(last))
            .find(|i| o.serving.contains(i))
            .or_else(|| (0..last).rev().find(|i| o.serving.contains(i)));
        return match to {
            Some(to) => Step::TransferLeader { from: last, to },
            None => Step::Wait(format!(
                "no serving member to take the leadership from ordinal {last}"
            )),
        };
    }
    if let Some(name) = o.registered.get(last as usize).filter(|n| !n.is_empty()) {
        return Step::DeleteMember(name.clone());
    }
    if !o.deferred_pvcs.contains(&last) {
        return Step::MarkPvc(last);
    }
    Step::SetReplicas(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(desired: u32, current: u32) -> Observed {
        Observed {
            desired,
            current,
            registered: (0..current).map(|i| format!("m-{i}")).collect(),
            serving: (0..current).collect(),
            leader: Some(0),
            deferred_pvcs: vec![],
            force: false,
        }
    }

    #[test]
    fn scale_out_one_at_a_time() {
        assert_eq!(next_step(&observed(5, 3)), Step::SetReplicas(4));
        let mut o = observed(5, 4);
        o.serving.retain(|&i| i != 3);
        assert!(
            matches!(next_step(&o), Step::Wait(_)),
            "the new member must serve first"
        );
        let mut o = observed(5, 3);
        o.deferred_pvcs = vec![3];
        assert_eq!(
            next_step(&o),
            Step::DeletePvc(3),
            "an old PVC is never reused"
        );
        assert_eq!(next_step(&observed(3, 3)), Step::Steady);
    }

    #[test]
    fn scale_in_leader_off_then_member_then_pvc_then_statefulset() {
        let mut o = observed(3, 5);
        o.leader = Some(4);
        assert_eq!(next_step(&o), Step::TransferLeader { from: 4, to: 0 });
        o.leader = Some(1);
        assert_eq!(next_step(&o), Step::DeleteMember("m-4".into()));
        o.registered[4].clear();
        assert_eq!(next_step(&o), Step::MarkPvc(4));
        o.deferred_pvcs.push(4);
        assert_eq!(next_step(&o), Step::SetReplicas(4));
    }

    /// 5 -> 3 with the leader on a member that goes: one move, to a member that stays,
    /// whichever of the going members leads and whoever serves.
    #[test]
    fn scale_in_moves_the_leader_at_most_once() {
        for leader in [3, 4] {
            let mut o = observed(3, 5);
            o.leader = Some(leader);
            let mut moves = 0;
            for _ in 0..20 {
                match next_step(&o) {
                    Step::TransferLeader { to, .. } => {
                        assert!(to < o.desired, "moved to ordinal {to}, which goes too");
                        moves += 1;
                        o.leader = Some(to);
                    }
                    Step::DeleteMember(name) => {
                        let i = o.registered.iter().position(|n| *n == name).unwrap();
                        o.registered[i].clear();
                    }
                    Step::MarkPvc(i) => o.deferred_pvcs.push(i),
                    Step::SetReplicas(n) => {
                        o.current = n;
                        o.serving.retain(|&i| i < n);
                        if o.leader.is_some_and(|l| l >= n) {
                            o.leader = None;
                        }
                    }
                    Step::Steady => break,
                    other => panic!("unexpected {other:?}"),
                }
            }
            assert_eq!(o.current, 3);
            assert!(moves <= 1, "leader {leader}: {moves} moves");
        }
        // The lowest staying ordinal that serves.
        let mut o = observed(3, 5);
        o.leader = Some(4);
        o.serving.retain(|&i| i != 0);
        assert_eq!(next_step(&o), Step::TransferLeader { from: 4, to: 1 });
    }

    #[test]
    fn never_to_zero_without_force() {
        assert!(matches!(next_step(&observed(0, 1)), Step::Refuse(_)));
        let mut o = observed(0, 1);
        o.force = true;
        o.leader = None;
        assert_eq!(next_step(&o), Step::DeleteMember("m-0".into()));
    }
}

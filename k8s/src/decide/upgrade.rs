//! The rolling upgrade, one member at a time and the leader last: outdated members that are
//! unhealthy go first (restarting them costs nothing), then outdated followers, then, with
//! every other member updated, leadership moves once to an updated healthy member and the old
//! leader's pod goes as a follower. No member is disrupted while the others would not keep a
//! quorum, and after each pod the next waits until every updated member is Ready, healthy and
//! has been so for `minReadySeconds`. `force` (the `meridian.io/force-upgrade` annotation)
//! skips the health gates for a cluster that is down anyway.

/// One member as the shell observed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Pod name (`<cluster>-<ordinal>`).
    pub pod: String,
    pub ordinal: u32,
    /// The pod runs the StatefulSet's update revision.
    pub updated: bool,
    /// Pod Ready condition.
    pub ready: bool,
    /// The members API says healthy.
    pub healthy: bool,
    pub is_leader: bool,
    /// How long the pod has been Ready and healthy, in milliseconds.
    pub ready_for_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Every member runs the update revision and is serving.
    Done,
    /// Nothing to do now; the reason goes into an event.
    Wait(String),
    /// Delete this pod so the StatefulSet (OnDelete) recreates it on the new revision.
    DeletePod(String),
    /// Move leadership to this member (then verify) before the leader's pod is deleted.
    TransferLeader { to: String },
}

/// The next step of the upgrade.
pub fn next_step(members: &[Member], min_ready_ms: u64, force: bool) -> Step {
    let n = members.len();
    let quorum = n / 2 + 1;
    let outdated: Vec<&Member> = members.iter().filter(|m| !m.updated).collect();
    let serving = |m: &Member| m.ready && m.healthy;
    if outdated.is_empty() {
        // A member that does not serve with nothing left to roll is the Degraded
        // condition's business (and failover's), not a wait of the upgrade's.
        return Step::Done;
    }
    if !force {
        if let Some(m) = members
            .iter()
            .filter(|m| m.updated)
            .find(|m| !serving(m) || m.ready_for_ms < min_ready_ms)
        {
            return Step::Wait(format!(
                "{} restarted and is not yet Ready, healthy and stable for minReadySeconds",
                m.pod
            ));
        }
    }
    // Highest ordinal first among equals, as a StatefulSet would.
    let by_ordinal = |a: &&Member, b: &&Member| b.ordinal.cmp(&a.ordinal);
    let mut unhealthy: Vec<&Member> = outdated.iter().copied().filter(|m| !serving(m)).collect();
    unhealthy.sort_by(by_ordinal);
    if let Some(m) = unhealthy.first() {
        // Restarting a member that serves nothing cannot cost the quorum.
        return Step::DeletePod(m.pod.clone());
    }
    let healthy = members.iter().filter(|m| serving(m)).count();
    let keeps_quorum = healthy.saturating_sub(1) >= quorum;
    let mut followers: Vec<&Member> = outdated.iter().copied().filter(|m| !m.is_leader).collect();
    followers.sort_by(by_ordinal);
    if let Some(m) = followers.first() {
        if !keeps_quorum && !force {
            return Step::Wait(format!(
                "restarting {} would leave {} of {} members serving, under a quorum of {quorum}",
                m.pod,
                healthy - 1,
                n
            ));
        }
        return Step::DeletePod(m.pod.clone());
    }
    // Only the leader is left on the old revision.
    let Some(leader) = outdated.iter().find(|m| m.is_leader) else {
        return Step::Wait("no member is leader; waiting for an election".into());
    };
    let target = members
        .iter()
        .filter(|m| m.updated && serving(m) && m.ready_for_ms >= min_ready_ms)
        .min_by_key(|m| m.ordinal);
    match target {
        Some(t) => Step::TransferLeader { to: t.pod.clone() },
        None if force => Step::DeletePod(leader.pod.clone()),
        None => Step::Wait(format!(
            "no updated, healthy member to hand {}'s leadership to",
            leader.pod
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `spec`: one letter per member, ordinal = position: `o` outdated, `u` updated; uppercase =
    /// leader; `!` after it = not serving; `~` after it = not yet stable for minReadySeconds.
    fn members(spec: &str) -> Vec<Member> {
        let mut out: Vec<Member> = Vec::new();
        for c in spec.chars() {
            match c {
                '!' => {
                    let m = out.last_mut().unwrap();
                    m.ready = false;
                    m.healthy = false;
                }
                '~' => out.last_mut().unwrap().ready_for_ms = 100,
                _ => {
                    let ordinal = out.len() as u32;
                    out.push(Member {
                        pod: format!("m-{ordinal}"),
                        ordinal,
                        updated: c.eq_ignore_ascii_case(&'u'),
                        ready: true,
                        healthy: true,
                        is_leader: c.is_ascii_uppercase(),
                        ready_for_ms: 60_000,
                    });
                }
            }
        }
        out
    }

    fn delete(pod: &str) -> Step {
        Step::DeletePod(pod.into())
    }

    #[test]
    fn table() {
        let min_ready = 10_000;
        let cases: Vec<(&str, &str, bool, Step)> = vec![
            (
                "followers first, highest ordinal first",
                "Ooo",
                false,
                delete("m-2"),
            ),
            (
                "next follower once the first is back",
                "Oou",
                false,
                delete("m-1"),
            ),
            (
                "leader last: hand over to an updated member",
                "Ouu",
                false,
                Step::TransferLeader { to: "m-1".into() },
            ),
            (
                "after the hand-over the old leader goes as a follower",
                "oUu",
                false,
                delete("m-0"),
            ),
            ("done", "uUu", false, Step::Done),
            (
                "done; a member not serving is not the upgrade's to wait for",
                "uUu!",
                false,
                Step::Done,
            ),
            (
                "unhealthy outdated members go first, even the lowest ordinal",
                "o!Oo",
                false,
                delete("m-0"),
            ),
            (
                "wait for a restarted member to be stable",
                "Oou~",
                false,
                Step::Wait(
                    "m-2 restarted and is not yet Ready, healthy and stable for minReadySeconds"
                        .into(),
                ),
            ),
            (
                "wait for a restarted member to serve",
                "Oou!",
                false,
                Step::Wait(
                    "m-2 restarted and is not yet Ready, healthy and stable for minReadySeconds"
                        .into(),
                ),
            ),
            (
                "never below a quorum: 2 of 3 serving",
                "Oo!u",
                false,
                delete("m-1"),
            ),
            (
                "the leader is never handed to an unstable member",
                "Ouu~",
                false,
                Step::Wait(
                    "m-2 restarted and is not yet Ready, healthy and stable for minReadySeconds"
                        .into(),
                ),
            ),
            (
                "five members: followers from the top",
                "oOooo",
                false,
                delete("m-4"),
            ),
            ("forced: gates skipped", "Oou!", true, delete("m-1")),
            (
                "forced with nobody to hand over to",
                "O",
                true,
                delete("m-0"),
            ),
            (
                "a single member with nobody to hand over to waits",
                "O",
                false,
                Step::Wait("no updated, healthy member to hand m-0's leadership to".into()),
            ),
            ("no leader among the outdated", "oou", false, delete("m-1")),
            (
                "two members: a restart would lose the quorum",
                "Oo",
                false,
                Step::Wait(
                    "restarting m-1 would leave 1 of 2 members serving, under a quorum of 2".into(),
                ),
            ),
        ];
        for (name, spec, force, want) in cases {
            assert_eq!(
                next_step(&members(spec), min_ready, force),
                want,
                "{name} ({spec})"
            );
        }
    }

    #[test]
    fn a_pod_stuck_on_an_earlier_new_revision_is_deleted_first() {
        // The template changed while m-2 was restarting onto the previous new revision, and
        // it never became Ready: it is outdated now, and it goes before any serving member,
        // without waiting on the stability gate (which only looks at updated members).
        let mut m = members("Ooo!");
        m[2].ready_for_ms = 0;
        assert_eq!(next_step(&m, 10_000, false), delete("m-2"));
    }

    #[test]
    fn quorum_is_kept_while_a_follower_restarts() {
        // 3 members, one updated but down: restarting another would leave 1 of 3 serving.
        let mut m = members("Oou");
        m[2].ready = false;
        m[2].healthy = false;
        let step = next_step(&m, 0, false);
        assert!(
            matches!(step, Step::Wait(ref why) if why.contains("not yet Ready")),
            "{step:?}"
        );
        // Without the stability gate (forced), the quorum rule is still the only thing between
        // the cluster and an outage: forced upgrades are for clusters already down.
        assert_eq!(next_step(&m, 0, true), delete("m-1"));
    }

    #[test]
    fn exactly_one_leader_move_per_upgrade() {
        // Simulate the whole upgrade of 3 and 5 members, applying each step.
        for n in [3usize, 5] {
            let mut m = members(&("O".to_string() + &"o".repeat(n - 1)));
            let (mut moves, mut deleted) = (0, Vec::new());
            for _ in 0..20 {
                match next_step(&m, 0, false) {
                    Step::Done => break,
                    Step::DeletePod(p) => {
                        let x = m.iter_mut().find(|x| x.pod == p).unwrap();
                        x.updated = true;
                        deleted.push(p);
                    }
                    Step::TransferLeader { to } => {
                        moves += 1;
                        for x in m.iter_mut() {
                            x.is_leader = x.pod == to;
                        }
                    }
                    Step::Wait(why) => panic!("stuck: {why}"),
                }
            }
            assert_eq!(moves, 1, "{n} members");
            assert_eq!(deleted.len(), n);
            assert_eq!(
                deleted.last().map(String::as_str),
                Some("m-0"),
                "the old leader's pod last"
            );
        }
    }
}

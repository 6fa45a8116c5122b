//! Failover (opt-in): a member unhealthy for `period` while the others keep a quorum becomes a
//! failure member; its member is deleted through the API and its pod and PVC are deleted, so it
//! comes back empty and joins again, while one extra replica keeps the count of serving members
//! up meanwhile. Once every member serves, the failure members are cleared and the extra
//! replica goes. Never more than `max_failover_count` at once; pods never scheduled do not count
//! (they are a scheduling problem, not a member failure).
//!
//! A failure is the member that failed, not the pod name: it is recorded with its member id
//! and volume UIDs, and only that member is ever replaced. The pod that comes back under the
//! same name joins as a new member with a new id and an empty volume; while it catches up it
//! is unhealthy too, and keyed by name it would be replaced again, and again (TiDB Operator
//! #1895).

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub pod: String,
    pub member_id: String,
    pub healthy: bool,
    /// How long it has been unhealthy, in milliseconds (0 when healthy).
    pub unhealthy_for_ms: u64,
    /// Whether its pod was ever scheduled to a node.
    pub scheduled: bool,
    pub pvc_uids: Vec<String>,
    /// Still registered in the cluster's member list.
    pub registered: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub enabled: bool,
    pub period_ms: u64,
    pub max_failover_count: usize,
    pub members: Vec<Member>,
    /// Members already declared failed (`status.failureMembers`).
    pub failures: Vec<Failure>,
}

/// A member declared failed, as recorded when it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub pod: String,
    pub member_id: String,
    pub pvc_uids: Vec<String>,
}

impl Failure {
    /// `m` is the very member that failed: same id, and (when recorded) still on one of the
    /// same volumes. Its replacement has a new id and a new volume, and is never it.
    fn is(&self, m: &Member) -> bool {
        m.pod == self.pod
            && !self.member_id.is_empty()
            && m.member_id == self.member_id
            && (self.pvc_uids.is_empty() || m.pvc_uids.iter().any(|u| self.pvc_uids.contains(u)))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Nothing,
    /// Record a failure member (pod, member id, PVC UIDs) and emit an event.
    Declare {
        pod: String,
        member_id: String,
        pvc_uids: Vec<String>,
    },
    /// Delete the failed member through the API, then its pod and PVCs.
    Replace {
        pod: String,
        member_id: String,
        pvc_uids: Vec<String>,
    },
    /// Every member serves again: clear the failure members (the extra replica goes with them).
    Recover,
}

/// Replicas the StatefulSet should have: the spec's plus one per failure member.
pub fn replicas(spec_replicas: u32, failures: usize) -> u32 {
    spec_replicas + failures as u32
}

pub fn next_step(o: &Observed) -> Step {
    if !o.enabled {
        return Step::Nothing;
    }
    for failure in &o.failures {
        if let Some(m) = o
            .members
            .iter()
            .find(|m| failure.is(m) && m.registered && !m.healthy)
        {
            return Step::Replace {
                pod: m.pod.clone(),
                member_id: m.member_id.clone(),
                pvc_uids: m.pvc_uids.clone(),
            };
        }
    }
    if !o.failures.is_empty() && o.members.iter().all(|m| m.healthy) {
        return Step::Recover;
    }
    if o.failures.len() >= o.max_failover_count {
        return Step::Nothing;
    }
    let n = o.members.len();
    let healthy = o.members.iter().filter(|m| m.healthy).count();
    if healthy < n / 2 + 1 {
        // Without a quorum nothing can be deleted through the members API safely.
        return Step::Nothing;
    }
    o.members
        .iter()
        .find(|m| {
            !m.healthy
                && m.scheduled
                && m.unhealthy_for_ms >= o.period_ms
                && !o.failures.iter().any(|f| f.pod == m.pod)
        })
        .map_or(Step::Nothing, |m| Step::Declare {
            pod: m.pod.clone(),
            member_id: m.member_id.clone(),
            pvc_uids: m.pvc_uids.clone(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(i: usize, healthy: bool, down_ms: u64) -> Member {
        Member {
            pod: format!("m-{i}"),
            member_id: format!("{}", 100 + i),
            healthy,
            unhealthy_for_ms: if healthy { 0 } else { down_ms },
            scheduled: true,
            pvc_uids: vec![format!("pvc-{i}")],
            registered: true,
        }
    }

    fn failure(i: usize) -> Failure {
        Failure {
            pod: format!("m-{i}"),
            member_id: format!("{}", 100 + i),
            pvc_uids: vec![format!("pvc-{i}")],
        }
    }

    fn observed(members: Vec<Member>) -> Observed {
        Observed {
            enabled: true,
            period_ms: 300_000,
            max_failover_count: 1,
            members,
            failures: vec![],
        }
    }

    #[test]
    fn table() {
        let declare = |i: usize| Step::Declare {
            pod: format!("m-{i}"),
            member_id: format!("{}", 100 + i),
            pvc_uids: vec![format!("pvc-{i}")],
        };
        let cases: Vec<(&str, Observed, Step)> = vec![
            (
                "all healthy",
                observed(vec![
                    member(0, true, 0),
                    member(1, true, 0),
                    member(2, true, 0),
                ]),
                Step::Nothing,
            ),
            (
                "unhealthy for less than the period",
                observed(vec![
                    member(0, true, 0),
                    member(1, true, 0),
                    member(2, false, 299_999),
                ]),
                Step::Nothing,
            ),
            (
                "unhealthy for the period, quorum kept",
                observed(vec![
                    member(0, true, 0),
                    member(1, true, 0),
                    member(2, false, 300_000),
                ]),
                declare(2),
            ),
            (
                "no quorum: nothing",
                observed(vec![
                    member(0, true, 0),
                    member(1, false, 900_000),
                    member(2, false, 900_000),
                ]),
                Step::Nothing,
            ),
            (
                "disabled",
                Observed {
                    enabled: false,
                    ..observed(vec![
                        member(0, true, 0),
                        member(1, true, 0),
                        member(2, false, 900_000),
                    ])
                },
                Step::Nothing,
            ),
            (
                "never scheduled does not count",
                observed(vec![
                    member(0, true, 0),
                    member(1, true, 0),
                    Member {
                        scheduled: false,
                        ..member(2, false, 900_000)
                    },
                ]),
                Step::Nothing,
            ),
            (
                "declared: replaced",
                Observed {
                    failures: vec![failure(2)],
                    ..observed(vec![
                        member(0, true, 0),
                        member(1, true, 0),
                        member(2, false, 900_000),
                    ])
                },
                Step::Replace {
                    pod: "m-2".into(),
                    member_id: "102".into(),
                    pvc_uids: vec!["pvc-2".into()],
                },
            ),
            (
                "at the limit: no second failure",
                Observed {
                    failures: vec![failure(2)],
                    ..observed(vec![
                        member(0, true, 0),
                        member(1, false, 900_000),
                        Member {
                            registered: false,
                            ..member(2, false, 900_000)
                        },
                        member(3, true, 0),
                        member(4, true, 0),
                    ])
                },
                Step::Nothing,
            ),
            (
                "everyone serves again: recover",
                Observed {
                    failures: vec![failure(2)],
                    ..observed(vec![
                        member(0, true, 0),
                        member(1, true, 0),
                        member(2, true, 0),
                        member(3, true, 0),
                    ])
                },
                Step::Recover,
            ),
        ];
        for (name, o, want) in cases {
            assert_eq!(next_step(&o), want, "{name}");
        }
        assert_eq!(replicas(3, 1), 4);
    }

    #[test]
    fn the_replacement_under_the_same_pod_name_is_never_replaced_again() {
        // m-2 was replaced: its pod is back with a new member id and a new volume, joined
        // but not serving yet. Keyed by pod name this was a second Replace.
        let joining = Member {
            member_id: "202".into(),
            pvc_uids: vec!["pvc-2b".into()],
            ..member(2, false, 900_000)
        };
        let o = Observed {
            failures: vec![failure(2)],
            ..observed(vec![
                member(0, true, 0),
                member(1, true, 0),
                joining.clone(),
            ])
        };
        assert_eq!(next_step(&o), Step::Nothing);
        // The same id on a new volume is not the failed member either (a replacement that
        // reused the id): its old volume is gone already.
        let reused_id = Member {
            pvc_uids: vec!["pvc-2b".into()],
            ..member(2, false, 900_000)
        };
        let o = Observed {
            failures: vec![failure(2)],
            ..observed(vec![member(0, true, 0), member(1, true, 0), reused_id])
        };
        assert_eq!(next_step(&o), Step::Nothing);
        // Once it serves, the failure is cleared.
        let o = Observed {
            failures: vec![failure(2)],
            ..observed(vec![
                member(0, true, 0),
                member(1, true, 0),
                Member {
                    healthy: true,
                    unhealthy_for_ms: 0,
                    ..joining
                },
            ])
        };
        assert_eq!(next_step(&o), Step::Recover);
    }
}

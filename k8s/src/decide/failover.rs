//! Failover (opt-in): a member unhealthy for `period` while the others keep a quorum becomes a
//! failure member; its member is deleted through the API and its pod and PVC are deleted, so it
//! comes back empty and joins again, while one extra replica keeps the count of serving members
//! up meanwhile. Once every member serves, the failure members are cleared and the extra
//! replica goes. Never more than `max_failover_count` at once; pods never scheduled do not count
//! (they are a scheduling problem, not a member failure).

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
    /// Pods already declared failed (`status.failureMembers`).
    pub failures: Vec<String>,
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
    for pod in &o.failures {
        if let Some(m) = o
            .members
            .iter()
            .find(|m| &m.pod == pod && m.registered && !m.healthy)
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
                && !o.failures.contains(&m.pod)
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
                    failures: vec!["m-2".into()],
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
                    failures: vec!["m-2".into()],
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
                    failures: vec!["m-2".into()],
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
}

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
//!
//! A replace that did not take (the member still registered and unhealthy: its delete was
//! lost, or the pod came back on the old volume) is tried again only after a backoff that
//! doubles with each attempt, from 30s to at most 10m: each attempt deletes a pod and a
//! volume, and one that fails for a lasting reason must not do so on every pass. A
//! replacement pod that stays `Pending` is no member of the failure (no member id, a new
//! volume), so it is never replaced, whatever the backoff: it is a scheduling problem.
//!
//! A lost node (NotReady or gone for `node_lost_timeout`) never confirms the deletion of the
//! pods on it: a member's pod there stays Terminating, the StatefulSet does not make it again,
//! and a replace (which deletes the pod gracefully) waits for ever. Such a pod, whose member
//! does not answer as healthy, is force-deleted (grace period 0) first, so the StatefulSet
//! makes it again; a member that does not come back is declared and replaced like any other,
//! under the quorum gate. This is safe for Meridian
//! where it is not for a store that trusts its own clock: a member serves (allocates
//! timestamps, leads) only while it holds a lease it has proven against etcd, so a process
//! left running on a node that cannot be reached cannot also lead once its lease lapses, and
//! the pod made again in its place waits for that lease like any other candidate. A member
//! that answers as healthy is never force-deleted, whatever its node's state.

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
    /// How long its node has been NotReady or gone (`None`: not lost, or not known).
    pub node_lost_for_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub enabled: bool,
    pub period_ms: u64,
    pub max_failover_count: usize,
    /// How long a node may be lost before the pods on it are force-deleted.
    pub node_lost_timeout_ms: u64,
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
    /// Replace attempts so far.
    pub replace_attempts: u32,
    /// How long ago the last replace attempt was, in milliseconds (`None`: never, or not
    /// known).
    pub since_replaced_ms: Option<u64>,
}

/// The first wait after a replace attempt.
pub const REPLACE_BACKOFF_MS: u64 = 30_000;
/// The longest wait between replace attempts.
pub const REPLACE_BACKOFF_MAX_MS: u64 = 600_000;

/// How long to wait after the `attempts`th replace before the next: doubling, capped.
pub fn replace_backoff_ms(attempts: u32) -> u64 {
    match attempts {
        0 => 0,
        n => REPLACE_BACKOFF_MS
            .saturating_mul(1u64 << (n - 1).min(16))
            .min(REPLACE_BACKOFF_MAX_MS),
    }
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

    /// The last replace attempt is recent enough that it may still take effect.
    fn backing_off(&self) -> bool {
        self.since_replaced_ms
            .is_some_and(|since| since < replace_backoff_ms(self.replace_attempts))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Nothing,
    /// Its node has been lost for longer than the timeout: delete the pod with grace period
    /// 0, so the StatefulSet can make it again.
    ForceDelete {
        pod: String,
        lost_for_ms: u64,
    },
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
    if let Some((m, lost_for_ms)) = o.members.iter().find_map(|m| {
        let lost = m
            .node_lost_for_ms
            .filter(|l| *l >= o.node_lost_timeout_ms)?;
        (!m.healthy).then_some((m, lost))
    }) {
        return Step::ForceDelete {
            pod: m.pod.clone(),
            lost_for_ms,
        };
    }
    for failure in &o.failures {
        if let Some(m) = o
            .members
            .iter()
            .find(|m| failure.is(m) && m.registered && !m.healthy)
            .filter(|_| !failure.backing_off())
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
            node_lost_for_ms: None,
        }
    }

    fn failure(i: usize) -> Failure {
        Failure {
            pod: format!("m-{i}"),
            member_id: format!("{}", 100 + i),
            pvc_uids: vec![format!("pvc-{i}")],
            replace_attempts: 0,
            since_replaced_ms: None,
        }
    }

    fn observed(members: Vec<Member>) -> Observed {
        Observed {
            enabled: true,
            period_ms: 300_000,
            max_failover_count: 1,
            node_lost_timeout_ms: 300_000,
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

    #[test]
    fn a_replace_that_did_not_take_is_tried_again_only_after_a_doubling_backoff() {
        let replace = Step::Replace {
            pod: "m-2".into(),
            member_id: "102".into(),
            pvc_uids: vec!["pvc-2".into()],
        };
        // The failed member is still registered and unhealthy after `attempts` replaces,
        // the last `since` ms ago (`None`: never replaced, or its time unreadable).
        let cases: Vec<(&str, u32, Option<u64>, Step)> = vec![
            ("never replaced", 0, None, replace.clone()),
            ("1 attempt, 29.999s ago", 1, Some(29_999), Step::Nothing),
            ("1 attempt, 30s ago", 1, Some(30_000), replace.clone()),
            ("2 attempts, 59.999s ago", 2, Some(59_999), Step::Nothing),
            ("2 attempts, 60s ago", 2, Some(60_000), replace.clone()),
            ("3 attempts, 119.999s ago", 3, Some(119_999), Step::Nothing),
            ("3 attempts, 120s ago", 3, Some(120_000), replace.clone()),
            (
                "capped: 9 attempts, 599.999s ago",
                9,
                Some(599_999),
                Step::Nothing,
            ),
            (
                "capped: 9 attempts, 10m ago",
                9,
                Some(600_000),
                replace.clone(),
            ),
            (
                "capped: u32::MAX attempts, 10m ago",
                u32::MAX,
                Some(600_000),
                replace.clone(),
            ),
            ("an attempt with no readable time", 1, None, replace.clone()),
        ];
        for (name, attempts, since, want) in cases {
            let o = Observed {
                failures: vec![Failure {
                    replace_attempts: attempts,
                    since_replaced_ms: since,
                    ..failure(2)
                }],
                ..observed(vec![
                    member(0, true, 0),
                    member(1, true, 0),
                    member(2, false, 900_000),
                ])
            };
            assert_eq!(next_step(&o), want, "{name}");
        }
        assert_eq!(replace_backoff_ms(0), 0);
        assert_eq!(replace_backoff_ms(1), 30_000);
        assert_eq!(replace_backoff_ms(4), 240_000);
        assert_eq!(replace_backoff_ms(5), 480_000);
        assert_eq!(replace_backoff_ms(6), 600_000);
    }

    #[test]
    fn a_replacement_that_stays_pending_is_never_replaced_nor_declared() {
        // m-2 was replaced: its member is deleted, and the pod the StatefulSet made again
        // cannot be scheduled. It has no member id and a new, unbound volume (or none).
        let pending = Member {
            member_id: String::new(),
            healthy: false,
            unhealthy_for_ms: 0,
            scheduled: false,
            pvc_uids: vec![],
            registered: false,
            ..member(2, false, 0)
        };
        // However long it has been, and with a backoff long over: nothing to do; and the
        // extra replica (for the one failure) does not count as a second failure.
        for since in [None, Some(0), Some(3_600_000)] {
            let o = Observed {
                max_failover_count: 3,
                failures: vec![Failure {
                    replace_attempts: 1,
                    since_replaced_ms: since,
                    ..failure(2)
                }],
                ..observed(vec![
                    member(0, true, 0),
                    member(1, true, 0),
                    pending.clone(),
                    member(3, true, 0),
                ])
            };
            assert_eq!(next_step(&o), Step::Nothing, "{since:?}");
        }
        // Had it joined (a member id, scheduled) but not yet served, it is still not the
        // failed member: no second replace.
        let o = Observed {
            max_failover_count: 3,
            failures: vec![Failure {
                replace_attempts: 1,
                since_replaced_ms: Some(3_600_000),
                ..failure(2)
            }],
            ..observed(vec![
                member(0, true, 0),
                member(1, true, 0),
                Member {
                    member_id: "202".into(),
                    pvc_uids: vec!["pvc-2b".into()],
                    ..member(2, false, 3_600_000)
                },
                member(3, true, 0),
            ])
        };
        assert_eq!(next_step(&o), Step::Nothing);
    }

    #[test]
    fn a_pod_on_a_node_lost_past_the_timeout_is_force_deleted_first() {
        let lost = |ms: Option<u64>, healthy: bool| Member {
            node_lost_for_ms: ms,
            ..member(2, healthy, if healthy { 0 } else { 900_000 })
        };
        let force = |ms: u64| Step::ForceDelete {
            pod: "m-2".into(),
            lost_for_ms: ms,
        };
        let cases: Vec<(&str, Observed, Step)> = vec![
            (
                "lost for the timeout: force-deleted before it is declared",
                observed(vec![
                    member(0, true, 0),
                    member(1, true, 0),
                    lost(Some(300_000), false),
                ]),
                force(300_000),
            ),
            (
                "lost for less than the timeout: declared as usual",
                observed(vec![
                    member(0, true, 0),
                    member(1, true, 0),
                    lost(Some(299_999), false),
                ]),
                Step::Declare {
                    pod: "m-2".into(),
                    member_id: "102".into(),
                    pvc_uids: vec!["pvc-2".into()],
                },
            ),
            (
                "its member still answers as healthy: never",
                observed(vec![
                    member(0, true, 0),
                    member(1, true, 0),
                    lost(Some(900_000), true),
                ]),
                Step::Nothing,
            ),
            (
                "declared and lost: force-deleted before the replace",
                Observed {
                    failures: vec![failure(2)],
                    ..observed(vec![
                        member(0, true, 0),
                        member(1, true, 0),
                        lost(Some(400_000), false),
                    ])
                },
                force(400_000),
            ),
            (
                // Force deletion needs no quorum: a process nobody reaches cannot lead
                // without its lease. The replace still waits for one.
                "no quorum: still force-deleted",
                observed(vec![
                    member(0, true, 0),
                    member(1, false, 900_000),
                    lost(Some(400_000), false),
                ]),
                force(400_000),
            ),
            (
                "failover disabled: never",
                Observed {
                    enabled: false,
                    ..observed(vec![
                        member(0, true, 0),
                        member(1, true, 0),
                        lost(Some(900_000), false),
                    ])
                },
                Step::Nothing,
            ),
        ];
        for (name, o, want) in cases {
            assert_eq!(next_step(&o), want, "{name}");
        }
    }
}

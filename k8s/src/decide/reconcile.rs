//! One reconcile: from the observed snapshot of a cluster to the actions to take and the
//! status to write. The owned objects that are missing or drifted are applied first, each
//! alone, so an unchanged cluster costs no write; then failover (a dead member is the most
//! urgent), then scaling, then the rolling upgrade; `paused` keeps only the status. An apply
//! that fails holds nothing else back: the shell reports it and carries on.

use super::drift::Drift;
use super::resources::Object;
use super::{failover, scale, upgrade, volumes};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub name: String,
    pub ordinal: u32,
    /// `controller-revision-hash` label.
    pub revision: String,
    pub ready: bool,
    pub ready_for_ms: u64,
    pub scheduled: bool,
    pub pvc_uids: Vec<String>,
    /// Deleted, not yet gone.
    pub terminating: bool,
    /// How long its node has been NotReady or gone (`None`: not lost, or not known).
    pub node_lost_for_ms: Option<u64>,
}

/// A member as the members API lists it (name = pod name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub id: String,
    pub healthy: bool,
    pub is_leader: bool,
    pub unhealthy_for_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub spec_replicas: u32,
    pub paused: bool,
    /// `meridian.io/force-upgrade` (and force for scaling to zero).
    pub force: bool,
    pub min_ready_ms: u64,
    pub failover_enabled: bool,
    pub failover_period_ms: u64,
    pub max_failover_count: usize,
    pub node_lost_timeout_ms: u64,
    /// The StatefulSet's replicas, `None` before it exists.
    pub sts_replicas: Option<u32>,
    pub update_revision: String,
    pub pods: Vec<Pod>,
    pub members: Vec<Member>,
    /// Some member answered the members API. Without an answer nothing is known of health or
    /// leadership, so nothing but the owned objects is touched (unless forced).
    pub members_reachable: bool,
    pub failures: Vec<failover::Failure>,
    pub deferred_pvcs: Vec<u32>,
    /// The owned objects missing or differing from what the spec wants, in apply order.
    pub drift: Vec<Drift>,
    /// The spec names a TLS Secret. Without one the members could not authenticate each other
    /// or the operator, so nothing is applied or touched.
    pub tls_secret: bool,
    /// The claims to raise to the spec's storage size, and what the condition says.
    pub volumes: volumes::Growth,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Server-side apply these owned objects, each alone, in this order (the StatefulSet
    /// with `replicas`, the count it has: scaling moves it).
    ApplyOwned {
        replicas: u32,
        objects: Vec<Drift>,
    },
    Failover(failover::Step),
    Scale(scale::Step),
    Upgrade(upgrade::Step),
    /// Raise these claims' storage requests (PVC expansion).
    GrowVolumes(Vec<volumes::Resize>),
}

/// The four conditions of the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Conditions {
    /// A leader serves and a quorum of members is healthy.
    pub available: bool,
    pub quorate: bool,
    /// Pods not on the update revision, or replicas not yet as wanted.
    pub progressing: bool,
    /// Some member is unhealthy.
    pub degraded: bool,
}

pub fn conditions(s: &Snapshot) -> Conditions {
    let n = s.members.len().max(s.spec_replicas as usize);
    let healthy = s.members.iter().filter(|m| m.healthy).count();
    let quorate = n > 0 && healthy > n / 2;
    Conditions {
        available: quorate && s.members.iter().any(|m| m.is_leader && m.healthy),
        quorate,
        progressing: s.pods.iter().any(|p| p.revision != s.update_revision)
            || s.sts_replicas != Some(failover::replicas(s.spec_replicas, s.failures.len())),
        degraded: s.members.iter().any(|m| !m.healthy),
    }
}

/// How far the rollout to the update revision is: what the upgrade progress metric shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rollout {
    /// Members running the update revision and not being deleted.
    pub updated: u32,
    /// Members the StatefulSet runs (its replicas; 0 before it exists).
    pub members: u32,
}

/// Counted against the StatefulSet's replicas rather than the pods that exist, so a pod
/// deleted for its restart counts as not yet updated instead of shrinking the total.
pub fn rollout(s: &Snapshot) -> Rollout {
    let members = s.sts_replicas.unwrap_or(0);
    let updated = s
        .pods
        .iter()
        .filter(|p| p.ordinal < members && !p.terminating && p.revision == s.update_revision)
        .count() as u32;
    Rollout { updated, members }
}

pub fn reconcile(s: &Snapshot) -> Vec<Action> {
    if s.paused || !s.tls_secret {
        return Vec::new();
    }
    let replicas = failover::replicas(s.spec_replicas, s.failures.len());
    let mut actions = Vec::new();
    if !s.drift.is_empty() {
        // Replicas stay where scaling has them: a spec change (the budget follows
        // spec.replicas) must not shrink the StatefulSet past the scale-in steps.
        actions.push(Action::ApplyOwned {
            replicas: s.sts_replicas.unwrap_or(1),
            objects: s.drift.clone(),
        });
        // Everything else waits for the StatefulSet to exist.
        if s.sts_replicas.is_none() {
            return actions;
        }
    }
    // Raising a claim's request restarts nothing and needs no member: it goes with whatever
    // else this pass does.
    if !s.volumes.resize.is_empty() {
        actions.push(Action::GrowVolumes(s.volumes.resize.clone()));
    }
    if !s.members_reachable && !s.force {
        return actions;
    }
    let member = |pod: &str| s.members.iter().find(|m| m.name == pod);
    let step = failover::next_step(&failover::Observed {
        enabled: s.failover_enabled,
        period_ms: s.failover_period_ms,
        max_failover_count: s.max_failover_count,
        node_lost_timeout_ms: s.node_lost_timeout_ms,
        members: s
            .pods
            .iter()
            .map(|p| {
                let m = member(&p.name);
                failover::Member {
                    pod: p.name.clone(),
                    member_id: m.map(|m| m.id.clone()).unwrap_or_default(),
                    healthy: m.is_some_and(|m| m.healthy),
                    unhealthy_for_ms: m.map_or(0, |m| m.unhealthy_for_ms),
                    scheduled: p.scheduled,
                    pvc_uids: p.pvc_uids.clone(),
                    registered: m.is_some(),
                    node_lost_for_ms: p.node_lost_for_ms,
                }
            })
            .collect(),
        failures: s.failures.clone(),
    });
    // An upgrade or a user's scale restarts and adds members on purpose: a member it has
    // down is not a failure, and replacing one then can loop (TiDB Operator #1895). New
    // failures wait for them to finish; clearing recovered ones does not, nor does
    // force-deleting a pod on a lost node (an upgrade would wait for it for ever).
    let upgrading = s.pods.iter().any(|p| p.revision != s.update_revision);
    let scaling = s
        .sts_replicas
        .is_some_and(|r| r < s.spec_replicas || r > s.spec_replicas + s.failures.len() as u32);
    let suspended = (upgrading || scaling)
        && matches!(
            step,
            failover::Step::Declare { .. } | failover::Step::Replace { .. }
        );
    if step != failover::Step::Nothing && !suspended {
        actions.push(Action::Failover(step));
        return actions;
    }
    let current = s.sts_replicas.unwrap_or(0);
    let mut registered = vec![String::new(); current as usize];
    for p in &s.pods {
        if let (Some(slot), Some(m)) = (registered.get_mut(p.ordinal as usize), member(&p.name)) {
            *slot = m.name.clone();
        }
    }
    // A failure member's pod does not hold back the extra replica meant to cover for it.
    let growing = replicas > current;
    let serving: Vec<u32> = s
        .pods
        .iter()
        .filter(|p| {
            (p.ready && member(&p.name).is_some_and(|m| m.healthy))
                || (growing && s.failures.iter().any(|f| f.pod == p.name))
        })
        .map(|p| p.ordinal)
        .collect();
    let leader = s
        .pods
        .iter()
        .find(|p| member(&p.name).is_some_and(|m| m.is_leader))
        .map(|p| p.ordinal);
    let step = scale::next_step(&scale::Observed {
        desired: replicas,
        current,
        registered,
        serving,
        leader,
        deferred_pvcs: s.deferred_pvcs.clone(),
        force: s.force,
    });
    if step != scale::Step::Steady {
        actions.push(Action::Scale(step));
        return actions;
    }
    // The update revision read this pass is the one the StatefulSet's apply replaces (a
    // template edited by hand is put back): pods are restarted only onto the revision the
    // spec wants, from the next pass on.
    if s.drift.iter().any(|d| d.object == Object::StatefulSet) {
        return actions;
    }
    // The upgrade's quorum arithmetic needs every member's pod, as it is.
    if let Some(p) = s.pods.iter().find(|p| p.terminating) {
        actions.push(Action::Upgrade(upgrade::Step::Wait(format!(
            "{} is terminating",
            p.name
        ))));
        return actions;
    }
    if (s.pods.len() as u32) < current {
        actions.push(Action::Upgrade(upgrade::Step::Wait(
            "the StatefulSet has not created every pod yet".into(),
        )));
        return actions;
    }
    let members: Vec<upgrade::Member> = s
        .pods
        .iter()
        .map(|p| {
            let m = member(&p.name);
            upgrade::Member {
                pod: p.name.clone(),
                ordinal: p.ordinal,
                updated: p.revision == s.update_revision,
                ready: p.ready,
                healthy: m.is_some_and(|m| m.healthy),
                is_leader: m.is_some_and(|m| m.is_leader),
                ready_for_ms: p.ready_for_ms,
            }
        })
        .collect();
    match upgrade::next_step(&members, s.min_ready_ms, s.force) {
        upgrade::Step::Done => {}
        step => actions.push(Action::Upgrade(step)),
    }
    actions
}

/// Why `drift`'s object is held back after the applies of this pass that failed (`refused`),
/// of `objects` (the pass's drift): a StatefulSet is not created while the NetworkPolicy that
/// fences the admin port does not exist, so members never run with that port open.
pub fn held_back(drift: &Drift, objects: &[Drift], refused: &[Object]) -> Option<String> {
    let unfenced = refused.contains(&Object::AdminNetworkPolicy)
        && objects
            .iter()
            .any(|d| d.object == Object::AdminNetworkPolicy && d.missing());
    (drift.object == Object::StatefulSet && drift.missing() && unfenced).then(|| {
        "not created while the NetworkPolicy fencing the admin port is missing (its apply \
         failed)"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(n: u32) -> Snapshot {
        Snapshot {
            spec_replicas: n,
            paused: false,
            force: false,
            min_ready_ms: 0,
            failover_enabled: true,
            failover_period_ms: 300_000,
            max_failover_count: 1,
            node_lost_timeout_ms: 300_000,
            sts_replicas: Some(n),
            update_revision: "r1".into(),
            pods: (0..n)
                .map(|i| Pod {
                    name: format!("pd-{i}"),
                    ordinal: i,
                    revision: "r1".into(),
                    ready: true,
                    ready_for_ms: 60_000,
                    scheduled: true,
                    pvc_uids: vec![format!("uid-{i}")],
                    terminating: false,
                    node_lost_for_ms: None,
                })
                .collect(),
            members: (0..n)
                .map(|i| Member {
                    name: format!("pd-{i}"),
                    id: format!("{}", 10 + i),
                    healthy: true,
                    is_leader: i == 0,
                    unhealthy_for_ms: 0,
                })
                .collect(),
            members_reachable: true,
            failures: vec![],
            deferred_pvcs: vec![],
            drift: vec![],
            tls_secret: true,
            volumes: volumes::Growth {
                resize: vec![],
                state: volumes::State::AtSize,
            },
        }
    }

    #[test]
    fn an_unchanged_healthy_cluster_needs_nothing() {
        let s = snapshot(3);
        assert_eq!(reconcile(&s), vec![]);
        let c = conditions(&s);
        assert!(
            c.available && c.quorate && !c.progressing && !c.degraded,
            "{c:?}"
        );
    }

    fn drifted(object: Object) -> Drift {
        Drift {
            object,
            field: Some("metadata.annotations[\"meridian.io/applied-hash\"]".into()),
        }
    }

    fn missing(object: Object) -> Drift {
        Drift {
            object,
            field: None,
        }
    }

    #[test]
    fn table() {
        let mut spec_changed = snapshot(3);
        spec_changed.drift = vec![drifted(Object::ConfigMap), drifted(Object::StatefulSet)];
        let mut shrink_asked = snapshot(5);
        shrink_asked.spec_replicas = 3;
        shrink_asked.drift = vec![drifted(Object::DisruptionBudget)];
        let mut service_deleted = snapshot(3);
        service_deleted.drift = vec![missing(Object::PeerService)];
        let mut fresh = snapshot(3);
        fresh.drift = Object::ALL.into_iter().map(missing).collect();
        fresh.sts_replicas = None;
        fresh.pods.clear();
        fresh.members.clear();
        let mut paused = snapshot(3);
        paused.paused = true;
        paused.update_revision = "r2".into();
        let mut upgrading = snapshot(3);
        upgrading.update_revision = "r2".into();
        let mut growing = snapshot(3);
        growing.spec_replicas = 5;
        let mut unreachable = snapshot(3);
        unreachable.update_revision = "r2".into();
        unreachable.members.clear();
        unreachable.members_reachable = false;
        let mut terminating = snapshot(3);
        terminating.update_revision = "r2".into();
        terminating.pods[2].terminating = true;
        terminating.pods[2].ready = false;
        let mut recreating = snapshot(3);
        recreating.update_revision = "r2".into();
        recreating.pods.pop();
        let mut no_secret = snapshot(3);
        no_secret.tls_secret = false;
        no_secret.drift = vec![drifted(Object::StatefulSet)];
        no_secret.update_revision = "r2".into();
        let mut no_secret_fresh = snapshot(3);
        no_secret_fresh.tls_secret = false;
        no_secret_fresh.sts_replicas = None;
        no_secret_fresh.drift = Object::ALL.into_iter().map(missing).collect();
        let mut dead = snapshot(3);
        dead.members[2].healthy = false;
        dead.members[2].unhealthy_for_ms = 400_000;
        let cases = vec![
            (
                "spec changed: the objects it changed are applied, then carry on",
                spec_changed,
                vec![Action::ApplyOwned {
                    replicas: 3,
                    objects: vec![drifted(Object::ConfigMap), drifted(Object::StatefulSet)],
                }],
            ),
            (
                "5 -> 3 changes the budget: applied at 5, then the first scale-in step",
                shrink_asked,
                vec![
                    Action::ApplyOwned {
                        replicas: 5,
                        objects: vec![drifted(Object::DisruptionBudget)],
                    },
                    Action::Scale(scale::Step::DeleteMember("pd-4".into())),
                ],
            ),
            (
                "a Service deleted by hand: that one is applied, nothing else",
                service_deleted,
                vec![Action::ApplyOwned {
                    replicas: 3,
                    objects: vec![missing(Object::PeerService)],
                }],
            ),
            (
                "nothing exists: apply with one member first",
                fresh,
                vec![Action::ApplyOwned {
                    replicas: 1,
                    objects: Object::ALL.into_iter().map(missing).collect(),
                }],
            ),
            (
                "paused: nothing, even with an upgrade pending",
                paused,
                vec![],
            ),
            (
                "upgrade: highest follower first",
                upgrading,
                vec![Action::Upgrade(upgrade::Step::DeletePod("pd-2".into()))],
            ),
            (
                "members API unreachable: no pod is touched, even with an upgrade pending",
                unreachable,
                vec![],
            ),
            (
                "a deleted pod still terminating: wait, do not delete it again",
                terminating,
                vec![Action::Upgrade(upgrade::Step::Wait(
                    "pd-2 is terminating".into(),
                ))],
            ),
            (
                "a pod not recreated yet: wait",
                recreating,
                vec![Action::Upgrade(upgrade::Step::Wait(
                    "the StatefulSet has not created every pod yet".into(),
                ))],
            ),
            (
                "no TLS Secret: nothing applied or restarted, though the spec changed",
                no_secret,
                vec![],
            ),
            (
                "no TLS Secret on a new cluster: nothing is created",
                no_secret_fresh,
                vec![],
            ),
            (
                "scale out by one",
                growing,
                vec![Action::Scale(scale::Step::SetReplicas(4))],
            ),
            (
                "a dead member is declared failed",
                dead,
                vec![Action::Failover(failover::Step::Declare {
                    pod: "pd-2".into(),
                    member_id: "12".into(),
                    pvc_uids: vec!["uid-2".into()],
                })],
            ),
        ];
        for (name, s, want) in cases {
            assert_eq!(reconcile(&s), want, "{name}");
        }
    }

    #[test]
    fn a_stateful_set_to_be_put_back_holds_the_upgrade_and_nothing_else() {
        // A template edited by hand: its update revision is not the pods', yet no pod is
        // restarted onto it; the apply puts the template back.
        let mut edited = snapshot(3);
        edited.update_revision = "r-hand".into();
        edited.drift = vec![drifted(Object::StatefulSet)];
        assert_eq!(
            reconcile(&edited),
            vec![Action::ApplyOwned {
                replicas: 3,
                objects: vec![drifted(Object::StatefulSet)],
            }]
        );
        // Its apply failing pass after pass (an immutable field) holds no scaling or
        // failover: they come in the same pass.
        let mut growing = snapshot(3);
        growing.spec_replicas = 4;
        growing.drift = vec![drifted(Object::StatefulSet)];
        assert_eq!(
            reconcile(&growing)[1..],
            [Action::Scale(scale::Step::SetReplicas(4))]
        );
        let mut dead = snapshot(3);
        dead.members[1].healthy = false;
        dead.members[1].unhealthy_for_ms = 400_000;
        dead.drift = vec![drifted(Object::StatefulSet)];
        assert!(matches!(
            reconcile(&dead)[1..],
            [Action::Failover(failover::Step::Declare { .. })]
        ));
    }

    #[test]
    fn a_stateful_set_is_not_created_while_the_admin_port_is_unfenced() {
        let all: Vec<Drift> = Object::ALL.into_iter().map(missing).collect();
        let sts = missing(Object::StatefulSet);
        assert!(held_back(&sts, &all, &[Object::AdminNetworkPolicy]).is_some());
        // Another failure, or a policy that exists (and only differs), holds nothing back.
        assert_eq!(held_back(&sts, &all, &[Object::ConfigMap]), None);
        let policy_edited = vec![drifted(Object::AdminNetworkPolicy), sts.clone()];
        assert_eq!(
            held_back(&sts, &policy_edited, &[Object::AdminNetworkPolicy]),
            None
        );
        // An existing StatefulSet is applied still: holding it back fences nothing.
        let edited = drifted(Object::StatefulSet);
        assert_eq!(
            held_back(&edited, &all, &[Object::AdminNetworkPolicy]),
            None
        );
    }

    #[test]
    fn rollout_counts_updated_members_against_the_stateful_set() {
        let mut s = snapshot(3);
        assert_eq!(
            rollout(&s),
            Rollout {
                updated: 3,
                members: 3
            }
        );
        s.update_revision = "r2".into();
        assert_eq!(
            rollout(&s).updated,
            0,
            "a new template: nothing updated yet"
        );
        s.pods[2].revision = "r2".into();
        assert_eq!(rollout(&s).updated, 1);
        // The next pod deleted for its restart, then gone: 1 of 3 either way.
        s.pods[1].terminating = true;
        assert_eq!(
            rollout(&s),
            Rollout {
                updated: 1,
                members: 3
            }
        );
        s.pods.remove(1);
        assert_eq!(rollout(&s).members, 3);
        // A pod past the replicas (scale-in under way) is not a member any more.
        let mut shrinking = snapshot(3);
        shrinking.sts_replicas = Some(2);
        assert_eq!(
            rollout(&shrinking),
            Rollout {
                updated: 2,
                members: 2
            }
        );
        let mut fresh = snapshot(3);
        fresh.sts_replicas = None;
        fresh.pods.clear();
        assert_eq!(rollout(&fresh), Rollout::default());
    }

    #[test]
    fn failover_waits_for_an_upgrade_or_a_scale_and_resumes_after() {
        let dead = |mut s: Snapshot| {
            s.members[2].healthy = false;
            s.members[2].unhealthy_for_ms = 400_000;
            s
        };
        let declares = |s: &Snapshot| {
            reconcile(s)
                .iter()
                .any(|a| matches!(a, Action::Failover(failover::Step::Declare { .. })))
        };
        assert!(declares(&dead(snapshot(3))), "a dead member is declared");

        // Mid-upgrade: a pod still on the old revision.
        let mut upgrading = dead(snapshot(3));
        upgrading.pods[0].revision = "old".into();
        assert!(!declares(&upgrading), "declared during an upgrade");
        upgrading.pods[0].revision = upgrading.update_revision.clone();
        assert!(
            declares(&upgrading),
            "not declared once the upgrade is done"
        );

        // Mid-scale-out, then mid-scale-in.
        let mut scaling = dead(snapshot(3));
        scaling.spec_replicas = 5;
        assert!(!declares(&scaling), "declared during a scale-out");
        let mut shrinking = dead(snapshot(3));
        shrinking.spec_replicas = 2;
        assert!(!declares(&shrinking), "declared during a scale-in");
    }

    #[test]
    fn failure_members_add_a_replica_and_conditions_follow() {
        let mut s = snapshot(3);
        s.failures = vec![failover::Failure {
            pod: "pd-2".into(),
            member_id: "12".into(),
            pvc_uids: vec!["uid-2".into()],
            replace_attempts: 0,
            since_replaced_ms: None,
        }];
        s.members[2].healthy = false;
        s.members[2].unhealthy_for_ms = 400_000;
        // Declared: the member is replaced before anything else.
        assert!(matches!(
            reconcile(&s)[..],
            [Action::Failover(failover::Step::Replace { .. })]
        ));
        // Replaced (no longer registered): the extra replica comes next.
        s.members.remove(2);
        assert_eq!(
            reconcile(&s),
            vec![Action::Scale(scale::Step::SetReplicas(4))]
        );
        let c = conditions(&s);
        assert!(c.quorate && c.available && c.progressing, "{c:?}");
        // Two of three gone: not quorate, not available, degraded.
        let mut down = snapshot(3);
        down.members[1].healthy = false;
        down.members[2].healthy = false;
        let c = conditions(&down);
        assert!(!c.quorate && !c.available && c.degraded, "{c:?}");
    }
}

//! From what the shell read (the cluster resource, its owned objects, pods, PVCs and the
//! members API) to the decision snapshot, and from a decision and what its applies met back to
//! the status to write. Pure: the time is an argument, nothing is fetched here.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::reconcile::{self, Conditions, Snapshot};
use super::resources::Object;
use super::{drift, failover, resources, volumes};
use crate::crd::{FailureMember, MemberStatus, MeridianCluster, MeridianClusterStatus};

/// The annotation that asks for upgrades (and scaling to zero) without the health gates.
pub const FORCE_ANNOTATION: &str = "meridian.io/force-upgrade";
pub use super::resources::APPLIED_HASH_ANNOTATION;
/// On a PVC: delete it before its ordinal is used again.
pub const DEFERRED_DELETE_ANNOTATION: &str = "meridian.io/deferred-delete";
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// One member as the members API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    pub name: String,
    pub id: String,
    pub healthy: bool,
    pub is_leader: bool,
}

/// The members API's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MembersView {
    pub cluster_id: Option<String>,
    pub members: Vec<MemberView>,
}

impl MembersView {
    pub fn leader(&self) -> Option<&MemberView> {
        self.members.iter().find(|m| m.is_leader)
    }
}

/// Everything one reconcile reads.
#[derive(Debug, Clone)]
pub struct Observed {
    pub cluster: MeridianCluster,
    pub stateful_set: Option<StatefulSet>,
    /// The other owned objects as stored, as JSON; one missing is not in the map.
    pub objects: BTreeMap<Object, serde_json::Value>,
    pub pods: Vec<Pod>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    /// `None` when no member answered.
    pub members: Option<MembersView>,
    /// The namespace the operator runs in: its pods are let in to the admin port.
    pub operator_namespace: String,
    /// The nodes of the pods that are not Ready (`None`: gone); one not in the map is not
    /// known.
    pub nodes: BTreeMap<String, Option<Node>>,
    /// Whether the claims' StorageClass allows volume expansion: looked up only while a claim
    /// asks for less than the spec (`volumes::any_below`); `None` when not looked up or not
    /// known.
    pub storage_expandable: Option<bool>,
}

/// The members' claims as `volumes` sees them.
pub fn claims(pvcs: &[PersistentVolumeClaim]) -> Vec<volumes::Claim> {
    pvcs.iter()
        .map(|c| volumes::Claim {
            name: c.name_any(),
            requested: c
                .spec
                .as_ref()
                .and_then(|s| s.resources.as_ref())
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("storage"))
                .map(|q| q.0.clone()),
            capacity: c
                .status
                .as_ref()
                .and_then(|s| s.capacity.as_ref())
                .and_then(|c| c.get("storage"))
                .map(|q| q.0.clone()),
        })
        .collect()
}

/// The storage size of a stored StatefulSet's claim template.
fn template_size(sts: &StatefulSet) -> Option<&str> {
    sts.spec
        .as_ref()?
        .volume_claim_templates
        .as_ref()?
        .first()?
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
        .map(|q| q.0.as_str())
}

/// `mc` as its StatefulSet can be applied now: the claim template keeps the stored size while
/// the spec asks for more, since that field cannot change (the claims grow instead:
/// `volumes`). Everything else is the spec's.
pub fn buildable(mc: &MeridianCluster, stored: Option<&StatefulSet>) -> MeridianCluster {
    let mut built = mc.clone();
    built.spec.storage.size =
        volumes::kept_size(&mc.spec.storage.size, stored.and_then(template_size));
    built
}

/// How long the node under a pod that is not Ready has been lost: NotReady (since its Ready
/// condition changed), or gone (since the pod stopped being Ready). `None` when the pod is
/// Ready, its node is Ready or not known, or there is no time to count from.
fn node_lost_for_ms(
    pod: &Pod,
    nodes: &BTreeMap<String, Option<Node>>,
    now: Timestamp,
) -> Option<u64> {
    let pod_ready = pod_condition(pod, "Ready");
    if pod_ready.is_some_and(|c| c.status == "True") {
        return None;
    }
    let node_name = pod.spec.as_ref()?.node_name.as_ref()?;
    let since = match nodes.get(node_name)? {
        Some(node) => {
            let ready = node
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "Ready")?;
            if ready.status == "True" {
                return None;
            }
            ready.last_transition_time.as_ref()?.0
        }
        None => pod_ready?.last_transition_time.as_ref()?.0,
    };
    Some(since_ms(now, since))
}

/// `data-<pod>`: the PVC the StatefulSet's claim template gives a pod.
pub fn pvc_name(pod: &str) -> String {
    format!("data-{pod}")
}

/// The ordinal of `<cluster>-<n>`, for names of this cluster only.
pub fn ordinal(cluster: &str, name: &str) -> Option<u32> {
    name.strip_prefix(cluster)?.strip_prefix('-')?.parse().ok()
}

/// A Go-style duration (`90s`, `5m`, `1h30m`, `250ms`) in milliseconds.
pub fn parse_duration_ms(s: &str) -> Option<u64> {
    let mut total = 0u64;
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        let value: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return None,
        };
        total = total.checked_add(value.checked_mul(scale)?)?;
        rest = &rest[unit_len..];
    }
    Some(total)
}

fn since_ms(now: Timestamp, then: Timestamp) -> u64 {
    (now.as_millisecond() - then.as_millisecond()).max(0) as u64
}

fn pod_condition<'a>(
    pod: &'a Pod,
    kind: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

fn parse_time(s: &str) -> Option<Timestamp> {
    s.parse().ok()
}

/// Members with the time each last changed health: kept from the previous status while the
/// health is the same, `now` when it changed.
pub fn member_statuses(
    previous: &[MemberStatus],
    members: &MembersView,
    now: Timestamp,
) -> Vec<MemberStatus> {
    members
        .members
        .iter()
        .map(|m| {
            let before = previous.iter().find(|p| p.name == m.name && p.id == m.id);
            let since = match before {
                Some(p) if p.healthy == m.healthy => p.last_transition_time.clone(),
                _ => None,
            };
            MemberStatus {
                name: m.name.clone(),
                id: m.id.clone(),
                healthy: m.healthy,
                last_transition_time: since.or_else(|| Some(now.to_string())),
            }
        })
        .collect()
}

/// An apply of this reconcile that failed: the object, and what the API server (or the
/// operator) said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyFailure {
    pub object: Object,
    pub message: String,
}

/// The condition that says which applies failed, and why.
pub const APPLY_FAILED: &str = "ApplyFailed";

/// What the `ApplyFailed` condition and its event say: each object and why it failed.
pub fn apply_failed_message(mc: &MeridianCluster, failures: &[ApplyFailure]) -> String {
    failures
        .iter()
        .map(|f| format!("{}: {}", f.object.describe(mc), f.message))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether `failures` are news against the stored status (none before, or other ones): the
/// warning event is published then, not on every pass that tries the same refused apply again.
pub fn apply_failures_are_news(mc: &MeridianCluster, failures: &[ApplyFailure]) -> bool {
    if failures.is_empty() {
        return false;
    }
    let message = apply_failed_message(mc, failures);
    !mc.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == APPLY_FAILED && c.status == "True" && c.message == message)
    })
}

/// The spec names a TLS Secret (the schema requires one; a cluster stored before it did may
/// lack it).
pub fn has_tls_secret(mc: &MeridianCluster) -> bool {
    mc.spec.tls_secret.as_deref().is_some_and(|s| !s.is_empty())
}

pub fn snapshot(o: &Observed, now: Timestamp) -> Snapshot {
    let mc = &o.cluster;
    let name = mc.name_any();
    let status = mc.status.clone().unwrap_or_default();
    let sts_status = o.stateful_set.as_ref().and_then(|s| s.status.as_ref());
    let members_now = o.members.clone().unwrap_or_default();
    let statuses = member_statuses(&status.members, &members_now, now);
    let pods = o
        .pods
        .iter()
        .filter_map(|p| {
            let pod_name = p.name_any();
            let ordinal = ordinal(&name, &pod_name)?;
            let ready = pod_condition(p, "Ready");
            let ready_since = ready
                .filter(|c| c.status == "True")
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0);
            let scheduled = p.spec.as_ref().is_some_and(|s| s.node_name.is_some())
                || pod_condition(p, "PodScheduled").is_some_and(|c| c.status == "True");
            let pvc = pvc_name(&pod_name);
            Some(reconcile::Pod {
                name: pod_name,
                ordinal,
                revision: p.labels().get(REVISION_LABEL).cloned().unwrap_or_default(),
                ready: ready.is_some_and(|c| c.status == "True"),
                ready_for_ms: ready_since.map_or(0, |t| since_ms(now, t)),
                scheduled,
                pvc_uids: o
                    .pvcs
                    .iter()
                    .filter(|c| c.name_any() == pvc)
                    .filter_map(|c| c.uid())
                    .collect(),
                terminating: p.metadata.deletion_timestamp.is_some(),
                node_lost_for_ms: node_lost_for_ms(p, &o.nodes, now),
            })
        })
        .collect();
    let members = members_now
        .members
        .iter()
        .zip(&statuses)
        .map(|(m, s)| reconcile::Member {
            name: m.name.clone(),
            id: m.id.clone(),
            healthy: m.healthy,
            is_leader: m.is_leader,
            unhealthy_for_ms: if m.healthy {
                0
            } else {
                s.last_transition_time
                    .as_deref()
                    .and_then(parse_time)
                    .map_or(0, |t| since_ms(now, t))
            },
        })
        .collect();
    let annotations = mc.annotations();
    let sts_replicas = o
        .stateful_set
        .as_ref()
        .map(|s| s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u32);
    let desired = resources::owned(
        &buildable(mc, o.stateful_set.as_ref()),
        sts_replicas.unwrap_or(1),
        &o.operator_namespace,
    );
    let drift = drift::drifted(&desired, |object| match object {
        // A typed object always serializes; were it not to, it is applied again.
        Object::StatefulSet => o
            .stateful_set
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok()),
        _ => o.objects.get(&object).cloned(),
    });
    Snapshot {
        spec_replicas: mc.spec.replicas.max(0) as u32,
        paused: mc.spec.paused,
        force: annotations
            .get(FORCE_ANNOTATION)
            .is_some_and(|v| v == "true"),
        min_ready_ms: mc.spec.min_ready_seconds.max(0) as u64 * 1_000,
        failover_enabled: mc.spec.failover.enabled,
        failover_period_ms: parse_duration_ms(&mc.spec.failover.period).unwrap_or(300_000),
        max_failover_count: mc.spec.failover.max_failover_count.max(0) as usize,
        node_lost_timeout_ms: parse_duration_ms(&mc.spec.failover.node_lost_timeout)
            .unwrap_or(300_000),
        sts_replicas,
        update_revision: sts_status
            .and_then(|s| s.update_revision.clone())
            .unwrap_or_default(),
        pods,
        members,
        members_reachable: o.members.is_some(),
        failures: status
            .failure_members
            .iter()
            .map(|f| failover::Failure {
                pod: f.pod_name.clone(),
                member_id: f.member_id.clone(),
                pvc_uids: f.pvc_uids.clone(),
                replace_attempts: f.replace_attempts,
                // A time that does not parse counts as long ago: one more attempt at most.
                since_replaced_ms: f
                    .replaced_at
                    .as_deref()
                    .and_then(|t| t.parse::<Timestamp>().ok())
                    .map(|t| since_ms(now, t)),
            })
            .collect(),
        deferred_pvcs: o
            .pvcs
            .iter()
            .filter(|c| c.annotations().contains_key(DEFERRED_DELETE_ANNOTATION))
            .filter_map(|c| ordinal(&name, c.name_any().strip_prefix("data-")?))
            .collect(),
        drift,
        tls_secret: has_tls_secret(mc),
        volumes: volumes::grow(
            &mc.spec.storage.size,
            &claims(&o.pvcs),
            o.storage_expandable,
        ),
    }
}

fn condition(
    previous: &[Condition],
    kind: &str,
    on: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    let status = if on { "True" } else { "False" };
    let since = previous
        .iter()
        .find(|c| c.type_ == kind && c.status == status)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    Condition {
        type_: kind.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: since,
    }
}

/// The status one reconcile observed. `failures` are the failure members after this
/// reconcile's failover step, `refused` the applies of this reconcile that failed. Unchanged
/// input gives an equal status (times are kept), so the shell can skip the write.
pub fn status(
    o: &Observed,
    s: &Snapshot,
    failures: Vec<FailureMember>,
    refused: &[ApplyFailure],
    now: Timestamp,
) -> MeridianClusterStatus {
    let mc = &o.cluster;
    let previous = mc.status.clone().unwrap_or_default();
    let c: Conditions = reconcile::conditions(s);
    let generation = mc.metadata.generation;
    let healthy = s.members.iter().filter(|m| m.healthy).count();
    let sts_status = o.stateful_set.as_ref().and_then(|s| s.status.as_ref());
    let selector = resources::labels(mc)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let p = &previous.conditions;
    MeridianClusterStatus {
        cluster_id: o
            .members
            .as_ref()
            .and_then(|m| m.cluster_id.clone())
            .or(previous.cluster_id.clone()),
        leader: o
            .members
            .as_ref()
            .and_then(|m| m.leader().map(|l| l.name.clone())),
        members: o.members.as_ref().map_or(previous.members.clone(), |m| {
            member_statuses(&previous.members, m, now)
        }),
        failure_members: failures,
        replicas: o.pods.len() as i32,
        selector: Some(selector),
        current_revision: sts_status.and_then(|s| s.current_revision.clone()),
        update_revision: sts_status.and_then(|s| s.update_revision.clone()),
        conditions: vec![
            condition(
                p,
                "Available",
                c.available,
                if c.available {
                    "LeaderServing"
                } else {
                    "NoLeader"
                },
                format!("{healthy} of {} members healthy", s.members.len()),
                generation,
                now,
            ),
            condition(
                p,
                "Quorate",
                c.quorate,
                if c.quorate { "Quorum" } else { "NoQuorum" },
                if s.members_reachable {
                    format!("{healthy} healthy members")
                } else {
                    "no member answered the members API".into()
                },
                generation,
                now,
            ),
            if s.tls_secret {
                condition(
                    p,
                    "Progressing",
                    c.progressing,
                    if c.progressing { "Rolling" } else { "Settled" },
                    format!("update revision {}", s.update_revision),
                    generation,
                    now,
                )
            } else {
                // Stuck, as a Deployment past its deadline says it: nothing is applied until
                // the spec names a Secret.
                condition(
                    p,
                    "Progressing",
                    false,
                    "TLSSecretMissing",
                    "spec.tlsSecret is required: the members and the operator need one cluster \
                     CA (a Secret with tls.crt, tls.key and ca.crt); nothing is applied until \
                     it is set"
                        .into(),
                    generation,
                    now,
                )
            },
            condition(
                p,
                "Degraded",
                c.degraded,
                if c.degraded {
                    "MemberUnhealthy"
                } else {
                    "AllHealthy"
                },
                s.members
                    .iter()
                    .filter(|m| !m.healthy)
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
                generation,
                now,
            ),
            // False again once every apply went through (or none was needed): the object
            // is as wanted.
            condition(
                p,
                APPLY_FAILED,
                !refused.is_empty(),
                if refused.is_empty() {
                    "NoFailure"
                } else {
                    "ApplyError"
                },
                apply_failed_message(mc, refused),
                generation,
                now,
            ),
            {
                let (at_size, reason, message) =
                    volumes::condition(&s.volumes.state, &mc.spec.storage.size);
                condition(
                    p,
                    "VolumesExpanded",
                    at_size,
                    reason,
                    message,
                    generation,
                    now,
                )
            },
        ],
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        for (s, ms) in [
            ("5m", Some(300_000)),
            ("90s", Some(90_000)),
            ("1h30m", Some(5_400_000)),
            ("250ms", Some(250)),
            ("", None),
            ("5", None),
            ("m", None),
            ("5d", None),
        ] {
            assert_eq!(parse_duration_ms(s), ms, "{s:?}");
        }
    }

    #[test]
    fn a_node_is_lost_while_notready_or_gone_and_its_pod_not_ready() {
        use k8s_openapi::api::core::v1::PodStatus;
        use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus, PodCondition, PodSpec};
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let t0: Timestamp = "2026-01-01T00:04:00Z".parse().unwrap();
        let t1: Timestamp = "2026-01-01T00:07:00Z".parse().unwrap();
        let pod = |ready: &str| Pod {
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    last_transition_time: Some(Time(t1)),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        let node = |ready: &str| Node {
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    last_transition_time: Some(Time(t0)),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
            ..Node::default()
        };
        let nodes = |n: Option<Node>| BTreeMap::from([("n1".to_string(), n)]);
        let cases = [
            (
                "node NotReady since t0",
                pod("False"),
                nodes(Some(node("False"))),
                Some(360_000),
            ),
            (
                "node Unknown since t0",
                pod("False"),
                nodes(Some(node("Unknown"))),
                Some(360_000),
            ),
            (
                "node gone: since the pod went",
                pod("False"),
                nodes(None),
                Some(180_000),
            ),
            ("node Ready", pod("False"), nodes(Some(node("True"))), None),
            ("pod Ready", pod("True"), nodes(Some(node("False"))), None),
            ("node not known", pod("False"), BTreeMap::new(), None),
            (
                "never scheduled",
                Pod {
                    spec: None,
                    ..pod("False")
                },
                nodes(None),
                None,
            ),
        ];
        for (name, p, nodes, want) in cases {
            assert_eq!(node_lost_for_ms(&p, &nodes, now), want, "{name}");
        }
    }

    #[test]
    fn ordinals_of_this_cluster_only() {
        assert_eq!(ordinal("pd", "pd-3"), Some(3));
        assert_eq!(ordinal("pd", "pd-x"), None);
        assert_eq!(ordinal("pd", "pdq-1"), None);
        assert_eq!(ordinal("pd", "other-1"), None);
    }

    #[test]
    fn health_transition_times_are_kept_until_the_health_changes() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        let view = |healthy| MembersView {
            cluster_id: None,
            members: vec![MemberView {
                name: "pd-0".into(),
                id: "7".into(),
                healthy,
                is_leader: false,
            }],
        };
        let first = member_statuses(&[], &view(true), t0);
        assert_eq!(
            first[0].last_transition_time.as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        let same = member_statuses(&first, &view(true), t1);
        assert_eq!(same, first);
        let changed = member_statuses(&first, &view(false), t1);
        assert_eq!(
            changed[0].last_transition_time.as_deref(),
            Some("2026-01-01T00:05:00Z")
        );
    }
}

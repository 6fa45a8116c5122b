//! One reconcile, the thin shell around `decide`: read the owned objects, the workload and the
//! members API, build the snapshot, decide, carry the actions out (with an event for each step
//! and each wait), and write the status only when it differs from what is stored. An
//! unchanged, healthy cluster therefore costs reads and no write. What it carries out it counts
//! in the metrics as it goes (a step once it took effect), and it records what it observed of
//! the cluster.
//!
//! An apply that fails holds nothing else back: the other objects are applied, failover,
//! scaling and the upgrade go on, the status is written with an `ApplyFailed` condition naming
//! the object and the API server's message (with a warning event when that is news, not on
//! every pass that tries again), and only then does the reconcile return the first such error,
//! so it is counted by kind and retried.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::error::ReconcileError;
use super::members::Members;
use super::metrics::{self, Metrics};
use super::platform::{Note, Owned, Platform};
use crate::crd::{FailureMember, MeridianCluster};
use crate::decide::drift::Drift;
use crate::decide::reconcile::{self as decide_reconcile, reconcile, Action};
use crate::decide::snapshot::{self, ApplyFailure, Observed};
use crate::decide::{failover, resources, scale, upgrade};

/// What the controller does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub actions: Vec<Action>,
    pub status_written: bool,
    pub requeue_after: Duration,
}

/// How long a leader transfer may take to show in the members API before the step fails.
const TRANSFER_VERIFY: Duration = Duration::from_secs(10);

/// The owned objects for `replicas` members, each stamped with its hash; the admin
/// NetworkPolicy lets in the operator's pods from `operator_namespace`.
pub fn owned(mc: &MeridianCluster, replicas: u32, operator_namespace: &str) -> Owned {
    resources::owned(mc, replicas, operator_namespace)
}

fn note(warning: bool, reason: &str, action: &str, message: String) -> Note {
    Note {
        warning,
        reason: reason.into(),
        action: action.into(),
        message,
    }
}

/// Publishes the event of a step or a wait. The step is counted first: it took effect
/// whether or not its event gets through.
async fn tell<P: Platform>(
    platform: &P,
    metrics: &Metrics,
    mc: &MeridianCluster,
    note: Note,
) -> Result<(), ReconcileError> {
    metrics.step(&note.action, &note.reason);
    platform.event(mc, &note).await
}

pub async fn reconcile_once<P: Platform, M: Members>(
    mc: &MeridianCluster,
    platform: &P,
    members: &M,
    metrics: &Metrics,
    now: Timestamp,
) -> Result<Outcome, ReconcileError> {
    let workload = platform.workload(mc).await?;
    let operator_namespace = platform.operator_namespace();
    let observed = Observed {
        cluster: mc.clone(),
        stateful_set: workload.stateful_set,
        objects: workload.objects,
        pods: workload.pods,
        pvcs: workload.pvcs,
        members: members.list(mc).await,
        operator_namespace: operator_namespace.clone(),
        nodes: workload.nodes,
        storage_expandable: workload.storage_expandable,
    };
    let snap = snapshot::snapshot(&observed, now);
    metrics.observed(
        mc,
        decide_reconcile::rollout(&snap),
        decide_reconcile::conditions(&snap),
    );
    let actions = reconcile(&snap);
    let mut failures = mc
        .status
        .as_ref()
        .map(|s| s.failure_members.clone())
        .unwrap_or_default();
    let mut waiting = false;
    let mut refused = Vec::new();
    let mut apply_error = None;
    let mut failover_error = None;
    let pod = |ordinal: u32| format!("{}-{ordinal}", mc.name_any());
    for action in &actions {
        match action {
            Action::ApplyOwned { replicas, objects } => {
                // The claim template as the stored StatefulSet has it while the claims grow.
                let built = snapshot::buildable(mc, observed.stateful_set.as_ref());
                let owned = owned(&built, *replicas, &operator_namespace);
                apply_error =
                    carry_apply(mc, platform, metrics, &owned, objects, &mut refused).await?;
            }
            Action::Failover(step) => {
                // A replace attempt that failed half-way is still recorded in the status
                // (its backoff starts), and the error returned after the write.
                if let Err(e) =
                    carry_failover(mc, platform, members, metrics, step, &mut failures, now).await
                {
                    failover_error = Some(e);
                }
            }
            Action::Scale(step) => {
                waiting |= carry_scale(mc, platform, members, metrics, step, &pod).await?
            }
            Action::Upgrade(step) => {
                waiting |= carry_upgrade(mc, platform, members, metrics, step).await?
            }
            Action::GrowVolumes(resizes) => {
                for r in resizes {
                    platform.resize_pvc(mc, &r.claim, &r.size).await?;
                    let message = format!("raised claim {} to {} (PVC expansion)", r.claim, r.size);
                    tell(
                        platform,
                        metrics,
                        mc,
                        note(false, "ResizedPvc", "Storage", message),
                    )
                    .await?;
                }
                waiting = true;
            }
        }
    }
    if snapshot::apply_failures_are_news(mc, &refused) {
        let message = snapshot::apply_failed_message(mc, &refused);
        let n = note(true, snapshot::APPLY_FAILED, "Reconcile", message);
        tell(platform, metrics, mc, n).await?;
    }
    let status = snapshot::status(&observed, &snap, failures, &refused, now);
    let status_written = mc.status.as_ref() != Some(&status);
    if status_written {
        platform.patch_status(mc, &status).await?;
    }
    // Declaring a failure member and clearing them take effect with the status write.
    for action in &actions {
        match action {
            Action::Failover(failover::Step::Declare { .. }) => {
                metrics.failover(mc, metrics::Failover::Declared)
            }
            Action::Failover(failover::Step::Recover) => {
                metrics.failover(mc, metrics::Failover::Recovered)
            }
            _ => {}
        }
    }
    if let Some(e) = failover_error.or(apply_error) {
        return Err(e);
    }
    let requeue_after = if actions.is_empty() {
        Duration::from_secs(30)
    } else if waiting {
        Duration::from_secs(3)
    } else {
        Duration::from_secs(1)
    };
    Ok(Outcome {
        actions,
        status_written,
        requeue_after,
    })
}

/// Applies each object of `objects` alone, in order, with one event for those applied. One that
/// fails (or is held back) goes to `refused` and the rest go on; the first API error is
/// returned for the end of the reconcile.
async fn carry_apply<P: Platform>(
    mc: &MeridianCluster,
    platform: &P,
    metrics: &Metrics,
    owned: &Owned,
    objects: &[Drift],
    refused: &mut Vec<ApplyFailure>,
) -> Result<Option<ReconcileError>, ReconcileError> {
    let mut applied = Vec::new();
    let mut first_error = None;
    for drift in objects {
        let failed: Vec<_> = refused.iter().map(|r| r.object).collect();
        let result = match decide_reconcile::held_back(drift, objects, &failed) {
            Some(why) => Err(why),
            None => platform.apply(owned, drift.object).await.map_err(|e| {
                let cause = e.cause();
                // The first is the reconcile's error, which the controller logs and counts;
                // any other shows here and in the condition.
                match first_error {
                    None => first_error = Some(e),
                    Some(_) => tracing::warn!("{e}"),
                }
                cause
            }),
        };
        match result {
            Ok(()) => applied.push(format!("{} ({})", drift.object.describe(mc), drift.why())),
            Err(message) => refused.push(ApplyFailure {
                object: drift.object,
                message,
            }),
        }
    }
    if !applied.is_empty() {
        let message = format!("applied {}", applied.join(", "));
        tell(
            platform,
            metrics,
            mc,
            note(false, "Applied", "Reconcile", message),
        )
        .await?;
    }
    Ok(first_error)
}

async fn carry_failover<P: Platform, M: Members>(
    mc: &MeridianCluster,
    platform: &P,
    members: &M,
    metrics: &Metrics,
    step: &failover::Step,
    failures: &mut Vec<FailureMember>,
    now: Timestamp,
) -> Result<(), ReconcileError> {
    match step {
        failover::Step::Nothing => {}
        failover::Step::Declare {
            pod,
            member_id,
            pvc_uids,
        } => {
            failures.push(FailureMember {
                pod_name: pod.clone(),
                member_id: member_id.clone(),
                pvc_uids: pvc_uids.clone(),
                created_at: now.to_string(),
                replaced_at: None,
                replace_attempts: 0,
            });
            let message = format!(
                "{pod} (member {member_id}) unhealthy for longer than {}: replacing it",
                mc.spec.failover.period
            );
            tell(
                platform,
                metrics,
                mc,
                note(true, "MemberFailed", "Failover", message),
            )
            .await?;
        }
        failover::Step::ForceDelete { pod, lost_for_ms } => {
            platform.force_delete_pod(mc, pod).await?;
            let message = format!(
                "{pod}'s node lost for {}s (longer than {}): pod force-deleted",
                lost_for_ms / 1_000,
                mc.spec.failover.node_lost_timeout
            );
            tell(
                platform,
                metrics,
                mc,
                note(true, "NodeLost", "Failover", message),
            )
            .await?;
        }
        failover::Step::Replace {
            pod,
            member_id,
            pvc_uids,
        } => {
            // Recorded before the deletes, so one that fails half-way backs off too.
            if let Some(f) = failures
                .iter_mut()
                .find(|f| f.pod_name == *pod && f.member_id == *member_id)
            {
                f.replaced_at = Some(now.to_string());
                f.replace_attempts = f.replace_attempts.saturating_add(1);
            }
            members.delete_member(mc, pod).await?;
            platform.delete_pod(mc, pod).await?;
            for uid in pvc_uids {
                platform
                    .delete_pvc(mc, &snapshot::pvc_name(pod), Some(uid))
                    .await?;
            }
            metrics.failover(mc, metrics::Failover::Replaced);
            let message =
                format!("member {member_id} deleted, {pod} and its volume deleted to join anew");
            tell(
                platform,
                metrics,
                mc,
                note(true, "MemberReplaced", "Failover", message),
            )
            .await?;
        }
        failover::Step::Recover => {
            let names: Vec<String> = failures.drain(..).map(|f| f.pod_name).collect();
            let message = format!(
                "every member serves again; failure members {} cleared",
                names.join(",")
            );
            tell(
                platform,
                metrics,
                mc,
                note(false, "FailoverRecovered", "Failover", message),
            )
            .await?;
        }
    }
    Ok(())
}

/// Carries out a scaling step; true when it was a wait.
async fn carry_scale<P: Platform, M: Members>(
    mc: &MeridianCluster,
    platform: &P,
    members: &M,
    metrics: &Metrics,
    step: &scale::Step,
    pod: &impl Fn(u32) -> String,
) -> Result<bool, ReconcileError> {
    let (warning, reason, message) = match step {
        scale::Step::Steady => return Ok(false),
        scale::Step::Wait(why) => {
            let n = note(false, "Waiting", "Scale", why.clone());
            tell(platform, metrics, mc, n).await?;
            return Ok(true);
        }
        scale::Step::Refuse(why) => {
            let n = note(true, "Refused", "Scale", why.clone());
            tell(platform, metrics, mc, n).await?;
            return Ok(true);
        }
        scale::Step::DeletePvc(o) => {
            let name = snapshot::pvc_name(&pod(*o));
            platform.delete_pvc(mc, &name, None).await?;
            (
                false,
                "DeletedPvc",
                format!("{name} deleted before ordinal {o} is used again"),
            )
        }
        scale::Step::SetReplicas(n) => {
            platform.scale_stateful_set(mc, *n).await?;
            (false, "Scaled", format!("StatefulSet replicas set to {n}"))
        }
        scale::Step::TransferLeader { from, to } => {
            if members.transfer_leader(mc, &pod(*to)).await? {
                metrics.leader_moved(mc, metrics::LeaderMove::Scale);
            }
            (
                false,
                "LeaderTransferred",
                format!("leadership moved off {} to {}", pod(*from), pod(*to)),
            )
        }
        scale::Step::DeleteMember(name) => {
            members.delete_member(mc, name).await?;
            (false, "MemberDeleted", format!("member {name} removed"))
        }
        scale::Step::MarkPvc(o) => {
            let name = snapshot::pvc_name(&pod(*o));
            platform.mark_pvc(mc, &name).await?;
            (
                false,
                "MarkedPvc",
                format!("{name} marked for deletion before ordinal {o} is reused"),
            )
        }
    };
    tell(
        platform,
        metrics,
        mc,
        note(warning, reason, "Scale", message),
    )
    .await?;
    Ok(false)
}

/// Carries out an upgrade step; true when it was a wait.
async fn carry_upgrade<P: Platform, M: Members>(
    mc: &MeridianCluster,
    platform: &P,
    members: &M,
    metrics: &Metrics,
    step: &upgrade::Step,
) -> Result<bool, ReconcileError> {
    match step {
        upgrade::Step::Done => Ok(false),
        upgrade::Step::Wait(why) => {
            let n = note(false, "Waiting", "Upgrade", why.clone());
            tell(platform, metrics, mc, n).await?;
            Ok(true)
        }
        upgrade::Step::DeletePod(name) => {
            platform.delete_pod(mc, name).await?;
            let message = format!("{name} deleted to restart on the update revision");
            let n = note(false, "DeletedPod", "Upgrade", message);
            tell(platform, metrics, mc, n).await?;
            Ok(false)
        }
        upgrade::Step::TransferLeader { to } => {
            let moved = members.transfer_leader(mc, to).await?;
            verify_leader(mc, members, to).await?;
            // Counted once the members API shows it, as the event says it.
            if moved {
                metrics.leader_moved(mc, metrics::LeaderMove::Upgrade);
            }
            let message = format!("leadership moved to the updated member {to}");
            let n = note(false, "LeaderTransferred", "Upgrade", message);
            tell(platform, metrics, mc, n).await?;
            Ok(false)
        }
    }
}

/// Waits (bounded) until the members API names `to` as the leader.
async fn verify_leader<M: Members>(
    mc: &MeridianCluster,
    members: &M,
    to: &str,
) -> Result<(), ReconcileError> {
    let deadline = tokio::time::Instant::now() + TRANSFER_VERIFY;
    loop {
        let leader = members
            .list(mc)
            .await
            .and_then(|v| v.leader().map(|l| l.name.clone()));
        if leader.as_deref() == Some(to) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ReconcileError::TransferUnverified {
                to: to.to_string(),
                within: TRANSFER_VERIFY,
                leader: leader.unwrap_or_else(|| "none".into()),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

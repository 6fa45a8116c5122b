//! The kube-runtime controller: watches MeridianClusters, the objects they own and their
//! members' pods (by label), runs one reconcile per change or requeue behind a finalizer that
//! removes what the operator created when a cluster is deleted. Each reconcile is counted and
//! timed here, failed or not, with its error's kind; readiness waits for the first list.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{self as runtime, Action, Controller};
use kube::runtime::finalizer::{finalizer, Event};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use super::endpoint::Probes;
use super::error::ReconcileError;
use super::kube_api::KubeApi;
use super::members::AdminMembers;
use super::metrics::Metrics;
use super::reconciler::reconcile_once;
use crate::crd::MeridianCluster;

pub const FINALIZER: &str = "meridian.io/cleanup";
const MANAGED: &str = "app.kubernetes.io/managed-by=meridian-operator";
const INSTANCE: &str = "app.kubernetes.io/instance";

pub struct Context {
    pub client: Client,
    pub platform: KubeApi,
    pub members: AdminMembers,
    pub metrics: Arc<Metrics>,
    pub probes: Arc<Probes>,
}

/// Apply or clean up one cluster behind the finalizer.
pub async fn reconcile(
    mc: Arc<MeridianCluster>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let ns = mc.namespace().unwrap_or_else(|| "default".into());
    let api: Api<MeridianCluster> = Api::namespaced(ctx.client.clone(), &ns);
    let result = finalizer(&api, FINALIZER, mc, |event| async {
        match event {
            Event::Apply(mc) => reconcile_once(
                &mc,
                &ctx.platform,
                &ctx.members,
                &ctx.metrics,
                Timestamp::now(),
            )
            .await
            .map(|o| Action::requeue(o.requeue_after)),
            Event::Cleanup(mc) => {
                ctx.platform.remove_owned(&mc).await?;
                ctx.metrics.forget(&mc);
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(ReconcileError::from);
    ctx.metrics
        .reconciled(started.elapsed(), result.as_ref().err());
    result
}

fn error_policy(mc: Arc<MeridianCluster>, error: &ReconcileError, _: Arc<Context>) -> Action {
    tracing::warn!(cluster = %mc.name_any(), kind = error.kind(), "reconcile failed: {error}");
    Action::requeue(Duration::from_secs(5))
}

/// Lists MeridianClusters until a list comes back, then marks the probes: the CRD is installed
/// and the operator may read it, which the controller's watches need.
pub async fn first_list(client: Client, probes: &Probes) {
    let api = Api::<MeridianCluster>::all(client);
    let mut pause = Duration::from_secs(1);
    loop {
        match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => {
                probes.listed();
                return;
            }
            Err(e) => tracing::warn!("listing MeridianClusters (retried in {pause:?}): {e}"),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(30));
    }
}

/// Runs the controller until shutdown (SIGTERM or ctrl-c).
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    first_list(client.clone(), &ctx.probes).await;
    let metrics = ctx.metrics.clone();
    let owned = || watcher::Config::default().labels(MANAGED);
    Controller::new(
        Api::<MeridianCluster>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<StatefulSet>::all(client.clone()), owned())
    .owns(Api::<Service>::all(client.clone()), owned())
    .owns(Api::<NetworkPolicy>::all(client.clone()), owned())
    .owns(Api::<ConfigMap>::all(client.clone()), owned())
    .owns(Api::<PodDisruptionBudget>::all(client.clone()), owned())
    // Pods are owned by the StatefulSet, not the cluster: map them by their instance label.
    .watches(Api::<Pod>::all(client.clone()), owned(), |pod| {
        let cluster = pod.labels().get(INSTANCE)?.clone();
        Some(ObjectRef::<MeridianCluster>::new(&cluster).within(&pod.namespace()?))
    })
    .shutdown_on_signal()
    .run(reconcile, error_policy, ctx)
    .for_each(|result| {
        if let Err(runtime::Error::QueueError(_)) = &result {
            metrics.watch_error();
        }
        async move {
            match result {
                Ok((cluster, _)) => tracing::debug!(%cluster.name, "reconciled"),
                Err(e) => tracing::warn!("{e}"),
            }
        }
    })
    .await;
}

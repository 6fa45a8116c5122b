//! The kube-runtime controller: watches MeridianClusters, the objects they own and their
//! members' pods (by label), runs one reconcile per change or requeue behind a finalizer that
//! removes what the operator created when a cluster is deleted.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{finalizer, Event};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use super::kube_api::KubeApi;
use super::members::AdminMembers;
use super::reconciler::reconcile_once;
use crate::crd::MeridianCluster;

pub const FINALIZER: &str = "meridian.io/cleanup";
const MANAGED: &str = "app.kubernetes.io/managed-by=meridian-operator";
const INSTANCE: &str = "app.kubernetes.io/instance";

pub struct Context {
    pub client: Client,
    pub platform: KubeApi,
    pub members: AdminMembers,
}

/// A reconcile failure, as kube-runtime wants errors typed.
#[derive(Debug)]
pub struct Failed(pub String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

/// Apply or clean up one cluster behind the finalizer.
pub async fn reconcile(mc: Arc<MeridianCluster>, ctx: Arc<Context>) -> Result<Action, Failed> {
    let ns = mc.namespace().unwrap_or_else(|| "default".into());
    let api: Api<MeridianCluster> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, mc, |event| async {
        match event {
            Event::Apply(mc) => reconcile_once(&mc, &ctx.platform, &ctx.members, Timestamp::now())
                .await
                .map(|o| Action::requeue(o.requeue_after))
                .map_err(|e| Failed(format!("{e:#}"))),
            Event::Cleanup(mc) => ctx
                .platform
                .remove_owned(&mc)
                .await
                .map(|()| Action::await_change())
                .map_err(|e| Failed(format!("{e:#}"))),
        }
    })
    .await
    .map_err(|e| Failed(e.to_string()))
}

fn error_policy(mc: Arc<MeridianCluster>, error: &Failed, _: Arc<Context>) -> Action {
    tracing::warn!(cluster = %mc.name_any(), "reconcile failed: {error}");
    Action::requeue(Duration::from_secs(5))
}

/// Runs the controller until shutdown (SIGTERM or ctrl-c).
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
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
    .for_each(|result| async move {
        match result {
            Ok((cluster, _)) => tracing::debug!(%cluster.name, "reconciled"),
            Err(e) => tracing::warn!("{e}"),
        }
    })
    .await;
}

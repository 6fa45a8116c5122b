//! What the shell needs from Kubernetes, as a trait: the real API (`kube_api`) and the
//! end-to-end simulation implement it, so one reconcile shell drives both. Owns no decision.

use std::future::Future;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::error::ReconcileError;
use crate::crd::{MeridianCluster, MeridianClusterStatus};

/// The objects a cluster owns, as they are applied together.
#[derive(Debug, Clone)]
pub struct Owned {
    pub client_service: Service,
    pub peer_service: Service,
    pub admin_service: Service,
    pub admin_network_policy: NetworkPolicy,
    pub config_map: ConfigMap,
    pub disruption_budget: PodDisruptionBudget,
    pub stateful_set: StatefulSet,
}

/// What the cluster's StatefulSet, pods and PVCs look like now.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    pub stateful_set: Option<StatefulSet>,
    pub pods: Vec<Pod>,
    pub pvcs: Vec<PersistentVolumeClaim>,
}

/// An event on the cluster resource: every step and every wait, with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    /// CamelCase reason (`DeletePod`, `Waiting`, ...).
    pub reason: String,
    /// The action taken (`Reconcile`, `Upgrade`, `Scale`, `Failover`).
    pub action: String,
    pub message: String,
}

pub trait Platform: Send + Sync {
    /// The namespace the operator's pods run in, which the admin NetworkPolicy lets in.
    fn operator_namespace(&self) -> String;
    fn workload(
        &self,
        mc: &MeridianCluster,
    ) -> impl Future<Output = Result<Workload, ReconcileError>> + Send;
    /// Server-side apply of every owned object, one field manager.
    fn apply_owned(&self, owned: &Owned)
        -> impl Future<Output = Result<(), ReconcileError>> + Send;
    /// Server-side apply of the StatefulSet alone (replicas move with scaling).
    fn apply_stateful_set(
        &self,
        sts: &StatefulSet,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;
    fn delete_pod(
        &self,
        mc: &MeridianCluster,
        name: &str,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;
    /// Deletes a PVC; with `uid`, only that exact claim (a newer one of the same name stays).
    fn delete_pvc(
        &self,
        mc: &MeridianCluster,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;
    /// Marks a PVC for deletion before its ordinal is used again.
    fn mark_pvc(
        &self,
        mc: &MeridianCluster,
        name: &str,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;
    fn patch_status(
        &self,
        mc: &MeridianCluster,
        status: &MeridianClusterStatus,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;
    fn event(
        &self,
        mc: &MeridianCluster,
        note: &Note,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;
}

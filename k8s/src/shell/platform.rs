//! What the shell needs from Kubernetes, as a trait: the real API (`kube_api`) and the
//! end-to-end simulation implement it, so one reconcile shell drives both. Owns no decision.

use std::collections::BTreeMap;
use std::future::Future;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};

use super::error::ReconcileError;
use crate::crd::{MeridianCluster, MeridianClusterStatus};
pub use crate::decide::resources::{Object, Owned};

/// What the cluster's owned objects, pods and PVCs look like now.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    pub stateful_set: Option<StatefulSet>,
    pub pods: Vec<Pod>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    /// The other owned objects (Services, NetworkPolicy, ConfigMap, budget) as stored, as
    /// JSON; one missing is not in the map.
    pub objects: BTreeMap<Object, serde_json::Value>,
    /// The nodes of the pods that are not Ready, by name (looked up only with failover on):
    /// `None` for one that is gone. A node not in the map is not known (not looked up, or the
    /// lookup failed).
    pub nodes: BTreeMap<String, Option<Node>>,
    /// Whether the claims' StorageClass allows volume expansion, looked up only while a claim
    /// asks for less than the spec (`None`: not looked up, or the lookup failed).
    pub storage_expandable: Option<bool>,
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
    /// Server-side apply of one of `owned`, with the one field manager.
    fn apply(
        &self,
        owned: &Owned,
        object: Object,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;
    /// Sets the StatefulSet's replicas alone, through its `/scale` subresource: scaling goes
    /// on while an apply of the rest of it is refused.
    fn scale_stateful_set(
        &self,
        mc: &MeridianCluster,
        replicas: u32,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;
    fn delete_pod(
        &self,
        mc: &MeridianCluster,
        name: &str,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;
    /// Deletes a pod at once (grace period 0): for a pod whose node is lost, whose kubelet
    /// will never confirm a graceful delete.
    fn force_delete_pod(
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
    /// Raises a PVC's storage request to `size` (PVC expansion).
    fn resize_pvc(
        &self,
        mc: &MeridianCluster,
        name: &str,
        size: &str,
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

//! The `MeridianCluster` custom resource: what a user asks for (spec) and what the operator
//! observed (status), with the `/status` and `/scale` subresources. Owns the schema, with the
//! CEL rules the API server enforces on updates (the storage the StatefulSet's immutable
//! volume claim template was made with); holds no behaviour.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvVar, LocalObjectReference, PodSecurityContext, ResourceRequirements,
    SecurityContext, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// Several `printcolumn(..)` entries share argument names, which clippy takes for repeats.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema, Default)]
#[kube(
    group = "meridian.io",
    version = "v1alpha1",
    kind = "MeridianCluster",
    namespaced,
    status = "MeridianClusterStatus",
    shortname = "mc",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Leader", type_ = "string", json_path = ".status.leader"),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version"),
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Available\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
// Transition rules (`oldSelf`) on the whole spec rather than on `storage`: a rule there would
// not run when `storage` is added to a cluster made without it (defaults: 10Gi, the default
// class). A StatefulSet's volume claim templates cannot change: without these rules such an
// edit is accepted here and then refused on every apply of the StatefulSet (an `ApplyFailed`
// condition). Growing is let through: the refusal then says what to do.
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "(has(self.storage) && has(self.storage.storageClassName)) ? (has(oldSelf.storage) && has(oldSelf.storage.storageClassName) && self.storage.storageClassName == oldSelf.storage.storageClassName) : !(has(oldSelf.storage) && has(oldSelf.storage.storageClassName))",
        "message": "spec.storage.storageClassName cannot be changed, set or unset after creation: the members' volume claims were made with it",
        "fieldPath": ".storage.storageClassName",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": "!isQuantity(has(oldSelf.storage) ? oldSelf.storage.size : '10Gi') || quantity(has(self.storage) ? self.storage.size : '10Gi').compareTo(quantity(has(oldSelf.storage) ? oldSelf.storage.size : '10Gi')) >= 0",
        "message": "spec.storage.size cannot shrink: a volume claim is never made smaller",
        "fieldPath": ".storage.size",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct MeridianClusterSpec {
    /// Members (StatefulSet replicas); 3 or 5 for a cluster that survives a failure.
    pub replicas: i32,
    /// The `meridian` container image.
    pub image: String,
    /// The Meridian version the image carries (shown and compared; the image decides).
    #[serde(default)]
    pub version: String,
    /// `meridian serve --config` contents (TOML), passed through unchanged.
    #[serde(default)]
    pub config: String,
    /// etcd client URLs.
    pub etcd_endpoints: Vec<String>,
    #[serde(default)]
    pub storage: Storage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Replaces the default anti-affinity (members on different nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// Members run only on nodes with these labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Secrets for pulling `image` from a private registry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// Extra environment for the `meridian` container (`RUST_LOG`, `MERIDIAN_ETCD_PASSWORD`
    /// from a Secret, ...). `POD_NAME` and `POD_NAMESPACE` are the operator's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// The pods' security context. Default: non-root (uid and gid 65532, the volume's group
    /// too), the runtime's default seccomp profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<PodSecurityContext>,
    /// The container's security context. Default: no privilege escalation, every
    /// capability dropped, a read-only root filesystem (data lives on the volume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    /// The client Service's type: `ClusterIP` (default), `NodePort` or `LoadBalancer`. The
    /// admin port is never on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^(ClusterIP|NodePort|LoadBalancer)$"))]
    pub service_type: Option<String>,
    /// Status is still synced; nothing is changed.
    #[serde(default)]
    pub paused: bool,
    #[serde(default)]
    pub failover: Failover,
    /// How long a restarted member must stay Ready and healthy before the next one goes.
    #[serde(default)]
    pub min_ready_seconds: i32,
    /// The Secret every member serves with, in the cluster's namespace: `tls.crt` and
    /// `tls.key`, a certificate signed by the cluster CA naming `<cluster>.<namespace>.svc`,
    /// `<cluster>-admin.<namespace>.svc` and `*.<cluster>-peer.<namespace>.svc`; and `ca.crt`,
    /// that CA, which every client certificate must be signed by (the operator's `admin` one
    /// included). A cert-manager Certificate's Secret has these keys. It is mounted as a
    /// directory, so the kubelet updates the files when the Secret is renewed.
    // Required by the schema, so `kubectl apply` refuses a cluster without one: every port
    // wants a client certificate from the cluster CA, and without a Secret each member would
    // make a CA of its own, trusted by no other member and not by the operator. Still an
    // `Option` in Rust: a cluster stored before the field was required must not make the
    // operator's watch fail to decode (that would stall every cluster); `reconcile` leaves such
    // a cluster alone and says why in its status.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required, length(min = 1))]
    pub tls_secret: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// PersistentVolumeClaim size, e.g. `10Gi`. Cannot shrink after creation. A larger size
    /// grows every member's claim in place (PVC expansion) where the StorageClass allows it
    /// (`allowVolumeExpansion`); the `VolumesExpanded` condition reports it.
    // Bounded, so the API server's cost estimate of the CEL rules on it stays small.
    #[schemars(length(max = 64), extend("x-kubernetes-validations" = [
        {"rule": "isQuantity(self)", "message": "spec.storage.size must be a quantity, e.g. 10Gi"}
    ]))]
    pub size: String,
    /// The members' StorageClass; unset: the cluster's default. Fixed at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub storage_class_name: Option<String>,
}

impl Default for Storage {
    fn default() -> Self {
        Storage {
            size: "10Gi".into(),
            storage_class_name: None,
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Failover {
    #[serde(default)]
    pub enabled: bool,
    /// How long a member must be unhealthy before it is replaced (Go duration, e.g. `5m`).
    #[serde(default = "default_failover_period")]
    pub period: String,
    /// Most members replaced at once.
    #[serde(default = "default_max_failover_count")]
    pub max_failover_count: i32,
    /// How long a member's node may be NotReady or gone before its pod is force-deleted
    /// (Go duration, e.g. `5m`), so the StatefulSet can make it again and a member that does
    /// not come back can be replaced.
    #[serde(default = "default_node_lost_timeout")]
    pub node_lost_timeout: String,
}

fn default_node_lost_timeout() -> String {
    "5m".into()
}

fn default_failover_period() -> String {
    "5m".into()
}

fn default_max_failover_count() -> i32 {
    3
}

impl Default for Failover {
    fn default() -> Self {
        Failover {
            enabled: false,
            period: default_failover_period(),
            max_failover_count: default_max_failover_count(),
            node_lost_timeout: default_node_lost_timeout(),
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct MeridianClusterStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// Members as the members API reports them.
    #[serde(default)]
    pub members: Vec<MemberStatus>,
    #[serde(default)]
    pub failure_members: Vec<FailureMember>,
    /// Members' pods (for `/scale`).
    #[serde(default)]
    pub replicas: i32,
    /// The label selector of the members' pods (for `/scale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_revision: Option<String>,
    /// Available, Quorate, Progressing, Degraded.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    pub name: String,
    pub id: String,
    pub healthy: bool,
    /// RFC 3339 time the health last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureMember {
    pub pod_name: String,
    pub member_id: String,
    #[serde(default)]
    pub pvc_uids: Vec<String>,
    /// RFC 3339 time it was declared failed.
    pub created_at: String,
    /// RFC 3339 time of the last replace attempt (member, pod and volume deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced_at: Option<String>,
    /// Replace attempts so far: each waits twice as long as the one before (from 30s, at
    /// most 10m) for the last to take effect.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replace_attempts: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The CRD as committed in `k8s/manifests/crd.yaml` (JSON, which is YAML too: `serde_yaml` is
/// unmaintained, and kubectl and validators read JSON manifests).
pub fn crd_manifest() -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(&MeridianCluster::crd())?)
}

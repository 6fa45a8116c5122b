//! The objects a `MeridianCluster` owns, as the operator wants them: client Service, headless
//! peer Service, headless admin Service with the NetworkPolicy that fences the admin port,
//! ConfigMap, StatefulSet (OnDelete: the operator picks the order) and PodDisruptionBudget.
//! Pure builders; the shell server-side-applies them with one field manager, each one when it
//! is missing or has drifted (`drift`). Every object carries the hash of its own desired form
//! ([`APPLIED_HASH_ANNOTATION`]), so a spec change that only removes a field still shows.
//!
//! Every port of a member wants a client certificate signed by the cluster CA, so the members
//! serve with the cluster's TLS Secret (`tls.crt`, `tls.key`, and `ca.crt`, the CA they verify
//! clients by). The kubelet's probes present no certificate: `--admin-open-probes` lets
//! `/health`, `/ready` and `/metrics` answer them, over HTTPS.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort,
    EmptyDirVolumeSource, EnvVar, EnvVarSource, HTTPGetAction, ObjectFieldSelector,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PodAffinityTerm, PodAntiAffinity,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, SeccompProfile, SecretVolumeSource,
    SecurityContext, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
    VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Resource, ResourceExt};
use serde::Serialize;

use crate::crd::MeridianCluster;

mod config;
mod disruption;
mod services;
mod stateful_set;
#[cfg(test)]
mod tests;

pub use config::{config_hash, config_map, config_map_name, CONFIG_HASH_ANNOTATION};
pub use disruption::disruption_budget;
pub use services::{admin_network_policy, admin_service, client_service, peer_service};
pub use stateful_set::{stateful_set, MEMBER_UID};

/// QUIC (UDP) and the PD-compatible gRPC front end (TCP) share this port number.
pub const CLIENT_PORT: i32 = 2379;
pub const ADMIN_PORT: i32 = 2380;
const DATA_DIR: &str = "/var/lib/meridian";
const CONFIG_DIR: &str = "/etc/meridian";
/// Where the cluster's TLS Secret is mounted. A directory mount, not `subPath`: the kubelet
/// then replaces the files in place when the Secret is renewed.
pub const TLS_DIR: &str = "/etc/meridian-tls";
/// The label the operator's pods carry (`k8s/manifests/operator.yaml`): the admin port's
/// NetworkPolicy lets in pods with it from the operator's namespace.
pub const OPERATOR_POD_LABEL: (&str, &str) = ("app.kubernetes.io/name", "meridian-operator");
/// The label the API server puts on every namespace, with the namespace's name as its value
/// (it cannot be set otherwise, unlike labels a tenant could copy onto a namespace).
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// On every owned object: [`config_hash`] of the object as the spec wants it, without this
/// annotation (and, for the StatefulSet, without its replicas, which move with scaling).
pub const APPLIED_HASH_ANNOTATION: &str = "meridian.io/applied-hash";

/// Which owned object. [`Object::ALL`] is the order they are applied in: the NetworkPolicy
/// before the StatefulSet, so members never run with the admin port unfenced, and the
/// ConfigMap before the pods that mount it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Object {
    ClientService,
    PeerService,
    AdminService,
    AdminNetworkPolicy,
    ConfigMap,
    DisruptionBudget,
    StatefulSet,
}

impl Object {
    pub const ALL: [Object; 7] = [
        Object::ClientService,
        Object::PeerService,
        Object::AdminService,
        Object::AdminNetworkPolicy,
        Object::ConfigMap,
        Object::DisruptionBudget,
        Object::StatefulSet,
    ];

    pub fn kind(self) -> &'static str {
        match self {
            Object::ClientService | Object::PeerService | Object::AdminService => "Service",
            Object::AdminNetworkPolicy => "NetworkPolicy",
            Object::ConfigMap => "ConfigMap",
            Object::DisruptionBudget => "PodDisruptionBudget",
            Object::StatefulSet => "StatefulSet",
        }
    }

    pub fn name(self, mc: &MeridianCluster) -> String {
        match self {
            Object::ClientService | Object::DisruptionBudget | Object::StatefulSet => mc.name_any(),
            Object::PeerService => peer_service_name(mc),
            Object::AdminService | Object::AdminNetworkPolicy => admin_service_name(mc),
            Object::ConfigMap => config_map_name(mc),
        }
    }

    /// `Kind namespace/name`, as events and conditions name it.
    pub fn describe(self, mc: &MeridianCluster) -> String {
        format!(
            "{} {}/{}",
            self.kind(),
            mc.namespace().unwrap_or_else(|| "default".into()),
            self.name(mc)
        )
    }
}

/// The objects a cluster owns, as they are applied, each stamped with its hash.
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

impl Owned {
    /// One object as JSON, as it is sent.
    pub fn value(&self, object: Object) -> serde_json::Result<serde_json::Value> {
        match object {
            Object::ClientService => serde_json::to_value(&self.client_service),
            Object::PeerService => serde_json::to_value(&self.peer_service),
            Object::AdminService => serde_json::to_value(&self.admin_service),
            Object::AdminNetworkPolicy => serde_json::to_value(&self.admin_network_policy),
            Object::ConfigMap => serde_json::to_value(&self.config_map),
            Object::DisruptionBudget => serde_json::to_value(&self.disruption_budget),
            Object::StatefulSet => serde_json::to_value(&self.stateful_set),
        }
    }
}

/// Stamps `object` with the hash of `content` (the object as wanted, without the stamp).
fn stamped<K: Resource + Serialize>(mut object: K, content: &impl Serialize) -> K {
    // These types always serialize; were one not to, its apply fails and says why.
    let hash = config_hash(&serde_json::to_string(content).unwrap_or_default());
    object
        .meta_mut()
        .annotations
        .get_or_insert_with(Default::default)
        .insert(APPLIED_HASH_ANNOTATION.to_string(), hash);
    object
}

fn stamp<K: Resource + Serialize + Clone>(object: K) -> K {
    let content = object.clone();
    stamped(object, &content)
}

/// The owned objects for `replicas` members, each stamped with its hash; the admin
/// NetworkPolicy lets in the operator's pods from `operator_namespace`.
pub fn owned(mc: &MeridianCluster, replicas: u32, operator_namespace: &str) -> Owned {
    Owned {
        client_service: stamp(client_service(mc)),
        peer_service: stamp(peer_service(mc)),
        admin_service: stamp(admin_service(mc)),
        admin_network_policy: stamp(admin_network_policy(mc, operator_namespace)),
        config_map: stamp(config_map(mc)),
        disruption_budget: stamp(disruption_budget(mc)),
        stateful_set: stamped(stateful_set(mc, replicas as i32), &stateful_set(mc, 0)),
    }
}

/// Labels on every object and pod of a cluster; the pod selector.
pub fn labels(mc: &MeridianCluster) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "meridian".to_string()),
        ("app.kubernetes.io/instance".to_string(), mc.name_any()),
        (
            "app.kubernetes.io/managed-by".to_string(),
            "meridian-operator".to_string(),
        ),
    ])
}

fn meta(mc: &MeridianCluster, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: mc.namespace(),
        labels: Some(labels(mc)),
        owner_references: mc.controller_owner_ref(&()).map(|r| vec![r]),
        ..ObjectMeta::default()
    }
}

pub fn peer_service_name(mc: &MeridianCluster) -> String {
    format!("{}-peer", mc.name_any())
}

/// The admin Service and its NetworkPolicy share this name.
pub fn admin_service_name(mc: &MeridianCluster) -> String {
    format!("{}-admin", mc.name_any())
}

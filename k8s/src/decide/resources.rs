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

fn service_port(name: &str, port: i32, protocol: &str) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port,
        protocol: Some(protocol.into()),
        ..ServicePort::default()
    }
}

/// What clients speak: QUIC over UDP and PD's gRPC over TCP, on the same port number.
fn client_ports() -> Vec<ServicePort> {
    vec![
        service_port("client", CLIENT_PORT, "UDP"),
        service_port("grpc", CLIENT_PORT, "TCP"),
    ]
}

fn admin_port() -> ServicePort {
    service_port("admin", ADMIN_PORT, "TCP")
}

/// What clients connect to. The admin port is not on it: this Service is the one users expose
/// (a LoadBalancer, a mesh), and the admin API moves leaders and deletes members.
pub fn client_service(mc: &MeridianCluster) -> Service {
    Service {
        metadata: meta(mc, mc.name_any()),
        spec: Some(ServiceSpec {
            selector: Some(labels(mc)),
            ports: Some(client_ports()),
            type_: mc.spec.service_type.clone(),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// Stable names for members, published before they are Ready so members find each other.
/// Members advertise their admin API under these names too (`<pod>.<cluster>-peer...`: a pod
/// has a DNS name only under the Service its StatefulSet names), so it lists the admin port.
pub fn peer_service(mc: &MeridianCluster) -> Service {
    let mut ports = client_ports();
    ports.push(admin_port());
    Service {
        metadata: meta(mc, peer_service_name(mc)),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(labels(mc)),
            ports: Some(ports),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The admin API, where the operator dials `https://<cluster>-admin.<ns>.svc`. Headless, so
/// the name resolves to every member and the client tries each in turn; not-ready members are
/// published too, because the operator must reach a cluster that is not serving to repair it.
pub fn admin_service(mc: &MeridianCluster) -> Service {
    Service {
        metadata: meta(mc, admin_service_name(mc)),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(labels(mc)),
            ports: Some(vec![admin_port()]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn policy_port(port: i32, protocol: &str) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(port)),
        protocol: Some(protocol.into()),
        ..NetworkPolicyPort::default()
    }
}

/// Ingress to the members: the client port from anywhere; the admin port only from the other
/// members (their health probes of each other, leader forwarding) and from the operator's pods
/// in `operator_namespace`. Anything else is dropped, so a stolen `admin` certificate is not
/// enough from an arbitrary pod. The kubelet's probes come from the node, which NetworkPolicy
/// always admits. Prometheus is not let in here: NetworkPolicies add up, so a user who scrapes
/// `/metrics` adds one of their own for the monitoring namespace.
pub fn admin_network_policy(mc: &MeridianCluster, operator_namespace: &str) -> NetworkPolicy {
    let selector = |labels: BTreeMap<String, String>| LabelSelector {
        match_labels: Some(labels),
        ..LabelSelector::default()
    };
    let (label, value) = OPERATOR_POD_LABEL;
    NetworkPolicy {
        metadata: meta(mc, admin_service_name(mc)),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(selector(labels(mc))),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![
                // No `from`: every source.
                NetworkPolicyIngressRule {
                    from: None,
                    ports: Some(vec![
                        policy_port(CLIENT_PORT, "UDP"),
                        policy_port(CLIENT_PORT, "TCP"),
                    ]),
                },
                NetworkPolicyIngressRule {
                    from: Some(vec![
                        // A pod selector alone means this namespace: the members.
                        NetworkPolicyPeer {
                            pod_selector: Some(selector(labels(mc))),
                            ..NetworkPolicyPeer::default()
                        },
                        // Both selectors in one peer: pods with the label in that namespace.
                        NetworkPolicyPeer {
                            namespace_selector: Some(selector(BTreeMap::from([(
                                NAMESPACE_NAME_LABEL.to_string(),
                                operator_namespace.to_string(),
                            )]))),
                            pod_selector: Some(selector(BTreeMap::from([(
                                label.to_string(),
                                value.to_string(),
                            )]))),
                            ..NetworkPolicyPeer::default()
                        },
                    ]),
                    ports: Some(vec![policy_port(ADMIN_PORT, "TCP")]),
                },
            ]),
            ..NetworkPolicySpec::default()
        }),
    }
}

pub fn config_map_name(mc: &MeridianCluster) -> String {
    format!("{}-config", mc.name_any())
}

pub fn config_map(mc: &MeridianCluster) -> ConfigMap {
    ConfigMap {
        metadata: meta(mc, config_map_name(mc)),
        data: Some(BTreeMap::from([(
            "meridian.toml".to_string(),
            mc.spec.config.clone(),
        )])),
        ..ConfigMap::default()
    }
}

/// On the pod template: [`config_hash`] of the config the pods run with.
pub const CONFIG_HASH_ANNOTATION: &str = "meridian.io/config-hash";

/// FNV-1a of the config text, in hex: stable across operator builds and Rust versions
/// (`DefaultHasher` is not), so an operator upgrade alone never looks like a config change.
pub fn config_hash(config: &str) -> String {
    let hash = config.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// The uid and gid members run as when the spec sets no security context (the conventional
/// "nonroot" id of distroless images); the volume is made group-writable for it.
pub const MEMBER_UID: i64 = 65532;

fn default_pod_security() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(MEMBER_UID),
        run_as_group: Some(MEMBER_UID),
        fs_group: Some(MEMBER_UID),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

fn default_container_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    }
}

/// Voluntary disruptions (node drains) may take members down one at a time. From 3 members
/// on, a quorum stays up (`minAvailable` = a majority), so a drain never stops the cluster.
/// With 1 or 2 members there is no failure to tolerate: any member down is an outage (2 need
/// both for a majority), and a budget that kept a quorum would forbid every eviction and block
/// node maintenance for good. There one member at a time may go (`maxUnavailable` 1); run 3
/// or more for a cluster that survives a drain.
pub fn disruption_budget(mc: &MeridianCluster) -> PodDisruptionBudget {
    let replicas = mc.spec.replicas.max(0);
    let (min_available, max_unavailable) = if replicas >= 3 {
        (Some(IntOrString::Int(replicas / 2 + 1)), None)
    } else {
        (None, Some(IntOrString::Int(1)))
    };
    PodDisruptionBudget {
        metadata: meta(mc, mc.name_any()),
        spec: Some(PodDisruptionBudgetSpec {
            min_available,
            max_unavailable,
            selector: Some(LabelSelector {
                match_labels: Some(labels(mc)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }
}

/// Members on different nodes when the user gave no affinity of their own.
fn default_affinity(mc: &MeridianCluster) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(labels(mc)),
                            ..LabelSelector::default()
                        }),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    }
}

fn field_env(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: field_path.into(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// The kubelet's probe of the admin port: HTTPS (the admin API serves nothing else), with no
/// client certificate, which `--admin-open-probes` accepts for these paths. The kubelet does not
/// verify the member's certificate.
fn probe(path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(ADMIN_PORT),
            scheme: Some("HTTPS".into()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(2),
        ..Probe::default()
    }
}

/// The members' StatefulSet with `replicas` pods (the spec's plus failover extras).
pub fn stateful_set(mc: &MeridianCluster, replicas: i32) -> StatefulSet {
    let spec = &mc.spec;
    let peer = peer_service_name(mc);
    let args = vec![
        "serve".to_string(),
        "--name".into(),
        "$(POD_NAME)".into(),
        "--listen".into(),
        format!("0.0.0.0:{CLIENT_PORT}"),
        "--admin-listen".into(),
        format!("0.0.0.0:{ADMIN_PORT}"),
        // Members and clients dial the pod's stable DNS name, not the wildcard it binds.
        "--advertise-client".into(),
        format!("$(POD_NAME).{peer}.$(POD_NAMESPACE).svc:{CLIENT_PORT}"),
        "--advertise-admin".into(),
        format!("$(POD_NAME).{peer}.$(POD_NAMESPACE).svc:{ADMIN_PORT}"),
        "--data-dir".into(),
        DATA_DIR.into(),
        "--etcd".into(),
        spec.etcd_endpoints.join(","),
        "--config".into(),
        format!("{CONFIG_DIR}/meridian.toml"),
        // The cluster's certificate, and the CA every client (members, the operator, stores)
        // must be signed by: without `--tls-ca` each member would trust a CA of its own.
        "--tls-cert".into(),
        format!("{TLS_DIR}/tls.crt"),
        "--tls-key".into(),
        format!("{TLS_DIR}/tls.key"),
        "--tls-ca".into(),
        format!("{TLS_DIR}/ca.crt"),
        // The kubelet's probes (and scrapers) present no certificate.
        "--admin-open-probes".into(),
    ];
    let mounts = vec![
        VolumeMount {
            name: "data".into(),
            mount_path: DATA_DIR.into(),
            ..VolumeMount::default()
        },
        VolumeMount {
            name: "config".into(),
            mount_path: CONFIG_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
        VolumeMount {
            name: "tls".into(),
            mount_path: TLS_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
        // The root filesystem is read-only; anything that wants a scratch file gets one here.
        VolumeMount {
            name: "tmp".into(),
            mount_path: "/tmp".into(),
            ..VolumeMount::default()
        },
    ];
    let volumes = vec![
        Volume {
            name: "tmp".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        },
        Volume {
            name: "config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map_name(mc),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        Volume {
            name: "tls".into(),
            secret: Some(SecretVolumeSource {
                // The schema requires it; a cluster stored without one is never applied
                // (`reconcile` stops first), so `None` here only feeds the spec's hash.
                secret_name: spec.tls_secret.clone(),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
    ];
    let container = Container {
        name: "meridian".into(),
        image: Some(spec.image.clone()),
        args: Some(args),
        env: Some(
            [
                field_env("POD_NAME", "metadata.name"),
                field_env("POD_NAMESPACE", "metadata.namespace"),
            ]
            .into_iter()
            .chain(
                spec.env
                    .iter()
                    .filter(|e| e.name != "POD_NAME" && e.name != "POD_NAMESPACE")
                    .cloned(),
            )
            .collect(),
        ),
        security_context: Some(
            spec.security_context
                .clone()
                .unwrap_or_else(default_container_security),
        ),
        ports: Some(vec![
            ContainerPort {
                name: Some("client".into()),
                container_port: CLIENT_PORT,
                protocol: Some("UDP".into()),
                ..ContainerPort::default()
            },
            ContainerPort {
                name: Some("grpc".into()),
                container_port: CLIENT_PORT,
                protocol: Some("TCP".into()),
                ..ContainerPort::default()
            },
            ContainerPort {
                name: Some("admin".into()),
                container_port: ADMIN_PORT,
                protocol: Some("TCP".into()),
                ..ContainerPort::default()
            },
        ]),
        readiness_probe: Some(probe("/ready")),
        liveness_probe: Some(Probe {
            initial_delay_seconds: Some(10),
            ..probe("/health")
        }),
        resources: spec.resources.clone(),
        volume_mounts: Some(mounts),
        ..Container::default()
    };
    let pod = PodSpec {
        containers: vec![container],
        affinity: Some(
            spec.affinity
                .clone()
                .unwrap_or_else(|| default_affinity(mc)),
        ),
        tolerations: (!spec.tolerations.is_empty()).then(|| spec.tolerations.clone()),
        topology_spread_constraints: (!spec.topology_spread_constraints.is_empty())
            .then(|| spec.topology_spread_constraints.clone()),
        volumes: Some(volumes),
        node_selector: (!spec.node_selector.is_empty()).then(|| spec.node_selector.clone()),
        image_pull_secrets: (!spec.image_pull_secrets.is_empty())
            .then(|| spec.image_pull_secrets.clone()),
        security_context: Some(
            spec.pod_security_context
                .clone()
                .unwrap_or_else(default_pod_security),
        ),
        ..PodSpec::default()
    };
    let claim = PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("data".into()),
            // The operator lists its members' claims by these labels.
            labels: Some(labels(mc)),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: spec.storage.storage_class_name.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity(spec.storage.size.clone()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    };
    StatefulSet {
        metadata: meta(mc, mc.name_any()),
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            service_name: Some(peer),
            selector: LabelSelector {
                match_labels: Some(labels(mc)),
                ..LabelSelector::default()
            },
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("OnDelete".into()),
                ..StatefulSetUpdateStrategy::default()
            }),
            pod_management_policy: Some("Parallel".into()),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(mc)),
                    // A config edit changes the template, so it rolls out as an upgrade does:
                    // one member at a time, the leader last (nothing reloads the file live).
                    annotations: Some(BTreeMap::from([(
                        CONFIG_HASH_ANNOTATION.to_string(),
                        config_hash(&spec.config),
                    )])),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            volume_claim_templates: Some(vec![claim]),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::MeridianClusterSpec;

    fn cluster(replicas: i32) -> MeridianCluster {
        let mut mc = MeridianCluster::new(
            "pd",
            MeridianClusterSpec {
                replicas,
                image: "meridian:1".into(),
                etcd_endpoints: vec!["http://etcd-0:2379".into(), "http://etcd-1:2379".into()],
                config: "[election]\nlease_ttl_secs = 3\n".into(),
                tls_secret: Some("pd-tls".into()),
                ..MeridianClusterSpec::default()
            },
        );
        mc.metadata.namespace = Some("db".into());
        mc.metadata.uid = Some("uid-1".into());
        mc
    }

    /// `(name, port, protocol)` of each port of a Service.
    fn service_ports(service: &Service) -> Vec<(String, i32, String)> {
        service
            .spec
            .as_ref()
            .unwrap()
            .ports
            .as_ref()
            .unwrap()
            .iter()
            .map(|p| (p.name.clone().unwrap(), p.port, p.protocol.clone().unwrap()))
            .collect()
    }

    fn owner_kind(meta: &ObjectMeta) -> (String, Option<bool>) {
        let owner = &meta.owner_references.as_ref().unwrap()[0];
        (owner.kind.clone(), owner.controller)
    }

    #[test]
    fn a_config_edit_changes_the_pod_template_with_a_stable_hash() {
        let template = |mc: &MeridianCluster| {
            serde_json::to_value(stateful_set(mc, 3).spec.unwrap().template).unwrap()
        };
        let mc = cluster(3);
        let mut edited = mc.clone();
        edited
            .spec
            .config
            .push_str("\n[limits]\nmax_stores = 100\n");
        assert_eq!(
            template(&mc),
            template(&cluster(3)),
            "the same spec, the same template"
        );
        assert_ne!(template(&mc), template(&edited));
        let annotation = |mc: &MeridianCluster| {
            stateful_set(mc, 3)
                .spec
                .unwrap()
                .template
                .metadata
                .unwrap()
                .annotations
                .unwrap()[CONFIG_HASH_ANNOTATION]
                .clone()
        };
        assert_eq!(annotation(&mc), config_hash(&mc.spec.config));
        assert_ne!(annotation(&mc), annotation(&edited));
        // Fixed values: the hash must not change with the Rust version or the build.
        assert_eq!(config_hash(""), "cbf29ce484222325");
        assert_eq!(config_hash("a"), "af63dc4c8601ec8c");
    }

    #[test]
    fn budget_keeps_a_quorum_and_lets_small_clusters_drain() {
        for (n, min) in [(3, 2), (4, 3), (5, 3)] {
            let spec = disruption_budget(&cluster(n)).spec.unwrap();
            assert_eq!(spec.min_available, Some(IntOrString::Int(min)), "{n}");
            assert_eq!(spec.max_unavailable, None, "{n}");
        }
        for n in [1, 2] {
            let spec = disruption_budget(&cluster(n)).spec.unwrap();
            assert_eq!(spec.min_available, None, "{n}");
            assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)), "{n}");
        }
    }

    #[test]
    fn pods_run_as_non_root_by_default_and_take_the_specs_extras() {
        let pod = |mc: &MeridianCluster| stateful_set(mc, 3).spec.unwrap().template.spec.unwrap();
        let plain = pod(&cluster(3));
        let security = plain.security_context.unwrap();
        assert_eq!(security.run_as_non_root, Some(true));
        assert_eq!(security.run_as_user, Some(MEMBER_UID));
        let container = &plain.containers[0];
        let c = container.security_context.as_ref().unwrap();
        assert_eq!(c.allow_privilege_escalation, Some(false));
        assert_eq!(c.read_only_root_filesystem, Some(true));
        assert!(plain.node_selector.is_none() && plain.image_pull_secrets.is_none());

        let mut mc = cluster(3);
        mc.spec.node_selector = BTreeMap::from([("disk".into(), "ssd".into())]);
        mc.spec.image_pull_secrets = vec![k8s_openapi::api::core::v1::LocalObjectReference {
            name: "registry".into(),
        }];
        mc.spec.env = vec![
            EnvVar {
                name: "RUST_LOG".into(),
                value: Some("debug".into()),
                ..EnvVar::default()
            },
            EnvVar {
                name: "POD_NAME".into(),
                value: Some("spoofed".into()),
                ..EnvVar::default()
            },
        ];
        mc.spec.service_type = Some("LoadBalancer".into());
        let extra = pod(&mc);
        assert_eq!(extra.node_selector.unwrap()["disk"], "ssd");
        assert_eq!(extra.image_pull_secrets.unwrap()[0].name, "registry");
        let env = extra.containers[0].env.clone().unwrap();
        assert!(env.iter().any(|e| e.name == "RUST_LOG"));
        assert_eq!(
            env.iter().filter(|e| e.name == "POD_NAME").count(),
            1,
            "the operator's POD_NAME stays the only one"
        );
        assert_eq!(
            client_service(&mc).spec.unwrap().type_.as_deref(),
            Some("LoadBalancer")
        );
    }

    #[test]
    fn services_statefulset_and_ownership() {
        let mc = cluster(3);
        let owned_by_cluster = ("MeridianCluster".to_string(), Some(true));
        let client = client_service(&mc);
        assert_eq!(
            service_ports(&client),
            [
                ("client".to_string(), 2379, "UDP".to_string()),
                ("grpc".into(), 2379, "TCP".into()),
            ],
            "the client Service carries no admin port"
        );
        assert_eq!(client.spec.as_ref().unwrap().cluster_ip, None);
        let peer_service = peer_service(&mc);
        let peer = peer_service.spec.as_ref().unwrap();
        assert_eq!(peer.cluster_ip.as_deref(), Some("None"));
        assert_eq!(peer.publish_not_ready_addresses, Some(true));
        assert!(service_ports(&peer_service)
            .iter()
            .any(|(name, port, _)| name == "admin" && *port == 2380));

        // The admin Service: headless, the admin port only, the not-ready members too.
        let admin = admin_service(&mc);
        assert_eq!(admin.metadata.name.as_deref(), Some("pd-admin"));
        assert_eq!(admin.metadata.namespace.as_deref(), Some("db"));
        assert_eq!(owner_kind(&admin.metadata), owned_by_cluster);
        let admin_spec = admin.spec.as_ref().unwrap();
        assert_eq!(admin_spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(admin_spec.publish_not_ready_addresses, Some(true));
        assert_eq!(admin_spec.selector, Some(labels(&mc)));
        assert_eq!(
            service_ports(&admin),
            [("admin".to_string(), 2380, "TCP".to_string())]
        );

        let sts = stateful_set(&mc, 4);
        assert_eq!(owner_kind(&sts.metadata), owned_by_cluster);
        let spec = sts.spec.unwrap();
        assert_eq!(spec.replicas, Some(4));
        assert_eq!(
            spec.update_strategy.unwrap().type_.as_deref(),
            Some("OnDelete")
        );
        assert_eq!(spec.service_name.as_deref(), Some("pd-peer"));
        let pod = spec.template.spec.unwrap();
        let container = &pod.containers[0];
        let args = container.args.clone().unwrap();
        let has = |flag: &str, value: &str| args.windows(2).any(|w| w == [flag, value]);
        assert!(has("--etcd", "http://etcd-0:2379,http://etcd-1:2379"));
        assert!(has(
            "--advertise-admin",
            "$(POD_NAME).pd-peer.$(POD_NAMESPACE).svc:2380"
        ));
        // Certificates from the Secret, clients verified against its CA, probes let in.
        assert!(has("--tls-cert", "/etc/meridian-tls/tls.crt"));
        assert!(has("--tls-key", "/etc/meridian-tls/tls.key"));
        assert!(has("--tls-ca", "/etc/meridian-tls/ca.crt"));
        assert!(args.iter().any(|a| a == "--admin-open-probes"));
        assert!(!args.iter().any(|a| a == "--insecure-no-client-auth"));
        let volumes = pod.volumes.clone().unwrap();
        let tls = volumes.iter().find(|v| v.name == "tls").unwrap();
        assert_eq!(
            tls.secret.as_ref().unwrap().secret_name.as_deref(),
            Some("pd-tls")
        );
        let mount = container
            .volume_mounts
            .as_ref()
            .unwrap()
            .iter()
            .find(|m| m.name == "tls")
            .unwrap();
        // The whole directory (no subPath), so a renewed Secret reaches the files.
        assert_eq!(
            (mount.mount_path.as_str(), mount.sub_path.as_deref()),
            ("/etc/meridian-tls", None)
        );
        for probe in [&container.readiness_probe, &container.liveness_probe] {
            let get = probe.as_ref().unwrap().http_get.as_ref().unwrap();
            assert_eq!(get.scheme.as_deref(), Some("HTTPS"));
            assert_eq!(get.port, IntOrString::Int(2380));
        }
        let ports: Vec<(i32, Option<&str>)> = container
            .ports
            .as_ref()
            .unwrap()
            .iter()
            .map(|p| (p.container_port, p.protocol.as_deref()))
            .collect();
        assert_eq!(
            ports,
            [
                (2379, Some("UDP")),
                (2379, Some("TCP")),
                (2380, Some("TCP"))
            ]
        );
        let anti = pod.affinity.unwrap().pod_anti_affinity.unwrap();
        assert!(anti
            .preferred_during_scheduling_ignored_during_execution
            .is_some());
        assert_eq!(
            config_map(&mc).data.unwrap()["meridian.toml"],
            "[election]\nlease_ttl_secs = 3\n"
        );
    }

    #[test]
    fn the_admin_port_is_fenced_to_the_members_and_the_operator() {
        let mc = cluster(3);
        let policy = admin_network_policy(&mc, "ops");
        assert_eq!(policy.metadata.name.as_deref(), Some("pd-admin"));
        assert_eq!(policy.metadata.namespace.as_deref(), Some("db"));
        assert_eq!(
            owner_kind(&policy.metadata),
            ("MeridianCluster".to_string(), Some(true))
        );
        let spec = policy.spec.unwrap();
        let members = LabelSelector {
            match_labels: Some(labels(&mc)),
            ..LabelSelector::default()
        };
        assert_eq!(spec.pod_selector.as_ref(), Some(&members));
        assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string()]));
        let rules = spec.ingress.unwrap();
        let ports = |rule: &NetworkPolicyIngressRule| -> Vec<(IntOrString, String)> {
            rule.ports
                .as_ref()
                .unwrap()
                .iter()
                .map(|p| (p.port.clone().unwrap(), p.protocol.clone().unwrap()))
                .collect()
        };
        // The client port (QUIC and gRPC) from anywhere.
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].from, None);
        assert_eq!(
            ports(&rules[0]),
            [
                (IntOrString::Int(2379), "UDP".to_string()),
                (IntOrString::Int(2379), "TCP".to_string()),
            ]
        );
        // The admin port from exactly two kinds of peer, and no other port with them.
        assert_eq!(
            ports(&rules[1]),
            [(IntOrString::Int(2380), "TCP".to_string())]
        );
        let from = rules[1].from.clone().unwrap();
        assert_eq!(from.len(), 2);
        assert_eq!(
            (from[0].pod_selector.as_ref(), &from[0].namespace_selector),
            (Some(&members), &None),
            "the cluster's own pods, in its namespace"
        );
        let only = |k: &str, v: &str| {
            Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(k.to_string(), v.to_string())])),
                ..LabelSelector::default()
            })
        };
        assert_eq!(
            from[1].namespace_selector,
            only("kubernetes.io/metadata.name", "ops")
        );
        assert_eq!(
            from[1].pod_selector,
            only("app.kubernetes.io/name", "meridian-operator")
        );
        assert!(from.iter().all(|p| p.ip_block.is_none()));
    }

    #[test]
    fn user_affinity_replaces_the_default() {
        let mut mc = cluster(3);
        mc.spec.affinity = Some(Affinity::default());
        let pod = stateful_set(&mc, 3).spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.affinity, Some(Affinity::default()));
    }
}

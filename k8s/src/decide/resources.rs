//! The objects a `MeridianCluster` owns, as the operator wants them: client Service, headless
//! peer Service, ConfigMap, StatefulSet (OnDelete: the operator picks the order) and
//! PodDisruptionBudget. Pure builders; the shell server-side-applies them with one field manager.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource,
    HTTPGetAction, ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, Probe, SecretVolumeSource, Service,
    ServicePort, ServiceSpec, Volume, VolumeMount, VolumeResourceRequirements,
    WeightedPodAffinityTerm,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Resource, ResourceExt};

use crate::crd::MeridianCluster;

pub const CLIENT_PORT: i32 = 2379;
pub const ADMIN_PORT: i32 = 2380;
const DATA_DIR: &str = "/var/lib/meridian";
const CONFIG_DIR: &str = "/etc/meridian";
const TLS_DIR: &str = "/etc/meridian-tls";

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

fn ports() -> Vec<ServicePort> {
    vec![
        ServicePort {
            name: Some("client".into()),
            port: CLIENT_PORT,
            protocol: Some("UDP".into()),
            ..ServicePort::default()
        },
        ServicePort {
            name: Some("admin".into()),
            port: ADMIN_PORT,
            protocol: Some("TCP".into()),
            ..ServicePort::default()
        },
    ]
}

/// What clients connect to (QUIC over UDP) and the admin API.
pub fn client_service(mc: &MeridianCluster) -> Service {
    Service {
        metadata: meta(mc, mc.name_any()),
        spec: Some(ServiceSpec {
            selector: Some(labels(mc)),
            ports: Some(ports()),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// Stable names for members, published before they are Ready so members find each other.
pub fn peer_service(mc: &MeridianCluster) -> Service {
    Service {
        metadata: meta(mc, peer_service_name(mc)),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(labels(mc)),
            ports: Some(ports()),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

pub fn config_map(mc: &MeridianCluster) -> ConfigMap {
    ConfigMap {
        metadata: meta(mc, format!("{}-config", mc.name_any())),
        data: Some(BTreeMap::from([(
            "meridian.toml".to_string(),
            mc.spec.config.clone(),
        )])),
        ..ConfigMap::default()
    }
}

/// A quorum of the members must stay up through voluntary disruptions.
pub fn disruption_budget(mc: &MeridianCluster) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(mc, mc.name_any()),
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(mc.spec.replicas.max(0) / 2 + 1)),
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

fn probe(path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(ADMIN_PORT),
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
    let mut args = vec![
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
    ];
    let mut mounts = vec![
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
    ];
    let mut volumes = vec![Volume {
        name: "config".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: format!("{}-config", mc.name_any()),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }];
    if let Some(secret) = &spec.tls_secret {
        args.extend([
            "--tls-cert".to_string(),
            format!("{TLS_DIR}/tls.crt"),
            "--tls-key".into(),
            format!("{TLS_DIR}/tls.key"),
        ]);
        mounts.push(VolumeMount {
            name: "tls".into(),
            mount_path: TLS_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
        volumes.push(Volume {
            name: "tls".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.clone()),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    let container = Container {
        name: "meridian".into(),
        image: Some(spec.image.clone()),
        args: Some(args),
        env: Some(vec![
            field_env("POD_NAME", "metadata.name"),
            field_env("POD_NAMESPACE", "metadata.namespace"),
        ]),
        ports: Some(vec![
            ContainerPort {
                name: Some("client".into()),
                container_port: CLIENT_PORT,
                protocol: Some("UDP".into()),
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
                ..MeridianClusterSpec::default()
            },
        );
        mc.metadata.namespace = Some("db".into());
        mc.metadata.uid = Some("uid-1".into());
        mc
    }

    #[test]
    fn budget_keeps_a_quorum() {
        for (n, min) in [(1, 1), (3, 2), (4, 3), (5, 3)] {
            let pdb = disruption_budget(&cluster(n));
            assert_eq!(
                pdb.spec.unwrap().min_available,
                Some(IntOrString::Int(min)),
                "{n}"
            );
        }
    }

    #[test]
    fn services_statefulset_and_ownership() {
        let mc = cluster(3);
        let peer = peer_service(&mc).spec.unwrap();
        assert_eq!(peer.cluster_ip.as_deref(), Some("None"));
        assert_eq!(peer.publish_not_ready_addresses, Some(true));
        let sts = stateful_set(&mc, 4);
        let owner = sts.metadata.owner_references.clone().unwrap();
        assert_eq!(
            (owner[0].kind.as_str(), owner[0].controller),
            ("MeridianCluster", Some(true))
        );
        let spec = sts.spec.unwrap();
        assert_eq!(spec.replicas, Some(4));
        assert_eq!(
            spec.update_strategy.unwrap().type_.as_deref(),
            Some("OnDelete")
        );
        assert_eq!(spec.service_name.as_deref(), Some("pd-peer"));
        let pod = spec.template.spec.unwrap();
        let args = pod.containers[0].args.clone().unwrap();
        assert!(args
            .windows(2)
            .any(|w| w == ["--etcd", "http://etcd-0:2379,http://etcd-1:2379"]));
        assert!(
            !args.iter().any(|a| a == "--tls-cert"),
            "no secret, no flag"
        );
        let mut with_tls = cluster(3);
        with_tls.spec.tls_secret = Some("pd-tls".into());
        let tls_pod = stateful_set(&with_tls, 3)
            .spec
            .unwrap()
            .template
            .spec
            .unwrap();
        let tls_args = tls_pod.containers[0].args.clone().unwrap();
        assert!(tls_args
            .windows(2)
            .any(|w| w == ["--tls-cert", "/etc/meridian-tls/tls.crt"]));
        let volumes = tls_pod.volumes.unwrap();
        assert_eq!(
            volumes[1].secret.as_ref().unwrap().secret_name.as_deref(),
            Some("pd-tls")
        );
        assert!(args.windows(2).any(|w| w
            == [
                "--advertise-admin",
                "$(POD_NAME).pd-peer.$(POD_NAMESPACE).svc:2380"
            ]));
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
    fn user_affinity_replaces_the_default() {
        let mut mc = cluster(3);
        mc.spec.affinity = Some(Affinity::default());
        let pod = stateful_set(&mc, 3).spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.affinity, Some(Affinity::default()));
    }
}

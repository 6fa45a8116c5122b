//! The StatefulSet: the members' pod template (security defaults, affinity, probes, the TLS
//! Secret and the config mounted) and their volume claims.

use super::*;

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

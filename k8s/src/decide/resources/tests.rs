//! The builders' tests: what each object holds for a cluster spec.

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

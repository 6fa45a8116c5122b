//! The Services and the NetworkPolicy: clients on the client Service, peers on the headless
//! peer Service, the admin port only on its own headless Service, fenced to the operator.

use super::*;

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

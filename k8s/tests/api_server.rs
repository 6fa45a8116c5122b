//! The kube I/O shell against a mock API server (`tower-test`, the `ApiServerVerifier` pattern of
//! kube-rs's controller-rs): every request the shell makes is recorded and answered from a small
//! object table, and the tests check the exact requests: server-side applies with the one field
//! manager, status patches, deletes (a pod whose node is lost force-deleted, with only the
//! nodes under pods that are not Ready read), events, the finalizer, the Lease, that reconciling an
//! unchanged cluster writes nothing, that an owned object deleted or edited by hand is applied
//! again alone, and that an apply the API server refuses becomes an `ApplyFailed` condition
//! and one warning event while the other objects, scaling (through `/scale`) and the status
//! go on. Through the controller's entry point, the operator's own endpoint: what a reconcile
//! counts (errors by kind), the probes, and that every metric the Grafana dashboard
//! `dashboards/meridian-operator.json` queries is served by `/metrics`. The endpoint itself,
//! started as `run` starts it: HTTPS, `/metrics` only for a bearer token the mock API server
//! authenticates (TokenReview) and authorizes (SubjectAccessReview), with the
//! decisions cached, the probes open, and plain HTTP only with the explicit opt-out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ureq::tls::{PemItem, RootCerts, TlsConfig, TlsProvider};

use http::{Request, Response, StatusCode};
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::client::Body;
use kube::Client;
use meridian_operator::crd::{MeridianCluster, MeridianClusterSpec, MeridianClusterStatus};
use meridian_operator::decide::resources::Object;
use meridian_operator::decide::snapshot::{
    MemberView, MembersView, DEFERRED_DELETE_ANNOTATION, REVISION_LABEL,
};
use meridian_operator::shell::access::MetricsAccess;
use meridian_operator::shell::controller::{self, Context, FINALIZER};
use meridian_operator::shell::endpoint::{
    self, Endpoint, Probes, ServingCert, ServingTls, Transport,
};
use meridian_operator::shell::error::ReconcileError;
use meridian_operator::shell::kube_api::KubeApi;
use meridian_operator::shell::lease::Elector;
use meridian_operator::shell::members::{AdminMembers, Members};
use meridian_operator::shell::metrics::Metrics;
use meridian_operator::shell::reconciler::{owned, reconcile_once};

/// One request as the API server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    /// Path and query.
    uri: String,
    body: serde_json::Value,
}

impl Seen {
    fn is_write(&self) -> bool {
        self.method != "GET"
    }

    fn line(&self) -> String {
        format!("{} {}", self.method, self.uri)
    }
}

/// GET answers by path (without query); anything not listed is a 404. Writes echo their body,
/// except where `write_replies` has an answer for the path, and TokenReviews and
/// SubjectAccessReviews (unless `write_replies` answers them), which are answered from `tokens`
/// and `metrics_readers` as the API server would.
#[derive(Default, Clone)]
struct Table {
    gets: BTreeMap<String, serde_json::Value>,
    write_replies: BTreeMap<String, (u16, serde_json::Value)>,
    /// Bearer token to the user name it authenticates; any other token is rejected.
    tokens: BTreeMap<String, String>,
    /// The users a SubjectAccessReview lets `get` the non-resource URL `/metrics`.
    metrics_readers: BTreeSet<String>,
}

const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

impl Table {
    /// A TokenReview or SubjectAccessReview POST answered with its status, as the API server
    /// does: the review echoed back with `status` filled in.
    fn review(&self, path: &str, body: &serde_json::Value) -> Option<serde_json::Value> {
        let status = match path {
            TOKEN_REVIEWS => {
                let token = body["spec"]["token"].as_str().unwrap_or_default();
                match self.tokens.get(token) {
                    Some(user) => serde_json::json!({"authenticated": true, "user": {
                        "username": user, "uid": format!("uid-{user}"),
                        "groups": ["system:serviceaccounts", "system:authenticated"]}}),
                    None => serde_json::json!({"authenticated": false,
                        "error": "invalid bearer token"}),
                }
            }
            ACCESS_REVIEWS => {
                let spec = &body["spec"];
                let asks = &spec["nonResourceAttributes"];
                let allowed = asks["path"] == "/metrics"
                    && asks["verb"] == "get"
                    && spec["user"]
                        .as_str()
                        .is_some_and(|u| self.metrics_readers.contains(u));
                if allowed {
                    serde_json::json!({"allowed": true,
                        "reason": "RBAC: allowed by ClusterRoleBinding"})
                } else {
                    serde_json::json!({"allowed": false})
                }
            }
            _ => return None,
        };
        let mut reply = body.clone();
        reply["status"] = status;
        Some(reply)
    }
}

fn list(kind: &str, items: Vec<serde_json::Value>) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items})
}

fn status_json(code: u16, reason: &str) -> serde_json::Value {
    serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": reason, "reason": reason, "code": code})
}

impl Table {
    /// The cluster `mc` and no workload: empty pod and claim lists; writes to the cluster and
    /// its status answer with the cluster.
    fn for_cluster(mc: &MeridianCluster) -> Table {
        let mut t = Table::default();
        let json = serde_json::to_value(mc).unwrap();
        let path = "/apis/meridian.io/v1alpha1/namespaces/db/meridianclusters/pd";
        t.write_replies.insert(path.into(), (200, json.clone()));
        t.write_replies
            .insert(format!("{path}/status"), (200, json));
        t.gets
            .insert("/api/v1/namespaces/db/pods".into(), list("PodList", vec![]));
        t.gets.insert(
            "/api/v1/namespaces/db/persistentvolumeclaims".into(),
            list("PersistentVolumeClaimList", vec![]),
        );
        t
    }
}

/// A client on a mock service, and the task answering it; the task ends (returning every
/// request) once every clone of the client is dropped.
fn mock_api(table: Table) -> (Client, tokio::task::JoinHandle<Vec<Seen>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let server = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some((request, send)) = handle.next_request().await {
            let method = request.method().to_string();
            let uri = request
                .uri()
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default();
            let path = request.uri().path().to_string();
            let bytes = request.into_body().collect_bytes().await.unwrap();
            let body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
            let (code, reply) = if method == "GET" {
                match table.gets.get(&path) {
                    Some(v) => (200, v.clone()),
                    None => (404, status_json(404, "NotFound")),
                }
            } else if let Some((code, reply)) = table.write_replies.get(&path) {
                (*code, reply.clone())
            } else if let Some(reply) = table.review(&path, &body) {
                (201, reply)
            } else if method == "DELETE" {
                let ok = serde_json::json!({"kind": "Status", "apiVersion": "v1",
                    "metadata": {}, "status": "Success", "code": 200});
                (200, ok)
            } else {
                (200, body.clone())
            };
            seen.push(Seen { method, uri, body });
            send.send_response(
                Response::builder()
                    .status(StatusCode::from_u16(code).unwrap())
                    .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                    .unwrap(),
            );
        }
        seen
    });
    (Client::new(service, "default"), server)
}

/// The members API as a fixed answer, recording what it was asked to do.
#[derive(Default)]
struct FixedMembers {
    view: Option<MembersView>,
    calls: Mutex<Vec<String>>,
}

impl Members for FixedMembers {
    async fn list(&self, _: &MeridianCluster) -> Option<MembersView> {
        self.view.clone()
    }

    async fn transfer_leader(&self, _: &MeridianCluster, to: &str) -> Result<bool, ReconcileError> {
        self.calls.lock().unwrap().push(format!("transfer {to}"));
        let leader = self.view.as_ref().and_then(|v| v.leader());
        Ok(leader.is_some_and(|l| l.name != to))
    }

    async fn delete_member(&self, _: &MeridianCluster, name: &str) -> Result<(), ReconcileError> {
        self.calls.lock().unwrap().push(format!("delete {name}"));
        Ok(())
    }
}

/// Where the operator runs, as `POD_NAMESPACE` gives it.
const OPERATOR_NAMESPACE: &str = "ops";

fn cluster() -> MeridianCluster {
    let mut mc = MeridianCluster::new(
        "pd",
        MeridianClusterSpec {
            replicas: 3,
            image: "meridian:1".into(),
            etcd_endpoints: vec!["http://etcd:2379".into()],
            tls_secret: Some("pd-tls".into()),
            ..MeridianClusterSpec::default()
        },
    );
    mc.metadata.namespace = Some("db".into());
    mc.metadata.uid = Some("uid-pd".into());
    mc.metadata.generation = Some(4);
    mc.metadata.finalizers = Some(vec![FINALIZER.into()]);
    mc
}

fn pod(i: u32, revision: &str, ready_since: Timestamp) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("pd-{i}")),
            namespace: Some("db".into()),
            labels: Some(BTreeMap::from([(
                REVISION_LABEL.to_string(),
                revision.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("node".into()),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(Time(ready_since)),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        }),
    }
}

fn healthy_members() -> MembersView {
    MembersView {
        cluster_id: Some("77".into()),
        members: (0..3)
            .map(|i| MemberView {
                name: format!("pd-{i}"),
                id: format!("{}", 10 + i),
                healthy: true,
                is_leader: i == 0,
            })
            .collect(),
    }
}

/// A running 3-member cluster: its owned objects as last applied (with a field or two the API
/// server adds), pods on `pod_revision`.
fn running(mc: &MeridianCluster, pod_revision: &str, pvcs: Vec<PersistentVolumeClaim>) -> Table {
    let objects = owned(mc, 3, OPERATOR_NAMESPACE);
    let mut sts: StatefulSet = objects.stateful_set.clone();
    sts.status = Some(StatefulSetStatus {
        update_revision: Some("rev-2".into()),
        current_revision: Some("rev-1".into()),
        replicas: 3,
        ..StatefulSetStatus::default()
    });
    let since: Timestamp = "2026-11-01T00:00:00Z".parse().unwrap();
    let pods = (0..3)
        .map(|i| serde_json::to_value(pod(i, pod_revision, since)).unwrap())
        .collect();
    let mut t = Table::for_cluster(mc);
    t.gets.insert(
        object_path(Object::StatefulSet).into(),
        serde_json::to_value(sts).unwrap(),
    );
    for object in Object::ALL {
        if object != Object::StatefulSet {
            let mut stored = objects.value(object).unwrap();
            stored["metadata"]["resourceVersion"] = "12".into();
            if object.kind() == "Service" {
                stored["spec"]["sessionAffinity"] = "None".into();
            }
            t.gets.insert(object_path(object).into(), stored);
        }
    }
    t.gets
        .insert("/api/v1/namespaces/db/pods".into(), list("PodList", pods));
    t.gets.insert(
        "/api/v1/namespaces/db/persistentvolumeclaims".into(),
        list(
            "PersistentVolumeClaimList",
            pvcs.into_iter()
                .map(|p| serde_json::to_value(p).unwrap())
                .collect(),
        ),
    );
    t
}

/// What every reconcile reads: the StatefulSet, its pods and claims, and each other owned
/// object by name (to compare with what the spec wants).
const READS: [&str; 9] = [
    "GET /apis/apps/v1/namespaces/db/statefulsets/pd",
    "GET /api/v1/namespaces/db/pods?&labelSelector=app.kubernetes.io%2Finstance%3Dpd%2Capp.kubernetes.io%2Fmanaged-by%3Dmeridian-operator%2Capp.kubernetes.io%2Fname%3Dmeridian",
    "GET /api/v1/namespaces/db/persistentvolumeclaims?&labelSelector=app.kubernetes.io%2Finstance%3Dpd%2Capp.kubernetes.io%2Fmanaged-by%3Dmeridian-operator%2Capp.kubernetes.io%2Fname%3Dmeridian",
    "GET /api/v1/namespaces/db/services/pd",
    "GET /api/v1/namespaces/db/services/pd-peer",
    "GET /api/v1/namespaces/db/services/pd-admin",
    "GET /apis/networking.k8s.io/v1/namespaces/db/networkpolicies/pd-admin",
    "GET /api/v1/namespaces/db/configmaps/pd-config",
    "GET /apis/policy/v1/namespaces/db/poddisruptionbudgets/pd",
];

/// Where each owned object is read and applied.
fn object_path(object: Object) -> &'static str {
    match object {
        Object::ClientService => "/api/v1/namespaces/db/services/pd",
        Object::PeerService => "/api/v1/namespaces/db/services/pd-peer",
        Object::AdminService => "/api/v1/namespaces/db/services/pd-admin",
        Object::AdminNetworkPolicy => {
            "/apis/networking.k8s.io/v1/namespaces/db/networkpolicies/pd-admin"
        }
        Object::ConfigMap => "/api/v1/namespaces/db/configmaps/pd-config",
        Object::DisruptionBudget => "/apis/policy/v1/namespaces/db/poddisruptionbudgets/pd",
        Object::StatefulSet => "/apis/apps/v1/namespaces/db/statefulsets/pd",
    }
}

async fn reconcile_on(
    table: Table,
    mc: &MeridianCluster,
    members: &FixedMembers,
) -> (Vec<Seen>, meridian_operator::shell::reconciler::Outcome) {
    reconcile_counted(table, mc, members, &Metrics::default()).await
}

/// `reconcile_on`, counting into `metrics`.
async fn reconcile_counted(
    table: Table,
    mc: &MeridianCluster,
    members: &FixedMembers,
    metrics: &Metrics,
) -> (Vec<Seen>, meridian_operator::shell::reconciler::Outcome) {
    let (client, server) = mock_api(table);
    let platform = KubeApi::new(client, Some("op-0".into()), OPERATOR_NAMESPACE.into());
    let now: Timestamp = "2026-11-22T00:00:00Z".parse().unwrap();
    let outcome = reconcile_once(mc, &platform, members, metrics, now)
        .await
        .unwrap();
    drop(platform);
    (server.await.unwrap(), outcome)
}

/// The value of one series in Prometheus text.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let (s, v) = l.rsplit_once(' ')?;
        (s == series).then(|| v.parse().ok())?
    })
}

/// The controller's context on a mock API server; members unreachable.
fn context(client: Client) -> Arc<Context> {
    Arc::new(Context {
        platform: KubeApi::new(client.clone(), None, OPERATOR_NAMESPACE.into()),
        members: AdminMembers::new(|_| vec![], meridian::tls::Trust::Insecure),
        client,
        metrics: Arc::default(),
        probes: Arc::default(),
    })
}

#[tokio::test]
async fn a_new_cluster_gets_its_objects_by_server_side_apply_with_one_field_manager() {
    let mc = cluster();
    let members = FixedMembers::default();
    let (seen, _) = reconcile_on(Table::for_cluster(&mc), &mc, &members).await;
    let lines: Vec<String> = seen.iter().map(Seen::line).collect();
    let apply = "?&force=true&fieldManager=meridian-operator";
    let mut want: Vec<String> = READS.iter().map(|s| s.to_string()).collect();
    want.extend([
        format!("PATCH /api/v1/namespaces/db/services/pd{apply}"),
        format!("PATCH /api/v1/namespaces/db/services/pd-peer{apply}"),
        format!("PATCH /api/v1/namespaces/db/services/pd-admin{apply}"),
        format!("PATCH /apis/networking.k8s.io/v1/namespaces/db/networkpolicies/pd-admin{apply}"),
        format!("PATCH /api/v1/namespaces/db/configmaps/pd-config{apply}"),
        format!("PATCH /apis/policy/v1/namespaces/db/poddisruptionbudgets/pd{apply}"),
        format!("PATCH /apis/apps/v1/namespaces/db/statefulsets/pd{apply}"),
        "POST /apis/events.k8s.io/v1/namespaces/db/events?".into(),
        format!("PATCH /apis/meridian.io/v1alpha1/namespaces/db/meridianclusters/pd/status{apply}"),
    ]);
    assert_eq!(lines, want);
    // The StatefulSet starts with one member, OnDelete, owned by the cluster, stamped with the
    // spec's hash; the budget keeps a quorum of the three.
    let applied = &seen[READS.len()..];
    let sts = &applied[6].body;
    assert_eq!(sts["spec"]["replicas"], 1);
    assert_eq!(sts["spec"]["updateStrategy"]["type"], "OnDelete");
    assert_eq!(sts["metadata"]["ownerReferences"][0]["uid"], "uid-pd");
    for object in applied[..7].iter() {
        assert!(
            object.body["metadata"]["annotations"]["meridian.io/applied-hash"].is_string(),
            "every object carries the hash of its desired form: {}",
            object.line()
        );
    }
    assert_eq!(applied[5].body["spec"]["minAvailable"], 2);
    assert_eq!(applied[1].body["spec"]["publishNotReadyAddresses"], true);
    // The client Service has no admin port; the admin Service has nothing else, and reaches
    // members that are not ready yet.
    let port_names = |body: &serde_json::Value| -> Vec<String> {
        body["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(port_names(&applied[0].body), ["client", "grpc"]);
    let admin = &applied[2].body;
    assert_eq!(port_names(admin), ["admin"]);
    assert_eq!(admin["spec"]["clusterIP"], "None");
    assert_eq!(admin["spec"]["publishNotReadyAddresses"], true);
    assert_eq!(admin["metadata"]["ownerReferences"][0]["uid"], "uid-pd");
    // The NetworkPolicy: admin port from the operator's pods in its namespace (as the platform
    // was told) and from the members; owned by the cluster like the rest.
    let policy = &applied[3].body;
    assert_eq!(policy["kind"], "NetworkPolicy");
    assert_eq!(policy["metadata"]["ownerReferences"][0]["uid"], "uid-pd");
    let operator = &policy["spec"]["ingress"][1]["from"][1];
    assert_eq!(
        operator["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        OPERATOR_NAMESPACE
    );
    assert_eq!(
        operator["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        "meridian-operator"
    );
    assert_eq!(policy["spec"]["ingress"][1]["ports"][0]["port"], 2380);
    // Status: applied whole under the same manager; no member answered, so not quorate.
    let status = &applied[8].body;
    assert_eq!(status["kind"], "MeridianCluster");
    assert_eq!(status["status"]["observedGeneration"], 4);
    let quorate = status["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Quorate")
        .unwrap();
    assert_eq!(quorate["status"], "False");
    assert_eq!(quorate["message"], "no member answered the members API");
}

#[tokio::test]
async fn a_cluster_stored_without_a_tls_secret_is_left_alone_and_its_status_says_why() {
    // The schema requires the field; a cluster stored before it did still decodes, and gets no
    // objects (its members could not authenticate each other or the operator), only a status.
    let mut mc = cluster();
    mc.spec.tls_secret = None;
    let members = FixedMembers::default();
    let (seen, outcome) = reconcile_on(Table::for_cluster(&mc), &mc, &members).await;
    assert!(outcome.actions.is_empty(), "{:?}", outcome.actions);
    let writes: Vec<&Seen> = seen.iter().filter(|s| s.is_write()).collect();
    assert_eq!(writes.len(), 1, "{seen:?}");
    assert!(writes[0].uri.contains("/meridianclusters/pd/status"));
    let progressing = writes[0].body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Progressing")
        .unwrap()
        .clone();
    assert_eq!(progressing["status"], "False");
    assert_eq!(progressing["reason"], "TLSSecretMissing");
    assert!(progressing["message"]
        .as_str()
        .unwrap()
        .contains("spec.tlsSecret is required"));
}

#[tokio::test]
async fn an_unchanged_cluster_costs_reads_and_no_write() {
    let mut mc = cluster();
    let members = FixedMembers {
        view: Some(healthy_members()),
        ..FixedMembers::default()
    };
    // First pass: everything is as wanted except the stored status.
    let (seen, outcome) = reconcile_on(running(&mc, "rev-2", vec![]), &mc, &members).await;
    assert!(outcome.actions.is_empty(), "{:?}", outcome.actions);
    let writes: Vec<&Seen> = seen.iter().filter(|s| s.is_write()).collect();
    assert_eq!(writes.len(), 1, "{seen:?}");
    assert!(writes[0].uri.contains("/meridianclusters/pd/status"));
    let status: MeridianClusterStatus =
        serde_json::from_value(writes[0].body["status"].clone()).unwrap();
    assert_eq!(status.leader.as_deref(), Some("pd-0"));
    assert_eq!(status.cluster_id.as_deref(), Some("77"));
    assert_eq!(status.members.len(), 3);

    // Second pass with that status stored, an hour later: reads only.
    mc.status = Some(status);
    let (client, server) = mock_api(running(&mc, "rev-2", vec![]));
    let platform = KubeApi::new(client, Some("op-0".into()), OPERATOR_NAMESPACE.into());
    let later: Timestamp = "2026-11-22T01:00:00Z".parse().unwrap();
    let outcome = reconcile_once(&mc, &platform, &members, &Metrics::default(), later)
        .await
        .unwrap();
    drop(platform);
    let seen = server.await.unwrap();
    assert!(!outcome.status_written);
    assert_eq!(outcome.requeue_after, Duration::from_secs(30));
    assert_eq!(
        seen.iter().map(Seen::line).collect::<Vec<_>>(),
        READS.to_vec()
    );
    assert!(members.calls.lock().unwrap().is_empty());
}

/// The status a pass over `table` writes (its last status write).
fn written_status(seen: &[Seen]) -> MeridianClusterStatus {
    let write = seen
        .iter()
        .rev()
        .find(|s| s.is_write() && s.uri.contains("/meridianclusters/pd/status"))
        .expect("a status write");
    serde_json::from_value(write.body["status"].clone()).unwrap()
}

/// The writes of a pass, as request lines.
fn writes(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .filter(|s| s.is_write())
        .map(Seen::line)
        .collect()
}

const APPLY: &str = "?&force=true&fieldManager=meridian-operator";
const EVENT: &str = "POST /apis/events.k8s.io/v1/namespaces/db/events?";

fn apply_line(object: Object) -> String {
    format!("PATCH {}{APPLY}", object_path(object))
}

/// The events a pass published, by reason.
fn event_reasons(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .filter(|s| s.line() == EVENT)
        .map(|s| s.body["reason"].as_str().unwrap().to_string())
        .collect()
}

fn apply_failed(status: &MeridianClusterStatus) -> &Condition {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "ApplyFailed")
        .expect("an ApplyFailed condition")
}

#[tokio::test]
async fn a_deleted_service_and_an_edited_stateful_set_are_applied_again_each_alone() {
    let mut mc = cluster();
    let members = FixedMembers {
        view: Some(healthy_members()),
        ..FixedMembers::default()
    };
    let (seen, _) = reconcile_on(running(&mc, "rev-2", vec![]), &mc, &members).await;
    mc.status = Some(written_status(&seen));
    assert_eq!(apply_failed(mc.status.as_ref().unwrap()).status, "False");

    // Someone deletes the peer Service, and edits the StatefulSet: an argument and a label
    // the operator sets, and a label of their own.
    let mut table = running(&mc, "rev-2", vec![]);
    table.gets.remove(object_path(Object::PeerService));
    let sts = table
        .gets
        .get_mut(object_path(Object::StatefulSet))
        .unwrap();
    sts["spec"]["template"]["spec"]["containers"][0]["args"][12] = "/tmp/elsewhere".into();
    sts["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "kubectl".into();
    sts["metadata"]["labels"]["team"] = "db".into();
    let (seen, outcome) = reconcile_on(table, &mc, &members).await;
    // Those two are applied, nothing else; the status is as it was.
    assert_eq!(
        writes(&seen),
        [
            apply_line(Object::PeerService),
            apply_line(Object::StatefulSet),
            EVENT.to_string()
        ]
    );
    assert!(!outcome.status_written);
    let sts = &seen
        .iter()
        .find(|s| s.line() == apply_line(Object::StatefulSet))
        .unwrap()
        .body;
    assert_eq!(
        sts["spec"]["template"]["spec"]["containers"][0]["args"][12],
        "/var/lib/meridian"
    );
    assert_eq!(
        sts["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "meridian-operator"
    );
    assert_eq!(sts["spec"]["replicas"], 3, "replicas stay where they are");
    let event = &seen.iter().find(|s| s.line() == EVENT).unwrap().body;
    assert_eq!(event["reason"], "Applied");
    let note = event["note"].as_str().unwrap();
    assert!(note.contains("Service db/pd-peer (missing)"), "{note}");
    assert!(
        note.contains("StatefulSet db/pd (metadata.labels[\"app.kubernetes.io/managed-by\"]"),
        "{note}"
    );
    // No pod is restarted for the edited template: the apply puts it back.
    assert!(!seen.iter().any(|s| s.method == "DELETE"), "{seen:?}");
}

#[tokio::test]
async fn a_refused_apply_is_a_condition_and_an_event_and_holds_nothing_else_back() {
    // The objects were made for 3 members on the default StorageClass. The spec now asks for
    // another class (the CRD's rule refuses that on a real API server; a cluster without the
    // rule gets this far, and a StatefulSet's claim templates cannot change), a NodePort
    // client Service and a fourth member. (A larger size is not refused: the claims grow.)
    let before = cluster();
    let mut mc = cluster();
    mc.spec.storage.storage_class_name = Some("fast-ssd".into());
    mc.spec.service_type = Some("NodePort".into());
    mc.spec.replicas = 4;
    let members = FixedMembers {
        view: Some(healthy_members()),
        ..FixedMembers::default()
    };
    let refusal = "StatefulSet.apps \"pd\" is invalid: spec: Forbidden: updates to statefulset \
                   spec for fields other than 'replicas', 'ordinals', 'template', \
                   'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and \
                   'minReadySeconds' are forbidden";
    let mut table = running(&before, "rev-2", vec![]);
    table.write_replies.insert(
        object_path(Object::StatefulSet).into(),
        (
            422,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": refusal, "reason": "Invalid", "code": 422}),
        ),
    );
    let scale = format!("{}/scale", object_path(Object::StatefulSet));
    table.write_replies.insert(
        scale.clone(),
        (
            200,
            serde_json::json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "pd", "namespace": "db"}, "spec": {"replicas": 4}}),
        ),
    );
    let pass = |mc: MeridianCluster, table: Table| {
        let members = &members;
        async move {
            let (client, server) = mock_api(table);
            let platform = KubeApi::new(client, Some("op-0".into()), OPERATOR_NAMESPACE.into());
            let now: Timestamp = "2026-11-22T00:00:00Z".parse().unwrap();
            let result = reconcile_once(&mc, &platform, members, &Metrics::default(), now).await;
            drop(platform);
            (server.await.unwrap(), result)
        }
    };
    let (seen, result) = pass(mc.clone(), table.clone()).await;
    // The refusal is the reconcile's error, returned once everything else is done.
    let e = result.expect_err("the refused apply");
    assert_eq!(e.kind(), "kube_api");
    assert!(e.to_string().starts_with("apply StatefulSet db/pd"), "{e}");
    let scaled = format!("PATCH {scale}?&fieldManager=meridian-operator");
    let status_write =
        format!("PATCH /apis/meridian.io/v1alpha1/namespaces/db/meridianclusters/pd/status{APPLY}");
    assert_eq!(
        writes(&seen),
        [
            apply_line(Object::ClientService),
            apply_line(Object::DisruptionBudget),
            apply_line(Object::StatefulSet),
            EVENT.to_string(),
            scaled.clone(),
            EVENT.to_string(),
            EVENT.to_string(),
            status_write,
        ]
    );
    assert_eq!(event_reasons(&seen), ["Applied", "Scaled", "ApplyFailed"]);
    let body = |line: &str| &seen.iter().find(|s| s.line() == line).unwrap().body;
    assert_eq!(
        body(&apply_line(Object::ClientService))["spec"]["type"],
        "NodePort"
    );
    assert_eq!(
        body(&apply_line(Object::DisruptionBudget))["spec"]["minAvailable"],
        3
    );
    // Scaling went through the scale subresource, the replicas alone.
    assert_eq!(*body(&scaled), serde_json::json!({"spec": {"replicas": 4}}));
    let status = written_status(&seen);
    let condition = apply_failed(&status);
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("True", "ApplyError")
    );
    assert_eq!(condition.message, format!("StatefulSet db/pd: {refusal}"));
    let warning = seen
        .iter()
        .find(|s| s.line() == EVENT && s.body["reason"] == "ApplyFailed")
        .unwrap();
    assert_eq!(warning.body["type"], "Warning");
    assert_eq!(warning.body["note"], condition.message.as_str());
    // The rest of the status is still written: members, leader.
    assert_eq!(status.leader.as_deref(), Some("pd-0"));

    // The next pass, with that status stored: the apply is tried again, but the warning is
    // not repeated, and the unchanged status is not written again.
    mc.status = Some(status);
    let (seen, result) = pass(mc, table).await;
    assert!(result.is_err());
    assert_eq!(event_reasons(&seen), ["Applied", "Scaled"]);
    assert!(
        !writes(&seen).iter().any(|w| w.contains("/status")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_stateful_set_is_not_created_while_the_admin_network_policy_is_refused() {
    let mc = cluster();
    let mut table = Table::for_cluster(&mc);
    table.write_replies.insert(
        object_path(Object::AdminNetworkPolicy).into(),
        (
            403,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "admission webhook \"policy.example\" denied the request",
                "reason": "Forbidden", "code": 403}),
        ),
    );
    let (client, server) = mock_api(table);
    let platform = KubeApi::new(client, Some("op-0".into()), OPERATOR_NAMESPACE.into());
    let now: Timestamp = "2026-11-22T00:00:00Z".parse().unwrap();
    let members = FixedMembers::default();
    let e = reconcile_once(&mc, &platform, &members, &Metrics::default(), now)
        .await
        .expect_err("the refused NetworkPolicy");
    drop(platform);
    let seen = server.await.unwrap();
    assert!(
        e.to_string().starts_with("apply NetworkPolicy db/pd-admin"),
        "{e}"
    );
    let w = writes(&seen);
    assert!(
        !w.contains(&apply_line(Object::StatefulSet)),
        "members would run with the admin port open: {w:?}"
    );
    for object in [
        Object::ClientService,
        Object::PeerService,
        Object::AdminService,
        Object::ConfigMap,
        Object::DisruptionBudget,
    ] {
        assert!(w.contains(&apply_line(object)), "{object:?}: {w:?}");
    }
    let message = apply_failed(&written_status(&seen)).message.clone();
    assert!(
        message.starts_with("NetworkPolicy db/pd-admin: admission webhook"),
        "{message}"
    );
    assert!(
        message.contains("; StatefulSet db/pd: not created while the NetworkPolicy"),
        "{message}"
    );
}

#[tokio::test]
async fn an_upgrade_deletes_the_highest_follower_first_and_says_so() {
    let mc = cluster();
    let members = FixedMembers {
        view: Some(healthy_members()),
        ..FixedMembers::default()
    };
    let metrics = Metrics::default();
    let (seen, _) = reconcile_counted(running(&mc, "rev-1", vec![]), &mc, &members, &metrics).await;
    let text = metrics.render();
    for (series, want) in [
        (
            "meridian_operator_steps_total{action=\"Upgrade\",reason=\"DeletedPod\"}",
            1.0,
        ),
        ("meridian_operator_upgrade_members{cluster=\"db/pd\"}", 3.0),
        (
            "meridian_operator_upgrade_members_updated{cluster=\"db/pd\"}",
            0.0,
        ),
        (
            "meridian_operator_cluster_condition{cluster=\"db/pd\",condition=\"Progressing\"}",
            1.0,
        ),
    ] {
        assert_eq!(sample(&text, series), Some(want), "{series}\n{text}");
    }
    let writes: Vec<String> = seen
        .iter()
        .filter(|s| s.is_write())
        .map(Seen::line)
        .collect();
    assert_eq!(
        writes[..2],
        [
            "DELETE /api/v1/namespaces/db/pods/pd-2?".to_string(),
            "POST /apis/events.k8s.io/v1/namespaces/db/events?".to_string(),
        ]
    );
    let event = &seen.iter().find(|s| s.method == "POST").unwrap().body;
    assert_eq!(event["reason"], "DeletedPod");
    assert_eq!(event["action"], "Upgrade");
    assert_eq!(event["regarding"]["name"], "pd");
    assert!(writes[2].contains("/meridianclusters/pd/status"));
    assert_eq!(writes.len(), 3);
}

#[tokio::test]
async fn a_pod_whose_node_is_lost_past_the_timeout_is_force_deleted() {
    let mut mc = cluster();
    mc.spec.failover.enabled = true;
    mc.spec.failover.node_lost_timeout = "5m".into();
    let mut members = healthy_members();
    members.members[2].healthy = false;
    let members = FixedMembers {
        view: Some(members),
        ..FixedMembers::default()
    };
    // Now is 2026-11-22T00:00:00Z: pd-2 went NotReady with its node 10 minutes ago.
    let lost: Timestamp = "2026-11-21T23:50:00Z".parse().unwrap();
    let mut table = running(&mc, "rev-2", vec![]);
    let mut pods: Vec<Pod> = (0..3)
        .map(|i| pod(i, "rev-2", "2026-11-01T00:00:00Z".parse().unwrap()))
        .collect();
    pods[2].spec = Some(PodSpec {
        node_name: Some("node-2".into()),
        ..PodSpec::default()
    });
    pods[2].status = Some(PodStatus {
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "False".into(),
            last_transition_time: Some(Time(lost)),
            ..PodCondition::default()
        }]),
        ..PodStatus::default()
    });
    table.gets.insert(
        "/api/v1/namespaces/db/pods".into(),
        list(
            "PodList",
            pods.iter()
                .map(|p| serde_json::to_value(p).unwrap())
                .collect(),
        ),
    );
    table.gets.insert(
        "/api/v1/nodes/node-2".into(),
        serde_json::json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node-2"},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown",
                "lastTransitionTime": "2026-11-21T23:50:00Z"}]}}),
    );
    let (seen, _) = reconcile_on(table, &mc, &members).await;
    // Only the node under the pod that is not Ready is read.
    let node_reads: Vec<String> = seen
        .iter()
        .map(Seen::line)
        .filter(|l| l.starts_with("GET /api/v1/nodes"))
        .collect();
    assert_eq!(node_reads, ["GET /api/v1/nodes/node-2"]);
    let writes: Vec<&Seen> = seen.iter().filter(|s| s.is_write()).collect();
    assert_eq!(writes[0].line(), "DELETE /api/v1/namespaces/db/pods/pd-2?");
    assert_eq!(
        writes[0].body["gracePeriodSeconds"], 0,
        "{:?}",
        writes[0].body
    );
    let event = &writes[1].body;
    assert_eq!(event["reason"], "NodeLost");
    assert_eq!(event["action"], "Failover");
}

#[tokio::test]
async fn a_paused_cluster_gets_its_status_and_nothing_else() {
    let mut mc = cluster();
    mc.spec.paused = true;
    // Outdated pods and a member down: an upgrade and a failover would be due.
    let mut view = healthy_members();
    view.members[1].healthy = false;
    mc.spec.failover.enabled = true;
    let members = FixedMembers {
        view: Some(view),
        ..FixedMembers::default()
    };
    let (seen, outcome) = reconcile_on(running(&mc, "rev-1", vec![]), &mc, &members).await;
    assert!(outcome.actions.is_empty());
    let writes: Vec<&Seen> = seen.iter().filter(|s| s.is_write()).collect();
    assert_eq!(writes.len(), 1, "{seen:?}");
    assert!(writes[0].uri.contains("/meridianclusters/pd/status"));
    let degraded = writes[0].body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Degraded")
        .unwrap()
        .clone();
    assert_eq!(degraded["status"], "True");
    assert_eq!(degraded["message"], "pd-1");
    assert!(members.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn scale_in_marks_the_claim_and_a_reused_ordinal_deletes_it_first() {
    // 3 -> 2: member pd-2 is deleted through the members API, then its claim is marked.
    let mut mc = cluster();
    mc.spec.replicas = 2;
    let mut members = FixedMembers {
        view: Some(healthy_members()),
        ..FixedMembers::default()
    };
    let (seen, _) = reconcile_on(running(&mc, "rev-2", vec![]), &mc, &members).await;
    assert_eq!(*members.calls.lock().unwrap(), vec!["delete pd-2"]);
    // pd-2 is no member any more: next, the claim is marked for deferred deletion.
    members.view.as_mut().unwrap().members.pop();
    members.calls.lock().unwrap().clear();
    let (seen2, _) = reconcile_on(running(&mc, "rev-2", vec![]), &mc, &members).await;
    let mark = seen2.iter().find(|s| s.method == "PATCH").unwrap();
    assert_eq!(
        mark.line(),
        "PATCH /api/v1/namespaces/db/persistentvolumeclaims/data-pd-2?"
    );
    assert_eq!(
        mark.body["metadata"]["annotations"][DEFERRED_DELETE_ANNOTATION],
        "true"
    );
    assert!(seen.iter().any(|s| s.body["reason"] == "MemberDeleted"));

    // Later 2 -> 3: the marked claim of ordinal 2 is deleted before the StatefulSet grows.
    mc.spec.replicas = 3;
    let marked = PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("data-pd-2".into()),
            annotations: Some(BTreeMap::from([(
                DEFERRED_DELETE_ANNOTATION.to_string(),
                "true".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        ..PersistentVolumeClaim::default()
    };
    let mut table = running(&mc, "rev-2", vec![marked]);
    let sts = table
        .gets
        .get_mut("/apis/apps/v1/namespaces/db/statefulsets/pd")
        .unwrap();
    sts["spec"]["replicas"] = 2.into();
    let pods = table.gets.get_mut("/api/v1/namespaces/db/pods").unwrap();
    pods["items"].as_array_mut().unwrap().pop();
    let (seen3, _) = reconcile_on(table, &mc, &members).await;
    let writes: Vec<String> = seen3
        .iter()
        .filter(|s| s.is_write())
        .map(Seen::line)
        .collect();
    assert_eq!(
        writes[0],
        "DELETE /api/v1/namespaces/db/persistentvolumeclaims/data-pd-2?"
    );
    assert!(
        !writes.iter().any(|w| w.contains("statefulsets")),
        "the StatefulSet grows only after the claim is gone: {writes:?}"
    );
}

#[tokio::test]
async fn the_finalizer_is_added_first_and_cleanup_removes_what_the_operator_created() {
    // A cluster without the finalizer: the first request writes it (JSON patch), nothing else.
    let mut mc = cluster();
    mc.metadata.finalizers = None;
    let (client, server) = mock_api(Table::for_cluster(&mc));
    controller::reconcile(Arc::new(mc.clone()), context(client))
        .await
        .unwrap();
    let seen = server.await.unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].line(),
        "PATCH /apis/meridian.io/v1alpha1/namespaces/db/meridianclusters/pd?"
    );
    assert!(
        seen[0].body.to_string().contains(FINALIZER),
        "{:?}",
        seen[0].body
    );

    // Being deleted: owned objects and marked claims go, data claims stay, then the finalizer.
    let mut deleting = cluster();
    deleting.metadata.deletion_timestamp = Some(Time("2026-11-22T00:00:00Z".parse().unwrap()));
    let claim = |name: &str, marked: bool| PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: marked.then(|| {
                BTreeMap::from([(DEFERRED_DELETE_ANNOTATION.to_string(), "true".to_string())])
            }),
            ..ObjectMeta::default()
        },
        ..PersistentVolumeClaim::default()
    };
    let table = running(
        &deleting,
        "rev-2",
        vec![claim("data-pd-0", false), claim("data-pd-3", true)],
    );
    let (client, server) = mock_api(table);
    controller::reconcile(Arc::new(deleting), context(client))
        .await
        .unwrap();
    let lines: Vec<String> = server.await.unwrap().iter().map(Seen::line).collect();
    assert_eq!(
        lines,
        vec![
            "DELETE /apis/apps/v1/namespaces/db/statefulsets/pd?",
            "DELETE /api/v1/namespaces/db/services/pd?",
            "DELETE /api/v1/namespaces/db/services/pd-peer?",
            "DELETE /api/v1/namespaces/db/services/pd-admin?",
            "DELETE /apis/networking.k8s.io/v1/namespaces/db/networkpolicies/pd-admin?",
            "DELETE /api/v1/namespaces/db/configmaps/pd-config?",
            "DELETE /apis/policy/v1/namespaces/db/poddisruptionbudgets/pd?",
            READS[2],
            "DELETE /api/v1/namespaces/db/persistentvolumeclaims/data-pd-3?",
            "PATCH /apis/meridian.io/v1alpha1/namespaces/db/meridianclusters/pd?",
        ]
    );
}

fn lease_json(holder: &str, renewed: Timestamp) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "meridian-operator", "namespace": "ops", "resourceVersion": "41"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                 "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
                 "leaseTransitions": 2}
    })
}

#[tokio::test]
async fn lease_election_creates_follows_takes_over_and_loses_races() {
    let path = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/meridian-operator";
    let round = |table: Table| async move {
        let (client, server) = mock_api(table);
        let elector = Elector::new(
            client,
            "ops",
            "meridian-operator",
            "op-a",
            Duration::from_secs(15),
        );
        let held = elector.try_hold().await.unwrap();
        drop(elector);
        (held, server.await.unwrap())
    };
    // No Lease: created, held.
    let (held, seen) = round(Table::default()).await;
    assert!(held);
    assert_eq!(
        seen[1].line(),
        "POST /apis/coordination.k8s.io/v1/namespaces/ops/leases?"
    );
    assert_eq!(seen[1].body["spec"]["holderIdentity"], "op-a");

    // Held by another replica, freshly renewed: no write.
    let mut table = Table::default();
    table
        .gets
        .insert(path.into(), lease_json("op-b", Timestamp::now()));
    let (held, seen) = round(table).await;
    assert!(!held);
    assert_eq!(seen.len(), 1);

    // Expired: taken over with the read resourceVersion, one more transition.
    let mut table = Table::default();
    let stale = Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(60);
    table.gets.insert(path.into(), lease_json("op-b", stale));
    let (held, seen) = round(table.clone()).await;
    assert!(held);
    assert_eq!(seen[1].method, "PUT");
    assert_eq!(seen[1].body["metadata"]["resourceVersion"], "41");
    assert_eq!(seen[1].body["spec"]["holderIdentity"], "op-a");
    assert_eq!(seen[1].body["spec"]["leaseTransitions"], 3);

    // Another replica wrote first: the 409 means not held, and no error.
    table
        .write_replies
        .insert(path.into(), (409, status_json(409, "Conflict")));
    let (held, _) = round(table).await;
    assert!(!held);
}

#[tokio::test]
async fn a_lease_round_tells_the_probes_whether_the_api_server_answered() {
    let path = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/meridian-operator";
    let probes = Arc::new(Probes::default());
    let round = |table: Table| {
        let probes = probes.clone();
        async move {
            let (client, server) = mock_api(table);
            let elector = Elector::new(
                client,
                "ops",
                "meridian-operator",
                "op-a",
                Duration::from_secs(15),
            )
            .reporting(probes);
            let held = elector.try_hold().await;
            drop(elector);
            server.await.unwrap();
            held
        }
    };
    // The API server fails the create: an error, and not ready.
    let mut failing = Table::default();
    failing.write_replies.insert(
        "/apis/coordination.k8s.io/v1/namespaces/ops/leases".into(),
        (500, status_json(500, "InternalError")),
    );
    assert!(round(failing).await.is_err());
    assert!(probes.ready().is_err());
    // Another replica holds it: a follower that reached the API server is ready.
    let mut table = Table::default();
    table
        .gets
        .insert(path.into(), lease_json("op-b", Timestamp::now()));
    assert!(!round(table).await.unwrap());
    assert_eq!(probes.ready(), Ok(()));
}

#[tokio::test]
async fn a_scale_in_off_the_leader_counts_one_leader_move() {
    // 3 -> 2 with pd-2 leading: the leadership moves to pd-0 first.
    let mut mc = cluster();
    mc.spec.replicas = 2;
    let mut view = healthy_members();
    view.members[0].is_leader = false;
    view.members[2].is_leader = true;
    let members = FixedMembers {
        view: Some(view),
        ..FixedMembers::default()
    };
    let metrics = Metrics::default();
    reconcile_counted(running(&mc, "rev-2", vec![]), &mc, &members, &metrics).await;
    assert_eq!(*members.calls.lock().unwrap(), vec!["transfer pd-0"]);
    let text = metrics.render();
    for (series, want) in [
        (
            "meridian_operator_leader_moves_total{cluster=\"db/pd\",reason=\"scale\"}",
            1.0,
        ),
        (
            "meridian_operator_leader_moves_total{cluster=\"db/pd\",reason=\"upgrade\"}",
            0.0,
        ),
        (
            "meridian_operator_steps_total{action=\"Scale\",reason=\"LeaderTransferred\"}",
            1.0,
        ),
    ] {
        assert_eq!(sample(&text, series), Some(want), "{series}\n{text}");
    }
}

#[tokio::test]
async fn a_failed_reconcile_is_counted_by_the_kind_of_its_error() {
    // The API server refuses the first apply with 409 Conflict: the rest of the reconcile goes
    // on, and the conflict is its error.
    let mc = cluster();
    let mut table = Table::for_cluster(&mc);
    table.write_replies.insert(
        "/api/v1/namespaces/db/services/pd".into(),
        (409, status_json(409, "Conflict")),
    );
    let (client, server) = mock_api(table);
    let ctx = context(client);
    let e = controller::reconcile(Arc::new(mc.clone()), ctx.clone())
        .await
        .expect_err("a conflict");
    assert_eq!(e.kind(), "conflict", "{e}");
    assert!(e.to_string().starts_with("apply Service db/pd"), "{e}");
    // Then one that succeeds (the status write of a cluster without a TLS Secret).
    let mut plain = cluster();
    plain.spec.tls_secret = None;
    let (client2, server2) = mock_api(Table::for_cluster(&plain));
    let ctx2 = Arc::new(Context {
        platform: KubeApi::new(client2.clone(), None, OPERATOR_NAMESPACE.into()),
        members: AdminMembers::new(|_| vec![], meridian::tls::Trust::Insecure),
        client: client2,
        metrics: ctx.metrics.clone(),
        probes: ctx.probes.clone(),
    });
    controller::reconcile(Arc::new(plain), ctx2).await.unwrap();
    let text = ctx.metrics.render();
    drop(ctx);
    server.await.unwrap();
    server2.await.unwrap();
    for (series, want) in [
        ("meridian_operator_reconciles_total", 2.0),
        (
            "meridian_operator_reconcile_errors_total{kind=\"conflict\"}",
            1.0,
        ),
        (
            "meridian_operator_reconcile_errors_total{kind=\"kube_api\"}",
            0.0,
        ),
        ("meridian_operator_reconcile_duration_seconds_count", 2.0),
    ] {
        assert_eq!(sample(&text, series), Some(want), "{series}\n{text}");
    }
}

/// The `meridian_operator_*` metric names a dashboard's queries use.
fn queried(dashboard: &serde_json::Value) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let mut rest = target["expr"].as_str().unwrap();
            while let Some(at) = rest.find("meridian_operator_") {
                let tail = &rest[at..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                names.insert(tail[..end].to_string());
                rest = &tail[end..];
            }
        }
    }
    names
}

/// Sample names in Prometheus text format.
fn exposed(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// The Prometheus scraper's service account, which the mock API server lets read `/metrics`,
/// and its token; a user it authenticates but does not let in, and a token it rejects.
const SCRAPER: &str = "system:serviceaccount:meridian-system:meridian-operator-metrics-scraper";
const SCRAPER_TOKEN: &str = "scraper-token";
const NOSY: &str = "system:serviceaccount:ops:nosy";
const NOSY_TOKEN: &str = "nosy-token";
const FORGED_TOKEN: &str = "forged-token";

/// The operator's endpoint as `run` serves it by default: HTTPS, here with a certificate for
/// loopback from a fresh CA (as `--metrics-cert/--metrics-key` from a mounted Secret), and
/// `/metrics` reviewed by a mock API server that knows the scraper and the nosy user.
struct Https {
    addr: std::net::SocketAddr,
    /// The CA a client verifies the endpoint with.
    ca: String,
    serving: tokio::task::JoinHandle<std::io::Result<()>>,
    /// The mock API server; it ends, returning what it was asked, once the endpoint is gone.
    api: tokio::task::JoinHandle<Vec<Seen>>,
    _dir: tempfile::TempDir,
}

async fn serve_https(telemetry: Endpoint) -> Https {
    let table = Table {
        tokens: BTreeMap::from([
            (SCRAPER_TOKEN.to_string(), SCRAPER.to_string()),
            (NOSY_TOKEN.to_string(), NOSY.to_string()),
        ]),
        metrics_readers: BTreeSet::from([SCRAPER.to_string()]),
        ..Table::default()
    };
    serve_https_on(telemetry, table).await
}

/// `serve_https` with the mock API server answering from `table`.
async fn serve_https_on(telemetry: Endpoint, table: Table) -> Https {
    let dir = tempfile::tempdir().unwrap();
    let ca = meridian::tls::cert::create_ca("metrics CA").unwrap();
    let pair =
        meridian::tls::cert::create_node(&ca, &["127.0.0.1".into(), "localhost".into()]).unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &pair.cert).unwrap();
    std::fs::write(&key, &pair.key).unwrap();
    let tls = ServingTls::load(&ServingCert::Files { cert, key }).unwrap();
    let (client, api) = mock_api(table);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let transport = Transport::Https {
        tls,
        access: Arc::new(MetricsAccess::new(client)),
    };
    let serving = tokio::spawn(endpoint::serve(listener, telemetry, transport));
    Https {
        addr,
        ca: ca.cert,
        serving,
        api,
        _dir: dir,
    }
}

/// What a GET got back.
#[derive(Debug)]
struct Got {
    status: u16,
    body: String,
    www_authenticate: Option<String>,
}

/// A GET over HTTPS verifying the endpoint against `ca`, with `token` as the bearer token.
/// Each call has its own client, so no connection outlives it.
async fn get_https(addr: std::net::SocketAddr, ca: &str, path: &str, token: Option<&str>) -> Got {
    let (ca, url, token) = (
        ca.to_string(),
        format!("https://127.0.0.1:{}{path}", addr.port()),
        token.map(str::to_string),
    );
    tokio::task::spawn_blocking(move || {
        let roots: Vec<_> = ureq::tls::parse_pem(ca.as_bytes())
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        let tls = TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .root_certs(RootCerts::Specific(Arc::new(roots)))
            .build();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .tls_config(tls)
            .build()
            .into();
        let mut request = agent.get(&url);
        if let Some(token) = token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let mut response = request.call().unwrap();
        Got {
            status: response.status().as_u16(),
            www_authenticate: response
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            body: response.body_mut().read_to_string().unwrap(),
        }
    })
    .await
    .unwrap()
}

/// A plain-HTTP GET: status and body, or why there was no HTTP answer.
async fn get_plain(
    addr: std::net::SocketAddr,
    path: &'static str,
) -> anyhow::Result<(u16, String)> {
    tokio::task::spawn_blocking(move || {
        meridian::admin::AdminClient::plain(&format!("http://{addr}")).get(path)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_operator_dashboard_queries_is_served_and_the_probes_answer() {
    // A reconcile through the controller's entry point, of a new cluster (its objects are
    // applied: a step), so that the per-cluster and per-step series exist as they do in a
    // running operator.
    let mc = cluster();
    let (client, server) = mock_api(Table::for_cluster(&mc));
    let ctx = context(client);
    controller::reconcile(Arc::new(mc.clone()), ctx.clone())
        .await
        .unwrap();
    let telemetry = Endpoint {
        metrics: ctx.metrics.clone(),
        probes: ctx.probes.clone(),
    };
    drop(ctx);
    server.await.unwrap();
    let https = serve_https(telemetry.clone()).await;
    let (addr, ca) = (https.addr, https.ca.clone());
    let get = |path: &'static str| {
        let ca = ca.clone();
        async move {
            let got = get_https(addr, &ca, path, Some(SCRAPER_TOKEN)).await;
            (got.status, got.body)
        }
    };

    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/meridian-operator.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let wanted = queried(&dashboard);
    assert!(wanted.len() >= 8, "{wanted:?}");
    let (status, text) = get("/metrics").await;
    assert_eq!(status, 200);
    let have = exposed(&text);
    let missing: Vec<&String> = wanted.iter().filter(|n| !have.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "missing from /metrics: {missing:?}\n{text}"
    );
    for series in [
        "meridian_operator_reconciles_total",
        "meridian_operator_upgrade_members{cluster=\"db/pd\"}",
        "meridian_operator_leader_moves_total{cluster=\"db/pd\",reason=\"upgrade\"}",
        "meridian_operator_failovers_total{cluster=\"db/pd\",step=\"replaced\"}",
    ] {
        assert!(sample(&text, series).is_some(), "{series}\n{text}");
    }
    assert_eq!(
        sample(&text, "meridian_operator_reconciles_total"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "meridian_operator_steps_total{action=\"Reconcile\",reason=\"Applied\"}"
        ),
        Some(1.0)
    );

    // Liveness answers from the start; readiness once the API server answered and, on the
    // replica that leads, once MeridianClusters were listed.
    assert_eq!(get("/healthz").await.0, 200);
    let (status, why) = get("/readyz").await;
    assert_eq!(status, 503, "{why}");
    telemetry.probes.api_reached(true);
    assert_eq!(get("/readyz").await.0, 200, "a follower standing by");
    telemetry.probes.leading();
    let (status, why) = get("/readyz").await;
    assert_eq!(status, 503);
    assert!(why.contains("first list"), "{why}");
    let mut table = Table::default();
    table.gets.insert(
        "/apis/meridian.io/v1alpha1/meridianclusters".into(),
        list("MeridianClusterList", vec![]),
    );
    let (client, server) = mock_api(table);
    controller::first_list(client, &telemetry.probes).await;
    let seen = server.await.unwrap();
    assert_eq!(
        seen.iter().map(Seen::line).collect::<Vec<_>>(),
        ["GET /apis/meridian.io/v1alpha1/meridianclusters?&limit=1"]
    );
    assert_eq!(get("/readyz").await.0, 200);
    https.serving.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_a_token_the_api_server_authenticates_and_authorizes_the_probes_do_not() {
    let telemetry = Endpoint::default();
    let https = serve_https(telemetry.clone()).await;
    let (addr, ca) = (https.addr, https.ca.as_str());

    // No token: 401 with the challenge, and no API call.
    let got = get_https(addr, ca, "/metrics", None).await;
    assert_eq!(got.status, 401, "{got:?}");
    assert_eq!(got.www_authenticate.as_deref(), Some("Bearer"));
    assert!(!got.body.contains("meridian_operator"), "{got:?}");
    // A token the API server does not authenticate: 401, and its reason is not echoed.
    let got = get_https(addr, ca, "/metrics", Some(FORGED_TOKEN)).await;
    assert_eq!(got.status, 401, "{got:?}");
    assert!(!got.body.contains("invalid bearer token"), "{got:?}");
    // Authenticated, but no binding lets it get /metrics: 403 naming the user.
    let got = get_https(addr, ca, "/metrics", Some(NOSY_TOKEN)).await;
    assert_eq!(got.status, 403, "{got:?}");
    assert!(got.body.contains(NOSY), "{got:?}");
    // The scraper: 200 with the registry, twice.
    for _ in 0..2 {
        let got = get_https(addr, ca, "/metrics", Some(SCRAPER_TOKEN)).await;
        assert_eq!(got.status, 200, "{got:?}");
        assert!(
            got.body.contains("meridian_operator_reconciles_total"),
            "{got:?}"
        );
    }
    // Within their 5 s, refusals are remembered too.
    assert_eq!(
        get_https(addr, ca, "/metrics", Some(NOSY_TOKEN))
            .await
            .status,
        403
    );
    assert_eq!(
        get_https(addr, ca, "/metrics", Some(FORGED_TOKEN))
            .await
            .status,
        401
    );

    // The probes need no token (the kubelet sends none), and a token changes nothing.
    let got = get_https(addr, ca, "/healthz", None).await;
    assert_eq!((got.status, got.body.as_str()), (200, "ok\n"));
    let got = get_https(addr, ca, "/readyz", None).await;
    assert_eq!(got.status, 503, "{got:?}");
    assert!(got.body.contains("not answered"), "{got:?}");
    telemetry.probes.api_reached(true);
    assert_eq!(get_https(addr, ca, "/readyz", None).await.status, 200);
    assert_eq!(
        get_https(addr, ca, "/readyz", Some(FORGED_TOKEN))
            .await
            .status,
        200
    );

    // Plain HTTP gets no HTTP answer from the HTTPS port.
    let plain = get_plain(addr, "/metrics").await;
    assert!(plain.is_err(), "{plain:?}");
    let plain = get_plain(addr, "/healthz").await;
    assert!(plain.is_err(), "{plain:?}");

    // What the API server was asked: one TokenReview per distinct token (the repeats were
    // answered from the cache), carrying the token; one SubjectAccessReview per authenticated
    // user, for get on the non-resource URL /metrics, with the user's groups.
    https.serving.abort();
    let seen = tokio::time::timeout(Duration::from_secs(10), https.api)
        .await
        .expect("the endpoint let go of its API client")
        .unwrap();
    let lines: Vec<String> = seen.iter().map(Seen::line).collect();
    assert_eq!(
        lines,
        [
            format!("POST {TOKEN_REVIEWS}?"),
            format!("POST {TOKEN_REVIEWS}?"),
            format!("POST {ACCESS_REVIEWS}?"),
            format!("POST {TOKEN_REVIEWS}?"),
            format!("POST {ACCESS_REVIEWS}?"),
        ]
    );
    let tokens: Vec<&serde_json::Value> = seen
        .iter()
        .filter(|s| s.uri.starts_with(TOKEN_REVIEWS))
        .map(|s| &s.body["spec"]["token"])
        .collect();
    assert_eq!(tokens, [FORGED_TOKEN, NOSY_TOKEN, SCRAPER_TOKEN]);
    let asked = &seen[4].body["spec"];
    assert_eq!(asked["user"], SCRAPER);
    assert_eq!(asked["uid"], format!("uid-{SCRAPER}"));
    assert_eq!(asked["groups"][0], "system:serviceaccounts");
    assert_eq!(
        asked["nonResourceAttributes"],
        serde_json::json!({"path": "/metrics", "verb": "get"})
    );
    assert_eq!(seen[2].body["spec"]["user"], NOSY);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_the_api_server_fails_is_a_503_and_is_asked_again_next_time() {
    let mut table = Table::default();
    table.write_replies.insert(
        TOKEN_REVIEWS.into(),
        (500, status_json(500, "InternalError")),
    );
    let https = serve_https_on(Endpoint::default(), table).await;
    for _ in 0..2 {
        let got = get_https(https.addr, &https.ca, "/metrics", Some(SCRAPER_TOKEN)).await;
        assert_eq!(got.status, 503, "{got:?}");
        assert!(!got.body.contains("meridian_operator"), "{got:?}");
    }
    https.serving.abort();
    let seen = tokio::time::timeout(Duration::from_secs(10), https.api)
        .await
        .expect("the endpoint let go of its API client")
        .unwrap();
    assert_eq!(
        seen.len(),
        2,
        "an outage is not a decision to remember: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_and_open_metrics_only_with_the_insecure_opt_out() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let telemetry = Endpoint::default();
    let serving = tokio::spawn(endpoint::serve(
        listener,
        telemetry,
        Transport::InsecurePlainHttp,
    ));
    let (status, text) = get_plain(addr, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    assert!(
        text.contains("meridian_operator_reconciles_total"),
        "{text}"
    );
    assert_eq!(get_plain(addr, "/healthz").await.unwrap().0, 200);
    serving.abort();
}

/// Member claims of `size` on `class` (`None`: no class name, the default class's).
fn claims(size: &str, class: Option<&str>) -> Vec<PersistentVolumeClaim> {
    (0..3)
        .map(|i| {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": format!("data-pd-{i}"), "namespace": "db"},
                "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": size}}},
                "status": {"phase": "Bound", "capacity": {"storage": size}},
            }))
            .unwrap()
        })
        .collect()
}

fn storage_class(name: &str, expandable: Option<bool>, default: bool) -> serde_json::Value {
    serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name, "annotations": if default {
            serde_json::json!({"storageclass.kubernetes.io/is-default-class": "true"})
        } else { serde_json::json!({}) }},
        "provisioner": "csi.example.com", "allowVolumeExpansion": expandable})
}

fn volumes_condition(status: &MeridianClusterStatus) -> (String, String) {
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == "VolumesExpanded")
        .expect("VolumesExpanded condition");
    (c.status.clone(), c.reason.clone())
}

#[tokio::test]
async fn a_larger_size_patches_each_claim_and_leaves_the_claim_template_alone() {
    // Made at 10Gi on the class `standard`, which allows expansion; the spec now asks 20Gi.
    let before = cluster();
    let mut mc = cluster();
    mc.spec.storage.size = "20Gi".into();
    let members = FixedMembers {
        view: Some(healthy_members()),
        ..FixedMembers::default()
    };
    let mut table = running(&before, "rev-2", claims("10Gi", Some("standard")));
    table.gets.insert(
        "/apis/storage.k8s.io/v1/storageclasses/standard".into(),
        storage_class("standard", Some(true), false),
    );
    let (seen, outcome) = reconcile_on(table, &mc, &members).await;
    let patches: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.method == "PATCH" && s.uri.contains("persistentvolumeclaims"))
        .collect();
    assert_eq!(patches.len(), 3, "{seen:#?}");
    for (i, p) in patches.iter().enumerate() {
        assert_eq!(
            p.line(),
            format!("PATCH /api/v1/namespaces/db/persistentvolumeclaims/data-pd-{i}?")
        );
        assert_eq!(p.body["spec"]["resources"]["requests"]["storage"], "20Gi");
    }
    // The StatefulSet is not applied (its claim template cannot change and need not).
    assert!(
        !seen
            .iter()
            .any(|s| s.is_write() && s.uri.contains("statefulsets")),
        "{:?}",
        writes(&seen)
    );
    assert!(outcome
        .actions
        .iter()
        .any(|a| matches!(a, meridian_operator::decide::reconcile::Action::GrowVolumes(r) if r.len() == 3)));
    let status = written_status(&seen);
    assert_eq!(
        volumes_condition(&status),
        ("False".into(), "Resizing".into())
    );
    assert!(event_reasons(&seen).contains(&"ResizedPvc".to_string()));

    // Grown: nothing more is written for the volumes, and the condition says so.
    let table = running(&before, "rev-2", claims("20Gi", Some("standard")));
    let (seen, _) = reconcile_on(table, &mc, &members).await;
    assert!(
        !seen
            .iter()
            .any(|s| s.uri.contains("persistentvolumeclaims/") || s.uri.contains("storageclasses")),
        "{seen:#?}"
    );
    assert_eq!(
        volumes_condition(&written_status(&seen)),
        ("True".into(), "AtSize".into())
    );
}

#[tokio::test]
async fn a_default_class_without_expansion_is_found_and_nothing_is_patched() {
    let before = cluster();
    let mut mc = cluster();
    mc.spec.storage.size = "20Gi".into();
    let members = FixedMembers {
        view: Some(healthy_members()),
        ..FixedMembers::default()
    };
    let mut table = running(&before, "rev-2", claims("10Gi", None));
    table.gets.insert(
        "/apis/storage.k8s.io/v1/storageclasses".into(),
        serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClassList",
        "metadata": {"resourceVersion": "1"}, "items": [
            storage_class("fast", Some(true), false),
            storage_class("standard", None, true),
        ]}),
    );
    let (seen, _) = reconcile_on(table, &mc, &members).await;
    assert!(
        !seen
            .iter()
            .any(|s| s.is_write() && s.uri.contains("persistentvolumeclaims")),
        "{seen:#?}"
    );
    assert!(seen.iter().any(|s| s
        .line()
        .starts_with("GET /apis/storage.k8s.io/v1/storageclasses")));
    assert_eq!(
        volumes_condition(&written_status(&seen)),
        ("False".into(), "ExpansionNotAllowed".into())
    );
}

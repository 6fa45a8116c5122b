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

mod lease;
mod metrics_endpoint;
mod reconcile;
mod volumes;

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

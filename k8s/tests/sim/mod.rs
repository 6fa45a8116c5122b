//! An in-process Kubernetes for the end-to-end simulation: it implements the operator's
//! `Platform` trait with StatefulSet `OnDelete` semantics (pods are created for missing
//! ordinals on the update revision and never replaced on a template change until deleted),
//! `controller-revision-hash` labels, readiness from each member's `/ready`, PVC protection
//! (a claim in use is deleted only once its pod is gone) and force deletion of pods on a lost
//! node; an ordinal no node can take any more has its new pods stay `Pending` (no node, no
//! process) until deleted; a lost node can also hold its pod Terminating until it is
//! force-deleted. Every pod is a real `meridian serve` process on loopback against a
//! real etcd; a background "kubelet" thread does the StatefulSet controller's and kubelet's
//! work.
//!
//! Owned objects are stored as the API server stores them: with fields it defaults (a
//! Service's `sessionAffinity`, `type`, cluster IP and `targetPort`s, a pod template's
//! `restartPolicy` and `imagePullPolicy`, a claim template's `volumeMode`), so the operator's
//! drift check meets them; and a StatefulSet apply that changes a spec field other than those
//! Kubernetes lets change (replicas, template, update strategy, ...; the claim templates among
//! the forbidden) is refused with the API server's 422. Objects can be deleted or edited by
//! hand, as `kubectl` would, which the operator must put back.

#![allow(dead_code)] // each scenario uses its own subset

pub mod world;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, Pod,
    PodCondition, PodSpec, PodStatus, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::core::Status;
use meridian::admin::AdminClient;
use meridian::harness::{free_udp_port, ServerProcess};
use meridian::tls::Trust;
use meridian_operator::crd::{MeridianCluster, MeridianClusterStatus};
use meridian_operator::decide::snapshot::{
    self, pvc_name, DEFERRED_DELETE_ANNOTATION, REVISION_LABEL,
};
use meridian_operator::decide::volumes;
use meridian_operator::shell::error::ReconcileError;
use meridian_operator::shell::platform::{Note, Object, Owned, Platform, Workload};

/// How each pod's `meridian serve` is started.
pub struct Env {
    pub bin: PathBuf,
    pub dir: PathBuf,
    pub etcd: String,
    pub config: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

struct SimPod {
    ordinal: u32,
    revision: String,
    uid: u64,
    process: Option<ServerProcess>,
    /// Being started by the kubelet (no process yet).
    starting: bool,
    /// Deleted: the kubelet stops it and removes it.
    terminating: bool,
    /// Its node is gone: the process is dead and is never restarted there.
    node_lost: bool,
    /// No node can take it: it stays `Pending`, with no process, until deleted.
    pending: bool,
    /// When its node was lost: the node is gone from then on.
    lost_at: Option<Timestamp>,
    /// A graceful delete is never confirmed (its kubelet is gone with the node): it stays
    /// Terminating until force-deleted.
    held: bool,
    ready_since: Option<Timestamp>,
}

struct SimPvc {
    uid: String,
    dir: PathBuf,
    deferred: bool,
    deleting: bool,
    /// The storage request, as the claim template or a resize set it.
    requested: String,
    /// What the volume holds: the request once the driver grew it.
    capacity: String,
}

#[derive(Default)]
struct State {
    cluster: Option<MeridianCluster>,
    sts: Option<StatefulSet>,
    /// The other owned objects, as stored.
    objects: BTreeMap<Object, serde_json::Value>,
    update_revision: String,
    pods: BTreeMap<u32, SimPod>,
    pvcs: BTreeMap<String, SimPvc>,
    client_ports: BTreeMap<u32, u16>,
    next_uid: u64,
    /// Every write through the Platform.
    writes: usize,
    events: Vec<Note>,
    /// What happened, in order: `deleted pd-2`, `created pd-2 <rev>`, `replicas 4`, ...
    log: Vec<String>,
    max_replicas: i32,
    /// Ordinals whose new pods no node can take (they stay `Pending`).
    unschedulable: BTreeSet<u32>,
    /// The claims' StorageClass refuses expansion (`allowVolumeExpansion` unset).
    fixed_size_class: bool,
    /// Storage class lookups made (only while a claim is below the spec's size).
    class_lookups: usize,
}

pub struct Sim {
    state: Arc<Mutex<State>>,
    env: Arc<Env>,
    stop: Arc<AtomicBool>,
    kubelet: Option<std::thread::JoinHandle<()>>,
}

/// `rev-<hash>` of the pod template, as a ControllerRevision would name it.
fn revision_of(sts: &StatefulSet) -> String {
    use std::hash::{Hash, Hasher};
    let template = serde_json::to_string(&sts.spec.as_ref().map(|s| &s.template)).unwrap();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    template.hash(&mut h);
    format!("rev-{:08x}", h.finish() as u32)
}

impl Sim {
    pub fn start(mut cluster: MeridianCluster, env: Env) -> Sim {
        cluster.metadata.namespace = Some("sim".into());
        cluster.metadata.uid = Some("uid-sim".into());
        cluster.metadata.generation = Some(1);
        let state = Arc::new(Mutex::new(State {
            cluster: Some(cluster),
            ..State::default()
        }));
        let env = Arc::new(env);
        let stop = Arc::new(AtomicBool::new(false));
        let kubelet = {
            let (state, env, stop) = (state.clone(), env.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    kubelet_round(&state, &env);
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Sim {
            state,
            env,
            stop,
            kubelet: Some(kubelet),
        }
    }

    pub fn cluster(&self) -> MeridianCluster {
        self.state.lock().unwrap().cluster.clone().unwrap()
    }

    /// A spec change, as `kubectl edit` would make it (the generation moves).
    pub fn edit(&self, f: impl FnOnce(&mut MeridianCluster)) {
        let mut s = self.state.lock().unwrap();
        let mc = s.cluster.as_mut().unwrap();
        f(mc);
        mc.metadata.generation = mc.metadata.generation.map(|g| g + 1);
    }

    pub fn status(&self) -> MeridianClusterStatus {
        self.cluster().status.unwrap_or_default()
    }

    pub fn writes(&self) -> usize {
        self.state.lock().unwrap().writes
    }

    pub fn log(&self) -> Vec<String> {
        self.state.lock().unwrap().log.clone()
    }

    pub fn events(&self) -> Vec<Note> {
        self.state.lock().unwrap().events.clone()
    }

    pub fn max_replicas(&self) -> i32 {
        self.state.lock().unwrap().max_replicas
    }

    pub fn update_revision(&self) -> String {
        self.state.lock().unwrap().update_revision.clone()
    }

    /// Pods by name with their revision and readiness.
    pub fn pods(&self) -> Vec<(String, String, bool)> {
        let s = self.state.lock().unwrap();
        s.pods
            .values()
            .map(|p| {
                (
                    pod_name(p.ordinal),
                    p.revision.clone(),
                    p.ready_since.is_some(),
                )
            })
            .collect()
    }

    pub fn pvc(&self, name: &str) -> Option<(String, bool)> {
        let s = self.state.lock().unwrap();
        s.pvcs.get(name).map(|c| (c.uid.clone(), c.deferred))
    }

    /// Each claim's request and capacity, by name.
    pub fn claim_sizes(&self) -> BTreeMap<String, (String, String)> {
        let s = self.state.lock().unwrap();
        s.pvcs
            .iter()
            .map(|(n, c)| (n.clone(), (c.requested.clone(), c.capacity.clone())))
            .collect()
    }

    /// Makes the claims' StorageClass refuse (or allow again) volume expansion.
    pub fn set_fixed_size_class(&self, fixed: bool) {
        self.state.lock().unwrap().fixed_size_class = fixed;
    }

    /// How many times the operator looked the StorageClass up.
    pub fn class_lookups(&self) -> usize {
        self.state.lock().unwrap().class_lookups
    }

    /// The stable client address of each ordinal ever created (like a pod's DNS name).
    pub fn client_endpoints(&self, ordinals: u32) -> Vec<String> {
        let mut s = self.state.lock().unwrap();
        (0..ordinals)
            .map(|i| {
                let port = *s.client_ports.entry(i).or_insert_with(free_udp_port);
                format!("127.0.0.1:{port}")
            })
            .collect()
    }

    /// The admin addresses of the pods running now.
    pub fn admin_addrs(&self) -> Vec<String> {
        admin_addrs(&self.state)
    }

    pub fn addresses(&self) -> impl Fn(&MeridianCluster) -> Vec<String> + Send + Sync + 'static {
        let state = self.state.clone();
        move |_| admin_addrs(&state)
    }

    /// The node under this pod is lost: its process is SIGKILLed and never comes back there.
    pub fn lose_node(&self, ordinal: u32) {
        let process = {
            let mut s = self.state.lock().unwrap();
            let pod = s.pods.get_mut(&ordinal).expect("no such pod");
            pod.node_lost = true;
            pod.ready_since = None;
            pod.lost_at = Some(Timestamp::now());
            s.log.push(format!("node lost under {}", pod_name(ordinal)));
            s.pods.get_mut(&ordinal).unwrap().process.take()
        };
        if let Some(p) = process {
            p.kill().unwrap();
        }
    }

    /// No node can take a pod of this ordinal from now on (its node is gone and its volume
    /// bound there, or a selector no node matches): the next one created stays `Pending`.
    pub fn make_unschedulable(&self, ordinal: u32) {
        let mut s = self.state.lock().unwrap();
        s.unschedulable.insert(ordinal);
        s.log
            .push(format!("no node can take {} any more", pod_name(ordinal)));
    }

    /// The pods that are `Pending` (never scheduled).
    pub fn pending(&self) -> Vec<String> {
        let s = self.state.lock().unwrap();
        s.pods
            .values()
            .filter(|p| p.pending)
            .map(|p| pod_name(p.ordinal))
            .collect()
    }

    /// As `lose_node`, and the pod is not removed on a graceful delete: it stays Terminating
    /// until force-deleted, as on a real cluster whose node does not come back.
    pub fn lose_node_holding_its_pod(&self, ordinal: u32) {
        self.lose_node(ordinal);
        let mut s = self.state.lock().unwrap();
        if let Some(pod) = s.pods.get_mut(&ordinal) {
            pod.held = true;
        }
    }

    /// An owned object as stored, as JSON; `None` when there is none.
    pub fn object(&self, object: Object) -> Option<serde_json::Value> {
        let s = self.state.lock().unwrap();
        match object {
            Object::StatefulSet => s.sts.as_ref().map(|sts| serde_json::to_value(sts).unwrap()),
            _ => s.objects.get(&object).cloned(),
        }
    }

    /// `kubectl delete` of an owned object other than the StatefulSet (not the operator's
    /// write).
    pub fn delete_object(&self, object: Object) {
        assert_ne!(object, Object::StatefulSet, "pods would go with it");
        let mut s = self.state.lock().unwrap();
        s.objects.remove(&object);
        s.log.push(format!("kubectl delete {object:?}"));
    }

    /// `kubectl edit` of the StatefulSet (not the operator's write): the update revision
    /// follows the template, as the StatefulSet controller's does.
    pub fn edit_stateful_set(&self, f: impl FnOnce(&mut StatefulSet)) {
        let mut s = self.state.lock().unwrap();
        let mut sts = s.sts.clone().expect("a StatefulSet");
        f(&mut sts);
        s.log.push("kubectl edit StatefulSet".into());
        s.apply_sts(&sts);
    }

    /// The CA that signed the pods' shared certificate (`ca.pem` beside it).
    pub fn ca(&self) -> PathBuf {
        self.env.cert.with_file_name("ca.pem")
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(k) = self.kubelet.take() {
            let _ = k.join();
        }
        // Processes are killed as their ServerProcess values drop with the state.
    }
}

fn pod_name(ordinal: u32) -> String {
    format!("pd-{ordinal}")
}

fn admin_addrs(state: &Mutex<State>) -> Vec<String> {
    let s = state.lock().unwrap();
    s.pods
        .values()
        .filter_map(|p| p.process.as_ref().map(|p| p.admin_addr.clone()))
        .collect()
}

/// One pass of the StatefulSet controller and the kubelet.
fn kubelet_round(state: &Mutex<State>, env: &Env) {
    let mut to_stop = Vec::new();
    let mut to_start = Vec::new();
    {
        let mut s = state.lock().unwrap();
        let replicas = s
            .sts
            .as_ref()
            .and_then(|sts| sts.spec.as_ref()?.replicas)
            .unwrap_or(0) as u32;
        // Scale-in: pods past the replicas are deleted (Parallel policy: all at once).
        for pod in s.pods.values_mut() {
            if pod.ordinal >= replicas && !pod.terminating {
                pod.terminating = true;
                pod.ready_since = None;
            }
        }
        // Deleted pods go (a lost node's at once: nothing there to stop).
        let gone: Vec<u32> = s
            .pods
            .values()
            .filter(|p| p.terminating && !p.starting && !p.held)
            .map(|p| p.ordinal)
            .collect();
        for o in gone {
            let mut pod = s.pods.remove(&o).unwrap();
            if let Some(p) = pod.process.take() {
                to_stop.push(p);
            }
            s.log.push(format!("removed {}", pod_name(o)));
        }
        // Claims whose deletion waited for their pod.
        let in_use: Vec<String> = s.pods.keys().map(|o| pvc_name(&pod_name(*o))).collect();
        let released: Vec<String> = s
            .pvcs
            .iter()
            .filter(|(name, c)| c.deleting && !in_use.contains(name))
            .map(|(name, _)| name.clone())
            .collect();
        for name in released {
            let claim = s.pvcs.remove(&name).unwrap();
            let _ = std::fs::remove_dir_all(&claim.dir);
            s.log.push(format!("deleted claim {name}"));
        }
        // OnDelete: missing ordinals are created on the update revision.
        if s.sts.is_some() {
            for o in 0..replicas {
                let claim = pvc_name(&pod_name(o));
                if s.pods.contains_key(&o) || s.pvcs.get(&claim).is_some_and(|c| c.deleting) {
                    continue;
                }
                s.next_uid += 1;
                let uid = s.next_uid;
                if !s.pvcs.contains_key(&claim) {
                    let dir = env.dir.join(format!("{claim}-{uid}"));
                    // The StatefulSet controller makes a claim from the template as stored.
                    let size = s.sts.as_ref().map(|sts| {
                        serde_json::to_value(sts).unwrap()["spec"]["volumeClaimTemplates"][0]
                            ["spec"]["resources"]["requests"]["storage"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string()
                    });
                    let size = size.unwrap_or_default();
                    s.pvcs.insert(
                        claim.clone(),
                        SimPvc {
                            uid: format!("pvc-uid-{uid}"),
                            dir,
                            deferred: false,
                            deleting: false,
                            requested: size.clone(),
                            capacity: size,
                        },
                    );
                }
                let revision = s.update_revision.clone();
                let pending = s.unschedulable.contains(&o);
                s.pods.insert(
                    o,
                    SimPod {
                        ordinal: o,
                        revision: revision.clone(),
                        uid,
                        process: None,
                        starting: !pending,
                        terminating: false,
                        node_lost: false,
                        pending,
                        lost_at: None,
                        held: false,
                        ready_since: None,
                    },
                );
                if pending {
                    s.log.push(format!("{} pending", pod_name(o)));
                    continue;
                }
                let port = *s.client_ports.entry(o).or_insert_with(free_udp_port);
                let dir = s.pvcs[&claim].dir.clone();
                s.log.push(format!("created {} {revision}", pod_name(o)));
                let args = template_args(s.sts.as_ref());
                to_start.push((o, uid, port, dir, args));
            }
        }
    }
    for p in to_stop {
        let _ = p.stop();
    }
    for (o, uid, port, dir, args) in to_start {
        let started = start_member(env, o, port, &dir, &args);
        let mut s = state.lock().unwrap();
        match (s.pods.get_mut(&o), started) {
            (Some(pod), Ok(process)) if pod.uid == uid => {
                pod.starting = false;
                if pod.terminating {
                    drop(s);
                    let _ = process.stop();
                } else {
                    pod.process = Some(process);
                }
            }
            (Some(pod), Err(e)) if pod.uid == uid => {
                // Crash-looping container: the next round tries again.
                s.log
                    .push(format!("start of {} failed: {e:#}", pod_name(o)));
                s.pods.remove(&o);
            }
            (_, Ok(process)) => {
                drop(s);
                let _ = process.stop();
            }
            _ => {}
        }
    }
    // Readiness probes.
    let probes: Vec<(u32, u64, String)> = {
        let s = state.lock().unwrap();
        s.pods
            .values()
            .filter(|p| !p.terminating)
            .filter_map(|p| Some((p.ordinal, p.uid, p.process.as_ref()?.admin_addr.clone())))
            .collect()
    };
    for (o, uid, admin) in probes {
        // As kubelet probes: no client certificate, the server's not verified (the members
        // run with --admin-open-probes, as the operator's StatefulSet has them).
        let ready = AdminClient::with_timeout(&admin, &Trust::Insecure, Duration::from_millis(300))
            .and_then(|c| c.get("/ready"))
            .is_ok_and(|(status, _)| status == 200);
        let mut s = state.lock().unwrap();
        if let Some(pod) = s
            .pods
            .get_mut(&o)
            .filter(|p| p.uid == uid && !p.terminating)
        {
            match (ready, pod.ready_since) {
                (true, None) => pod.ready_since = Some(Timestamp::now()),
                (false, Some(_)) => pod.ready_since = None,
                _ => {}
            }
        }
    }
}

/// The member container's arguments in a StatefulSet's pod template.
fn template_args(sts: Option<&StatefulSet>) -> Vec<String> {
    sts.and_then(|s| s.spec.as_ref())
        .and_then(|spec| spec.template.spec.as_ref())
        .and_then(|pod| pod.containers.first())
        .and_then(|c| c.args.clone())
        .unwrap_or_default()
}

/// The command line the operator's pod template gives a member, with what only a pod has
/// mapped to this host: the listen and advertise addresses and the data dir are the
/// harness's, `$(POD_NAME)` is the pod's name, and the mounted TLS files and config are the
/// sim's. Every other argument is passed as the operator wrote it, and one the sim does not
/// know fails the start: a flag the operator adds runs here before it runs in a cluster.
fn member_args(template: &[String], env: &Env, ordinal: u32) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut args = template.iter();
    anyhow::ensure!(
        args.next().map(String::as_str) == Some("serve"),
        "the template does not run `serve`: {template:?}"
    );
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--admin-open-probes" => out.push(flag.clone()),
            "--listen" | "--admin-listen" | "--advertise-client" | "--advertise-admin"
            | "--data-dir" => {
                args.next();
            }
            "--name" | "--etcd" | "--config" | "--tls-cert" | "--tls-key" | "--tls-ca" => {
                let value = args
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("{flag} without a value"))?;
                let local = match flag.as_str() {
                    "--name" if value == "$(POD_NAME)" => pod_name(ordinal),
                    "--etcd" => value.clone(),
                    "--config" if value == "/etc/meridian/meridian.toml" => {
                        env.config.display().to_string()
                    }
                    "--tls-cert" if value.ends_with("/tls.crt") => env.cert.display().to_string(),
                    "--tls-key" if value.ends_with("/tls.key") => env.key.display().to_string(),
                    "--tls-ca" if value.ends_with("/ca.crt") => {
                        env.cert.with_file_name("ca.pem").display().to_string()
                    }
                    _ => anyhow::bail!("the sim cannot map {flag} {value}"),
                };
                out.extend([flag.clone(), local]);
            }
            other => anyhow::bail!("the sim does not know the member argument {other}"),
        }
    }
    out.extend(["--cores".into(), "1".into()]);
    Ok(out)
}

fn start_member(
    env: &Env,
    ordinal: u32,
    port: u16,
    dir: &Path,
    template: &[String],
) -> anyhow::Result<ServerProcess> {
    std::fs::create_dir_all(dir)?;
    let args = member_args(template, env, ordinal)?;
    ServerProcess::start_with(&env.bin, dir, &format!("127.0.0.1:{port}"), &args)
}

/// The spec fields of a StatefulSet an update may change; any other is refused.
const MUTABLE_STS_SPEC: [&str; 7] = [
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

/// The API server's refusal of such an update (its message, as Kubernetes words it).
fn sts_update_forbidden(name: &str) -> ReconcileError {
    let message = format!(
        "StatefulSet.apps \"{name}\" is invalid: spec: Forbidden: updates to statefulset spec \
         for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', \
         'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and \
         'minReadySeconds' are forbidden"
    );
    ReconcileError::kube(
        format!("apply StatefulSet sim/{name}"),
        kube::Error::Api(Status::failure(&message, "Invalid").with_code(422).boxed()),
    )
}

/// The spec of `sts` without the fields an update may change.
fn immutable_spec(sts: &StatefulSet) -> serde_json::Value {
    let mut spec = serde_json::to_value(&sts.spec).unwrap();
    if let Some(spec) = spec.as_object_mut() {
        for field in MUTABLE_STS_SPEC {
            spec.remove(field);
        }
    }
    spec
}

/// A StatefulSet as the API server stores it: with the defaults it fills in.
fn sts_defaults(mut sts: StatefulSet) -> StatefulSet {
    if let Some(spec) = sts.spec.as_mut() {
        spec.revision_history_limit.get_or_insert(10);
        if let Some(pod) = spec.template.spec.as_mut() {
            pod.restart_policy.get_or_insert_with(|| "Always".into());
            pod.dns_policy.get_or_insert_with(|| "ClusterFirst".into());
            pod.termination_grace_period_seconds.get_or_insert(30);
            for c in &mut pod.containers {
                c.image_pull_policy
                    .get_or_insert_with(|| "IfNotPresent".into());
                c.termination_message_path
                    .get_or_insert_with(|| "/dev/termination-log".into());
            }
        }
        for claim in spec.volume_claim_templates.iter_mut().flatten() {
            if let Some(claim_spec) = claim.spec.as_mut() {
                claim_spec
                    .volume_mode
                    .get_or_insert_with(|| "Filesystem".into());
            }
        }
    }
    sts.metadata.uid.get_or_insert_with(|| "sts-uid".into());
    sts
}

/// A Service as the API server stores it: a cluster IP unless headless, the default type and
/// session affinity, each port's target port.
fn service_defaults(mut service: serde_json::Value, ip: u32) -> serde_json::Value {
    let spec = &mut service["spec"];
    if spec.get("clusterIP").is_none() {
        spec["clusterIP"] = format!("10.96.0.{ip}").into();
    }
    if spec.get("type").is_none() {
        spec["type"] = "ClusterIP".into();
    }
    spec["sessionAffinity"] = "None".into();
    for port in spec["ports"].as_array_mut().into_iter().flatten() {
        if port.get("targetPort").is_none() {
            port["targetPort"] = port["port"].clone();
        }
    }
    service
}

impl State {
    fn apply_sts(&mut self, sts: &StatefulSet) {
        let revision = revision_of(sts);
        if revision != self.update_revision {
            self.log.push(format!("template {revision}"));
            self.update_revision = revision;
        }
        let replicas = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        if self.sts.as_ref().and_then(|s| s.spec.as_ref()?.replicas) != Some(replicas) {
            self.log.push(format!("replicas {replicas}"));
        }
        self.max_replicas = self.max_replicas.max(replicas);
        self.sts = Some(sts.clone());
    }
}

impl Platform for Sim {
    fn operator_namespace(&self) -> String {
        "meridian-system".into()
    }

    async fn workload(&self, mc: &MeridianCluster) -> Result<Workload, ReconcileError> {
        let mut s = self.state.lock().unwrap();
        let stateful_set = s.sts.clone().map(|mut sts| {
            let current = s
                .pods
                .values()
                .map(|p| p.revision.clone())
                .min()
                .unwrap_or_else(|| s.update_revision.clone());
            sts.status = Some(StatefulSetStatus {
                replicas: s.pods.len() as i32,
                update_revision: Some(s.update_revision.clone()),
                current_revision: Some(current),
                ..StatefulSetStatus::default()
            });
            sts
        });
        let pods = s
            .pods
            .values()
            .map(|p| Pod {
                metadata: ObjectMeta {
                    name: Some(pod_name(p.ordinal)),
                    namespace: Some("sim".into()),
                    labels: Some(BTreeMap::from([(
                        REVISION_LABEL.to_string(),
                        p.revision.clone(),
                    )])),
                    deletion_timestamp: p.terminating.then(|| Time(Timestamp::now())),
                    ..ObjectMeta::default()
                },
                spec: Some(PodSpec {
                    node_name: (!p.pending).then(|| format!("node-{}", p.ordinal)),
                    ..PodSpec::default()
                }),
                status: Some(PodStatus {
                    phase: Some(if p.pending { "Pending" } else { "Running" }.into()),
                    conditions: Some(vec![PodCondition {
                        type_: "Ready".into(),
                        status: if p.ready_since.is_some() {
                            "True"
                        } else {
                            "False"
                        }
                        .into(),
                        last_transition_time: p.ready_since.or(p.lost_at).map(Time),
                        ..PodCondition::default()
                    }]),
                    ..PodStatus::default()
                }),
            })
            .collect();
        let pvcs = s
            .pvcs
            .iter()
            .map(|(name, c)| PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    uid: Some(c.uid.clone()),
                    annotations: c.deferred.then(|| {
                        BTreeMap::from([(
                            DEFERRED_DELETE_ANNOTATION.to_string(),
                            "true".to_string(),
                        )])
                    }),
                    ..ObjectMeta::default()
                },
                spec: Some(PersistentVolumeClaimSpec {
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".to_string(),
                            Quantity(c.requested.clone()),
                        )])),
                        ..VolumeResourceRequirements::default()
                    }),
                    ..PersistentVolumeClaimSpec::default()
                }),
                status: Some(PersistentVolumeClaimStatus {
                    capacity: Some(BTreeMap::from([(
                        "storage".to_string(),
                        Quantity(c.capacity.clone()),
                    )])),
                    ..PersistentVolumeClaimStatus::default()
                }),
            })
            .collect::<Vec<_>>();
        // The StorageClass is read, as the API platform reads it, only while a claim is small.
        let storage_expandable =
            volumes::any_below(&mc.spec.storage.size, &snapshot::claims(&pvcs)).then(|| {
                s.class_lookups += 1;
                !s.fixed_size_class
            });
        // A lost node is gone: its pods' nodes are looked up and not found.
        let nodes = s
            .pods
            .values()
            .filter(|p| p.lost_at.is_some())
            .map(|p| (format!("node-{}", p.ordinal), None))
            .collect();
        Ok(Workload {
            stateful_set,
            pods,
            pvcs,
            nodes,
            objects: s.objects.clone(),
            storage_expandable,
        })
    }

    async fn apply(&self, owned: &Owned, object: Object) -> Result<(), ReconcileError> {
        let mut s = self.state.lock().unwrap();
        s.writes += 1;
        if object == Object::StatefulSet {
            let sts = sts_defaults(owned.stateful_set.clone());
            let name = sts.metadata.name.clone().unwrap_or_default();
            if let Some(stored) = &s.sts {
                if immutable_spec(stored) != immutable_spec(&sts) {
                    let refused = sts_update_forbidden(&name);
                    s.log.push(format!("refused StatefulSet {name}"));
                    return Err(refused);
                }
            }
            s.log.push(format!("applied StatefulSet {name}"));
            s.apply_sts(&sts);
            return Ok(());
        }
        let mut value = owned.value(object).unwrap();
        if object.kind() == "Service" {
            value = service_defaults(value, object as u32 + 10);
        }
        value["metadata"]["uid"] = format!("uid-{object:?}").into();
        s.log.push(format!(
            "applied {} {}",
            object.kind(),
            value["metadata"]["name"].as_str().unwrap_or_default()
        ));
        s.objects.insert(object, value);
        Ok(())
    }

    async fn scale_stateful_set(
        &self,
        _: &MeridianCluster,
        replicas: u32,
    ) -> Result<(), ReconcileError> {
        let mut s = self.state.lock().unwrap();
        s.writes += 1;
        let mut sts = s.sts.clone().expect("scaled before it exists");
        sts.spec.get_or_insert_with(Default::default).replicas = Some(replicas as i32);
        s.apply_sts(&sts);
        Ok(())
    }

    async fn delete_pod(&self, _: &MeridianCluster, name: &str) -> Result<(), ReconcileError> {
        let mut s = self.state.lock().unwrap();
        s.writes += 1;
        s.log.push(format!("deleted {name}"));
        if let Some(pod) = s.pods.values_mut().find(|p| pod_name(p.ordinal) == name) {
            pod.terminating = true;
            pod.ready_since = None;
        }
        Ok(())
    }

    async fn force_delete_pod(
        &self,
        _: &MeridianCluster,
        name: &str,
    ) -> Result<(), ReconcileError> {
        let mut s = self.state.lock().unwrap();
        s.writes += 1;
        s.log.push(format!("force-deleted {name}"));
        if let Some(pod) = s.pods.values_mut().find(|p| pod_name(p.ordinal) == name) {
            pod.held = false;
            pod.terminating = true;
            pod.ready_since = None;
        }
        Ok(())
    }

    async fn delete_pvc(
        &self,
        _: &MeridianCluster,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), ReconcileError> {
        let mut s = self.state.lock().unwrap();
        s.writes += 1;
        if let Some(c) = s.pvcs.get_mut(name) {
            if uid.is_none_or(|u| u == c.uid) {
                c.deleting = true;
            }
        }
        Ok(())
    }

    async fn resize_pvc(
        &self,
        _: &MeridianCluster,
        name: &str,
        size: &str,
    ) -> Result<(), ReconcileError> {
        let mut s = self.state.lock().unwrap();
        s.writes += 1;
        s.log.push(format!("resized claim {name} to {size}"));
        let fixed = s.fixed_size_class;
        if let Some(c) = s.pvcs.get_mut(name) {
            // As the API server's admission does: a class without expansion refuses the raise.
            if fixed {
                return Err(ReconcileError::kube(
                    format!("resize claim sim/{name}"),
                    kube::Error::Api(
                        Status::failure(
                            "only dynamically provisioned pvc can be resized and the \
                             storageclass that provisions the pvc must support resize",
                            "Forbidden",
                        )
                        .with_code(403)
                        .boxed(),
                    ),
                ));
            }
            // The driver grows the volume online, at once here.
            c.requested = size.to_string();
            c.capacity = size.to_string();
        }
        Ok(())
    }

    async fn mark_pvc(&self, _: &MeridianCluster, name: &str) -> Result<(), ReconcileError> {
        let mut s = self.state.lock().unwrap();
        s.writes += 1;
        if let Some(c) = s.pvcs.get_mut(name) {
            c.deferred = true;
        }
        Ok(())
    }

    async fn patch_status(
        &self,
        _: &MeridianCluster,
        status: &MeridianClusterStatus,
    ) -> Result<(), ReconcileError> {
        let mut s = self.state.lock().unwrap();
        s.writes += 1;
        s.cluster.as_mut().unwrap().status = Some(status.clone());
        Ok(())
    }

    async fn event(&self, _: &MeridianCluster, note: &Note) -> Result<(), ReconcileError> {
        let mut s = self.state.lock().unwrap();
        s.writes += 1;
        s.log
            .push(format!("event {}: {}", note.reason, note.message));
        s.events.push(note.clone());
        Ok(())
    }
}

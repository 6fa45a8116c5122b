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

mod api;
mod kubelet;
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

use kubelet::*;

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

//! The simulated API server's side of `Platform`: objects stored with the defaults the API
//! server fills in, StatefulSet updates to immutable fields refused with its 422, and every
//! write counted and logged.

use super::*;

/// The spec fields of a StatefulSet an update may change; any other is refused.
pub(super) const MUTABLE_STS_SPEC: [&str; 7] = [
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

/// The API server's refusal of such an update (its message, as Kubernetes words it).
pub(super) fn sts_update_forbidden(name: &str) -> ReconcileError {
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
pub(super) fn immutable_spec(sts: &StatefulSet) -> serde_json::Value {
    let mut spec = serde_json::to_value(&sts.spec).unwrap();
    if let Some(spec) = spec.as_object_mut() {
        for field in MUTABLE_STS_SPEC {
            spec.remove(field);
        }
    }
    spec
}

/// A StatefulSet as the API server stores it: with the defaults it fills in.
pub(super) fn sts_defaults(mut sts: StatefulSet) -> StatefulSet {
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
pub(super) fn service_defaults(mut service: serde_json::Value, ip: u32) -> serde_json::Value {
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
    pub(super) fn apply_sts(&mut self, sts: &StatefulSet) {
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

//! `Platform` on the Kubernetes API: the owned objects read by name (so one stripped of its
//! labels is still found), pods and claims by the cluster's labels; server-side apply of one
//! object at a time with one field manager (forced, so the operator owns what it sets),
//! replicas through the StatefulSet's `/scale` subresource, status through the `/status`
//! subresource, events through the events API. A thing already gone counts as deleted. Every
//! failure names the call that failed (`ReconcileError::kube`: a 409 is a conflict).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::error::ReconcileError;
use super::platform::{Note, Object, Owned, Platform, Workload};
use crate::crd::{MeridianCluster, MeridianClusterStatus};
use crate::decide::snapshot::{self, DEFERRED_DELETE_ANNOTATION};
use crate::decide::{resources, volumes};

/// The one field manager of every write.
pub const FIELD_MANAGER: &str = "meridian-operator";

#[derive(Clone)]
pub struct KubeApi {
    client: Client,
    recorder: Recorder,
    operator_namespace: String,
}

impl KubeApi {
    /// `instance` names this replica in events; `operator_namespace` is where the operator's
    /// pods run (`POD_NAMESPACE`), for the admin NetworkPolicy.
    pub fn new(client: Client, instance: Option<String>, operator_namespace: String) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.into(),
            instance,
        };
        KubeApi {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            operator_namespace,
        }
    }

    fn api<K>(&self, namespace: &str) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Server-side apply of an object into its own namespace.
    async fn apply<K>(&self, object: &K) -> Result<(), ReconcileError>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Serialize
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let (namespace, name) = (namespace_of(object), object.name_any());
        self.api::<K>(&namespace)
            .patch(&name, &params, &Patch::Apply(object))
            .await
            .map_err(|e| {
                ReconcileError::kube(
                    format!("apply {} {namespace}/{name}", K::kind(&Default::default())),
                    e,
                )
            })?;
        Ok(())
    }

    /// The object `object` of `mc` as stored, as JSON; `None` when there is none.
    async fn observe<K>(
        &self,
        mc: &MeridianCluster,
        object: Object,
    ) -> Result<Option<serde_json::Value>, ReconcileError>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Serialize
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let (ns, name) = (namespace_of(mc), object.name(mc));
        let found =
            self.api::<K>(&ns).get_opt(&name).await.map_err(|e| {
                ReconcileError::kube(format!("get {} {ns}/{name}", object.kind()), e)
            })?;
        // A typed object always serializes; were it not to, it counts as missing and is
        // applied again.
        Ok(found.and_then(|k| serde_json::to_value(k).ok()))
    }

    /// Deletes `name` (a 404 is fine: it is gone already).
    async fn delete<K>(&self, namespace: &str, name: &str) -> Result<(), ReconcileError>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        gone_is_fine(
            self.api::<K>(namespace)
                .delete(name, &DeleteParams::default())
                .await,
        )
        .map_err(|e| {
            ReconcileError::kube(
                format!("delete {} {namespace}/{name}", K::kind(&Default::default())),
                e,
            )
        })
    }

    /// The finalizer's work: delete what the operator created (StatefulSet, Services,
    /// NetworkPolicy, ConfigMap, disruption budget) and the PVCs it marked for deletion.
    /// Members' other PVCs hold data and stay, as a StatefulSet's do.
    pub async fn remove_owned(&self, mc: &MeridianCluster) -> Result<(), ReconcileError> {
        let ns = namespace_of(mc);
        let name = mc.name_any();
        self.delete::<StatefulSet>(&ns, &name).await?;
        self.delete::<Service>(&ns, &name).await?;
        self.delete::<Service>(&ns, &resources::peer_service_name(mc))
            .await?;
        let admin = resources::admin_service_name(mc);
        self.delete::<Service>(&ns, &admin).await?;
        self.delete::<NetworkPolicy>(&ns, &admin).await?;
        self.delete::<ConfigMap>(&ns, &resources::config_map_name(mc))
            .await?;
        self.delete::<PodDisruptionBudget>(&ns, &name).await?;
        let pvcs = self
            .api::<PersistentVolumeClaim>(&ns)
            .list(&selector(mc))
            .await
            .map_err(|e| ReconcileError::kube(format!("list claims of {ns}/{name}"), e))?;
        for pvc in pvcs.items {
            if pvc.annotations().contains_key(DEFERRED_DELETE_ANNOTATION) {
                self.delete::<PersistentVolumeClaim>(&ns, &pvc.name_any())
                    .await?;
            }
        }
        Ok(())
    }
}

fn selector(mc: &MeridianCluster) -> ListParams {
    let labels = resources::labels(mc)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    ListParams::default().labels(&labels)
}

/// A 404 on delete: it is gone already, which is what was asked.
impl KubeApi {
    /// The nodes under the pods that are not Ready (a Ready pod's kubelet reports, so its node
    /// is not lost). A lookup that fails (no RBAC for nodes, say) leaves the node unknown,
    /// which never counts as lost: force deletion is only for what is known.
    async fn nodes_of_unready(
        &self,
        pods: &[Pod],
    ) -> std::collections::BTreeMap<String, Option<Node>> {
        let api: Api<Node> = Api::all(self.client.clone());
        let mut nodes = std::collections::BTreeMap::new();
        for pod in pods {
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                continue;
            };
            if ready || nodes.contains_key(&node) {
                continue;
            }
            match api.get_opt(&node).await {
                Ok(found) => {
                    nodes.insert(node, found);
                }
                Err(e) => tracing::warn!("get node {node}: {e}"),
            }
        }
        nodes
    }
}

/// The annotation that marks the cluster's default StorageClass.
const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

impl KubeApi {
    /// Whether the claims' StorageClass allows expansion, asked only while a claim is below
    /// the spec's size (an idle cluster makes no extra read). A claim without a class name
    /// takes the default class. A class that is not there allows nothing; a lookup that fails
    /// (no RBAC for storageclasses, say) is not known, and nothing is resized on it.
    async fn storage_expandable(
        &self,
        mc: &MeridianCluster,
        pvcs: &[PersistentVolumeClaim],
    ) -> Option<bool> {
        if !volumes::any_below(&mc.spec.storage.size, &snapshot::claims(pvcs)) {
            return None;
        }
        let named = pvcs
            .iter()
            .find_map(|c| c.spec.as_ref()?.storage_class_name.clone())
            .or_else(|| mc.spec.storage.storage_class_name.clone());
        let api: Api<StorageClass> = Api::all(self.client.clone());
        let class = match named {
            Some(name) => api.get_opt(&name).await,
            None => api.list(&ListParams::default()).await.map(|l| {
                l.items.into_iter().find(|c| {
                    c.annotations()
                        .get(DEFAULT_CLASS_ANNOTATION)
                        .is_some_and(|v| v == "true")
                })
            }),
        };
        match class {
            Ok(class) => Some(class.is_some_and(|c| c.allow_volume_expansion == Some(true))),
            Err(e) => {
                tracing::warn!("reading the claims' StorageClass: {e}");
                None
            }
        }
    }
}

fn gone_is_fine<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

impl Platform for KubeApi {
    fn operator_namespace(&self) -> String {
        self.operator_namespace.clone()
    }

    async fn workload(&self, mc: &MeridianCluster) -> Result<Workload, ReconcileError> {
        let (ns, name) = (namespace_of(mc), mc.name_any());
        let stateful_set = self
            .api::<StatefulSet>(&ns)
            .get_opt(&name)
            .await
            .map_err(|e| ReconcileError::kube(format!("get StatefulSet {ns}/{name}"), e))?;
        let pods = self
            .api::<Pod>(&ns)
            .list(&selector(mc))
            .await
            .map_err(|e| ReconcileError::kube(format!("list pods of {ns}/{name}"), e))?
            .items;
        // Claims made from the StatefulSet's template carry the pod labels.
        let pvcs = self
            .api::<PersistentVolumeClaim>(&ns)
            .list(&selector(mc))
            .await
            .map_err(|e| ReconcileError::kube(format!("list claims of {ns}/{name}"), e))?
            .items;
        let mut objects = std::collections::BTreeMap::new();
        for object in Object::ALL {
            let found = match object {
                Object::StatefulSet => continue,
                Object::ClientService | Object::PeerService | Object::AdminService => {
                    self.observe::<Service>(mc, object).await?
                }
                Object::AdminNetworkPolicy => self.observe::<NetworkPolicy>(mc, object).await?,
                Object::ConfigMap => self.observe::<ConfigMap>(mc, object).await?,
                Object::DisruptionBudget => self.observe::<PodDisruptionBudget>(mc, object).await?,
            };
            if let Some(value) = found {
                objects.insert(object, value);
            }
        }
        let nodes = if mc.spec.failover.enabled {
            self.nodes_of_unready(&pods).await
        } else {
            Default::default()
        };
        let storage_expandable = self.storage_expandable(mc, &pvcs).await;
        Ok(Workload {
            stateful_set,
            pods,
            pvcs,
            objects,
            nodes,
            storage_expandable,
        })
    }

    async fn apply(&self, owned: &Owned, object: Object) -> Result<(), ReconcileError> {
        match object {
            Object::ClientService => self.apply::<Service>(&owned.client_service).await,
            Object::PeerService => self.apply::<Service>(&owned.peer_service).await,
            Object::AdminService => self.apply::<Service>(&owned.admin_service).await,
            Object::AdminNetworkPolicy => {
                self.apply::<NetworkPolicy>(&owned.admin_network_policy)
                    .await
            }
            Object::ConfigMap => self.apply::<ConfigMap>(&owned.config_map).await,
            Object::DisruptionBudget => {
                self.apply::<PodDisruptionBudget>(&owned.disruption_budget)
                    .await
            }
            Object::StatefulSet => self.apply::<StatefulSet>(&owned.stateful_set).await,
        }
    }

    async fn scale_stateful_set(
        &self,
        mc: &MeridianCluster,
        replicas: u32,
    ) -> Result<(), ReconcileError> {
        let (ns, name) = (namespace_of(mc), mc.name_any());
        let patch = serde_json::json!({"spec": {"replicas": replicas}});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        self.api::<StatefulSet>(&ns)
            .patch_scale(&name, &params, &Patch::Merge(&patch))
            .await
            .map_err(|e| ReconcileError::kube(format!("scale StatefulSet {ns}/{name}"), e))?;
        Ok(())
    }

    async fn delete_pod(&self, mc: &MeridianCluster, name: &str) -> Result<(), ReconcileError> {
        self.delete::<Pod>(&namespace_of(mc), name).await
    }

    async fn force_delete_pod(
        &self,
        mc: &MeridianCluster,
        name: &str,
    ) -> Result<(), ReconcileError> {
        let ns = namespace_of(mc);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        gone_is_fine(self.api::<Pod>(&ns).delete(name, &params).await)
            .map_err(|e| ReconcileError::kube(format!("force-delete pod {ns}/{name}"), e))
    }

    async fn delete_pvc(
        &self,
        mc: &MeridianCluster,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), ReconcileError> {
        let params = DeleteParams {
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let ns = namespace_of(mc);
        match self
            .api::<PersistentVolumeClaim>(&ns)
            .delete(name, &params)
            .await
        {
            // A UID precondition that no longer holds: that claim is gone, a newer one stays.
            Err(kube::Error::Api(e)) if e.code == 409 && uid.is_some() => Ok(()),
            r => gone_is_fine(r)
                .map_err(|e| ReconcileError::kube(format!("delete claim {ns}/{name}"), e)),
        }
    }

    async fn resize_pvc(
        &self,
        mc: &MeridianCluster,
        name: &str,
        size: &str,
    ) -> Result<(), ReconcileError> {
        let patch = serde_json::json!({
            "spec": {"resources": {"requests": {"storage": size}}}
        });
        let ns = namespace_of(mc);
        self.api::<PersistentVolumeClaim>(&ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| ReconcileError::kube(format!("resize claim {ns}/{name} to {size}"), e))?;
        Ok(())
    }

    async fn mark_pvc(&self, mc: &MeridianCluster, name: &str) -> Result<(), ReconcileError> {
        let patch = serde_json::json!({
            "metadata": {"annotations": {DEFERRED_DELETE_ANNOTATION: "true"}}
        });
        let ns = namespace_of(mc);
        self.api::<PersistentVolumeClaim>(&ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| ReconcileError::kube(format!("mark claim {ns}/{name}"), e))?;
        Ok(())
    }

    async fn patch_status(
        &self,
        mc: &MeridianCluster,
        status: &MeridianClusterStatus,
    ) -> Result<(), ReconcileError> {
        let body = serde_json::json!({
            "apiVersion": MeridianCluster::api_version(&()),
            "kind": MeridianCluster::kind(&()),
            "status": status,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let (ns, name) = (namespace_of(mc), mc.name_any());
        self.api::<MeridianCluster>(&ns)
            .patch_status(&name, &params, &Patch::Apply(&body))
            .await
            .map_err(|e| ReconcileError::kube(format!("write the status of {ns}/{name}"), e))?;
        Ok(())
    }

    async fn event(&self, mc: &MeridianCluster, note: &Note) -> Result<(), ReconcileError> {
        let event = Event {
            type_: if note.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: note.reason.clone(),
            note: Some(note.message.clone()),
            action: note.action.clone(),
            secondary: None,
        };
        self.recorder
            .publish(&event, &mc.object_ref(&()))
            .await
            .map_err(|e| ReconcileError::kube(format!("publish event {}", note.reason), e))?;
        Ok(())
    }
}

fn namespace_of(object: &impl Resource) -> String {
    object.namespace().unwrap_or_else(|| "default".into())
}

//! `Platform` on the Kubernetes API: reads by the cluster's labels, server-side apply with one
//! field manager (forced, so the operator owns what it sets), status through the `/status`
//! subresource, events through the events API. A thing already gone counts as deleted.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::platform::{Note, Owned, Platform, Workload};
use crate::crd::{MeridianCluster, MeridianClusterStatus};
use crate::decide::resources;
use crate::decide::snapshot::DEFERRED_DELETE_ANNOTATION;

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
    async fn apply<K>(&self, object: &K) -> anyhow::Result<()>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Serialize
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api::<K>(&namespace_of(object))
            .patch(&object.name_any(), &params, &Patch::Apply(object))
            .await?;
        Ok(())
    }

    /// The finalizer's work: delete what the operator created (StatefulSet, Services,
    /// NetworkPolicy, ConfigMap, disruption budget) and the PVCs it marked for deletion.
    /// Members' other PVCs hold data and stay, as a StatefulSet's do.
    pub async fn remove_owned(&self, mc: &MeridianCluster) -> anyhow::Result<()> {
        let ns = namespace_of(mc);
        let dp = DeleteParams::default();
        let name = mc.name_any();
        gone_is_fine(self.api::<StatefulSet>(&ns).delete(&name, &dp).await)?;
        gone_is_fine(self.api::<Service>(&ns).delete(&name, &dp).await)?;
        let peer = resources::peer_service_name(mc);
        gone_is_fine(self.api::<Service>(&ns).delete(&peer, &dp).await)?;
        let admin = resources::admin_service_name(mc);
        gone_is_fine(self.api::<Service>(&ns).delete(&admin, &dp).await)?;
        gone_is_fine(self.api::<NetworkPolicy>(&ns).delete(&admin, &dp).await)?;
        let config = resources::config_map(mc).name_any();
        gone_is_fine(self.api::<ConfigMap>(&ns).delete(&config, &dp).await)?;
        gone_is_fine(
            self.api::<PodDisruptionBudget>(&ns)
                .delete(&name, &dp)
                .await,
        )?;
        let pvcs = self
            .api::<PersistentVolumeClaim>(&ns)
            .list(&selector(mc))
            .await?;
        for pvc in pvcs.items {
            if pvc.annotations().contains_key(DEFERRED_DELETE_ANNOTATION) {
                gone_is_fine(
                    self.api::<PersistentVolumeClaim>(&ns)
                        .delete(&pvc.name_any(), &dp)
                        .await,
                )?;
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
fn gone_is_fine<T>(r: Result<T, kube::Error>) -> anyhow::Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

impl Platform for KubeApi {
    fn operator_namespace(&self) -> String {
        self.operator_namespace.clone()
    }

    async fn workload(&self, mc: &MeridianCluster) -> anyhow::Result<Workload> {
        let stateful_set = self
            .api::<StatefulSet>(&namespace_of(mc))
            .get_opt(&mc.name_any())
            .await?;
        let pods = self
            .api::<Pod>(&namespace_of(mc))
            .list(&selector(mc))
            .await?
            .items;
        // Claims made from the StatefulSet's template carry the pod labels.
        let pvcs = self
            .api::<PersistentVolumeClaim>(&namespace_of(mc))
            .list(&selector(mc))
            .await?
            .items;
        Ok(Workload {
            stateful_set,
            pods,
            pvcs,
        })
    }

    async fn apply_owned(&self, owned: &Owned) -> anyhow::Result<()> {
        self.apply::<Service>(&owned.client_service).await?;
        self.apply::<Service>(&owned.peer_service).await?;
        self.apply::<Service>(&owned.admin_service).await?;
        // Before the StatefulSet: members never run with the admin port unfenced.
        self.apply::<NetworkPolicy>(&owned.admin_network_policy)
            .await?;
        self.apply::<ConfigMap>(&owned.config_map).await?;
        self.apply::<PodDisruptionBudget>(&owned.disruption_budget)
            .await?;
        // Last: its hash annotation says everything before it was applied.
        self.apply::<StatefulSet>(&owned.stateful_set).await
    }

    async fn apply_stateful_set(&self, sts: &StatefulSet) -> anyhow::Result<()> {
        self.apply::<StatefulSet>(sts).await
    }

    async fn delete_pod(&self, mc: &MeridianCluster, name: &str) -> anyhow::Result<()> {
        gone_is_fine(
            self.api::<Pod>(&namespace_of(mc))
                .delete(name, &DeleteParams::default())
                .await,
        )
    }

    async fn delete_pvc(
        &self,
        mc: &MeridianCluster,
        name: &str,
        uid: Option<&str>,
    ) -> anyhow::Result<()> {
        let params = DeleteParams {
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self
            .api::<PersistentVolumeClaim>(&namespace_of(mc))
            .delete(name, &params)
            .await
        {
            // A UID precondition that no longer holds: that claim is gone, a newer one stays.
            Err(kube::Error::Api(e)) if e.code == 409 && uid.is_some() => Ok(()),
            r => gone_is_fine(r),
        }
    }

    async fn mark_pvc(&self, mc: &MeridianCluster, name: &str) -> anyhow::Result<()> {
        let patch = serde_json::json!({
            "metadata": {"annotations": {DEFERRED_DELETE_ANNOTATION: "true"}}
        });
        self.api::<PersistentVolumeClaim>(&namespace_of(mc))
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    async fn patch_status(
        &self,
        mc: &MeridianCluster,
        status: &MeridianClusterStatus,
    ) -> anyhow::Result<()> {
        let body = serde_json::json!({
            "apiVersion": MeridianCluster::api_version(&()),
            "kind": MeridianCluster::kind(&()),
            "status": status,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api::<MeridianCluster>(&namespace_of(mc))
            .patch_status(&mc.name_any(), &params, &Patch::Apply(&body))
            .await?;
        Ok(())
    }

    async fn event(&self, mc: &MeridianCluster, note: &Note) -> anyhow::Result<()> {
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
        self.recorder.publish(&event, &mc.object_ref(&())).await?;
        Ok(())
    }
}

fn namespace_of(object: &impl Resource) -> String {
    object.namespace().unwrap_or_else(|| "default".into())
}

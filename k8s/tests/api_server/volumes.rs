//! Volume growth through the API: claims raised by merge patch, the StorageClass read only
//! while a claim is small, and nothing written on a class without expansion.

use super::*;

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

//! The committed CRD is exactly what the types generate, CEL rules included; regenerate it
//! with `cargo run -p meridian-operator -- crd > k8s/manifests/crd.yaml`. Status and spec
//! objects stored before a field was added still parse.

#[test]
fn committed_crd_matches_the_types() {
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/crd.yaml"))
            .expect("k8s/manifests/crd.yaml is committed");
    let generated = meridian_operator::crd::crd_manifest().unwrap();
    if let Some((i, (c, g))) = committed
        .lines()
        .zip(generated.lines())
        .enumerate()
        .find(|(_, (c, g))| c != g)
    {
        panic!(
            "k8s/manifests/crd.yaml is stale at line {}: {c:?} != {g:?}",
            i + 1
        );
    }
    assert_eq!(
        committed.trim_end().lines().count(),
        generated.trim_end().lines().count(),
        "k8s/manifests/crd.yaml is stale (length)"
    );
    // And it is the resource the operator expects: group, kind, both subresources.
    let crd: serde_json::Value = serde_json::from_str(&committed).unwrap();
    assert_eq!(crd["spec"]["group"], "meridian.io");
    assert_eq!(crd["spec"]["names"]["kind"], "MeridianCluster");
    let version = &crd["spec"]["versions"][0];
    assert!(version["subresources"]["status"].is_object());
    assert_eq!(
        version["subresources"]["scale"]["specReplicasPath"],
        ".spec.replicas"
    );
    // A cluster without a TLS Secret is refused when applied: its members would each make a
    // CA of their own and could not authenticate each other or the operator.
    let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert!(
        spec["required"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "tlsSecret"),
        "{}",
        spec["required"]
    );
    let tls_secret = &spec["properties"]["tlsSecret"];
    assert_eq!(tls_secret["type"], "string");
    assert_eq!(tls_secret["minLength"], 1);
    assert!(tls_secret.get("nullable").is_none(), "{tls_secret}");
    // The StatefulSet's volume claim template cannot change: the API server refuses a new
    // storage class (set, changed or unset) and a smaller size on the cluster itself, by
    // transition rules on the spec (so they hold when `storage` was absent before), and a
    // size that is no quantity on creation.
    let rules = spec["x-kubernetes-validations"].as_array().unwrap();
    let rule = |field: &str| {
        rules
            .iter()
            .find(|r| r["fieldPath"] == field)
            .unwrap_or_else(|| panic!("no rule for {field}: {rules:?}"))
    };
    let class = rule(".storage.storageClassName");
    let text = class["rule"].as_str().unwrap();
    assert!(
        text.contains("self.storage.storageClassName == oldSelf.storage.storageClassName"),
        "{text}"
    );
    assert!(class["message"]
        .as_str()
        .unwrap()
        .contains("cannot be changed"));
    let size = rule(".storage.size")["rule"].as_str().unwrap();
    assert!(
        size.contains("compareTo(quantity(has(oldSelf.storage) ? oldSelf.storage.size")
            && size.ends_with(">= 0"),
        "{size}"
    );
    for r in rules {
        assert_eq!(r["reason"], "FieldValueForbidden", "{r}");
    }
    let storage = &spec["properties"]["storage"]["properties"];
    assert_eq!(
        storage["size"]["x-kubernetes-validations"][0]["rule"],
        "isQuantity(self)"
    );
    // Bounded strings keep the rules' estimated cost within the API server's budget.
    assert_eq!(storage["size"]["maxLength"], 64);
    assert_eq!(storage["storageClassName"]["maxLength"], 253);
}

#[test]
fn status_and_spec_stored_before_the_backoff_and_node_timeout_still_parse() {
    use meridian_operator::crd::{Failover, MeridianClusterStatus};
    // As an operator without replace backoff wrote it.
    let status: MeridianClusterStatus = serde_json::from_value(serde_json::json!({
        "failureMembers": [{"podName": "pd-2", "memberId": "12", "pvcUids": ["u"],
            "createdAt": "2026-11-01T00:00:00Z"}]
    }))
    .unwrap();
    let f = &status.failure_members[0];
    assert_eq!((f.replace_attempts, f.replaced_at.as_deref()), (0, None));
    // Never attempted: nothing new is written for it.
    let written = serde_json::to_value(&status.failure_members[0]).unwrap();
    assert!(written.get("replaceAttempts").is_none(), "{written}");
    assert!(written.get("replacedAt").is_none(), "{written}");
    let failover: Failover =
        serde_json::from_value(serde_json::json!({"enabled": true, "period": "1m"})).unwrap();
    assert_eq!(failover.node_lost_timeout, "5m");
}

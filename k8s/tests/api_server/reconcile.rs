//! Reconciles against the mock API server: the applies, deletes, status writes and events a
//! pass makes for a new, an unchanged, a drifted, a refused, an upgrading, a failing, a paused
//! and a scaling cluster, the finalizer, and what a pass counts.

use super::*;

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

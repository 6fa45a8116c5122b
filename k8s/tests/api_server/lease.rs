//! The operator's leader election on a `coordination.k8s.io` Lease, and what a round tells
//! the probes.

use super::*;

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

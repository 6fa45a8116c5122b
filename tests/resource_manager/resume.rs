//! A drained bucket is resumed, not refilled: across a restart of a single node, and on etcd
//! by the next leader after a SIGKILL; deleting or replacing a group starts it full.

use super::*;

/// Drains a group of fill 10 RU/s and burst 100,000 (starting full), reporting 5 RRU of
/// consumption.
async fn drain(rm: &mut Rm, name: &str) {
    add(rm, ru_group(name, 10, 100_000)).await.unwrap();
    let mut ask = token_request(&[(name, 100_000.0)], 9);
    ask.requests[0].consumption_since_last_request = Some(Consumption {
        r_r_u: 5.0,
        ..Default::default()
    });
    let reply = grant_once(rm, ask).await;
    assert_eq!(granted(&reply), [100_000.0]);
}

/// A resumed group: still drained (at most 10 RU/s since `drained`, not refilled to its
/// burst), its consumption kept.
async fn assert_still_drained(rm: &mut Rm, name: &str, drained: Instant) {
    let group = rm
        .get_resource_group(GetResourceGroupRequest {
            resource_group_name: name.into(),
            with_ru_stats: true,
            keyspace_id: null_keyspace(),
        })
        .await
        .unwrap()
        .into_inner()
        .group
        .unwrap();
    let tokens = group.r_u_settings.and_then(|s| s.r_u).unwrap().tokens;
    let bound = 10.0 * drained.elapsed().as_secs_f64() + 1.0;
    assert!(
        tokens <= bound,
        "{tokens} tokens after a restart, at most {bound}"
    );
    assert_eq!(group.ru_stats.unwrap().r_r_u, 5.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_resumes_a_drained_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("n0");
    let (node, mut rm, _) = start_serving(&data).await;
    drain(&mut rm, "drained").await;
    let drained = Instant::now();
    // Past one tick of the persister, which writes the states clients touched.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    node.stop().unwrap();
    let (mut node, mut rm, _) = start_serving(&data).await;
    assert_still_drained(&mut rm, "drained", drained).await;
    // Deleting the group deletes its state, and adding one drops the state of the group it
    // replaces: drained again, then deleted (or replaced) and added, it starts full, also
    // after a restart.
    for replace in [false, true] {
        drain(&mut rm, "drained").await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        if !replace {
            delete(&mut rm, "drained").await.unwrap();
        }
        add(&mut rm, ru_group("drained", 10, 100_000))
            .await
            .unwrap();
        node.stop().unwrap();
        (node, rm, _) = start_serving(&data).await;
        let tokens = tokens(&mut rm, "drained").await;
        assert_eq!(tokens, 100_000.0, "replaced: {replace}");
    }
    node.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_etcd_the_next_leader_resumes_a_drained_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut cluster, leader, trust, mut rm) = led_on_etcd(tmp.path()).await;
    drain(&mut rm, "drained").await;
    let drained = Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (mut rm, _) = next_leader(&mut cluster, leader, &trust).await;
    assert_still_drained(&mut rm, "drained", drained).await;
    cluster.stop_all().unwrap();
}

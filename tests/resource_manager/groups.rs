//! Resource groups in PD's words: added, read, modified and deleted, with PD's errors and
//! roles; kept across a restart, and on etcd across a leader's SIGKILL, where TiDB's
//! controller reads them through MetaStorage.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_are_added_read_modified_and_deleted_in_pds_words_and_outlive_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("n0");
    // PD's default group: RU mode, unlimited, middle priority, in the null keyspace.
    let (node, mut rm, groups) = start_serving(&data).await;
    assert_eq!(names(&groups), ["default"]);
    let default = &groups[0];
    assert_eq!(default.mode, GroupMode::RuMode as i32);
    assert_eq!(settings(default), (i32::MAX as u64, -1));
    assert_eq!(default.priority, 8);
    assert_eq!(default.keyspace_id, null_keyspace());

    assert_eq!(
        add(&mut rm, ru_group("rg1", 100, 200)).await.unwrap(),
        "Success!"
    );
    let rg1 = get(&mut rm, "rg1").await.unwrap();
    assert_eq!(settings(&rg1), (100, 200));
    assert_eq!(rg1.ru_stats, None, "stats only when asked for");

    pd_error(
        add(&mut rm, ru_group("", 1, 1)).await,
        "[PD:resourcemanager:ErrInvalidGroup]invalid group settings, please check the group name",
    );
    pd_error(
        add(&mut rm, ru_group(&"n".repeat(33), 1, 1)).await,
        "[PD:resourcemanager:ErrInvalidGroup]invalid group settings, please check the group name",
    );
    let mut urgent = ru_group("urgent", 1, 1);
    urgent.priority = 17;
    pd_error(
        add(&mut rm, urgent).await,
        "[PD:resourcemanager:ErrInvalidGroup]invalid group settings, please check the group priority",
    );
    pd_error(
        get(&mut rm, "nope").await,
        "[PD:resourcemanager:ErrGroupNotExists]the nope resource group does not exist",
    );
    pd_error(
        modify(&mut rm, ru_group("nope", 1, 1)).await,
        "[PD:resourcemanager:ErrGroupNotExists]the nope resource group does not exist",
    );
    let mut raw = ru_group("rg1", 1, 1);
    raw.mode = GroupMode::RawMode as i32;
    pd_error(
        modify(&mut rm, raw).await,
        "only support reconfigure in same mode, maybe you should delete and create a new one",
    );
    pd_error(
        delete(&mut rm, "default").await,
        "[PD:resourcemanager:ErrDeleteReservedGroup]cannot delete reserved group",
    );
    pd_error(
        delete(&mut rm, "nope").await,
        "[PD:resourcemanager:ErrGroupNotExists]the nope resource group does not exist",
    );
    let mut elsewhere = ru_group("rg9", 1, 1);
    elsewhere.keyspace_id = Some(KeyspaceIdValue {
        keyspace: Some(keyspace_id_value::Keyspace::Value(7)),
    });
    pd_error(
        add(&mut rm, elsewhere).await,
        "[PD:resourcemanager:ErrKeyspaceNotExists]the keyspace does not exist with id 7",
    );

    assert_eq!(
        modify(&mut rm, ru_group("rg1", 500, -1)).await.unwrap(),
        "Success!"
    );
    assert_eq!(settings(&get(&mut rm, "rg1").await.unwrap()), (500, -1));
    add(&mut rm, ru_group("rg2", 1, 1)).await.unwrap();
    assert_eq!(delete(&mut rm, "rg2").await.unwrap(), "Success!");
    assert_eq!(names(&list(&mut rm).await.unwrap()), ["default", "rg1"]);

    // A restart loads what was written, and nothing that was deleted.
    node.stop().unwrap();
    let (node, _rm, groups) = start_serving(&data).await;
    assert_eq!(names(&groups), ["default", "rg1"]);
    assert_eq!(settings(&groups[1]), (500, -1));
    node.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_grants_take_any_role_and_ddl_needs_client() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("n0");
    let (node, mut admin, _) = start_serving(&data).await;
    let addr = node.grpc_addr.clone().unwrap();

    let tikv = node.role_cert(Role::Store, "tikv").unwrap();
    let mut store = ResourceManagerClient::new(pd_grpc::channel(&addr, &tikv).await.unwrap());
    assert_eq!(names(&list(&mut store).await.unwrap()), ["default"]);
    let reply = grant_once(&mut store, token_request(&[("default", 10.0)], 1)).await;
    assert_eq!(granted(&reply), [10.0]);
    for refused in [
        add(&mut store, ru_group("rg", 1, 1)).await,
        modify(&mut store, ru_group("default", 1, 1)).await,
        delete(&mut store, "default").await.map(|_| String::new()),
    ] {
        let status = refused.unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
        assert!(status.message().contains("`client`"), "{status:?}");
    }
    // The refused calls changed nothing.
    assert_eq!(
        settings(&get(&mut admin, "default").await.unwrap()),
        (i32::MAX as u64, -1)
    );

    // Without a certificate there is no connection, as on every port.
    let anonymous = node.anonymous_trust(&tmp.path().join("bare")).unwrap();
    if let Ok(channel) = pd_grpc::channel(&addr, &anonymous).await {
        let status = list(&mut ResourceManagerClient::new(channel))
            .await
            .unwrap_err();
        assert_ne!(status.code(), Code::Ok, "{status:?}");
    }
    node.stop().unwrap();
}

/// On etcd: a group written through the leader is where TiDB's controller reads it through
/// MetaStorage (`resource_group/settings/<name>`, kvproto's `ResourceGroup`); a follower
/// answers PD's "not leader"; the next leader, after a SIGKILL, serves the same groups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_etcd_groups_outlive_the_leader_and_are_visible_through_meta_storage() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut cluster, leader, trust, mut rm) = led_on_etcd(tmp.path()).await;
    add(&mut rm, ru_group("tidb_rg", 300, 600)).await.unwrap();

    let follower = (leader + 1) % 3;
    let mut other = self::rm(&cluster.grpc_addr(follower), &trust).await;
    let status = list(&mut other).await.unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::Unavailable, "not leader")
    );

    let mut meta = MetaStorageClient::new(
        pd_grpc::channel(&cluster.grpc_addr(follower), &trust)
            .await
            .unwrap(),
    );
    let reply = meta
        .get(GetRequest {
            key: b"resource_group/settings".to_vec(),
            range_end: b"resource_group/settingt".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.header.as_ref().unwrap().error, None);
    assert!(reply.header.as_ref().unwrap().revision > 0);
    assert_eq!(reply.kvs.len(), 1, "{reply:?}");
    assert_eq!(reply.kvs[0].key, b"resource_group/settings/tidb_rg");
    let stored = ResourceGroup::decode(reply.kvs[0].value.as_slice()).unwrap();
    assert_eq!(
        (stored.name.as_str(), settings(&stored)),
        ("tidb_rg", (300, 600))
    );

    let (mut rm, groups) = next_leader(&mut cluster, leader, &trust).await;
    assert_eq!(names(&groups), ["default", "tidb_rg"]);
    assert_eq!(settings(&groups[1]), (300, 600));
    // And the new leader's deletion reaches the copy TiDB watches.
    delete(&mut rm, "tidb_rg").await.unwrap();
    let reply = meta
        .get(GetRequest {
            key: b"resource_group/settings/tidb_rg".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(reply.kvs.is_empty(), "{reply:?}");
    cluster.stop_all().unwrap();
}

/// The etcd a single node runs on holds Meridian's record of each group under its own keys,
/// which the etcd namespace does not reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meridians_own_record_is_outside_the_namespace() {
    let tmp = tempfile::tempdir().unwrap();
    let (etcd, node) = ServerProcess::start_with_etcd(tmp.path()).unwrap();
    let (mut rm, _) = serving(&node.grpc_addr.clone().unwrap(), &node.trust()).await;
    add(&mut rm, ru_group("g", 10, 10)).await.unwrap();
    let own = etcd.meridian_keys().await.unwrap();
    assert!(own
        .iter()
        .any(|key| key.ends_with(b"/resource_group/settings/g")));
    let mut direct = etcd.client(None).await.unwrap();
    let copy = direct
        .get("/meridian-kv/resource_group/settings/g", None)
        .await
        .unwrap();
    assert_eq!(copy.kvs().len(), 1);
    node.stop().unwrap();
}

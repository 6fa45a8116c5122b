//! kvproto's `ResourceManager` against the real binary, with kvproto's generated client: the
//! `default` group with PD's settings, adding, reading, modifying and deleting groups with
//! PD's answers and errors, the groups still there after a restart (on the embedded store, and
//! on etcd across a leader's SIGKILL, where TiDB's controller also finds each record through
//! `MetaStorage`), roles, and token buckets granted over the AcquireTokenBuckets stream within
//! the fill rate, the burst and PD's loans, whose drained state a restarted or new leader
//! resumes.

use std::time::{Duration, Instant};

use meridian::harness::{
    null_keyspace, ru_group, test_binary, token_request, Cluster, ServerProcess,
};
use meridian::kvproto::meta_storagepb::{meta_storage_client::MetaStorageClient, GetRequest};
use meridian::kvproto::resource_manager::{
    keyspace_id_value, resource_manager_client::ResourceManagerClient, Consumption,
    DeleteResourceGroupRequest, GetResourceGroupRequest, GroupMode, KeyspaceIdValue,
    ListResourceGroupsRequest, PutResourceGroupRequest, ResourceGroup, TokenBucketsResponse,
};
use meridian::pd_grpc;
use meridian::tls::cert::Role;
use meridian::tls::Trust;
use prost::Message;
use tonic::transport::Channel;
use tonic::Code;

type Rm = ResourceManagerClient<Channel>;

async fn rm(addr: &str, trust: &Trust) -> Rm {
    ResourceManagerClient::new(pd_grpc::channel(addr, trust).await.unwrap())
}

fn settings(g: &ResourceGroup) -> (u64, i64) {
    let s = g
        .r_u_settings
        .as_ref()
        .and_then(|s| s.r_u.as_ref())
        .and_then(|b| b.settings.as_ref())
        .expect("RU settings");
    (s.fill_rate, s.burst_limit)
}

async fn list(rm: &mut Rm) -> Result<Vec<ResourceGroup>, tonic::Status> {
    Ok(rm
        .list_resource_groups(ListResourceGroupsRequest {
            with_ru_stats: false,
            keyspace_id: null_keyspace(),
        })
        .await?
        .into_inner()
        .groups)
}

/// The groups, once the node leads and has loaded its term.
async fn list_when_serving(rm: &mut Rm) -> Vec<ResourceGroup> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match list(rm).await {
            Ok(groups) => return groups,
            Err(s) if s.code() == Code::Unavailable && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(s) => panic!("the resource manager never served: {s:?}"),
        }
    }
}

async fn add(rm: &mut Rm, g: ResourceGroup) -> Result<String, tonic::Status> {
    Ok(rm
        .add_resource_group(PutResourceGroupRequest { group: Some(g) })
        .await?
        .into_inner()
        .body)
}

async fn modify(rm: &mut Rm, g: ResourceGroup) -> Result<String, tonic::Status> {
    Ok(rm
        .modify_resource_group(PutResourceGroupRequest { group: Some(g) })
        .await?
        .into_inner()
        .body)
}

async fn get(rm: &mut Rm, name: &str) -> Result<ResourceGroup, tonic::Status> {
    Ok(rm
        .get_resource_group(GetResourceGroupRequest {
            resource_group_name: name.into(),
            with_ru_stats: false,
            keyspace_id: null_keyspace(),
        })
        .await?
        .into_inner()
        .group
        .expect("a group"))
}

async fn delete(rm: &mut Rm, name: &str) -> Result<String, tonic::Status> {
    Ok(rm
        .delete_resource_group(DeleteResourceGroupRequest {
            resource_group_name: name.into(),
            keyspace_id: null_keyspace(),
        })
        .await?
        .into_inner()
        .body)
}

/// PD's error for a call: gRPC's `Unknown` with PD's message.
fn pd_error(result: Result<impl std::fmt::Debug, tonic::Status>, message: &str) {
    let status = result.expect_err(message);
    assert_eq!(
        (status.code(), status.message()),
        (Code::Unknown, message),
        "{status:?}"
    );
}

/// A client of the resource manager at `addr`, once that serves; the groups it serves then.
async fn serving(addr: &str, trust: &Trust) -> (Rm, Vec<ResourceGroup>) {
    let mut rm = rm(addr, trust).await;
    let groups = list_when_serving(&mut rm).await;
    (rm, groups)
}

/// A single node on `data` (new, or started again on what a stopped one left), once it
/// serves: the node, a client of its resource manager, the groups it serves.
async fn start_serving(data: &std::path::Path) -> (ServerProcess, Rm, Vec<ResourceGroup>) {
    let node = ServerProcess::start(test_binary(), data, "127.0.0.1:0", Some(1)).unwrap();
    let (rm, groups) = serving(&node.grpc_addr.clone().unwrap(), &node.trust()).await;
    (node, rm, groups)
}

/// Three nodes on etcd below `dir`, once one leads: the cluster, the leader, the trust and a
/// client of the leader's resource manager.
async fn led_on_etcd(dir: &std::path::Path) -> (Cluster, usize, Trust, Rm) {
    let (cluster, leader) = Cluster::start_led(dir, 3, "", Duration::from_secs(15)).unwrap();
    let trust = cluster.trust();
    let (rm, _) = serving(&cluster.grpc_addr(leader), &trust).await;
    (cluster, leader, trust, rm)
}

/// Kills the `leader`; a client of the next leader's resource manager once that serves, and
/// the groups it serves.
async fn next_leader(
    cluster: &mut Cluster,
    leader: usize,
    trust: &Trust,
) -> (Rm, Vec<ResourceGroup>) {
    cluster.nodes[leader].kill().unwrap();
    let next = cluster
        .leader_within(Some(leader), Duration::from_secs(20))
        .expect("a new leader");
    serving(&cluster.grpc_addr(next), trust).await
}

/// The RU tokens group `name` holds.
async fn tokens(rm: &mut Rm, name: &str) -> f64 {
    get(rm, name)
        .await
        .unwrap()
        .r_u_settings
        .and_then(|s| s.r_u)
        .unwrap()
        .tokens
}

fn names(groups: &[ResourceGroup]) -> Vec<&str> {
    groups.iter().map(|g| g.name.as_str()).collect()
}

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
    let mut grants = store
        .acquire_token_buckets(tokio_stream::iter([token_request(&[("default", 10.0)], 1)]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(granted(&grants.message().await.unwrap().unwrap()), [10.0]);
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

/// The RU granted to each group answered, in order.
fn granted(reply: &TokenBucketsResponse) -> Vec<f64> {
    reply
        .responses
        .iter()
        .flat_map(|r| &r.granted_r_u_tokens)
        .map(|g| g.granted_tokens.as_ref().unwrap().tokens)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_buckets_grant_within_the_fill_rate_and_the_burst() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("n0");
    let (node, mut rm, _) = start_serving(&data).await;
    let (rate, burst) = (1000.0, 2000.0);
    add(&mut rm, ru_group("slow", rate as u64, burst as i64))
        .await
        .unwrap();

    let (send, requests) = tokio::sync::mpsc::channel(4);
    let mut replies = rm
        .acquire_token_buckets(tokio_stream::wrappers::ReceiverStream::new(requests))
        .await
        .unwrap()
        .into_inner();
    let started = Instant::now();
    // The first ask takes the whole burst and borrows the rest against the fill to come, as
    // PD does: 2000 held + 3000 of the first round (twice the fill rate, up to 10,000), all
    // 5000 trickled at 2000 RU/s: 2.5 s.
    send.send(token_request(
        &[("slow", 5000.0), ("default", 1e9), ("nope", 1.0)],
        7,
    ))
    .await
    .unwrap();
    let first = replies.message().await.unwrap().unwrap();
    assert_eq!(
        first
            .responses
            .iter()
            .map(|r| r.resource_group_name.as_str())
            .collect::<Vec<_>>(),
        ["slow", "default"],
        "a group that does not exist is skipped, as PD skips it"
    );
    assert_eq!(
        granted(&first),
        [5000.0, 1e9],
        "the default group is never refused"
    );
    let slow = &first.responses[0].granted_r_u_tokens[0];
    assert_eq!(slow.trickle_time_ms, 2500);
    assert_eq!(
        slow.granted_tokens
            .as_ref()
            .unwrap()
            .settings
            .as_ref()
            .unwrap()
            .burst_limit,
        2000
    );

    // Asking as fast as the stream answers: never more than the fill rate since the start, on
    // top of the burst and what the group now owes (its tokens below zero, read after).
    let mut total = 5000.0;
    let mut asks = 0;
    while started.elapsed() < Duration::from_millis(1500) {
        send.send(token_request(&[("slow", 500.0)], 7))
            .await
            .unwrap();
        total += granted(&replies.message().await.unwrap().unwrap())[0];
        asks += 1;
    }
    let tokens = tokens(&mut rm, "slow").await;
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        total <= rate * elapsed + burst - tokens.min(0.0) + 1e-6,
        "{total} RU granted in {elapsed:.3}s over {asks} asks, {tokens} left"
    );
    assert!(
        total >= rate * (elapsed - 0.5) + burst,
        "the bucket refills: {total} RU in {elapsed:.3}s"
    );

    // Lowering the fill rate takes effect on the open stream.
    modify(&mut rm, ru_group("slow", 1, 1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    send.send(token_request(&[("slow", 500.0)], 7))
        .await
        .unwrap();
    let after = granted(&replies.message().await.unwrap().unwrap())[0];
    // The change forgives the debt (as PD does): one 5 s period of 1 RU/s is lent.
    assert!(
        after <= 5.0,
        "{after} RU granted at 1 RU/s and a burst of 1"
    );
    drop(send);
    assert!(
        replies.message().await.unwrap().is_none(),
        "the stream ends with the client's"
    );
    node.stop().unwrap();
}

/// One grant a client was given: when it asked, when the answer came, what it was granted.
#[derive(Debug, Clone, Copy)]
struct Granted {
    sent: Instant,
    got: Instant,
    tokens: f64,
}

/// A client `client` of group `group` on its own stream, as TiDB's controller behaves: it asks
/// for `ask` RU every `pace`, and spends a loan over the trickle time it comes with before it
/// asks again, until `until`. Every grant, in order.
async fn ask_until(
    mut rm: Rm,
    group: &'static str,
    client: u64,
    ask: f64,
    pace: Duration,
    until: Instant,
) -> Vec<Granted> {
    let (send, requests) = tokio::sync::mpsc::channel(4);
    let mut replies = rm
        .acquire_token_buckets(tokio_stream::wrappers::ReceiverStream::new(requests))
        .await
        .unwrap()
        .into_inner();
    let mut grants = Vec::new();
    while Instant::now() < until {
        let sent = Instant::now();
        send.send(token_request(&[(group, ask)], client))
            .await
            .unwrap();
        let reply = replies.message().await.unwrap().unwrap();
        let got = Instant::now();
        let item = &reply.responses[0].granted_r_u_tokens[0];
        let tokens = item.granted_tokens.as_ref().unwrap().tokens;
        grants.push(Granted { sent, got, tokens });
        let trickle = Duration::from_millis(item.trickle_time_ms.max(0) as u64);
        tokio::time::sleep(trickle.max(pace)).await;
    }
    grants
}

/// Two groups under contention, each asked by two clients on their own streams for about
/// twice its fill rate, through kvproto's client against the real binary. Each group is held
/// to its own bucket whatever the other does: over any window, from any grant's request to
/// any reading of the group's tokens, the group is granted at most its fill rate over the
/// window plus its burst plus the debt it is left with (the pure bucket's promise); net of
/// that debt, each group gets its whole fill over the run on top of its burst; and the two
/// clients of a group, asking alike, share it alike (PD's even split).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_under_contention_each_get_their_fill_rate_and_no_more_over_any_window() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("n0");
    let (node, mut rm, _) = start_serving(&data).await;
    // (group, fill rate, burst): a small and a large group.
    let groups: [(&'static str, f64, f64); 2] =
        [("small", 2000.0, 1000.0), ("large", 6000.0, 9000.0)];
    for (name, rate, burst) in groups {
        add(&mut rm, ru_group(name, rate as u64, burst as i64))
            .await
            .unwrap();
    }
    let pace = Duration::from_millis(20);
    let run = Duration::from_secs(3);
    let started = Instant::now();
    let until = started + run;
    let mut clients = Vec::new();
    for (g, &(name, rate, _)) in groups.iter().enumerate() {
        for c in 0..2u64 {
            // Each client asks for its group's whole fill rate: twice the fill in all.
            let ask = rate * pace.as_secs_f64();
            let client = rm.clone();
            let id = 100 + g as u64 * 10 + c;
            clients.push((
                g,
                tokio::spawn(ask_until(client, name, id, ask, pace, until)),
            ));
        }
    }
    // The groups' tokens read all along: the debt each is left with at each reading.
    let mut reader = rm.clone();
    let mut readings: Vec<Vec<(Instant, Instant, f64)>> = vec![Vec::new(); groups.len()];
    while Instant::now() < until + Duration::from_millis(200) {
        for (g, &(name, _, _)) in groups.iter().enumerate() {
            let sent = Instant::now();
            let held = tokens(&mut reader, name).await;
            readings[g].push((sent, Instant::now(), held));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut grants: Vec<Vec<Vec<Granted>>> = vec![Vec::new(); groups.len()];
    for (g, task) in clients {
        grants[g].push(task.await.unwrap());
    }

    for (g, &(name, rate, burst)) in groups.iter().enumerate() {
        let mut all: Vec<Granted> = grants[g].iter().flatten().copied().collect();
        all.sort_by_key(|x| x.sent);
        assert!(all.len() > 20, "{name}: {} grants", all.len());
        // Any window: from a grant's request (the server granted it no earlier) to a reading's
        // answer (the server read no later), the grants answered before the reading was asked.
        let mut windows = 0;
        for &(read_sent, read_got, held) in &readings[g] {
            let debt = (-held).max(0.0);
            for (i, start) in all.iter().enumerate() {
                let sum: f64 = all[i..]
                    .iter()
                    .filter(|x| x.got <= read_sent)
                    .map(|x| x.tokens)
                    .sum();
                if sum == 0.0 {
                    continue;
                }
                let window = read_got.duration_since(start.sent).as_secs_f64();
                let bound = rate * window + burst + debt;
                assert!(
                    sum <= bound * (1.0 + 1e-9) + 1e-6,
                    "{name}: {sum} RU granted over {window:.3}s, more than {rate} RU/s, a burst of {burst} and a debt of {debt}"
                );
                windows += 1;
            }
        }
        assert!(windows > 100, "{name}: only {windows} windows checked");

        // Its whole fill, net of what it owes at the end, on top of its burst: the other
        // group's contention took none of it.
        let &(_, _, held) = readings[g].last().unwrap();
        let total: f64 = all.iter().map(|x| x.tokens).sum();
        let first = all[0].got;
        let last = all.last().unwrap().sent;
        let served = last.duration_since(first).as_secs_f64();
        let net = total + held.min(0.0);
        assert!(
            net >= rate * (served - 0.3) + burst,
            "{name}: {net} RU net of the debt in {served:.3}s at {rate} RU/s and a burst of {burst}"
        );
        // The two clients, asking alike, share it alike.
        for (c, client) in grants[g].iter().enumerate() {
            let own: f64 = client.iter().map(|x| x.tokens).sum();
            assert!(
                own >= total / 3.0,
                "{name}: client {c} got {own} of {total} RU"
            );
        }
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

/// Drains a group of fill 10 RU/s and burst 100,000 (starting full), reporting 5 RRU of
/// consumption.
async fn drain(rm: &mut Rm, name: &str) {
    add(rm, ru_group(name, 10, 100_000)).await.unwrap();
    let mut ask = token_request(&[(name, 100_000.0)], 9);
    ask.requests[0].consumption_since_last_request = Some(Consumption {
        r_r_u: 5.0,
        ..Default::default()
    });
    let mut replies = rm
        .acquire_token_buckets(tokio_stream::iter([ask]))
        .await
        .unwrap()
        .into_inner();
    let reply = replies.message().await.unwrap().unwrap();
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

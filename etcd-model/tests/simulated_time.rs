//! The model under a paused tokio clock, reached over an in-memory gRPC connection (as a
//! simulation reaches it): a lease expires exactly when its TTL runs out on tokio's clock,
//! with no request to prompt it, and a watch hears of the deletion; a keep-alive sent in
//! time pushes the expiry back by the TTL. Across a change of etcd's leader nothing expires,
//! writes are refused, keep-alives wait for the new leader, and leases run their whole TTL
//! again from the election plus its timeout.

use std::time::Duration;

use etcd_model::pb::kv_client::KvClient;
use etcd_model::pb::lease_client::LeaseClient;
use etcd_model::pb::watch_client::WatchClient;
use etcd_model::pb::watch_request::RequestUnion;
use etcd_model::pb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, PutRequest, WatchCreateRequest, WatchRequest,
};
use etcd_model::EtcdModel;
use hyper_util::rt::TokioIo;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint, Uri};

async fn in_memory(model: &EtcdModel) -> Channel {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let router = model.router();
    tokio::spawn(async move {
        let _ = router
            .serve_with_incoming(tokio_stream::once(Ok::<_, std::io::Error>(server_io)))
            .await;
    });
    let mut client_io = Some(client_io);
    Endpoint::from_static("http://model")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let io = client_io.take();
            async move {
                io.map(TokioIo::new)
                    .ok_or_else(|| std::io::Error::other("one connection only"))
            }
        }))
        .await
        .expect("an in-memory channel")
}

#[tokio::test(start_paused = true)]
async fn a_lease_expires_on_the_tokio_clock_to_the_millisecond() {
    let model = EtcdModel::new();
    let channel = in_memory(&model).await;
    let mut lease = LeaseClient::new(channel.clone());
    let mut kv = KvClient::new(channel.clone());
    let mut watch = WatchClient::new(channel);

    let granted = Instant::now();
    let id = lease
        .lease_grant(LeaseGrantRequest { ttl: 3, id: 0 })
        .await
        .expect("grant")
        .into_inner()
        .id;
    kv.put(PutRequest {
        key: b"held".to_vec(),
        value: b"1".to_vec(),
        lease: id,
        ..Default::default()
    })
    .await
    .expect("put");
    let (requests, inbound) = tokio::sync::mpsc::channel(4);
    requests
        .send(WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                key: b"held".to_vec(),
                ..Default::default()
            })),
        })
        .await
        .expect("send the create");
    let mut events = watch
        .watch(tokio_stream::wrappers::ReceiverStream::new(inbound))
        .await
        .expect("watch")
        .into_inner();
    let created = events
        .message()
        .await
        .expect("a response")
        .expect("created");
    assert!(created.created);

    // A keep-alive at 2 s moves the expiry from 3 s to 5 s.
    tokio::time::sleep_until(granted + Duration::from_secs(2)).await;
    let (keepalives, inbound) = tokio::sync::mpsc::channel(4);
    keepalives
        .send(LeaseKeepAliveRequest { id })
        .await
        .expect("send a keep-alive");
    let mut acks = lease
        .lease_keep_alive(tokio_stream::wrappers::ReceiverStream::new(inbound))
        .await
        .expect("keep-alive")
        .into_inner();
    let ack = acks.message().await.expect("an ack").expect("an ack");
    assert_eq!(ack.ttl, 3);

    // Nothing else is sent: the model's own timer expires the lease.
    let deleted = events.message().await.expect("a response").expect("events");
    let at = granted.elapsed();
    assert_eq!(deleted.events.len(), 1);
    assert_eq!(deleted.events[0].r#type, 1, "a delete");
    assert_eq!(
        at,
        Duration::from_secs(5),
        "expired at 2 s + the 3 s TTL, exactly"
    );
    drop(requests);
    drop(keepalives);
}

#[tokio::test(start_paused = true)]
async fn a_leader_change_holds_expiry_refuses_writes_and_lengthens_leases() {
    let model = EtcdModel::new();
    let channel = in_memory(&model).await;
    let mut lease = LeaseClient::new(channel.clone());
    let mut kv = KvClient::new(channel);
    let put = |lease: i64| PutRequest {
        key: b"held".to_vec(),
        value: b"1".to_vec(),
        lease,
        ..Default::default()
    };

    let granted = Instant::now();
    let id = lease
        .lease_grant(LeaseGrantRequest { ttl: 3, id: 0 })
        .await
        .expect("grant")
        .into_inner()
        .id;
    kv.put(put(id)).await.expect("put");

    // At 2 s the leader steps down; the next is elected 2 s later, with a 1 s timeout.
    tokio::time::sleep_until(granted + Duration::from_secs(2)).await;
    model.change_leader(Duration::from_secs(2), Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(model.is_leaderless());
    let refused = kv.put(put(0)).await.expect_err("no leader to propose to");
    assert_eq!(
        (refused.code(), refused.message()),
        (tonic::Code::Unavailable, "etcdserver: leader changed")
    );

    // Past the lease's 3 s: nothing expired without a leader.
    tokio::time::sleep_until(granted + Duration::from_millis(3_500)).await;
    assert!(model.value(b"held").is_some());

    // A keep-alive sent now is answered once the leader is elected, at 4 s.
    let (keepalives, inbound) = tokio::sync::mpsc::channel(4);
    keepalives
        .send(LeaseKeepAliveRequest { id })
        .await
        .expect("send a keep-alive");
    let mut acks = lease
        .lease_keep_alive(tokio_stream::wrappers::ReceiverStream::new(inbound))
        .await
        .expect("keep-alive")
        .into_inner();
    let ack = acks.message().await.expect("an ack").expect("an ack");
    assert_eq!(ack.ttl, 3);
    assert_eq!(
        granted.elapsed(),
        Duration::from_secs(4),
        "held until elected"
    );
    assert!(!model.is_leaderless());

    // Renewed just after the election: as etcd's renewal does, it sets the expiry to 4 s + 3 s,
    // over the election's own refresh (to 4 s + 1 s + 3 s).
    tokio::time::sleep_until(granted + Duration::from_millis(6_999)).await;
    assert!(model.value(b"held").is_some());
    tokio::time::sleep_until(granted + Duration::from_millis(7_001)).await;
    assert!(model.value(b"held").is_none(), "expired at 7 s");
    drop(keepalives);
}

#[tokio::test(start_paused = true)]
async fn a_new_leader_refreshes_every_lease_by_its_election_timeout() {
    let model = EtcdModel::new();
    let channel = in_memory(&model).await;
    let mut lease = LeaseClient::new(channel.clone());
    let mut kv = KvClient::new(channel);
    let granted = Instant::now();
    let id = lease
        .lease_grant(LeaseGrantRequest { ttl: 3, id: 0 })
        .await
        .expect("grant")
        .into_inner()
        .id;
    kv.put(PutRequest {
        key: b"held".to_vec(),
        value: b"1".to_vec(),
        lease: id,
        ..Default::default()
    })
    .await
    .expect("put");
    // Steps down at 1 s, elected at 1.5 s: the lease then runs 1 s + 3 s, to 5.5 s.
    tokio::time::sleep_until(granted + Duration::from_secs(1)).await;
    model.change_leader(Duration::from_millis(500), Duration::from_secs(1));
    tokio::time::sleep_until(granted + Duration::from_millis(5_499)).await;
    assert!(!model.is_leaderless());
    assert!(model.value(b"held").is_some(), "not at its first 3 s");
    tokio::time::sleep_until(granted + Duration::from_millis(5_501)).await;
    assert!(model.value(b"held").is_none(), "expired at 5.5 s");
}

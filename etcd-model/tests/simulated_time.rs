//! The model under a paused tokio clock, reached over an in-memory gRPC connection (as a
//! simulation reaches it): a lease expires exactly when its TTL runs out on tokio's clock,
//! with no request to prompt it, and a watch hears of the deletion; a keep-alive sent in
//! time pushes the expiry back by the TTL.

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

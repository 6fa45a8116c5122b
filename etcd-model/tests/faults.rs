//! The fault knobs, seen from the real client: a request failed before it applies leaves
//! the store alone; one failed after it applies, or whose reply is dropped, has changed it;
//! a delay holds the answer back; a keep-alive fault hits one message; compacting and
//! revoking through the model act at once.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions, GetOptions, PutOptions};
use etcd_model::{EtcdModel, Fault, Rpc};

async fn serve() -> (EtcdModel, Client, tokio::task::JoinHandle<()>) {
    let model = EtcdModel::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let endpoint = format!("http://{}", listener.local_addr().expect("its address"));
    let server = tokio::spawn({
        let model = model.clone();
        async move {
            let _ = model.serve(listener).await;
        }
    });
    let options = ConnectOptions::new().with_timeout(Duration::from_secs(2));
    let client = Client::connect([endpoint], Some(options))
        .await
        .expect("connect to the model");
    (model, client, server)
}

fn code(e: etcd_client::Error) -> (tonic::Code, String) {
    match e {
        etcd_client::Error::GRpcStatus(s) => (s.code(), s.message().to_string()),
        other => panic!("not a status: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_before_and_after_apply_and_a_dropped_reply() {
    let (model, mut c, server) = serve().await;
    let start = model.revision();

    model.inject(Rpc::Put, Fault::timeout_before_apply());
    let e = c.put("a", "1", None).await.expect_err("the fault");
    assert_eq!(
        code(e),
        (
            tonic::Code::Unavailable,
            "etcdserver: request timed out".into()
        )
    );
    assert_eq!(model.revision(), start, "nothing applied");

    model.inject(Rpc::Put, Fault::timeout_after_apply());
    c.put("a", "2", None).await.expect_err("the fault");
    assert_eq!(model.revision(), start + 1, "applied all the same");

    model.inject(Rpc::Txn, Fault::DropReply);
    let txn = etcd_client::Txn::new().and_then([etcd_client::TxnOp::put("b", "1", None)]);
    tokio::time::timeout(Duration::from_secs(10), c.txn(txn))
        .await
        .expect("the client's own deadline ends the wait")
        .expect_err("no reply before the client's deadline");
    assert_eq!(model.revision(), start + 2, "the txn applied");

    // One fault per request: the next put goes through.
    let r = c.put("a", "3", None).await.expect("no fault left");
    assert_eq!(r.header().map(|h| h.revision()), Some(start + 3));
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_holds_the_answer_back() {
    let (model, mut c, server) = serve().await;
    model.set_rpc_delay(Rpc::Range, Duration::from_millis(300));
    let sent = tokio::time::Instant::now();
    c.get("a", None).await.expect("a read");
    assert!(sent.elapsed() >= Duration::from_millis(300));
    model.clear_faults();
    let sent = tokio::time::Instant::now();
    c.get("a", None).await.expect("a read");
    assert!(sent.elapsed() < Duration::from_millis(300));
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_keepalive_reply_still_renews_and_revoke_and_compact_act_at_once() {
    let (model, mut c, server) = serve().await;
    let lease = c.lease_grant(10, None).await.expect("grant").id();
    c.put("held", "1", Some(PutOptions::new().with_lease(lease)))
        .await
        .expect("put");
    let (mut keeper, mut acks) = c.lease_keep_alive(lease).await.expect("keep-alive");
    model.inject(Rpc::LeaseKeepAlive, Fault::DropReply);
    keeper.keep_alive().await.expect("send");
    keeper.keep_alive().await.expect("send");
    // Only the second is answered.
    let ack = acks.message().await.expect("a stream").expect("an ack");
    assert_eq!(ack.ttl(), 10);

    let revision = model.revoke_lease(lease).expect("the lease exists");
    let r = c.get("held", None).await.expect("a read");
    assert!(r.kvs().is_empty(), "revoking deleted the key");
    assert_eq!(r.header().map(|h| h.revision()), Some(revision));
    keeper.keep_alive().await.expect("send");
    let ack = acks.message().await.expect("a stream").expect("an ack");
    assert_eq!(ack.ttl(), 0, "a revoked lease answers TTL 0");

    model.compact(revision).expect("compact");
    let e = c
        .get("held", Some(GetOptions::new().with_revision(revision - 1)))
        .await
        .expect_err("compacted");
    assert_eq!(
        code(e),
        (
            tonic::Code::OutOfRange,
            "etcdserver: mvcc: required revision has been compacted".into()
        )
    );
    server.abort();
}

/// Puts 200 keys with `per_mille` of requests lost from `seed`: for each, whether the client
/// was answered and whether the put applied.
async fn puts_under_loss(per_mille: u32, seed: u64) -> Vec<(bool, bool)> {
    let (model, mut c, server) = serve().await;
    model.set_loss(per_mille, seed);
    let mut outcomes = Vec::new();
    for i in 0..200 {
        let before = model.revision();
        let answered = c.put(format!("k{i}"), "v", None).await.is_ok();
        outcomes.push((answered, model.revision() > before));
    }
    model.set_loss(0, 0);
    c.put("after", "v", None)
        .await
        .expect("nothing lost any more");
    server.abort();
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_of_requests_is_lost_before_or_after_applying_as_the_seed_picks() {
    let outcomes = puts_under_loss(400, 7).await;
    let count = |o: (bool, bool)| outcomes.iter().filter(|x| **x == o).count();
    // 20% refused before applying, 20% applied with the answer lost, 60% answered.
    let (answered, before, after) = (
        count((true, true)),
        count((false, false)),
        count((false, true)),
    );
    assert_eq!(count((true, false)), 0, "an answered put applied");
    assert!((90..=150).contains(&answered), "{answered} answered");
    assert!((15..=70).contains(&before), "{before} lost before applying");
    assert!((15..=70).contains(&after), "{after} lost after applying");
    assert_eq!(puts_under_loss(400, 7).await, outcomes, "the seed picks");
    assert_ne!(
        puts_under_loss(400, 8).await,
        outcomes,
        "another seed, others"
    );
}

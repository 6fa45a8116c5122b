//! One connection to the client address holds at most 1024 HTTP/2 streams at once (SECURITY.md):
//! every gRPC call, watch and token stream, and every HTTP/2 request of PD's HTTP API, is one,
//! and each open one costs the node a task and buffers (a MetaStorage watch, a stream at etcd
//! too). A client that opens more waits for one of its own to end, as HTTP/2 makes it; it is
//! not refused, and other connections are not affected.

use std::time::Duration;

use meridian::harness::{test_binary, ServerProcess};
use meridian::kvproto::pdpb::{self, pd_client::PdClient};
use meridian::pd_grpc;
use meridian::tls::Trust;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// SECURITY.md's bound.
const MAX_STREAMS: usize = 1024;

/// Opens a TSO stream and takes one answer on it; the stream stays open while the sender and
/// the answers are held.
async fn open_tso(
    pd: &mut PdClient<Channel>,
    cluster_id: u64,
) -> (
    mpsc::Sender<pdpb::TsoRequest>,
    tonic::Streaming<pdpb::TsoResponse>,
) {
    let (tx, rx) = mpsc::channel(1);
    tx.send(pdpb::TsoRequest {
        header: Some(pdpb::RequestHeader {
            cluster_id,
            ..Default::default()
        }),
        count: 1,
        ..Default::default()
    })
    .await
    .unwrap();
    let mut answers = pd.tso(ReceiverStream::new(rx)).await.unwrap().into_inner();
    answers.message().await.unwrap().expect("a timestamp");
    (tx, answers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_holds_a_bounded_number_of_streams() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let node = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(1)).unwrap();
    let grpc = node.grpc_addr.clone().expect("gRPC is on by default");
    let trust = Trust::Ca(data.join("tls/ca.pem"));
    let mut pd = pd_grpc::connect(&grpc, &trust).await.unwrap();
    let cluster_id = pd_grpc::cluster_id(&mut pd).await.unwrap();
    // The TSO serves once this node leads.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let (tx, rx) = mpsc::channel(1);
        tx.send(pdpb::TsoRequest {
            header: Some(pdpb::RequestHeader {
                cluster_id,
                ..Default::default()
            }),
            count: 1,
            ..Default::default()
        })
        .await
        .unwrap();
        let served = match pd.tso(ReceiverStream::new(rx)).await {
            Ok(r) => matches!(r.into_inner().message().await, Ok(Some(_))),
            Err(_) => false,
        };
        if served {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the TSO never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let mut open = Vec::with_capacity(MAX_STREAMS);
    for _ in 0..MAX_STREAMS {
        open.push(open_tso(&mut pd, cluster_id).await);
    }
    // One more on the same connection waits for a slot...
    let mut more = pd.clone();
    let waiting = tokio::spawn(async move { open_tso(&mut more, cluster_id).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !waiting.is_finished(),
        "a connection opened more than {MAX_STREAMS} streams at once"
    );
    // ...while another connection is served at once...
    let mut other = pd_grpc::connect(&grpc, &trust).await.unwrap();
    let _beside = tokio::time::timeout(Duration::from_secs(5), open_tso(&mut other, cluster_id))
        .await
        .expect("another connection is not held up");
    // ...and gets its slot when one of the connection's streams ends.
    drop(open.pop());
    let _last = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting stream opened once a slot was free")
        .unwrap();
}

//! Where the front end listens (on, off, moved) and the standard health service.

use super::*;

/// `--grpc-listen off`: nothing serves gRPC (the ready line says so, members advertise no URL)
/// and a TCP connection to the client port is closed, not left hanging. `--grpc-listen ADDR`:
/// gRPC serves there and members advertise it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_end_can_be_turned_off_or_moved() {
    use tokio::io::AsyncReadExt;

    let tmp = tempfile::tempdir().unwrap();
    let off = ServerProcess::start_with(
        test_binary(),
        &tmp.path().join("off"),
        "127.0.0.1:0",
        &["--grpc-listen".into(), "off".into()],
    )
    .unwrap();
    assert_eq!(off.grpc_addr, None);
    let mut conn = tokio::net::TcpStream::connect(&off.client_addr)
        .await
        .unwrap();
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf))
        .await
        .expect("closed, not hanging");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    off.stop().unwrap();

    let data = tmp.path().join("moved");
    let moved = ServerProcess::start_with(
        test_binary(),
        &data,
        "127.0.0.1:0",
        &["--grpc-listen".into(), "127.0.0.1:0".into()],
    )
    .unwrap();
    let grpc = moved.grpc_addr.clone().unwrap();
    assert_ne!(grpc, moved.client_addr);
    let mut pd = pd_grpc::connect(&grpc, &moved.trust()).await.unwrap();
    let members = pd
        .get_members(pdpb::GetMembersRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        members.leader.unwrap().client_urls,
        vec![format!("https://{grpc}")]
    );
    moved.stop().unwrap();
}

/// The standard gRPC health service: SERVING for the whole server (service ""), which pd's Go
/// client checks before it uses a member; a service never registered is NOT_FOUND.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_check_reports_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;

    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let n = start(&data).await;
    let channel = pd_grpc::channel(n.server.grpc_addr.as_deref().unwrap(), &n.server.trust())
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    let r = health
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        ServingStatus::try_from(r.status).unwrap(),
        ServingStatus::Serving
    );
    let err = health
        .check(HealthCheckRequest {
            service: "no.such.Service".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    n.server.stop().unwrap();
}

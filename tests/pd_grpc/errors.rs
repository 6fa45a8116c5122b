//! What a client that misbehaves gets: UNIMPLEMENTED, decode errors, and a server that keeps serving.

use super::*;

/// A method kvproto has and Meridian does not serve, and bytes that are not the message the
/// method takes: `UNIMPLEMENTED` and a decode error, and the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_methods_and_malformed_messages_get_errors_not_hangs() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let n = start(&data).await;
    let channel = pd_grpc::channel(n.server.grpc_addr.as_deref().unwrap(), &n.server.trust())
        .await
        .unwrap();
    let mut raw = tonic::client::Grpc::new(channel.clone());
    raw.ready().await.unwrap();

    /// Field 1 (the header, a message) as a varint: not decodable as any PD request.
    #[derive(Clone, PartialEq, prost::Message)]
    struct Garbled {
        #[prost(uint64, tag = "1")]
        header: u64,
    }
    let codec = tonic_prost::ProstCodec::<Garbled, pdpb::GetMembersResponse>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/pdpb.PD/GetDCLocationInfo");
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        raw.unary(
            tonic::Request::new(Garbled { header: 1 }),
            path,
            codec.clone(),
        ),
    )
    .await
    .expect("no hang")
    .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);

    raw.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/pdpb.PD/GetMembers");
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        raw.unary(tonic::Request::new(Garbled { header: 7 }), path, codec),
    )
    .await
    .expect("no hang")
    .unwrap_err();
    assert_eq!(err.code(), Code::Internal, "{err}");

    // Still serving.
    let mut pd = PdClient::new(channel);
    pd.get_members(pdpb::GetMembersRequest::default())
        .await
        .unwrap();
    n.server.stop().unwrap();
}

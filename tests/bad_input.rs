//! Bad input over a real QUIC connection: each kind of garbage gets a typed error or closes only
//! its own stream, and the server keeps serving the same connection and new clients.

use std::time::Duration;

use meridian::client::{Client, ClientOptions};
use meridian::harness::{test_binary, ServerProcess};
use meridian::proto::{
    self, ErrorReply, FrameDecoder, Reply, Request, Response, StreamCode, MAX_FRAME_LEN,
};
use meridian::tls::{self, Trust};
use meridian::tso::MAX_COUNT;

struct Raw {
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    decoder: FrameDecoder,
}

impl Raw {
    async fn open(conn: &quinn::Connection) -> Raw {
        let (send, recv) = conn.open_bi().await.expect("open stream");
        Raw {
            send,
            recv,
            decoder: FrameDecoder::new(),
        }
    }

    /// The next response, or the stream's end as an error.
    async fn response(&mut self) -> Result<Response, quinn::ReadError> {
        loop {
            if let Some(r) = self
                .decoder
                .next_response()
                .expect("server sent a valid frame")
            {
                return Ok(r);
            }
            match tokio::time::timeout(Duration::from_secs(5), self.recv.read_chunk(65536, true))
                .await
            {
                Ok(Ok(Some(chunk))) => self.decoder.extend(&chunk.bytes),
                Ok(Ok(None)) => panic!("stream finished without a response"),
                Ok(Err(e)) => return Err(e),
                Err(_) => panic!("no response within 5 s"),
            }
        }
    }

    async fn request(&mut self, req: &Request) -> Result<Response, quinn::ReadError> {
        let mut out = Vec::new();
        proto::encode(req, &mut rkyv::util::AlignedVec::new(), &mut out).unwrap();
        self.send.write_all(&out).await.unwrap();
        self.response().await
    }
}

fn framed(payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

fn assert_invalid(r: Result<Response, quinn::ReadError>) {
    match r {
        // The reason is the server's own words: rkyv's validation messages print addresses
        // in the server's heap, which a client has no business learning.
        Ok(Response::Err(ErrorReply::InvalidArgument(why))) => {
            assert!(!why.contains("0x"), "the reply shows an address: {why}")
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

fn assert_reset(r: Result<Response, quinn::ReadError>, code: StreamCode) {
    match r {
        Err(quinn::ReadError::Reset(c)) => assert_eq!(c.into_inner(), u64::from(code.code())),
        other => panic!("expected a reset with {code:?}, got {other:?}"),
    }
}

async fn assert_pong(raw: &mut Raw) {
    assert_eq!(
        raw.request(&Request::Ping).await.unwrap(),
        Response::Ok(Reply::Pong)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_gets_typed_errors_and_costs_only_its_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let ca = data.join("tls").join("ca.pem");

    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(tls::client_config(&Trust::Ca(ca.clone())).unwrap());
    let conn = endpoint
        .connect(server.client_addr.parse().unwrap(), "127.0.0.1")
        .unwrap()
        .await
        .unwrap();

    // Garbage payload in a well-formed frame: typed error, and the stream goes on.
    let mut s = Raw::open(&conn).await;
    s.send
        .write_all(&framed(b"\xde\xad\xbe\xef garbage that is no archive"))
        .await
        .unwrap();
    assert_invalid(s.response().await);
    assert_pong(&mut s).await;

    // An unknown message tag: a valid Tso archive with its discriminant changed.
    let mut archive = Vec::new();
    proto::encode(
        &Request::Tso { count: 1 },
        &mut rkyv::util::AlignedVec::new(),
        &mut archive,
    )
    .unwrap();
    let payload = &mut archive[4..];
    let tag = payload
        .iter()
        .position(|&b| b == 1)
        .expect("the Tso tag byte");
    payload[tag] = 0xEE;
    s.send.write_all(&archive).await.unwrap();
    assert_invalid(s.response().await);
    assert_pong(&mut s).await;

    // An empty frame.
    s.send.write_all(&framed(b"")).await.unwrap();
    assert_invalid(s.response().await);

    // count 0 and count over 2^18 (T6): typed errors; the stream goes on.
    assert_invalid(s.request(&Request::Tso { count: 0 }).await);
    assert_invalid(
        s.request(&Request::Tso {
            count: MAX_COUNT + 1,
        })
        .await,
    );
    match s.request(&Request::Tso { count: MAX_COUNT }).await.unwrap() {
        Response::Ok(Reply::Tso { count, .. }) => assert_eq!(count, MAX_COUNT),
        other => panic!("{other:?}"),
    }

    // A frame over the limit: only this stream is reset.
    let mut big = Raw::open(&conn).await;
    big.send
        .write_all(&((MAX_FRAME_LEN as u32) + 1).to_le_bytes())
        .await
        .unwrap();
    // The server may refuse the rest of the frame as soon as it has read the header, so the
    // write of the tail either lands or is stopped with the same code.
    match big.send.write_all(&[0u8; 1024]).await {
        Ok(()) => {}
        Err(quinn::WriteError::Stopped(c)) => {
            assert_eq!(c.into_inner(), u64::from(StreamCode::FrameTooLarge.code()))
        }
        Err(e) => panic!("the tail of an oversized frame: {e:?}"),
    }
    assert_reset(big.response().await, StreamCode::FrameTooLarge);

    // A truncated frame: the header promises more than the stream carries before it ends.
    let mut cut = Raw::open(&conn).await;
    cut.send.write_all(&100u32.to_le_bytes()).await.unwrap();
    cut.send.write_all(&[1u8; 10]).await.unwrap();
    cut.send.finish().unwrap();
    assert_reset(cut.response().await, StreamCode::Truncated);

    // A header cut short.
    let mut short = Raw::open(&conn).await;
    short.send.write_all(&[7u8, 0]).await.unwrap();
    short.send.finish().unwrap();
    assert_reset(short.response().await, StreamCode::Truncated);

    // The first stream, the connection and a brand-new client all still work.
    assert_pong(&mut s).await;
    assert_pong(&mut Raw::open(&conn).await).await;
    let client = Client::connect(ClientOptions::new(
        vec![server.client_addr.clone()],
        Trust::Ca(ca),
    ))
    .await
    .unwrap();
    let a = client.get_ts().await.unwrap();
    let b = client.get_ts().await.unwrap();
    assert!(b > a);

    server.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_ca_is_refused_and_insecure_needs_asking_on_both_sides() {
    let tmp = tempfile::tempdir().unwrap();
    let server =
        ServerProcess::start(test_binary(), &tmp.path().join("a"), "127.0.0.1:0", Some(1)).unwrap();
    // Another node's self-signed CA must not verify this one.
    let other =
        ServerProcess::start(test_binary(), &tmp.path().join("b"), "127.0.0.1:0", Some(1)).unwrap();
    let mut opts = ClientOptions::new(
        vec![server.client_addr.clone()],
        Trust::Ca(tmp.path().join("b/tls/ca.pem")),
    );
    opts.retry_budget = Duration::from_millis(300);
    assert!(Client::connect(opts).await.is_err());
    // A client that verifies nothing presents nothing: a node that authenticates clients (the
    // default) refuses it; one run with the explicit opt-out serves it.
    let mut insecure = ClientOptions::new(vec![server.client_addr.clone()], Trust::Insecure);
    insecure.retry_budget = Duration::from_millis(300);
    // TLS 1.3 lets the client finish its side before the server judges its certificate: the
    // refusal may come at connect or at the first call, never as an answer.
    if let Ok(client) = Client::connect(insecure).await {
        assert!(
            client.get_ts().await.is_err(),
            "served a client without a certificate"
        );
    }
    let open = ServerProcess::start_with(
        test_binary(),
        &tmp.path().join("c"),
        "127.0.0.1:0",
        &[
            "--insecure-no-client-auth".into(),
            "--cores".into(),
            "1".into(),
        ],
    )
    .unwrap();
    let insecure = ClientOptions::new(vec![open.client_addr.clone()], Trust::Insecure);
    Client::connect(insecure)
        .await
        .unwrap()
        .get_ts()
        .await
        .unwrap();
    open.stop().unwrap();
    other.stop().unwrap();
    server.stop().unwrap();
}

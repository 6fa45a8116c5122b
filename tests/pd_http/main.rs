//! PD's HTTP API on the client port of the real binary, beside gRPC on the same TCP port and
//! TLS: each route's JSON field by field against PD's shapes (tikv/pd `pkg/response`,
//! `client/http/types.go`, `server/api`), over HTTP/1.1 and HTTP/2 (ALPN chooses), gRPC still
//! served on the same port, PD's error bodies (an unknown route's 404, a missing store or
//! region), who may call what (`roles`), placement and label rules checked as PD checks them
//! and kept across a restart (`rules`), a follower's answers (`follower`, on etcd), a TiDB
//! server's start emulated from its code (`tidb_start`), and PD's operator API: operators
//! created, listed, sent to the leader and cancelled (`operators`; merges and splits by each
//! policy in `split_merge_operators`, a merge's two halves ending as one in `merge_pair`), and
//! the sizes regions report (`sizes`).

mod follower;
mod merge_pair;
mod no_leader;
mod operator_log;
mod operator_setup;
mod operators;
mod roles;
mod routes;
mod rules;
mod sizes;
mod split_merge_operators;
mod tidb_start;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, Method, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use meridian::harness::{connect_when_placement_loads, pd_header, test_binary, ServerProcess};
use meridian::kvproto::pdpb::{self, pd_client::PdClient};
use meridian::pd_grpc;
use meridian::tls::Trust;
use tonic::transport::Channel;

/// Which HTTP the client speaks; ALPN offers only that one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    H1,
    H2,
}

const BOTH: [Proto; 2] = [Proto::H1, Proto::H2];

/// One answer, with what the connection negotiated.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    content_type: String,
    body: Vec<u8>,
    version: Version,
    alpn: Option<Vec<u8>>,
}

impl Answer {
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{e}: not JSON: {:?} ({})",
                String::from_utf8_lossy(&self.body),
                self.status
            )
        })
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One request on a fresh TLS connection to `addr`.
async fn send(
    addr: &str,
    trust: &Trust,
    proto: Proto,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> anyhow::Result<Answer> {
    let mut tls = meridian::tls::client_tls(meridian::tls::client_builder()?, trust)?;
    tls.alpn_protocols = vec![match proto {
        Proto::H1 => b"http/1.1".to_vec(),
        Proto::H2 => b"h2".to_vec(),
    }];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).to_string();
    let name = rustls::pki_types::ServerName::try_from(host)?;
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let stream = connector.connect(name, tcp).await?;
    let alpn = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    let io = TokioIo::new(stream);
    let uri = match proto {
        Proto::H1 => path.to_string(),
        Proto::H2 => format!("https://{addr}{path}"),
    };
    let mut req = axum::http::Request::builder().method(method).uri(uri);
    if proto == Proto::H1 {
        req = req.header(header::HOST, addr);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(axum::body::Body::from(body.to_string()))?;
    let resp = match proto {
        Proto::H1 => {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(conn);
            sender.send_request(req).await?
        }
        Proto::H2 => {
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
            tokio::spawn(conn);
            sender.send_request(req).await?
        }
    };
    let status = resp.status();
    let version = resp.version();
    let content_type = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = axum::body::to_bytes(axum::body::Body::new(resp.into_body()), 64 << 20)
        .await?
        .to_vec();
    Ok(Answer {
        status,
        content_type,
        body,
        version,
        alpn,
    })
}

/// A GET over `proto`, checked to have gone over that protocol.
async fn get(addr: &str, trust: &Trust, proto: Proto, path: &str) -> Answer {
    let a = tokio::time::timeout(
        Duration::from_secs(10),
        send(addr, trust, proto, Method::GET, path, &[], ""),
    )
    .await
    .expect("an answer within 10 s, never a hang")
    .unwrap();
    let (version, alpn): (Version, &[u8]) = match proto {
        Proto::H1 => (Version::HTTP_11, &b"http/1.1"[..]),
        Proto::H2 => (Version::HTTP_2, &b"h2"[..]),
    };
    assert_eq!(a.version, version, "{path}");
    assert_eq!(a.alpn.as_deref(), Some(alpn), "{path}");
    a
}

/// A request with a JSON body (or none) over HTTP/2.
async fn call(
    addr: &str,
    trust: &Trust,
    method: Method,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Answer {
    let body = body.map(serde_json::Value::to_string).unwrap_or_default();
    tokio::time::timeout(
        Duration::from_secs(10),
        send(
            addr,
            trust,
            Proto::H2,
            method,
            path,
            &[("content-type", "application/json")],
            &body,
        ),
    )
    .await
    .expect("answered")
    .unwrap()
}

/// A GET answered 200 with JSON, the same over HTTP/1.1 and HTTP/2.
async fn get_json(addr: &str, trust: &Trust, path: &str) -> serde_json::Value {
    let mut seen = Vec::new();
    for proto in BOTH {
        let a = get(addr, trust, proto, path).await;
        assert_eq!(
            a.status,
            StatusCode::OK,
            "{path} over {proto:?}: {}",
            a.text()
        );
        assert!(
            a.content_type.starts_with("application/json"),
            "{path}: {}",
            a.content_type
        );
        seen.push(a.json());
    }
    assert_eq!(seen[0], seen[1], "{path}: HTTP/1.1 and HTTP/2 disagree");
    seen.remove(0)
}

/// GET `path` over HTTP/1.1, asked every 50 ms until `done` holds of the answer, which is
/// returned; past `within`, a panic naming the last answer.
async fn poll(
    addr: &str,
    trust: &Trust,
    path: &str,
    within: Duration,
    done: impl Fn(&Answer) -> bool,
) -> Answer {
    let deadline = std::time::Instant::now() + within;
    loop {
        let a = get(addr, trust, Proto::H1, path).await;
        if done(&a) {
            return a;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{path}: not within {within:?}; the last answer: {} {}",
            a.status,
            a.text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The JSON of `path` once it answers 200 and `done` holds of it, within 10 s ([`poll`]).
async fn until(
    addr: &str,
    trust: &Trust,
    path: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let ok = |a: &Answer| a.status == StatusCode::OK && done(&a.json());
    poll(addr, trust, path, Duration::from_secs(10), ok)
        .await
        .json()
}

struct Node {
    server: ServerProcess,
    pd: PdClient<Channel>,
    cluster_id: u64,
    trust: Trust,
}

impl Node {
    fn addr(&self) -> &str {
        &self.server.client_addr
    }

    fn h(&self) -> Option<pdpb::RequestHeader> {
        pd_header(self.cluster_id)
    }
}

/// A node on its own local CA (the harness's client certificate has client, store and
/// admin), with gRPC up and placement loaded.
async fn start(data: &Path) -> Node {
    start_with(data, &[]).await
}

/// [`start`], with `extra` `serve` flags (a `--config FILE`).
async fn start_with(data: &Path, extra: &[String]) -> Node {
    let mut args = vec!["--cores".to_string(), "2".to_string()];
    args.extend_from_slice(extra);
    let server = ServerProcess::start_with(test_binary(), data, "127.0.0.1:0", &args).unwrap();
    assert_eq!(
        server.grpc_addr.as_deref(),
        Some(server.client_addr.as_str())
    );
    let trust = server.trust();
    let (pd, cluster_id) =
        connect_when_placement_loads(&server.client_addr, &trust, Duration::from_secs(10))
            .await
            .unwrap();
    Node {
        server,
        pd,
        cluster_id,
        trust,
    }
}

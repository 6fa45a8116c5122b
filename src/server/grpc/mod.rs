//! The PD-compatible front end: kvproto's `pdpb.PD` over gRPC (HTTP/2, TLS with the node's
//! certificate), and beside it etcd's v3 API forwarded to the etcd the node runs on (`etcd`)
//! and PD's HTTP API (`http`, HTTP/1.1 or HTTP/2 on the same port and TLS, split from gRPC by
//! `content-type`), on TCP at the client address by default, on its own thread and runtime so
//! the QUIC cores stay as they are. The translation lives in `service`, `convert`, `etcd` and
//! `http`; this module only binds, serves and stops.

mod connection;
// `pub(crate)` for `crate::fuzzing`.
pub(crate) mod convert;
mod etcd;
mod http;
mod meta_storage;
mod region_sync;
mod resource_manager;
mod service;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio_rustls::TlsAcceptor;
use tonic::service::Routes;
use tonic::transport::Server;

use crate::kvproto::pdpb::pd_server::PdServer;

use super::Shared;
use connection::Authenticated;
pub use etcd::EtcdUpstream;
/// Go's duration text and PD's `Operator.String()`, for the operator lines of the log.
pub(crate) use http::{go_duration_ms, operator_string};
pub use service::PdService;

/// `key` as etcd holds it when a client names it through the etcd API or `MetaStorage`
/// (inside the namespace clients see), for what Meridian writes there in PD's place.
pub fn client_visible_key(key: &[u8]) -> Vec<u8> {
    etcd::namespace::Namespace::default().key(key)
}

/// Largest gRPC message accepted (a batch split report of 256 regions fits many times over).
const MAX_MESSAGE: usize = 16 << 20;

/// A TLS handshake not finished by then is dropped.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Handshakes in progress at once; more connections wait in the kernel's backlog.
const MAX_HANDSHAKES: usize = 256;

/// HTTP/2 streams one connection may hold open at once: gRPC calls, streams and watches,
/// and PD's HTTP API over HTTP/2. Each open one holds a task and buffers here (a MetaStorage
/// watch, a stream at etcd too); a client that opens more waits for one of its own to end,
/// as HTTP/2 makes it. tonic leaves hyper's bound of 200 unset (none at all), so it is set
/// here, to the QUIC port's default `max_streams_per_connection`.
const MAX_STREAMS_PER_CONNECTION: u32 = 1024;

/// Streams a peer may make this node reset for its errors (HTTP/2 "MadeYouReset") before the
/// connection is closed: h2's own default, which tonic otherwise turns off.
const MAX_LOCAL_ERROR_RESETS: usize = 1024;

/// How long a stopping node lets gRPC connections close on their own.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Where the front end listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrpcListen {
    /// TCP at the client (`--listen`) address.
    SameAsClient,
    At(SocketAddr),
    Off,
}

impl std::str::FromStr for GrpcListen {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(GrpcListen::Off),
            "client" | "" => Ok(GrpcListen::SameAsClient),
            addr => addr
                .parse()
                .map(GrpcListen::At)
                .map_err(|e| format!("--grpc-listen {addr}: {e} (an address, `client` or `off`)")),
        }
    }
}

pub struct GrpcSetup {
    pub listener: TcpListener,
    /// TLS with the node's certificate and client authentication (`tls::grpc_server_config`).
    pub tls: Arc<rustls::ServerConfig>,
    pub shared: Arc<Shared>,
    pub metrics_slot: usize,
    pub threads: usize,
    pub shutdown: watch::Receiver<bool>,
    /// The etcd the etcd API forwards to; `None` on the embedded store.
    pub etcd: Option<EtcdUpstream>,
    /// TLS as a member, to send a follower's HTTP requests on to the leader; `None` where
    /// this node never follows (the embedded store).
    pub peer_tls: Option<rustls::ClientConfig>,
    /// Where a follower keeps its copy of the region index on disk; `None`: in memory only.
    pub region_copy: Option<std::path::PathBuf>,
}

/// Starts the front end on its own thread; it returns when `shutdown` turns true.
pub fn spawn(setup: GrpcSetup) -> anyhow::Result<std::thread::JoinHandle<()>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(setup.threads.max(1))
        .thread_name("meridian-grpc")
        .enable_all()
        .build()
        .context("building the gRPC runtime")?;
    let addr = setup.listener.local_addr()?;
    Ok(std::thread::Builder::new()
        .name("meridian-grpc-main".into())
        .spawn(move || {
            if let Err(e) = runtime.block_on(serve(setup)) {
                tracing::error!(%addr, "gRPC front end stopped: {e:#}");
            }
        })?)
}

async fn serve(setup: GrpcSetup) -> anyhow::Result<()> {
    setup.listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(setup.listener)?;
    // TLS is ours, not tonic's, so that it resolves through the node's live certificates (a
    // SIGHUP reload reaches this port too). The same client authentication as QUIC: a
    // certificate from the CA finishes the handshake; each call then checks its roles
    // against what the certificate granted, read once per connection.
    let (handshaken, incoming) = mpsc::channel(64);
    tokio::spawn(accept(
        listener,
        TlsAcceptor::from(setup.tls),
        setup.shared.clone(),
        handshaken,
        setup.shutdown.clone(),
    ));
    let incoming = tokio_stream::wrappers::ReceiverStream::new(incoming);
    // HTTP/1.1 too: what is not gRPC is PD's HTTP API (`http::split`).
    let mut builder = Server::builder()
        .accept_http1(true)
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .http2_max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESETS));
    if let Some(tls) = &setup.peer_tls {
        // A member on etcd follows: its region syncer keeps a copy of the leader's index.
        tokio::spawn(region_sync::follow(
            setup.shared.clone(),
            tls.clone(),
            setup.region_copy.clone(),
        ));
    }
    let api = http::router(
        setup.shared.clone(),
        setup.metrics_slot,
        setup.peer_tls.map(http::proxy::LeaderProxy::new),
    );
    let etcd = etcd::EtcdProxy::new(
        setup.etcd.as_ref(),
        setup.shared.clone(),
        setup.metrics_slot,
    )?;
    let meta_storage =
        meta_storage::MetaStorageService::new(&etcd, setup.shared.clone(), setup.metrics_slot);
    let resource_manager = resource_manager::ResourceManagerService::new(
        setup.shared.clone(),
        setup.metrics_slot,
        setup.etcd.is_some(),
    );
    let service = Arc::new(PdService::new(setup.shared, setup.metrics_slot));
    // The standard `grpc.health.v1.Health`, which pd's Go client asks (`Check` with service "")
    // before it uses a member. It reports SERVING for "" from every member, followers too (as
    // PD's embedded etcd does): a member that answers is alive, and `pdpb.PD` itself tells a
    // client who leads.
    let (_health_reporter, health) = tonic_health::server::health_reporter();
    let mut shutdown = setup.shutdown.clone();
    let mut stopped = setup.shutdown;
    let grpc = Routes::new(
        PdServer::new(service)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE),
    )
    .add_service(health)
    .add_service(etcd.kv())
    .add_service(etcd.watch())
    .add_service(etcd.lease())
    .add_service(etcd.cluster())
    .add_service(meta_storage.server())
    .add_service(resource_manager.server());
    let server = builder
        .add_routes(http::split(grpc.into_axum_router(), api))
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = shutdown.wait_for(|s| *s).await;
        });
    // A graceful stop waits for every connection to close, and a client may hold one open
    // for ever: after the grace, what is left is dropped.
    tokio::select! {
        served = server => served.context("serving gRPC")?,
        _ = async {
            let _ = stopped.wait_for(|s| *s).await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => tracing::info!("gRPC connections still open after the grace period; closing them"),
    }
    Ok(())
}

/// Accepts TCP connections and runs their TLS handshakes concurrently, each within
/// `HANDSHAKE_TIMEOUT`, handing finished ones to tonic. A refused or slow handshake costs only
/// its own task.
async fn accept(
    listener: tokio::net::TcpListener,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
    handshaken: mpsc::Sender<std::io::Result<Authenticated>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let permit = tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return,
            permit = handshakes.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (tcp, peer) = tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!("gRPC accept: {e}");
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, handshaken, shared) = (acceptor.clone(), handshaken.clone(), shared.clone());
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => {
                    let connection = Authenticated::new(tls, &shared.client_auth, peer);
                    let _ = handshaken.send(Ok(connection)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, "gRPC TLS handshake refused: {e}"),
                Err(_) => tracing::debug!(%peer, "gRPC TLS handshake timed out"),
            }
        });
    }
}

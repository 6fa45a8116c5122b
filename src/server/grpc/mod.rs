//! The PD-compatible front end: kvproto's `pdpb.PD` over gRPC (HTTP/2, TLS with the node's
//! certificate), on TCP at the client address by default, on its own thread and runtime so the
//! QUIC cores stay as they are. The translation lives in `service` and `convert`; this module
//! only binds, serves and stops.

mod convert;
mod service;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::watch;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

use crate::kvproto::pdpb::pd_server::PdServer;

use super::Shared;
pub use service::PdService;

/// Largest gRPC message accepted (a batch split report of 256 regions fits many times over).
const MAX_MESSAGE: usize = 16 << 20;

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
    /// PEM certificate chain and key; `None` serves plaintext (an explicit opt-out).
    pub tls: Option<(Vec<u8>, Vec<u8>)>,
    pub shared: Arc<Shared>,
    pub metrics_slot: usize,
    pub threads: usize,
    pub shutdown: watch::Receiver<bool>,
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
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let mut builder = Server::builder();
    if let Some((cert, key)) = setup.tls {
        let mut tls = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
        // The same client authentication as QUIC: a certificate from the CA is required to
        // finish the handshake; each call then checks the roles it carries.
        if let crate::tls::ClientAuth::Required { ca_pem } = &setup.shared.client_auth {
            tls = tls.client_ca_root(Certificate::from_pem(ca_pem));
        }
        builder = builder.tls_config(tls).context("gRPC TLS config")?;
    }
    let service = Arc::new(PdService::new(setup.shared, setup.metrics_slot));
    // The standard `grpc.health.v1.Health`, which pd's Go client asks (`Check` with service "")
    // before it uses a member. It reports SERVING for "" from every member, followers too (as
    // PD's embedded etcd does): a member that answers is alive, and `pdpb.PD` itself tells a
    // client who leads.
    let (_health_reporter, health) = tonic_health::server::health_reporter();
    let mut shutdown = setup.shutdown.clone();
    let mut stopped = setup.shutdown;
    let server = builder
        .add_service(
            PdServer::new(service)
                .max_decoding_message_size(MAX_MESSAGE)
                .max_encoding_message_size(MAX_MESSAGE),
        )
        .add_service(health)
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

//! One core: a pinned thread running a single-threaded tokio runtime with its own QUIC endpoint
//! on the shared SO_REUSEPORT port. It accepts connections and serves their streams; on shutdown
//! it stops accepting, lets streams answer what they have read, then closes.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::CertificateDer;
use tokio::task::JoinSet;

use crate::proto::StreamCode;

use super::handshake_rate::HandshakeRate;
use super::socket::pin_to_cpu;
use super::steering::CoreCids;
use super::stream::serve_stream;
use super::Shared;

pub struct CoreSetup {
    pub index: usize,
    pub socket: UdpSocket,
    /// The queue of the shard this core owns.
    pub shard_queue: tokio::sync::mpsc::Receiver<super::placement::ShardMsg>,
    pub endpoint_config: quinn::EndpointConfig,
    /// With connection steering on, the connection-id key: this core's ids then carry its
    /// index (`steering.rs`).
    pub cid_key: Option<u64>,
    pub server_config: quinn::ServerConfig,
    pub shared: Arc<Shared>,
}

pub fn spawn(setup: CoreSetup) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("meridian-core-{}", setup.index))
        .spawn(move || {
            if setup.shared.config.server.pin_cores {
                pin_to_cpu(setup.index);
            }
            let index = setup.index;
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(core = index, "cannot build runtime: {e}");
                    return;
                }
            };
            if let Err(e) = runtime.block_on(run(setup)) {
                tracing::error!(core = index, "core stopped: {e}");
            }
        })
}

async fn run(setup: CoreSetup) -> std::io::Result<()> {
    let CoreSetup {
        index,
        socket,
        shard_queue,
        mut endpoint_config,
        cid_key,
        server_config,
        shared,
    } = setup;
    if let Some(key) = cid_key {
        endpoint_config.cid_generator(move || Box::new(CoreCids::new(index, key)));
    }
    let endpoint = quinn::Endpoint::new(
        endpoint_config,
        Some(server_config),
        socket,
        Arc::new(quinn::TokioRuntime),
    )?;
    let mut shutdown = shared.shutdown.clone();
    let shard = tokio::spawn(super::placement::run_shard(
        shard_queue,
        shared.placement.clone(),
        index,
        shutdown.clone(),
    ));
    let mut connections = JoinSet::new();
    let limits = &shared.config.server;
    // Handshakes this core has started and not finished.
    let handshaking = Arc::new(AtomicUsize::new(0));
    let mut rate = HandshakeRate::new(limits.handshakes_per_sec);
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => break,
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => {
                    let metrics = shared.metrics.core(index);
                    if connections.len() >= limits.max_connections_per_core as usize {
                        metrics.connection_refused();
                        incoming.refuse();
                        continue;
                    }
                    if !rate.admit(Instant::now()) {
                        metrics.handshake_limited();
                        incoming.refuse();
                        continue;
                    }
                    if handshaking.load(Relaxed) >= limits.retry_above_handshakes as usize
                        && !incoming.remote_address_validated()
                        && incoming.may_retry()
                    {
                        metrics.retry_sent();
                        if let Err(e) = incoming.retry() {
                            e.into_incoming().ignore();
                        }
                        continue;
                    }
                    handshaking.fetch_add(1, Relaxed);
                    connections.spawn(serve_connection(
                        incoming,
                        shared.clone(),
                        index,
                        handshaking.clone(),
                    ));
                }
                None => break,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    endpoint.set_server_config(None);
    let grace = Duration::from_millis(shared.config.server.shutdown_grace_ms);
    let _ = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    endpoint.close(StreamCode::ShuttingDown.code().into(), b"shutting down");
    let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
    let _ = shard.await;
    Ok(())
}

async fn serve_connection(
    incoming: quinn::Incoming,
    shared: Arc<Shared>,
    core: usize,
    handshaking: Arc<AtomicUsize>,
) {
    let handshake = incoming.await;
    handshaking.fetch_sub(1, Relaxed);
    let connection = match handshake {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(core, "handshake failed: {e}");
            return;
        }
    };
    shared.metrics.core(core).connection_opened();
    // The handshake verified the chain; what it may do is read once, here.
    let chain = connection
        .peer_identity()
        .and_then(|id| id.downcast::<Vec<CertificateDer<'static>>>().ok());
    let caller = shared.client_auth.identify(
        chain.as_deref().map(Vec::as_slice),
        &connection.remote_address(),
    );
    let mut shutdown = shared.shutdown.clone();
    let mut streams = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => break,
            stream = connection.accept_bi() => match stream {
                Ok((send, recv)) => {
                    streams.spawn(serve_stream(send, recv, shared.clone(), core, caller.clone()));
                }
                Err(e) => {
                    tracing::debug!(core, "connection ended: {e}");
                    break;
                }
            },
            Some(_) = streams.join_next(), if !streams.is_empty() => {}
        }
    }
    while streams.join_next().await.is_some() {}
    // Streams have flushed their last replies; closing now may still drop bytes in flight, so
    // wait briefly for the peer to acknowledge them.
    let _ = tokio::time::timeout(Duration::from_millis(200), connection.closed()).await;
    connection.close(StreamCode::ShuttingDown.code().into(), b"shutting down");
}

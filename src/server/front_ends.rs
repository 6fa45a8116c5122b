//! Starts the three front ends on what `bind` bound: one pinned core per socket with its QUIC
//! endpoint (connections steered to cores where the kernel allows it), the PD-compatible gRPC
//! server, and the admin HTTPS API; and joins their threads at shutdown. Owns only the wiring;
//! each front end's serving lives in its own module (`core`, `grpc`, `admin`).

use std::net::{TcpListener, UdpSocket};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::mpsc;

use super::node_tls::NodeTls;
use super::placement::ShardMsg;
use super::{core, grpc, socket, steering, ServeOptions, Shared};
use crate::admin::{self, AdminState};
use crate::tls;

/// The front ends' threads, joined at shutdown.
pub struct FrontEnds {
    threads: Vec<JoinHandle<()>>,
}

impl FrontEnds {
    /// Waits for every front end to finish its connections (blocking).
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// What the front ends listen on.
pub struct Listeners {
    pub sockets: Vec<UdpSocket>,
    pub grpc: Option<TcpListener>,
    pub admin: TcpListener,
}

pub fn start(
    opts: &ServeOptions,
    listeners: Listeners,
    tls: &NodeTls,
    shared: &Arc<Shared>,
    shard_queues: Vec<mpsc::Receiver<ShardMsg>>,
    admin_state: AdminState,
) -> anyhow::Result<FrontEnds> {
    let cores = listeners.sockets.len();
    let mut threads = quic_cores(opts, listeners.sockets, tls, shared, shard_queues)?;
    if let Some(listener) = listeners.grpc {
        threads.push(grpc::spawn(grpc::GrpcSetup {
            listener,
            tls: tls.grpc.clone(),
            shared: shared.clone(),
            metrics_slot: cores,
            threads: cores.min(4),
            shutdown: shared.shutdown.clone(),
            etcd: (!opts.etcd.is_empty()).then(|| grpc::EtcdUpstream {
                endpoints: opts.etcd.clone(),
                access: opts.etcd_access.clone(),
            }),
            peer_tls: if opts.etcd.is_empty() {
                None
            } else {
                Some(super::node_tls::peer_client_tls(opts)?)
            },
            region_copy: (!opts.etcd.is_empty())
                .then(|| super::placement::region_copy::dir(&opts.data_dir)),
        })?);
    }
    threads.push(admin::spawn(
        admin::AdminListener {
            listener: listeners.admin,
            tls: tls.admin.clone(),
            client_auth: tls.client_auth.clone(),
            limits: admin::AdminLimits::default(),
            shutdown: shared.shutdown.clone(),
        },
        admin_state,
    )?);
    Ok(FrontEnds { threads })
}

/// One thread per core, each with its endpoint on its socket and its shard's queue.
fn quic_cores(
    opts: &ServeOptions,
    sockets: Vec<UdpSocket>,
    tls: &NodeTls,
    shared: &Arc<Shared>,
    shard_queues: Vec<mpsc::Receiver<ShardMsg>>,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    // One EndpointConfig (and so one stateless-reset key) for all cores: a packet the kernel
    // hands to the wrong core is answered with a reset the client accepts, not ignored.
    let (endpoint_config, cid_key) =
        tls::endpoint_config(&opts.data_dir, opts.config.server.max_udp_payload)?;
    let steer = steer_connections(&sockets, &opts.config.server);
    let mut threads = Vec::with_capacity(sockets.len());
    for (index, (socket, shard_queue)) in sockets.into_iter().zip(shard_queues).enumerate() {
        threads.push(core::spawn(core::CoreSetup {
            index,
            socket,
            shard_queue,
            endpoint_config: endpoint_config.clone(),
            cid_key: steer.then_some(cid_key),
            server_config: tls.quic.clone(),
            shared: shared.clone(),
        })?);
    }
    Ok(threads)
}

/// Attaches the steering program to the cores' reuseport group (`steering.rs`); without it
/// (turned off, or a kernel that refuses it) the kernel spreads connections by address hash.
fn steer_connections(sockets: &[UdpSocket], config: &crate::config::ServerConfig) -> bool {
    // An id carries its core in one byte.
    if !config.steer_connections || sockets.len() > 256 {
        return false;
    }
    let Some(first) = sockets.first() else {
        return false;
    };
    let cpus = if config.pin_cores {
        socket::allowed_cpus()
    } else {
        Vec::new()
    };
    match steering::attach(first, &steering::program(sockets.len(), &cpus)) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!("connection steering off, connections spread by address hash: {e}");
            false
        }
    }
}

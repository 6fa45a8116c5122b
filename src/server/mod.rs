//! The thread-per-core server shell: wires the meta store, the TSO control loop, one pinned
//! core per CPU with its own QUIC endpoint on a shared port, and the admin HTTP server, and
//! shuts them down in order. Decisions live in `tso` and `proto`; this module only runs them.

mod control;
mod core;
mod exclusive;
// `pub(crate)`: `crate::fuzzing` runs `grpc::convert` on fuzzed pdpb messages.
pub(crate) mod grpc;
mod handshake_rate;
mod identity;
mod leadership;
// `pub(crate)`: `crate::fuzzing` decodes fuzzed region buckets with `placement::persist`.
pub(crate) mod placement;
// `pub(crate)`: `crate::fuzzing` sorts fuzzed frames with `service::Op`.
pub(crate) mod service;
mod socket;
mod steering;
mod stream;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;

use crate::admin::{self, AdminControl, AdminState, Metrics};
use crate::clock::WallClock;
use crate::config::Config;
use crate::election::{encode_member, Election, Membership};
use crate::meta::{EtcdAccess, EtcdStore, Keys, LocalStore, MetaStore};
use crate::proto::MemberInfo;
use crate::tls;
use crate::tso::Allocator;

pub use grpc::GrpcListen;
pub use socket::{allowed_cpus, available_cores, pin_to_cpu};

/// `meridian serve` options (the CLI contract; see the README).
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub name: String,
    pub listen: SocketAddr,
    pub admin_listen: SocketAddr,
    /// Published in the member registry instead of the bound addresses when set.
    pub advertise_client: Option<String>,
    pub advertise_admin: Option<String>,
    pub data_dir: PathBuf,
    pub cores: usize,
    pub config: Config,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// The CA that signs client certificates (see [`tls::client_ca_path`] for the default).
    pub tls_ca: Option<PathBuf>,
    /// `--insecure-no-client-auth`: every port lets anyone in with every role.
    pub insecure_no_client_auth: bool,
    /// `--admin-open-probes`: `/health`, `/ready` and `/metrics` answer clients that present
    /// no certificate (kubelet, Prometheus without a client certificate).
    pub admin_open_probes: bool,
    /// etcd endpoints; empty for the single node on the embedded store.
    pub etcd: Vec<String>,
    /// How the node is let into etcd: TLS files and user, read and checked at start.
    pub etcd_access: EtcdAccess,
    /// Where the PD-compatible gRPC front end listens.
    pub grpc_listen: GrpcListen,
}

/// What every core reads; written only by the control thread.
pub struct Shared {
    pub allocator: Arc<Allocator>,
    pub placement: Arc<placement::PlacementState>,
    pub metrics: Arc<Metrics>,
    pub membership: Membership,
    pub config: Config,
    pub shutdown: watch::Receiver<bool>,
    /// Who may connect, and what a connection's certificate grants.
    pub client_auth: tls::ClientAuth,
}

/// Runs the server until SIGTERM or ctrl-c, then shuts down gracefully.
pub fn run(opts: ServeOptions) -> anyhow::Result<()> {
    let control_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    control_rt.block_on(serve(opts))
}

async fn serve(opts: ServeOptions) -> anyhow::Result<()> {
    let cores = opts.cores.max(1);
    std::fs::create_dir_all(&opts.data_dir)
        .with_context(|| format!("creating {}", opts.data_dir.display()))?;
    // Both before anything is read or bound: a second process must change nothing.
    let _data_dir_lock = exclusive::DataDirLock::acquire(&opts.data_dir)?;
    let (address_guard, sockets) = bind_client_address(opts.listen, cores)?;
    let backend = if opts.etcd.is_empty() {
        Backend::Local(
            LocalStore::open(&opts.data_dir.join("meta")).context("opening the meta store")?,
        )
    } else {
        Backend::Etcd(Box::new(
            EtcdStore::connect_with(&opts.etcd, &opts.etcd_access)
                .await
                .context("connecting to etcd")?,
        ))
    };
    let (cluster_id, member_id) = match &backend {
        Backend::Local(s) => ids(s, &opts.name).await?,
        Backend::Etcd(s) => ids(s.as_ref(), &opts.name).await?,
    };
    let keys = Keys::new(cluster_id);

    let client_addr = sockets[0].local_addr()?;
    // The guard keeps the client address whatever happens to gRPC; when gRPC serves there, the
    // guard's socket is its listener.
    let guard_listener = std::net::TcpListener::from(address_guard.socket.try_clone()?);
    let grpc_listener = match &opts.grpc_listen {
        GrpcListen::SameAsClient => Some(guard_listener),
        other => {
            // Nobody serves TCP here: close what connects rather than leave it hanging.
            guard_listener.set_nonblocking(true)?;
            let refuse = tokio::net::TcpListener::from_std(guard_listener)?;
            tokio::spawn(async move {
                while let Ok((conn, _)) = refuse.accept().await {
                    drop(conn);
                }
            });
            match other {
                GrpcListen::At(addr) => Some(
                    std::net::TcpListener::bind(addr)
                        .with_context(|| format!("binding gRPC {addr}"))?,
                ),
                _ => None,
            }
        }
    };
    let grpc_addr = grpc_listener.as_ref().map(|l| l.local_addr()).transpose()?;
    let admin_listener = std::net::TcpListener::bind(opts.admin_listen)
        .with_context(|| format!("binding admin {}", opts.admin_listen))?;
    let admin_addr = admin_listener.local_addr()?;

    let mut names = vec![opts.name.clone(), opts.listen.ip().to_string()];
    // The certificate must also name the advertised host, which is what peers dial.
    names.extend(
        opts.advertise_client
            .iter()
            .filter_map(|a| a.rsplit_once(':').map(|(host, _)| host.to_string())),
    );
    let (client_auth, live_tls) = live_tls(&opts, &names)?;
    let grpc_tls = tls::grpc_server_config(&live_tls)?;
    let admin_tls = tls::admin_server_config(&live_tls, opts.admin_open_probes)?;
    let server_config = tls::server_config(&live_tls, &opts.config.server)?;

    let me = MemberInfo {
        name: opts.name.clone(),
        id: member_id,
        client_url: opts
            .advertise_client
            .clone()
            .unwrap_or_else(|| client_addr.to_string()),
        admin_url: format!(
            "https://{}",
            opts.advertise_admin
                .clone()
                .unwrap_or_else(|| admin_addr.to_string())
        ),
        grpc_url: grpc_addr
            .map(|a| {
                format!(
                    "https://{}",
                    advertised(opts.advertise_client.as_deref(), a)
                )
            })
            .unwrap_or_default(),
    };
    let allocator = Arc::new(Allocator::new(opts.config.tso.max_lead_ms));
    // One metrics slot per core, and one for the gRPC front end.
    let metrics = Arc::new(Metrics::new(cores + 1));
    let (stop_tx, stop_rx) = watch::channel(false);
    let (leader_tx, leader_rx) = watch::channel(None);
    let membership = Membership::new(cluster_id, me.clone(), leader_rx);
    let tick = Duration::from_millis(opts.config.server.tick_interval_ms);
    let clock = Arc::new(WallClock::default());
    let (placement, shard_queues) = placement::PlacementState::new(
        cores,
        opts.config.schedule,
        opts.config.limits.clone(),
        clock.clone(),
        keys.clone(),
        metrics.clone(),
    );

    let mut admin_control = None;
    // The node starts serving only once the control side says so: the embedded store starts the
    // window right here; an etcd node campaigns first.
    let control = match backend {
        Backend::Local(store) => {
            let tso = control::TsoControl {
                store,
                keys,
                cfg: opts.config.tso,
                allocator: allocator.clone(),
                metrics: metrics.clone(),
                term: None,
                clock: clock.clone(),
            };
            let limit = tso.start().await.context("starting tso")?;
            leader_tx.send_replace(Some(me.clone()));
            let stop = stop_rx.clone();
            let placement_term = tokio::spawn(placement::serve_term(
                placement.clone(),
                tso.store.clone(),
                tso.keys.clone(),
                stop_rx.clone(),
            ));
            tokio::spawn(async move {
                tso.run(tick, limit, stop).await;
                match placement_term.await {
                    Ok(Err(e)) => tracing::error!("placement stopped: {e}"),
                    Err(e) => tracing::error!("placement task failed: {e}"),
                    Ok(Ok(())) => {}
                }
            })
        }
        Backend::Etcd(store) => {
            store
                .put(&keys.member_info(&me.name), &encode_member(&me))
                .await
                .context("registering this member")?;
            let (commands_tx, commands) = tokio::sync::mpsc::channel(8);
            admin_control = Some(AdminControl {
                commands: commands_tx,
                store: (*store).clone(),
                keys: keys.clone(),
            });
            let election = Election::new(
                store.client(),
                keys.leader(),
                me.clone(),
                opts.config.election.lease_ttl_secs,
                opts.config.election.safety_margin_ms,
            )
            .with_removed_flag(membership.removed_flag());
            tokio::spawn(watch_registry(
                (*store).clone(),
                keys.clone(),
                membership.clone(),
                stop_rx.clone(),
            ));
            let leadership = leadership::Leadership {
                election,
                store: *store,
                keys,
                cfg: opts.config.tso,
                tick,
                allocator: allocator.clone(),
                metrics: metrics.clone(),
                leader: leader_tx,
                commands,
                clock: clock.clone(),
                sit_out: Duration::from_secs(opts.config.election.lease_ttl_secs.max(1) as u64),
                placement: placement.clone(),
            };
            tokio::spawn(leadership.run(stop_rx.clone()))
        }
    };

    let shared = Arc::new(Shared {
        allocator: allocator.clone(),
        placement: placement.clone(),
        metrics: metrics.clone(),
        membership: membership.clone(),
        config: opts.config.clone(),
        shutdown: stop_rx.clone(),
        client_auth,
    });

    // One EndpointConfig (and so one stateless-reset key) for all cores: a packet the kernel
    // hands to the wrong core is answered with a reset the client accepts, not ignored.
    let (endpoint_config, cid_key) =
        tls::endpoint_config(&opts.data_dir, opts.config.server.max_udp_payload)?;
    let steer = steer_connections(&sockets, &opts.config.server);
    let mut threads = Vec::with_capacity(cores);
    for (index, (socket, shard_queue)) in sockets.into_iter().zip(shard_queues).enumerate() {
        threads.push(core::spawn(core::CoreSetup {
            index,
            socket,
            shard_queue,
            endpoint_config: endpoint_config.clone(),
            cid_key: steer.then_some(cid_key),
            server_config: server_config.clone(),
            shared: shared.clone(),
        })?);
    }

    let grpc = match grpc_listener {
        Some(listener) => Some(grpc::spawn(grpc::GrpcSetup {
            listener,
            tls: grpc_tls,
            shared: shared.clone(),
            metrics_slot: cores,
            threads: cores.min(4),
            shutdown: stop_rx.clone(),
        })?),
        None => None,
    };

    let peers = match &admin_control {
        Some(_) => Some(peer_admin_client(&opts)?),
        None => None,
    };
    let admin_state = AdminState {
        membership,
        metrics,
        allocator: allocator.clone(),
        control: admin_control,
        clock: opts.config.debug.clock_injection.then(|| clock.clone()),
        open_probes: opts.admin_open_probes,
        peers,
        members_cache: Default::default(),
    };
    let admin = admin::spawn(
        admin::AdminListener {
            listener: admin_listener,
            tls: admin_tls,
            client_auth,
            limits: admin::AdminLimits::default(),
            shutdown: stop_rx.clone(),
        },
        admin_state,
    )?;

    // Before the ready line: a SIGTERM sent the moment it is read must find the handler.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    // Tests and scripts read this line to learn the ports picked for `:0`.
    let grpc_shown = grpc_addr.map_or("off".to_string(), |a| a.to_string());
    println!("meridian ready name={} client={client_addr} admin={admin_addr} grpc={grpc_shown} cores={cores} cluster_id={cluster_id}", opts.name);
    tracing::info!(%client_addr, %admin_addr, cores, "serving");

    // Replaced certificate files are noticed within this period (a renewed Kubernetes
    // Secret, where nobody sends SIGHUP).
    let mut tls_watch = tokio::time::interval(TLS_WATCH_PERIOD);
    tls_watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = term.recv() => break,
            r = tokio::signal::ctrl_c() => { r?; break }
            _ = hangup.recv() => reload_tls(&live_tls),
            _ = tls_watch.tick() => {
                match live_tls.reload_if_changed() {
                    Ok(true) => tracing::info!("TLS files changed: certificates reloaded"),
                    Ok(false) => {}
                    Err(e) => tracing::error!("TLS files changed but do not load, the old certificates still serve: {e:#}"),
                }
            }
        }
    }
    tracing::info!("shutting down: no new connections; answering requests in flight");
    let _ = stop_tx.send(true);
    let joined = tokio::task::spawn_blocking(move || {
        for t in threads.into_iter().chain(grpc).chain([admin]) {
            let _ = t.join();
        }
    });
    joined.await?;
    // The control side suspends the allocator (and an etcd leader resigns) as it stops.
    allocator.suspend();
    control.await?;
    tracing::info!("stopped");
    Ok(())
}

/// How this member probes the others' admin APIs: its own certificate (role `member`) as the
/// client certificate, the cluster CA as the trust.
fn peer_admin_client(opts: &ServeOptions) -> anyhow::Result<admin::AdminClient> {
    let local = opts.data_dir.join("tls");
    let (cert, key) = match (&opts.tls_cert, &opts.tls_key) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        _ => (local.join("cert.pem"), local.join("key.pem")),
    };
    let ca = tls::client_ca_path(
        &opts.data_dir,
        opts.tls_cert.as_deref(),
        opts.tls_ca.as_deref(),
    );
    let trust = if opts.insecure_no_client_auth && !ca.exists() {
        tls::Trust::Insecure
    } else {
        tls::Trust::Mutual { ca, cert, key }
    };
    admin::AdminClient::with_timeout("localhost", &trust, Duration::from_millis(300))
}

/// How often the certificate files are checked for a change.
const TLS_WATCH_PERIOD: Duration = Duration::from_secs(10);

/// SIGHUP: the certificate, key and client CA read again for every port.
fn reload_tls(live: &tls::LiveTls) {
    match live.reload() {
        Ok(()) => {
            let files = live.files();
            tracing::info!(cert = %files.cert.display(), "SIGHUP: TLS certificates reloaded");
        }
        Err(e) => {
            tracing::error!("SIGHUP: TLS reload failed, the old certificates still serve: {e:#}")
        }
    }
}

/// The node's TLS as the flags ask: its certificate, and client authentication against the
/// cluster CA unless the loud opt-out is given.
fn live_tls(
    opts: &ServeOptions,
    names: &[String],
) -> anyhow::Result<(tls::ClientAuth, Arc<tls::LiveTls>)> {
    let (cert, key) = tls::ensure_identity(
        &opts.data_dir,
        opts.tls_cert.as_deref(),
        opts.tls_key.as_deref(),
        names,
    )?;
    let auth = client_auth(opts);
    let client_ca = (auth == tls::ClientAuth::Required).then(|| {
        tls::client_ca_path(
            &opts.data_dir,
            opts.tls_cert.as_deref(),
            opts.tls_ca.as_deref(),
        )
    });
    let live = tls::LiveTls::load(tls::TlsFiles {
        cert,
        key,
        client_ca,
    })?;
    Ok((auth, live))
}

/// Client authentication as the flags ask: required, or the loud opt-out.
fn client_auth(opts: &ServeOptions) -> tls::ClientAuth {
    if opts.insecure_no_client_auth {
        let warning =
            "--insecure-no-client-auth: CLIENT AUTHENTICATION IS OFF. Anyone who can reach \
                       this node's ports can bootstrap, rewrite routing, move GC safe points and \
                       change leadership. Never run a reachable node like this.";
        eprintln!("WARNING: {warning}");
        tracing::warn!("{warning}");
        return tls::ClientAuth::Off;
    }
    tls::ClientAuth::Required
}

/// `host:port` for a listener bound at `bound`: the advertised client host if one is given.
fn advertised(advertise_client: Option<&str>, bound: SocketAddr) -> String {
    match advertise_client.and_then(|a| a.rsplit_once(':')) {
        Some((host, _)) => format!("{host}:{}", bound.port()),
        None => bound.to_string(),
    }
}

/// Attaches the steering program to the cores' reuseport group (`steering.rs`); without it
/// (turned off, or a kernel that refuses it) the kernel spreads connections by address hash.
fn steer_connections(
    sockets: &[std::net::UdpSocket],
    config: &crate::config::ServerConfig,
) -> bool {
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

/// Binds the client address: first the exclusive TCP guard (a second process fails here),
/// then the per-core UDP sockets on the same port. With port 0 the guard picks the port; if
/// that port's UDP side is taken, another is tried.
fn bind_client_address(
    listen: SocketAddr,
    cores: usize,
) -> anyhow::Result<(exclusive::AddressGuard, Vec<std::net::UdpSocket>)> {
    let attempts = if listen.port() == 0 { 16 } else { 1 };
    let mut last = None;
    for _ in 0..attempts {
        let guard = exclusive::AddressGuard::bind(listen)?;
        let addr = guard.local_addr()?;
        match socket::bind_reuseport(addr, cores) {
            Ok(sockets) => return Ok((guard, sockets)),
            Err(e) => last = Some(anyhow::Error::new(e).context(format!("binding UDP {addr}"))),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("binding {listen}")))
}

enum Backend {
    Local(LocalStore),
    Etcd(Box<EtcdStore>),
}

async fn ids<M: crate::meta::MetaStore>(store: &M, name: &str) -> anyhow::Result<(u64, u64)> {
    let cluster_id = identity::cluster_id(store).await?;
    let member_id = identity::member_id(store, &Keys::new(cluster_id), name).await?;
    Ok((cluster_id, member_id))
}

/// Polls the member registry (for `GetMembers`, so clients learn every member) and this
/// member's removal marker (once set, the flag stays set).
async fn watch_registry(
    store: EtcdStore,
    keys: Keys,
    membership: Membership,
    mut shutdown: watch::Receiver<bool>,
) {
    let removed_key = keys.removed(&membership.me.name);
    let me = membership.me.id.to_string();
    let mut warned = std::collections::HashSet::new();
    loop {
        if let Ok(listed) = store.list(&keys.members_prefix()).await {
            let members = listed
                .iter()
                .filter(|(k, _)| k.ends_with(b"/info"))
                .filter_map(|(k, v)| {
                    // A record whose addresses do not parse is not handed to clients; said
                    // once per key, not every poll.
                    crate::election::read_member(k, v)
                        .inspect_err(|e| {
                            if warned.insert(k.clone()) {
                                tracing::warn!("skipping a member: {e}");
                            }
                        })
                        .ok()
                })
                .collect();
            membership.set_registered(members);
        }
        if !membership.is_removed() {
            // A marker with another id is an earlier incarnation of this name, not this one.
            if let Ok(Some(id)) = store.get(&removed_key).await {
                if id == me.as_bytes() {
                    membership
                        .removed_flag()
                        .store(true, std::sync::atomic::Ordering::Release);
                    tracing::warn!(
                        "this member was removed from the cluster: it will not campaign again"
                    );
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}

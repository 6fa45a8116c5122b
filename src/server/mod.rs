//! The thread-per-core server shell: wires the meta store, the TSO control loop, one pinned
//! core per CPU with its own QUIC endpoint on a shared port, and the admin HTTP server, and
//! shuts them down in order. Decisions live in `tso` and `proto`; this module only runs them.

mod backend;
mod bind;
mod control;
mod core;
mod exclusive;

#[cfg(feature = "testkit")]
pub(crate) use exclusive::PORT_TAKEN;
mod front_ends;
// `pub(crate)`: `crate::fuzzing` runs `grpc::convert` on fuzzed pdpb messages.
pub(crate) mod grpc;
mod handshake_rate;
mod identity;
mod leadership;
// The deliberate bugs live at the crate root (election consults them too); kept here by name.
pub use crate::mutation;
mod node_tls;
// `pub(crate)`: `crate::fuzzing` decodes fuzzed region buckets with `placement::persist`.
pub(crate) mod placement;
// `pub(crate)`: `crate::fuzzing` sorts fuzzed frames with `service::Op`.
pub(crate) mod service;
mod socket;
mod steering;
// A member's control side started with no sockets, for the cluster simulation.
#[cfg(feature = "sim")]
pub mod sim;
mod stream;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use crate::admin::{AdminState, Metrics};
use crate::clock::WallClock;
use crate::config::Config;
use crate::election::Membership;
use crate::meta::{EtcdAccess, Keys};
use crate::proto::MemberInfo;
use crate::tls;
use crate::tso::Allocator;

use backend::{Backend, Control, Driven};
use bind::Addrs;
use front_ends::{FrontEnds, Listeners};
use node_tls::NodeTls;

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

/// The node's life, in order.
async fn serve(opts: ServeOptions) -> anyhow::Result<()> {
    let cores = opts.cores.max(1);
    let bound = bind::bind(&opts, cores)?;
    let backend = Backend::open(&opts).await?;
    let (cluster_id, member_id) = backend.ids(&opts.name).await?;
    let tls = NodeTls::load(&opts)?;
    let me = member_info(&opts, member_id, &bound.addrs);
    let (stop, stopped) = watch::channel(false);
    let parts = Parts::new(
        &opts.config,
        cores,
        cluster_id,
        me,
        tls.client_auth.clone(),
        stopped,
        Arc::new(WallClock::default()),
    );
    let control = backend::start(backend, &opts, parts.driven()).await?;
    let listeners = Listeners {
        sockets: bound.sockets,
        grpc: bound.grpc,
        admin: bound.admin,
    };
    let front_ends = front_ends::start(
        &opts,
        listeners,
        &tls,
        &parts.shared,
        parts.shard_queues,
        admin_state(&opts, &parts.shared, control.admin.clone(), &parts.clock)?,
    )?;
    let _held = bound.held;
    // Before the ready line: a SIGTERM sent the moment it is read must find the handler.
    let signals = Signals::listen()?;
    announce(&opts, &bound.addrs, cores, cluster_id);
    signals.serve_until_stopped(&tls.live).await?;
    shut_down(stop, front_ends, &parts.shared.allocator, control).await
}

/// What the cores, the control side and the admin API share, made before any of them starts.
struct Parts {
    shared: Arc<Shared>,
    shard_queues: Vec<tokio::sync::mpsc::Receiver<placement::ShardMsg>>,
    keys: Keys,
    clock: Arc<WallClock>,
    leader: watch::Sender<Option<MemberInfo>>,
}

impl Parts {
    fn new(
        config: &Config,
        cores: usize,
        cluster_id: u64,
        me: MemberInfo,
        client_auth: tls::ClientAuth,
        stopped: watch::Receiver<bool>,
        clock: Arc<WallClock>,
    ) -> Parts {
        let keys = Keys::new(cluster_id);
        // One metrics slot per core, and one for the gRPC front end.
        let metrics = Arc::new(Metrics::new(cores + 1));
        let (leader, leader_rx) = watch::channel(None);
        let (placement, shard_queues) = placement::PlacementState::new(
            cluster_id,
            cores,
            config.schedule.clone(),
            config.limits.clone(),
            clock.clone(),
            keys.clone(),
            metrics.clone(),
        );
        let shared = Arc::new(Shared {
            allocator: Arc::new(Allocator::new(config.tso.max_lead_ms)),
            placement,
            metrics,
            membership: Membership::new(cluster_id, me, leader_rx),
            config: config.clone(),
            shutdown: stopped,
            client_auth,
        });
        Parts {
            shared,
            shard_queues,
            keys,
            clock,
            leader,
        }
    }

    /// The control side's share.
    fn driven(&self) -> Driven {
        let shared = &self.shared;
        Driven {
            me: shared.membership.me.clone(),
            keys: self.keys.clone(),
            allocator: shared.allocator.clone(),
            metrics: shared.metrics.clone(),
            membership: shared.membership.clone(),
            clock: self.clock.clone(),
            placement: shared.placement.clone(),
            leader: self.leader.clone(),
            stop: shared.shutdown.clone(),
        }
    }
}

/// This member as the registry and clients see it: the advertised addresses where given.
fn member_info(opts: &ServeOptions, id: u64, addrs: &Addrs) -> MemberInfo {
    MemberInfo {
        name: opts.name.clone(),
        id,
        client_url: opts
            .advertise_client
            .clone()
            .unwrap_or_else(|| addrs.client.to_string()),
        admin_url: format!(
            "https://{}",
            opts.advertise_admin
                .clone()
                .unwrap_or_else(|| addrs.admin.to_string())
        ),
        grpc_url: addrs
            .grpc
            .map(|a| {
                format!(
                    "https://{}",
                    advertised(opts.advertise_client.as_deref(), a)
                )
            })
            .unwrap_or_default(),
    }
}

fn admin_state(
    opts: &ServeOptions,
    shared: &Shared,
    control: Option<crate::admin::AdminControl>,
    clock: &Arc<WallClock>,
) -> anyhow::Result<AdminState> {
    let peers = match &control {
        Some(_) => Some(node_tls::peer_admin_client(opts)?),
        None => None,
    };
    Ok(AdminState {
        membership: shared.membership.clone(),
        metrics: shared.metrics.clone(),
        allocator: shared.allocator.clone(),
        placement_ready: {
            let placement = shared.placement.clone();
            Arc::new(move || placement.is_ready() && placement.is_reconciled())
        },
        control,
        clock: opts.config.debug.clock_injection.then(|| clock.clone()),
        open_probes: opts.admin_open_probes,
        peers,
        members_cache: Default::default(),
    })
}

/// The ready line: tests and scripts read it to learn the ports picked for `:0`.
fn announce(opts: &ServeOptions, addrs: &Addrs, cores: usize, cluster_id: u64) {
    let Addrs {
        client,
        grpc,
        admin,
    } = addrs;
    let grpc = grpc.map_or("off".to_string(), |a| a.to_string());
    println!("meridian ready name={} client={client} admin={admin} grpc={grpc} cores={cores} cluster_id={cluster_id}", opts.name);
    tracing::info!(client_addr = %client, admin_addr = %admin, cores, "serving");
}

/// The signals a running node answers.
struct Signals {
    term: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn listen() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// Serves until SIGTERM or ctrl-c, reloading TLS on SIGHUP and when the files change.
    async fn serve_until_stopped(mut self, live: &tls::LiveTls) -> anyhow::Result<()> {
        let mut tls_watch = tokio::time::interval(node_tls::TLS_WATCH_PERIOD);
        tls_watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.term.recv() => return Ok(()),
                r = tokio::signal::ctrl_c() => return Ok(r?),
                _ = self.hangup.recv() => node_tls::reload(live),
                _ = tls_watch.tick() => node_tls::reload_if_changed(live),
            }
        }
    }
}

/// No new connections, requests in flight answered, then the control side stopped (it
/// suspends the allocator, and an etcd leader resigns).
async fn shut_down(
    stop: watch::Sender<bool>,
    front_ends: FrontEnds,
    allocator: &Allocator,
    control: Control,
) -> anyhow::Result<()> {
    tracing::info!("shutting down: no new connections; answering requests in flight");
    let _ = stop.send(true);
    tokio::task::spawn_blocking(move || front_ends.join()).await?;
    allocator.suspend();
    control.task.await?;
    tracing::info!("stopped");
    Ok(())
}

/// `host:port` for a listener bound at `bound`: the advertised client host if one is given.
fn advertised(advertise_client: Option<&str>, bound: SocketAddr) -> String {
    match advertise_client.and_then(|a| a.rsplit_once(':')) {
        Some((host, _)) => format!("{host}:{}", bound.port()),
        None => bound.to_string(),
    }
}

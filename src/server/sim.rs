//! A member's control side started with no sockets, for the cluster simulation: the member
//! registers itself, campaigns, and once elected runs the TSO control loop and the placement
//! persister exactly as `serve` does, on an etcd client the simulation hands it. No bind, no
//! cores, no front ends (QUIC, gRPC, admin HTTP): requests reach the member through
//! [`SimMember::tso`], [`SimMember::alloc_id`] and [`SimMember::request`], which take the
//! dispatch every front end calls, and transfers and resignations through the admin API's command channel.
//!
//! Owns only this wiring. It must not change how `serve` starts a node, and it runs no shard
//! tasks: their thread-local shard would be shared by every member a one-thread simulation
//! runs.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::backend::{self, Driven};
use super::service::{self, Op};
use super::{Parts, Shared};
use crate::admin::AdminControl;
use crate::clock::WallClock;
use crate::config::Config;
use crate::election::Command;
use crate::meta::EtcdStore;
use crate::proto::{MemberInfo, Request, Response};

/// One running member's control side, and the handles a simulation drives and inspects.
pub struct SimMember {
    pub shared: Arc<Shared>,
    pub clock: Arc<WallClock>,
    /// Transfer and resign, as the admin API sends them.
    pub admin: AdminControl,
    pub cluster_id: u64,
    stop: watch::Sender<bool>,
    /// The leadership loop, until a shutdown waits for it.
    task: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl SimMember {
    /// Starts member `name` on `store` (a client of the simulation's etcd), reading `clock`.
    /// Like `serve`: ids from the store, the member registered, then the leadership loop.
    pub async fn start(
        name: &str,
        config: &Config,
        store: EtcdStore,
        clock: Arc<WallClock>,
    ) -> anyhow::Result<SimMember> {
        let (cluster_id, member_id) = backend::ids(&store, name).await?;
        let me = MemberInfo {
            name: name.to_string(),
            id: member_id,
            client_url: format!("{name}:2379"),
            admin_url: format!("https://{name}:2380"),
            grpc_url: String::new(),
        };
        let (stop, stopped) = watch::channel(false);
        let parts = Parts::new(
            config,
            1,
            cluster_id,
            me,
            crate::tls::ClientAuth::Off,
            stopped,
            clock.clone(),
        );
        let driven: Driven = parts.driven();
        // No shard tasks (see the module doc): a reset sent to a shard finds it gone.
        drop(parts.shard_queues);
        let tick = std::time::Duration::from_millis(config.server.tick_interval_ms);
        let control = backend::start_etcd(store, config, driven, tick).await?;
        let admin = control
            .admin
            .ok_or_else(|| anyhow::anyhow!("an etcd member has an admin handle"))?;
        Ok(SimMember {
            shared: parts.shared,
            clock,
            admin,
            cluster_id,
            stop,
            task: std::sync::Mutex::new(Some(control.task)),
        })
    }

    /// Serves one request as a front end would (`Op::Tso(n)` for timestamps).
    async fn execute(&self, op: Op) -> Response {
        service::execute(op, &self.shared, self.shared.metrics.core(0)).await
    }

    /// `count` timestamps through the member's request path.
    pub async fn tso(&self, count: u32) -> Response {
        self.execute(Op::Tso(count)).await
    }

    /// One id through the member's request path (`AllocId`).
    pub async fn alloc_id(&self) -> Response {
        self.execute(Op::of(Request::AllocId)).await
    }

    /// Any request through the member's request path, as a front end would serve it once
    /// decoded and authorized (placement's stores, splits and lookups among them).
    pub async fn request(&self, req: Request) -> Response {
        self.execute(Op::of(req)).await
    }

    /// Asks the leadership loop to hand over to member `target`, on the channel the admin
    /// API's transfer route sends on (the route's own checks, that this member leads and
    /// `target` is registered, are the caller's). The outcome is not awaited. `false` if the
    /// loop is gone or busy.
    pub fn request_transfer(&self, target: &str) -> bool {
        let (reply, _) = tokio::sync::oneshot::channel();
        self.admin
            .commands
            .try_send(Command::Transfer(target.to_string(), reply))
            .is_ok()
    }

    /// Asks the leadership loop to resign, as the admin API's resign route does; see
    /// [`SimMember::request_transfer`].
    pub fn request_resign(&self) -> bool {
        let (reply, _) = tokio::sync::oneshot::channel();
        self.admin.commands.try_send(Command::Resign(reply)).is_ok()
    }

    /// Whether this member's allocator hands out timestamps now.
    pub fn is_serving(&self) -> bool {
        self.shared.allocator.is_serving()
    }

    /// Shuts down as `serve` does: the allocator suspended, then the control side stopped
    /// (a leader resigns). Later calls return at once.
    pub async fn shut_down(&self) {
        let _ = self.stop.send(true);
        self.shared.allocator.suspend();
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

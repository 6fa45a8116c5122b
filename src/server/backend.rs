//! Where the node's state lives and who drives it: the embedded store (a single node that
//! serves at once) or etcd (members campaign for a lease), opened at start, and the control
//! side each one runs (the TSO window, the placement term, the election and the member
//! registry). Owns the choice between the two; the loops themselves are `control` and
//! `leadership`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{control, leadership, placement, ServeOptions};
use crate::admin::{AdminControl, Metrics};
use crate::clock::WallClock;
use crate::election::{encode_member, Election, Membership};
use crate::meta::{EtcdStore, Keys, LocalStore, MetaStore};
use crate::proto::MemberInfo;
use crate::tso::Allocator;

pub enum Backend {
    Local(LocalStore),
    Etcd(Box<EtcdStore>),
}

impl Backend {
    /// The embedded store in the data directory, or etcd when `--etcd` names it.
    pub async fn open(opts: &ServeOptions) -> anyhow::Result<Backend> {
        Ok(if opts.etcd.is_empty() {
            Backend::Local(
                LocalStore::open(&opts.data_dir.join("meta")).context("opening the meta store")?,
            )
        } else {
            Backend::Etcd(Box::new(
                EtcdStore::connect_with(&opts.etcd, &opts.etcd_access)
                    .await
                    .context("connecting to etcd")?,
            ))
        })
    }

    /// The cluster's id and this member's, made once and kept in the store.
    pub async fn ids(&self, name: &str) -> anyhow::Result<(u64, u64)> {
        match self {
            Backend::Local(s) => ids(s, name).await,
            Backend::Etcd(s) => ids(s.as_ref(), name).await,
        }
    }
}

pub(super) async fn ids<M: MetaStore>(store: &M, name: &str) -> anyhow::Result<(u64, u64)> {
    let cluster_id = super::identity::cluster_id(store).await?;
    let member_id = super::identity::member_id(store, &Keys::new(cluster_id), name).await?;
    Ok((cluster_id, member_id))
}

/// What the control side drives: shared with the cores and the admin API.
pub struct Driven {
    pub me: MemberInfo,
    pub keys: Keys,
    pub allocator: Arc<Allocator>,
    pub metrics: Arc<Metrics>,
    pub membership: Membership,
    pub clock: Arc<WallClock>,
    pub placement: Arc<placement::PlacementState>,
    /// Who leads, as the control side learns it.
    pub leader: watch::Sender<Option<MemberInfo>>,
    pub stop: watch::Receiver<bool>,
}

/// The running control side: the task to wait for at shutdown, and the admin API's handle on
/// leadership (etcd only).
pub struct Control {
    pub task: JoinHandle<()>,
    pub admin: Option<AdminControl>,
}

/// Starts the control side. The node serves only once it says so: the embedded store starts
/// the window right here; an etcd member campaigns first.
pub async fn start(backend: Backend, opts: &ServeOptions, d: Driven) -> anyhow::Result<Control> {
    let tick = Duration::from_millis(opts.config.server.tick_interval_ms);
    match backend {
        Backend::Local(store) => start_local(store, opts, d, tick).await,
        Backend::Etcd(store) => start_etcd(*store, &opts.config, d, tick).await,
    }
}

async fn start_local(
    store: LocalStore,
    opts: &ServeOptions,
    d: Driven,
    tick: Duration,
) -> anyhow::Result<Control> {
    let tso = control::TsoControl {
        store,
        keys: d.keys,
        cfg: opts.config.tso,
        allocator: d.allocator,
        metrics: d.metrics,
        term: None,
        clock: d.clock,
    };
    let limit = tso.start().await.context("starting tso")?;
    d.leader.send_replace(Some(d.me));
    let placement_term = tokio::spawn(placement::serve_term(
        d.placement,
        tso.store.clone(),
        tso.keys.clone(),
        // No client reads the embedded store's keys through `MetaStorage`.
        None,
        d.stop.clone(),
    ));
    let task = tokio::spawn(async move {
        tso.run(tick, limit, d.stop).await;
        match placement_term.await {
            Ok(Err(e)) => tracing::error!("placement stopped: {e}"),
            Err(e) => tracing::error!("placement task failed: {e}"),
            Ok(Ok(())) => {}
        }
    });
    Ok(Control { task, admin: None })
}

pub(super) async fn start_etcd(
    store: EtcdStore,
    config: &crate::config::Config,
    d: Driven,
    tick: Duration,
) -> anyhow::Result<Control> {
    store
        .put(&d.keys.member_info(&d.me.name), &encode_member(&d.me))
        .await
        .context("registering this member")?;
    let (commands_tx, commands) = tokio::sync::mpsc::channel(8);
    let admin = AdminControl {
        commands: commands_tx,
        store: store.clone(),
        keys: d.keys.clone(),
    };
    let election = Election::new(
        store.client(),
        d.keys.leader(),
        d.me.clone(),
        config.election.lease_ttl_secs,
        config.election.safety_margin_ms,
    )
    .with_removed_flag(d.membership.removed_flag());
    tokio::spawn(watch_registry(
        store.clone(),
        d.keys.clone(),
        d.membership.clone(),
        d.stop.clone(),
    ));
    let leadership = leadership::Leadership {
        election,
        store,
        keys: d.keys,
        cfg: config.tso,
        tick,
        allocator: d.allocator,
        metrics: d.metrics,
        leader: d.leader,
        commands,
        clock: d.clock,
        sit_out: Duration::from_secs(config.election.lease_ttl_secs.max(1) as u64),
        placement: d.placement,
    };
    let task = tokio::spawn(leadership.run(d.stop));
    Ok(Control {
        task,
        admin: Some(admin),
    })
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
        // Shutdown first: a stop as the poll's pause ends reads the registry no more.
        tokio::select! {
            biased;
            _ = shutdown.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

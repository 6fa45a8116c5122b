//! Resource groups on the leader: the `resource_group` registry, loaded with the term from the
//! embedded store or etcd alike and dropped when the term ends, and the durable write of a
//! change through the term's guarded persister (the leader writes; a follower holds nothing and
//! refuses), and PD's controller config written for TiDB when a term starts on etcd. A change
//! is planned on the registry, persisted, then applied, with one writer at a
//! time, so what a reader sees is durable. The buckets' running states (tokens and
//! consumption) are written by the term's persister each tick for the groups clients touched
//! (PD writes every group each minute) and resumed when a term loads, so a new leader does not
//! refill a drained bucket. The rules are `resource_group`'s; the calls are the
//! gRPC front end's (`server/grpc/resource_manager`).

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prost::Message;
use tokio::sync::{mpsc, oneshot};

use super::messages::PersistOp;
use crate::kvproto::resource_manager::ResourceGroup;
use crate::meta::{Keys, MetaError, MetaStore, WriteOp};
use crate::resource_group::{GroupState, Registry};

/// Keys read per request when a term loads the groups.
const LOAD_PAGE: usize = 1024;
/// How long a change waits for its durable write, as every placement write does.
const WAIT: Duration = Duration::from_secs(3);

/// Why a change was not made durable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error("persisting the resource group failed: {0}")]
    Failed(String),
    #[error("persisting the resource group timed out; retry")]
    TimedOut,
    #[error("this node is stopping or no longer leads")]
    Gone,
}

/// The registry of the current term (`None` outside one), its clock's origin, and the queue
/// to the term's persister.
pub struct ResourceGroups {
    registry: Mutex<Option<Registry>>,
    /// One change at a time, from its plan to its apply.
    writing: tokio::sync::Mutex<()>,
    origin: Instant,
    persist: mpsc::Sender<PersistOp>,
}

impl ResourceGroups {
    pub(super) fn new(persist: mpsc::Sender<PersistOp>) -> ResourceGroups {
        ResourceGroups {
            registry: Mutex::new(None),
            writing: tokio::sync::Mutex::new(()),
            origin: Instant::now(),
            persist,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Registry>> {
        // Every registry call leaves it valid, even one a panic interrupted afterwards.
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The buckets' clock: monotonic, from this node's start.
    pub fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// `f` on the term's registry, or `None` when this node holds no term.
    pub fn with<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> Option<R> {
        self.lock().as_mut().map(f)
    }

    /// Taken by a writer for the whole of a change: plan, persist, apply.
    pub async fn writer(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.writing.lock().await
    }

    pub(super) fn reset(
        &self,
        records: Vec<ResourceGroup>,
        states: Vec<(String, GroupState, Duration)>,
    ) {
        let registry = Registry::resumed(records, states, self.now());
        *self.lock() = Some(registry);
    }

    pub(super) fn clear(&self) {
        *self.lock() = None;
    }

    /// Makes `ops` durable through the term's persister (leader-guarded on etcd), within the
    /// wait every placement write has.
    pub async fn persist(&self, ops: Vec<WriteOp>) -> Result<(), WriteError> {
        let (reply, rx) = oneshot::channel();
        let written = tokio::time::timeout(WAIT, async {
            self.persist
                .send(PersistOp::Sync { ops, reply })
                .await
                .ok()?;
            rx.await.ok()
        })
        .await;
        match written {
            Ok(Some(Ok(()))) => Ok(()),
            Ok(Some(Err(MetaError::NotLeader))) | Ok(None) => Err(WriteError::Gone),
            Ok(Some(Err(e))) => Err(WriteError::Failed(e.to_string())),
            Err(_) => Err(WriteError::TimedOut),
        }
    }
}

/// PD's resource manager as it starts a term (`initControllerConfig`): the controller config
/// at `key` (where TiDB reads it through `MetaStorage`) is kept when PD would load it, and
/// otherwise written with PD's defaults, so a controller finds PD's config and not none.
pub(super) async fn init_controller_config<M: MetaStore>(
    store: &M,
    key: &[u8],
) -> Result<(), MetaError> {
    let stored = store.get(key).await?;
    if stored
        .as_deref()
        .is_some_and(crate::resource_group::is_loadable)
    {
        return Ok(());
    }
    if stored.is_some() {
        tracing::warn!("the resource controller config does not decode; writing PD's default");
    }
    store
        .put(
            key,
            crate::resource_group::DEFAULT_CONTROLLER_CONFIG.as_bytes(),
        )
        .await
}

/// The stored records; one that does not decode, or whose name is not its key's, is skipped
/// with a warning rather than stopping the term.
pub(super) async fn load<M: MetaStore>(
    store: &M,
    keys: &Keys,
) -> Result<Vec<ResourceGroup>, MetaError> {
    let mut records = Vec::new();
    for (key, value) in store
        .scan(&keys.resource_groups_prefix(), LOAD_PAGE)
        .await?
    {
        match ResourceGroup::decode(value.as_slice()) {
            Ok(group) if keys.resource_group(&group.name) == key => records.push(group),
            Ok(group) => tracing::warn!(
                key = %String::from_utf8_lossy(&key),
                name = %group.name,
                "skipping a resource group stored under another name's key"
            ),
            Err(e) => tracing::warn!(
                key = %String::from_utf8_lossy(&key),
                "skipping a resource group that does not decode: {e}"
            ),
        }
    }
    Ok(records)
}

/// The wall clock in Unix nanoseconds (persisted states carry PD's wall-clock `last_update`).
fn unix_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// The persisted running states, each with how long ago it was current (0 for one from the
/// future: a clock that went back accrues nothing). One that does not decode is skipped with a
/// warning, and its group starts afresh as PD would.
pub(super) async fn load_states<M: MetaStore>(
    store: &M,
    keys: &Keys,
) -> Result<Vec<(String, GroupState, Duration)>, MetaError> {
    let prefix = keys.resource_group_states_prefix();
    let now = unix_ns();
    let mut states = Vec::new();
    for (key, value) in store.scan(&prefix, LOAD_PAGE).await? {
        let name = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
        match GroupState::decode(&value) {
            Ok(Some(state)) => {
                let idle_ns = (now - state.last_update_unix_ns).clamp(0, u64::MAX as i128);
                states.push((name, state, Duration::from_nanos(idle_ns as u64)));
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(group = %name, "skipping a resource group state: {e}"),
        }
    }
    Ok(states)
}

/// Writes the running states of the groups clients touched since the last write; when the
/// write fails they are written at the next.
pub(super) async fn persist_states<M: MetaStore>(
    groups: &ResourceGroups,
    store: &M,
    keys: &Keys,
) -> Result<(), MetaError> {
    let now = groups.now();
    let Some(states) = groups.with(|r| r.take_states(now, unix_ns())) else {
        return Ok(());
    };
    if states.is_empty() {
        return Ok(());
    }
    let ops = states
        .iter()
        .map(|(name, state)| (keys.resource_group_state(name), Some(state.encode())))
        .collect();
    let written = store.batch(ops).await;
    if written.is_err() {
        groups.with(|r| r.retouch(states.iter().map(|(name, _)| name.as_str())));
    }
    written
}

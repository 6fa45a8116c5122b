//! Global config on the leader: StoreGlobalConfig (one transaction, durable with its revision
//! before it is applied and answered), LoadGlobalConfig, and the watch: the changes from a
//! revision on, waiting a little for one when none is there, so a front end follows them by
//! asking again (gRPC's WatchGlobalConfig stream does). The rules are `global_config`'s; the
//! items and the revision counter are loaded with the term, from the embedded store or etcd
//! alike. PD serves these from any member, reading etcd; here the leader holds the revision
//! counter and the changes, so a follower refuses as for other calls.

use std::time::Duration;

use super::answer::{invalid, persist_now, unavailable};
use super::state::PlacementState;
use crate::global_config::{GlobalConfig, TxnError, DEFAULT_PATH};
use crate::placement::PAGE_BUDGET;
use crate::proto::{ConfigChange, ConfigEvent, ErrorReply, Refusal, Reply, Response};

/// The longest a watch request waits for a change.
const MAX_WATCH_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub enum GlobalConfigOp {
    Store {
        config_path: String,
        changes: Vec<ConfigChange>,
    },
    Load {
        config_path: String,
        names: Vec<String>,
    },
    Watch {
        config_path: String,
        revision: i64,
        wait: Duration,
    },
}

/// PD's path when none is given.
fn or_default(config_path: String) -> String {
    if config_path.is_empty() {
        DEFAULT_PATH.to_string()
    } else {
        config_path
    }
}

pub async fn serve(state: &PlacementState, op: GlobalConfigOp) -> Response {
    match op {
        GlobalConfigOp::Store {
            config_path,
            changes,
        } => store(state, &or_default(config_path), &changes).await,
        GlobalConfigOp::Load { config_path, names } => {
            let held = state.global_config.lock().await;
            let Some(config) = held.as_ref() else {
                return not_held();
            };
            let (items, revision) = config.load(&or_default(config_path), &names);
            Response::Ok(Reply::GlobalConfig { items, revision })
        }
        GlobalConfigOp::Watch {
            config_path,
            revision,
            wait,
        } => watch(state, &or_default(config_path), revision, wait).await,
    }
}

fn not_held() -> Response {
    unavailable("global config is not loaded on this node (not the leader, or starting)")
}

async fn store(state: &PlacementState, config_path: &str, changes: &[ConfigChange]) -> Response {
    // Held across the durable write: transactions are persisted in revision order.
    let mut held = state.global_config.lock().await;
    let Some(config) = held.as_mut() else {
        return not_held();
    };
    let txn = match config.plan(config_path, changes, state.limits.max_global_config_bytes) {
        Ok(Some(txn)) => txn,
        Ok(None) => return Response::Ok(Reply::Done),
        Err(e @ TxnError::TooLarge { .. }) => {
            return Response::Err(ErrorReply::LimitExceeded(e.to_string()))
        }
        Err(e) => return invalid(e.to_string()),
    };
    let keys = &state.keys;
    let mut ops = vec![(
        keys.global_config_revision(),
        Some(txn.revision.to_string().into_bytes()),
    )];
    ops.extend(
        txn.writes
            .iter()
            .map(|(key, value)| (keys.global_config_item(key), value.clone())),
    );
    match rkyv::to_bytes::<rkyv::rancor::Error>(&txn.events().to_vec()) {
        Ok(events) => ops.push((keys.global_config_last_txn(), Some(events.to_vec()))),
        Err(e) => return Response::Err(ErrorReply::Internal(format!("encoding changes: {e}"))),
    }
    if let Err(r) = persist_now(state, ops).await {
        return r;
    }
    config.commit(txn);
    state.global_config_changed.notify_waiters();
    Response::Ok(Reply::Done)
}

async fn watch(state: &PlacementState, prefix: &str, revision: i64, wait: Duration) -> Response {
    let deadline = tokio::time::Instant::now() + wait.min(MAX_WATCH_WAIT);
    let mut from = revision;
    loop {
        // Registered before the look, so a change between the look and the wait wakes it.
        let changed = state.global_config_changed.notified();
        {
            let held = state.global_config.lock().await;
            let Some(config) = held.as_ref() else {
                return not_held();
            };
            if from <= 0 {
                from = config.revision() + 1;
            }
            match config.changes(prefix, from, PAGE_BUDGET / 2) {
                Err(c) => {
                    return Response::Err(ErrorReply::Refused(Refusal::Compacted {
                        required: c.required,
                        compact_revision: c.compact_revision,
                    }))
                }
                Ok(changes) if !changes.is_empty() => {
                    let next = changes.last().map_or(from, |c| c.revision + 1);
                    return Response::Ok(Reply::GlobalConfigChanges { changes, next });
                }
                Ok(_) => {}
            }
        }
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            return Response::Ok(Reply::GlobalConfigChanges {
                changes: Vec::new(),
                next: from,
            });
        }
    }
}

impl PlacementState {
    /// A term's items (by full key) and revision; watchers waiting wake and see them.
    pub(super) async fn reset_global_config(
        &self,
        items: Vec<(String, Vec<u8>)>,
        revision: i64,
        last: Vec<ConfigEvent>,
    ) {
        let budget = 4 * self.limits.max_global_config_bytes;
        let config = GlobalConfig::new(items, revision, budget).hold_last(last);
        *self.global_config.lock().await = Some(config);
        self.global_config_changed.notify_waiters();
    }

    /// A term's end: nothing is held, and waiting watchers end.
    pub(super) async fn clear_global_config(&self) {
        *self.global_config.lock().await = None;
        self.global_config_changed.notify_waiters();
    }
}

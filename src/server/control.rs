//! The TSO control loop, the shell around the pure window decisions: it reads the clock, starts
//! the allocator above the last persisted limit (T3), ticks the physical time forward and
//! persists each renewal before the allocator may use it (T2). One write per renewal, none per
//! request.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::admin::Metrics;
use crate::election::{mono_ms, Term};
use crate::meta::{Keys, MetaError, MetaStore};
use crate::tso::{Allocator, WindowConfig};

/// Wall-clock milliseconds since the Unix epoch: the only clock read in the TSO path.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub async fn load_limit<M: MetaStore>(store: &M, keys: &Keys) -> Result<Option<u64>, MetaError> {
    match store.get(&keys.tso_limit()).await? {
        None => Ok(None),
        Some(bytes) => std::str::from_utf8(&bytes)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map(Some)
            .ok_or_else(|| MetaError::Corrupt(format!("tso limit {bytes:?} is not a number"))),
    }
}

async fn save_limit<M: MetaStore>(store: &M, keys: &Keys, limit_ms: u64) -> Result<(), MetaError> {
    store
        .put(&keys.tso_limit(), limit_ms.to_string().as_bytes())
        .await
}

/// The control loop's inputs: where the window lives and what it drives.
pub struct TsoControl<M> {
    pub store: M,
    pub keys: Keys,
    pub cfg: WindowConfig,
    pub allocator: Arc<Allocator>,
    pub metrics: Arc<Metrics>,
    /// The leadership term this node serves under (etcd); `None` for the single embedded node.
    pub term: Option<Arc<Term>>,
}

/// Why the control loop returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Shutdown,
    /// The lease could no longer be proven, or a guarded write found another leader.
    LeadershipLost,
}

impl<M: MetaStore + Clone> TsoControl<M> {
    /// Persists a window above everything handed out before and starts the allocator on it.
    /// Returns the persisted limit.
    pub async fn start(&self) -> Result<u64, MetaError> {
        let last = load_limit(&self.store, &self.keys).await?;
        let now = now_ms();
        let plan = self.cfg.plan_start(now, last);
        save_limit(&self.store, &self.keys, plan.limit_ms).await?;
        self.allocator.begin(plan.start_ms, plan.limit_ms, now);
        tracing::info!(start_ms = plan.start_ms, limit_ms = plan.limit_ms, last_limit_ms = ?last, "tso serving");
        Ok(plan.limit_ms)
    }

    /// Ticks and renews until `shutdown`; an in-flight renewal is finished before it returns.
    pub async fn run(
        self,
        tick: Duration,
        mut limit_ms: u64,
        mut shutdown: watch::Receiver<bool>,
    ) -> Ended {
        let TsoControl {
            store,
            keys,
            cfg,
            allocator,
            metrics,
            term,
        } = self;
        let mut interval = tokio::time::interval(tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut renewal: Option<(u64, JoinHandle<Result<(), MetaError>>)> = None;
        let ended = loop {
            tokio::select! {
                _ = interval.tick() => {}
                _ = shutdown.wait_for(|stop| *stop) => break Ended::Shutdown,
            }
            // T4: stop serving the moment the lease can no longer be proven.
            if term.as_ref().is_some_and(|t| !t.holds(mono_ms())) {
                allocator.suspend();
                tracing::warn!("lease no longer provable: stopped serving timestamps");
                break Ended::LeadershipLost;
            }
            let now = now_ms();
            allocator.tick(now);
            if let Some((target, handle)) = renewal.take_if(|(_, h)| h.is_finished()) {
                match handle.await {
                    Ok(Ok(())) => {
                        limit_ms = target;
                        allocator.raise_limit(target);
                        metrics.window_renewals.fetch_add(1, Relaxed);
                    }
                    Ok(Err(MetaError::NotLeader)) => {
                        allocator.suspend();
                        tracing::warn!("another node leads: stopped serving timestamps");
                        break Ended::LeadershipLost;
                    }
                    Ok(Err(e)) => {
                        metrics.window_renewal_failures.fetch_add(1, Relaxed);
                        tracing::warn!("persisting the tso window failed: {e}");
                    }
                    Err(e) => tracing::error!("tso renewal task failed: {e}"),
                }
            }
            if renewal.is_none() {
                if let Some(target) =
                    cfg.plan_renewal(now, allocator.current().physical_ms(), limit_ms)
                {
                    let (store, keys) = (store.clone(), keys.clone());
                    renewal = Some((
                        target,
                        tokio::spawn(async move { save_limit(&store, &keys, target).await }),
                    ));
                }
            }
        };
        if let Some((target, handle)) = renewal {
            if let Ok(Ok(())) = handle.await {
                tracing::debug!(limit_ms = target, "last renewal persisted before exit");
            }
        }
        ended
    }
}

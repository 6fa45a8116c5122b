//! The TSO control loop, the shell around the pure window decisions: it reads the clock, starts
//! the allocator above the last persisted limit (T3), ticks the physical time forward and
//! persists each renewal before the allocator may use it (T2). One write per renewal, none per
//! request.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::admin::Metrics;
use crate::clock::WallClock;
use crate::election::{mono_ms, Term};
use crate::failpoint::{self, points};
use crate::meta::{load_decimal, Keys, MetaError, MetaStore};
use crate::mutation::{self, Mutation};
use crate::tso::{Allocator, WindowConfig, WindowPlan};

pub async fn load_limit<M: MetaStore>(store: &M, keys: &Keys) -> Result<Option<u64>, MetaError> {
    load_decimal(store, &keys.tso_limit()).await
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
    pub clock: Arc<WallClock>,
}

/// Why the control loop returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Shutdown,
    /// The lease could no longer be proven, or a guarded write found another leader.
    LeadershipLost,
    /// The window ran out and renewing it kept failing or hanging (etcd writes do not go
    /// through from here): a leader that cannot serve hands the term to one that may.
    WindowStuck,
    /// The clock stayed more than `max_lead` behind the handed-out time (it jumped back):
    /// a leader steps down so a member with a sane clock serves instead of everyone waiting.
    ClockBehind,
}

/// How long the clock may stay behind the allocator before a leader gives up its term.
const CLOCK_BEHIND_GRACE_MS: u64 = 500;
/// How long a leader's window may stay run out, on the monotonic clock, before it gives up its
/// term. A renewal starts `renew_below_ms` before the end, so this is on top of that much
/// trying; and a wall clock that jumps past the end is followed by a renewal within it.
const WINDOW_STUCK_GRACE_MS: u64 = 1_000;
/// How long a term's end waits for its in-flight renewal. Abandoning it is safe: the write is
/// guarded, so once another member leads it cannot apply.
const RENEWAL_DRAIN: Duration = Duration::from_secs(1);

impl<M: MetaStore + Clone> TsoControl<M> {
    /// Persists a window above everything handed out before and starts the allocator on it.
    /// Returns the persisted limit.
    pub async fn start(&self) -> Result<WindowPlan, MetaError> {
        let now = self.clock.now_ms();
        // Checked before use: a corrupt limit must stop this term, not overflow or jump (T3).
        let last = match load_limit(&self.store, &self.keys).await? {
            Some(last) => Some(
                self.cfg
                    .check_last_limit(last, now)
                    .map_err(|why| MetaError::out_of_range(&self.keys.tso_limit(), last, why))?,
            ),
            None => None,
        };
        // The mutation trusts the clock alone, as if nothing had been handed out before.
        let after = if mutation::on(Mutation::TrustClockAfterBackwardJump) {
            None
        } else {
            last
        };
        let plan = self.cfg.plan_start(now, after);
        save_limit(&self.store, &self.keys, plan.limit_ms).await?;
        self.allocator.begin(plan.start_ms, plan.limit_ms, now);
        tracing::info!(start_ms = plan.start_ms, limit_ms = plan.limit_ms, last_limit_ms = ?last, "tso serving");
        Ok(plan)
    }

    /// Ticks and renews until `shutdown`; an in-flight renewal is finished before it returns.
    pub async fn run(
        self,
        tick: Duration,
        plan: WindowPlan,
        mut shutdown: watch::Receiver<bool>,
    ) -> Ended {
        let TsoControl {
            store,
            keys,
            cfg,
            allocator,
            metrics,
            term,
            clock,
        } = self;
        let mut behind_since: Option<u64> = None;
        let mut exhausted_since: Option<u64> = None;
        let mut limit_ms = plan.limit_ms;
        let mut interval = tokio::time::interval(tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut renewal: Option<(u64, JoinHandle<Result<(), MetaError>>)> = None;
        let ended = loop {
            // Shutdown first: the 1 ms tick is ready at almost every poll, and an unbiased
            // choice would run one more tick after a stop or not by chance, which a seeded
            // simulation cannot replay.
            tokio::select! {
                biased;
                _ = shutdown.wait_for(|stop| *stop) => break Ended::Shutdown,
                _ = interval.tick() => {}
            }
            // T4: stop serving the moment the lease can no longer be proven.
            if term.as_ref().is_some_and(|t| !t.holds(mono_ms()))
                && !mutation::on(Mutation::ServeBeforeLeaseProof)
            {
                allocator.suspend();
                tracing::warn!("lease no longer provable: stopped serving timestamps");
                break Ended::LeadershipLost;
            }
            let now = clock.now_ms();
            allocator.tick(now);
            if term.is_some() {
                // T5 makes requests wait while the clock is behind; a leader with other members
                // to take over hands the term on instead of stalling the cluster.
                // Measured as the allocator bounds the lead: from the later of the clock and the
                // term's start, which may lie ahead of the clock (T3) without anything wrong.
                if allocator.current().physical_ms() > now.max(plan.start_ms) + cfg.max_lead_ms {
                    let since = *behind_since.get_or_insert(mono_ms());
                    if mono_ms().saturating_sub(since) > CLOCK_BEHIND_GRACE_MS {
                        allocator.suspend();
                        tracing::warn!("wall clock is behind the handed-out time: stepping down");
                        break Ended::ClockBehind;
                    }
                } else {
                    behind_since = None;
                }
                if now >= limit_ms {
                    let since = *exhausted_since.get_or_insert(mono_ms());
                    let stuck_ms = mono_ms().saturating_sub(since);
                    if stuck_ms > WINDOW_STUCK_GRACE_MS {
                        allocator.suspend();
                        tracing::error!(
                            limit_ms,
                            renewal_in_flight = renewal.is_some(),
                            "the tso window ran out {stuck_ms} ms ago and renewing it has not \
                             succeeded (etcd writes failing or hanging): stepping down"
                        );
                        break Ended::WindowStuck;
                    }
                } else {
                    exhausted_since = None;
                }
            }
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
                    let persist = !mutation::on(Mutation::SkipWindowPersist);
                    renewal = Some((
                        target,
                        tokio::spawn(async move {
                            failpoint::step(points::WINDOW_RENEW).await?;
                            if !persist {
                                return Ok(());
                            }
                            save_limit(&store, &keys, target).await
                        }),
                    ));
                }
            }
        };
        if let Some((target, mut handle)) = renewal {
            match tokio::time::timeout(RENEWAL_DRAIN, &mut handle).await {
                Ok(Ok(Ok(()))) => {
                    tracing::debug!(limit_ms = target, "last renewal persisted before exit")
                }
                Ok(_) => {}
                Err(_) => {
                    handle.abort();
                    tracing::warn!(limit_ms = target, "abandoned a renewal that did not finish");
                }
            }
        }
        ended
    }
}

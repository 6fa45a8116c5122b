//! The leadership loop of an etcd-backed node: campaign; on winning, start the TSO window above
//! the last persisted limit with guarded writes (T3, T4) and serve until the term ends; then
//! stop serving *before* giving the key up, so two nodes never serve at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::clock::WallClock;
use super::control::{Ended, TsoControl};
use crate::admin::Metrics;
use crate::election::{Command, Election};
use crate::meta::{EtcdStore, Keys, MetaError};
use crate::proto::MemberInfo;
use crate::tso::{Allocator, WindowConfig};

use super::placement::{serve_term, PlacementState};

pub struct Leadership {
    pub election: Election,
    pub store: EtcdStore,
    pub keys: Keys,
    pub cfg: WindowConfig,
    pub tick: Duration,
    pub allocator: Arc<Allocator>,
    pub metrics: Arc<Metrics>,
    pub leader: watch::Sender<Option<MemberInfo>>,
    pub commands: mpsc::Receiver<Command>,
    pub clock: Arc<WallClock>,
    /// How long a member that resigned stays out of the next campaign.
    pub sit_out: Duration,
    pub placement: Arc<PlacementState>,
}

enum Step {
    Ended(Ended),
    Command(Command),
}

impl Leadership {
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        loop {
            let term = match self.election.campaign(&self.leader, &mut shutdown).await {
                Ok(Some(term)) => Arc::new(term),
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!("campaign failed: {e}; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(500)) => continue,
                        _ = shutdown.wait_for(|s| *s) => return,
                    }
                }
            };
            tracing::info!("elected leader");
            // Commands sent to an earlier term are stale now.
            while let Ok(stale) = self.commands.try_recv() {
                refuse(stale, "leadership changed while the request waited");
            }
            let tso = TsoControl {
                store: self.store.guarded(term.guard.clone()),
                keys: self.keys.clone(),
                cfg: self.cfg,
                allocator: self.allocator.clone(),
                metrics: self.metrics.clone(),
                term: Some(term.clone()),
                clock: self.clock.clone(),
            };
            let (term_stop, term_stopped) = watch::channel(false);
            let mut placement = tokio::spawn(serve_term(
                self.placement.clone(),
                tso.store.clone(),
                self.keys.clone(),
                term_stopped,
            ));
            // A value in etcd that cannot be right (out of range, corrupt) fails every term the
            // same way: refuse loudly, and pause before campaigning again rather than spin.
            let mut bad_value = false;
            let mut refuse_on = |e: &MetaError| {
                bad_value = matches!(e, MetaError::OutOfRange { .. } | MetaError::Corrupt(_));
                if bad_value {
                    tracing::error!("refusing to serve as leader: {e}");
                }
            };
            let step = match tso.start().await {
                Ok(limit) => tokio::select! {
                    ended = tso.run(self.tick, limit, shutdown.clone()) => Step::Ended(ended),
                    Some(command) = self.commands.recv() => Step::Command(command),
                    ended = &mut placement => {
                        if let Ok(Err(e)) = &ended {
                            refuse_on(e);
                        }
                        tracing::warn!("placement ended its term: {ended:?}");
                        Step::Ended(Ended::LeadershipLost)
                    }
                },
                Err(e) => {
                    refuse_on(&e);
                    tracing::warn!("starting tso as leader failed: {e}");
                    drop(tso);
                    Step::Ended(Ended::LeadershipLost)
                }
            };
            // Stop serving before the key goes: two nodes must never serve at once.
            self.allocator.suspend();
            self.placement.set_ready(false);
            let _ = term_stop.send(true);
            if !placement.is_finished() {
                let _ = placement.await;
            }
            self.leader.send_replace(None);
            let Ok(term) = Arc::try_unwrap(term) else {
                tracing::error!("leadership term still shared after the control loop ended");
                continue;
            };
            match step {
                Step::Ended(Ended::ClockBehind) => {
                    self.election.resign(term).await;
                    tokio::select! {
                        _ = tokio::time::sleep(self.sit_out) => {}
                        _ = shutdown.wait_for(|s| *s) => return,
                    }
                }
                Step::Ended(ended) => {
                    self.election.resign(term).await;
                    tracing::info!(?ended, "leadership ended");
                    if ended == Ended::Shutdown {
                        return;
                    }
                    if bad_value {
                        tokio::select! {
                            _ = tokio::time::sleep(self.sit_out) => {}
                            _ = shutdown.wait_for(|s| *s) => return,
                        }
                    }
                }
                Step::Command(Command::Resign(reply)) => {
                    self.election.resign(term).await;
                    tracing::info!("resigned on request");
                    let _ = reply.send(Ok(()));
                    tokio::select! {
                        _ = tokio::time::sleep(self.sit_out) => {}
                        _ = shutdown.wait_for(|s| *s) => return,
                    }
                }
                Step::Command(Command::Transfer(target, reply)) => {
                    tracing::info!(%target, "transferring leadership");
                    let result = match self.election.transfer(term, &target).await {
                        Ok(()) => self.await_leader(&target).await,
                        Err(e) => Err(e.to_string()),
                    };
                    let _ = reply.send(result);
                }
            }
        }
    }
}

impl Leadership {
    /// Waits (bounded) until `target` holds the leader key, and publishes it.
    async fn await_leader(&self, target: &str) -> Result<MemberInfo, String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while tokio::time::Instant::now() < deadline {
            if let Ok(Some(m)) = self.election.leader_now().await {
                if m.name == target {
                    self.leader.send_replace(Some(m.clone()));
                    return Ok(m);
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Err(format!("{target} did not take over within 5 s"))
    }
}

fn refuse(command: Command, why: &str) {
    match command {
        Command::Resign(reply) => drop(reply.send(Err(why.to_string()))),
        Command::Transfer(_, reply) => drop(reply.send(Err(why.to_string()))),
    }
}

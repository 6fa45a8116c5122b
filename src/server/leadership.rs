//! The leadership loop of an etcd-backed node: campaign; on winning, start the TSO window above
//! the last persisted limit with guarded writes (T3, T4) and serve until the term ends; then
//! stop serving *before* giving the key up, so two nodes never serve at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::control::{Ended, TsoControl};
use crate::admin::Metrics;
use crate::clock::WallClock;
use crate::election::{Command, Election};
use crate::meta::{EtcdStore, Keys, MetaError};
use crate::mutation::{self, Mutation};
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

/// How long a new term may take to persist its first window before it is handed on.
const START_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a term's end waits for placement to finish its last write.
const PLACEMENT_DRAIN: Duration = Duration::from_secs(2);

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
                    // A stop that lands as the pause ends wins over one more campaign (and
                    // the order is not drawn from tokio's unseeded generator).
                    tokio::select! {
                        biased;
                        _ = shutdown.wait_for(|s| *s) => return,
                        _ = tokio::time::sleep(Duration::from_millis(500)) => continue,
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
                // PD's resource manager writes its controller config where TiDB reads it.
                Some(super::grpc::client_visible_key(
                    crate::resource_group::CONTROLLER_CONFIG_KEY,
                )),
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
            // A first window that cannot be persisted (etcd writes hanging) must not hold the
            // term forever while the lease is kept alive: the term ends and is handed on.
            let started = tokio::time::timeout(START_TIMEOUT, tso.start())
                .await
                .unwrap_or_else(|_| {
                    Err(MetaError::Io(format!(
                        "persisting the first tso window took over {START_TIMEOUT:?}"
                    )))
                });
            let step = match started {
                // Polled in order, not tokio's random order: that order is drawn from an
                // unseeded generator, so a command arriving on a tick would end the term
                // before or after that tick's work by chance, and a simulation would not replay.
                Ok(limit) => tokio::select! {
                    biased;
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
            let handing_over = matches!(step, Step::Command(Command::Transfer(..)));
            if !(handing_over && mutation::on(Mutation::TransferBeforeStopping)) {
                self.allocator.suspend();
            }
            self.placement.set_ready(false);
            let _ = term_stop.send(true);
            if !placement.is_finished()
                && tokio::time::timeout(PLACEMENT_DRAIN, &mut placement)
                    .await
                    .is_err()
            {
                // Stuck in a write that does not return (etcd hanging). Its writes are
                // guarded, so none can apply once another member leads; the next term
                // reloads placement from etcd.
                placement.abort();
                let _ = (&mut placement).await;
                crate::server::placement::abandon_term(&self.placement).await;
                tracing::warn!("abandoned placement's term: a write did not return");
            }
            self.leader.send_replace(None);
            let Ok(term) = Arc::try_unwrap(term) else {
                tracing::error!("leadership term still shared after the control loop ended");
                continue;
            };
            match step {
                Step::Ended(ended @ (Ended::ClockBehind | Ended::WindowStuck)) => {
                    tracing::info!(?ended, "leadership ended; sitting out {:?}", self.sit_out);
                    self.election.resign(term).await;
                    // Shutdown first, as for the campaign's pause.
                    tokio::select! {
                        biased;
                        _ = shutdown.wait_for(|s| *s) => return,
                        _ = tokio::time::sleep(self.sit_out) => {}
                    }
                }
                Step::Ended(ended) => {
                    self.election.resign(term).await;
                    tracing::info!(?ended, "leadership ended");
                    if ended == Ended::Shutdown {
                        return;
                    }
                    if bad_value {
                        // Shutdown first, as for the campaign's pause.
                        tokio::select! {
                            biased;
                            _ = shutdown.wait_for(|s| *s) => return,
                            _ = tokio::time::sleep(self.sit_out) => {}
                        }
                    }
                }
                Step::Command(Command::Resign(reply)) => {
                    self.election.resign(term).await;
                    tracing::info!("resigned on request");
                    let _ = reply.send(Ok(()));
                    // Shutdown first, as for the campaign's pause.
                    tokio::select! {
                        biased;
                        _ = shutdown.wait_for(|s| *s) => return,
                        _ = tokio::time::sleep(self.sit_out) => {}
                    }
                }
                Step::Command(Command::Transfer(target, reply)) => {
                    tracing::info!(%target, "transferring leadership");
                    let result = match self.election.transfer(term, &target).await {
                        Ok(()) => self.await_leader(&target).await,
                        Err(e) => Err(e.to_string()),
                    };
                    if mutation::on(Mutation::TransferBeforeStopping) {
                        // The mutation left the old leader serving until now.
                        self.allocator.suspend();
                    }
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

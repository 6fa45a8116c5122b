//! The gRPC shell over the core: [`EtcdModel`] serves `etcdserverpb`'s `KV`, `Lease` and
//! `Watch` with tonic, reads time from `tokio::time` (so a paused or simulated tokio clock
//! drives lease expiry), delivers queued watch responses to their streams, and applies the
//! fault knobs. It holds no etcd logic of its own: every answer comes from [`Etcd`].

mod faults;
mod kv;
mod lease;
mod watch;

pub use faults::{Fault, Rpc};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;
use tonic::{Response, Status};

use crate::machine::{Config, Etcd, EtcdError, StreamId};
use crate::pb::kv_server::KvServer;
use crate::pb::lease_server::LeaseServer;
use crate::pb::watch_server::WatchServer;
use crate::pb::{CompactionRequest, LeaseRevokeRequest, WatchResponse};

type WatchSender = mpsc::UnboundedSender<Result<WatchResponse, Status>>;

/// The core and the open watch streams it queues responses for, under one lock so responses
/// reach each stream in the order the core made them.
struct State {
    etcd: Etcd,
    streams: BTreeMap<StreamId, WatchSender>,
}

impl State {
    fn deliver(&mut self) {
        for (stream, response) in self.etcd.take_watch_responses() {
            let gone = match self.streams.get(&stream) {
                Some(sender) => sender.send(Ok(response)).is_err(),
                None => true,
            };
            if gone {
                self.streams.remove(&stream);
                self.etcd.close_watch_stream(stream);
            }
        }
    }
}

/// A change of etcd's leader, as asked by a simulation and carried out by the expiry task on
/// the model's own clock (whoever asks may run outside the model's runtime, with no clock).
#[derive(Debug, Default, Clone, Copy)]
enum LeaderChange {
    #[default]
    None,
    /// Asked: the leader steps down, and the next is elected `gap` later; leases are
    /// refreshed by `extend` (etcd's election timeout) on election.
    Asked { gap: Duration, extend: Duration },
    /// Stepped down; the next leader is elected at `at`.
    Electing { at: Instant, extend: Duration },
    /// Stepped down; the next leader is to be elected at once.
    ElectNow { extend: Duration },
}

struct Shared {
    state: Mutex<State>,
    faults: Mutex<faults::Faults>,
    /// Time zero of the core's milliseconds.
    epoch: Instant,
    /// Wakes the expiry task when leases may have changed.
    wake: Arc<Notify>,
    leader_change: Mutex<LeaderChange>,
    /// Wakes the keep-alives held while there is no leader.
    elected: Notify,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Lets the expiry task see that the model is gone.
        self.wake.notify_one();
    }
}

/// A poisoned lock only means a panic elsewhere (a failing test); the state is still whole,
/// since the core never panics half-way through a request.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An etcd served over gRPC. Cheap to clone: clones share one model.
#[derive(Clone)]
pub struct EtcdModel {
    shared: Arc<Shared>,
}

impl EtcdModel {
    /// A model with etcd's defaults. Must be called inside a tokio runtime: it starts the
    /// task that expires leases on time.
    pub fn new() -> EtcdModel {
        EtcdModel::with_config(Config::default())
    }

    /// A model with `config`; see [`EtcdModel::new`].
    pub fn with_config(config: Config) -> EtcdModel {
        let wake = Arc::new(Notify::new());
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                etcd: Etcd::new(config),
                streams: BTreeMap::new(),
            }),
            faults: Mutex::new(Default::default()),
            epoch: Instant::now(),
            wake: wake.clone(),
            leader_change: Mutex::new(LeaderChange::None),
            elected: Notify::new(),
        });
        tokio::spawn(expire_leases(Arc::downgrade(&shared), wake));
        EtcdModel { shared }
    }

    /// The core's time: milliseconds of the tokio clock since the model was made.
    pub fn now_ms(&self) -> u64 {
        self.shared.epoch.elapsed().as_millis() as u64
    }

    /// Runs `f` on the core at the current time (leases that expired by then are gone
    /// first), then delivers the watch responses it queued.
    pub fn with_etcd<R>(&self, f: impl FnOnce(&mut Etcd, u64) -> R) -> R {
        let result = self.apply(f);
        self.shared.wake.notify_one();
        result
    }

    fn apply<R>(&self, f: impl FnOnce(&mut Etcd, u64) -> R) -> R {
        let now = self.now_ms();
        let mut state = lock(&self.shared.state);
        state.etcd.advance(now);
        let result = f(&mut state.etcd, now);
        state.deliver();
        result
    }

    /// The key's value as last applied, for a checker: unlike a request it moves no time
    /// and expires no lease, so looking changes nothing in the run.
    pub fn value(&self, key: &[u8]) -> Option<Vec<u8>> {
        lock(&self.shared.state).etcd.value(key).map(<[u8]>::to_vec)
    }

    /// The store's revision.
    pub fn revision(&self) -> i64 {
        self.with_etcd(|etcd, _| etcd.revision())
    }

    /// Delays every request by `delay` (on top of any per-kind delay).
    pub fn set_delay(&self, delay: Duration) {
        lock(&self.shared.faults).set_delay(delay);
    }

    /// Delays every request of kind `rpc` by `delay`.
    pub fn set_rpc_delay(&self, rpc: Rpc, delay: Duration) {
        lock(&self.shared.faults).set_rpc_delay(rpc, delay);
    }

    /// Queues `fault` for the next request of kind `rpc` (faults for one kind apply in the
    /// order queued, one per request).
    pub fn inject(&self, rpc: Rpc, fault: Fault) {
        lock(&self.shared.faults).inject(rpc, fault);
    }

    /// From now, loses `per_mille` of every thousand requests (keep-alive messages and watch
    /// openings too) at random, picked by a stream seeded with `seed`: half are refused with
    /// etcd's "request timed out" before they apply, half apply and are answered with it
    /// (the answer lost). A queued fault comes first. 0 loses none.
    pub fn set_loss(&self, per_mille: u32, seed: u64) {
        lock(&self.shared.faults).set_loss(per_mille, seed);
    }

    /// Removes every delay and queued fault.
    pub fn clear_faults(&self) {
        lock(&self.shared.faults).clear();
    }

    /// Revokes lease `id` now, as an expiry would; returns the revision after.
    pub fn revoke_lease(&self, id: i64) -> Result<i64, EtcdError> {
        self.with_etcd(|etcd, now| {
            etcd.lease_revoke(&LeaseRevokeRequest { id }, now)
                .map(|r| r.header.map(|h| h.revision).unwrap_or_default())
        })
    }

    /// etcd's leader steps down now and the next is elected `gap` later (an election), at
    /// which every lease is refreshed to `extend` plus its TTL, as etcd's new leader does with
    /// its election timeout. Meanwhile no lease expires, unary requests are refused with
    /// etcd's "leader changed" (nothing applied), and keep-alives wait for the new leader, as
    /// etcd forwards them to a leader once there is one. Needs no clock of the caller's: the
    /// model's own task carries it out.
    pub fn change_leader(&self, gap: Duration, extend: Duration) {
        *lock(&self.shared.leader_change) = LeaderChange::Asked { gap, extend };
        self.shared.wake.notify_one();
    }

    /// Ends an election under way at once (a leader is elected now); nothing if etcd leads.
    pub fn elect_now(&self) {
        let mut change = lock(&self.shared.leader_change);
        *change = match *change {
            LeaderChange::None => LeaderChange::None,
            LeaderChange::Asked { extend, .. } | LeaderChange::Electing { extend, .. } => {
                LeaderChange::ElectNow { extend }
            }
            now @ LeaderChange::ElectNow { .. } => now,
        };
        drop(change);
        self.shared.wake.notify_one();
    }

    /// Whether etcd has no leader now.
    pub fn is_leaderless(&self) -> bool {
        lock(&self.shared.state).etcd.is_leaderless()
    }

    /// Returns once etcd has a leader.
    async fn leader(&self) {
        loop {
            let elected = self.shared.elected.notified();
            tokio::pin!(elected);
            elected.as_mut().enable();
            if !self.is_leaderless() {
                return;
            }
            elected.await;
        }
    }

    /// Compacts the history to `revision`.
    pub fn compact(&self, revision: i64) -> Result<(), EtcdError> {
        self.with_etcd(|etcd, now| {
            etcd.compact(
                &CompactionRequest {
                    revision,
                    physical: false,
                },
                now,
            )
            .map(|_| ())
        })
    }

    /// Ends every open watch stream with `status`, as an etcd that lost its leader or
    /// restarted would.
    pub fn break_watch_streams(&self, status: Status) {
        let mut state = lock(&self.shared.state);
        let streams = std::mem::take(&mut state.streams);
        for (stream, sender) in streams {
            let _ = sender.send(Err(status.clone()));
            state.etcd.close_watch_stream(stream);
        }
    }

    /// The three services on one tonic router, for `serve_with_incoming` on any listener
    /// (a simulated one too).
    pub fn router(&self) -> tonic::transport::server::Router {
        tonic::transport::Server::builder()
            .add_service(KvServer::new(self.clone()))
            .add_service(LeaseServer::new(self.clone()))
            .add_service(WatchServer::new(self.clone()))
    }

    /// Serves the model on `listener` until the listener fails.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
    ) -> Result<(), tonic::transport::Error> {
        self.router()
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
    }

    /// The delay and fault for the next request of kind `rpc`.
    fn next_fault(&self, rpc: Rpc) -> (Duration, Option<Fault>) {
        lock(&self.shared.faults).next(rpc)
    }

    /// One unary request: its delay, its fault if one is queued, and `apply` on the core.
    async fn unary<T>(
        &self,
        rpc: Rpc,
        apply: impl FnOnce(&mut Etcd, u64) -> Result<T, EtcdError> + Send,
    ) -> Result<Response<T>, Status> {
        let (delay, fault) = self.next_fault(rpc);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if let Some(Fault::FailBeforeApply { code, message }) = fault {
            return Err(Status::new(code, message));
        }
        if self.is_leaderless() {
            // A proposal or a linearizable read finds no leader to serve it.
            return Err(Status::unavailable("etcdserver: leader changed"));
        }
        let result = self.with_etcd(apply);
        match fault {
            Some(Fault::DropReply) => std::future::pending().await,
            Some(Fault::FailAfterApply { code, message }) => Err(Status::new(code, message)),
            _ => result.map(Response::new).map_err(EtcdError::status),
        }
    }
}

impl EtcdModel {
    /// Steps down or elects as asked and as due; returns when an election is due, if one is
    /// under way.
    fn carry_out_leader_change(&self) -> Option<Instant> {
        let mut change = lock(&self.shared.leader_change);
        match *change {
            LeaderChange::None => None,
            LeaderChange::Asked { gap, extend } => {
                // Through `apply`: what expired until now is revoked and its watchers told.
                self.apply(|etcd, now| etcd.lose_leader(now));
                let at = Instant::now() + gap;
                *change = LeaderChange::Electing { at, extend };
                Some(at)
            }
            LeaderChange::Electing { at, .. } if Instant::now() < at => Some(at),
            LeaderChange::Electing { extend, .. } | LeaderChange::ElectNow { extend } => {
                *change = LeaderChange::None;
                drop(change);
                let extend = extend.as_millis() as u64;
                self.apply(|etcd, now| etcd.elect_leader(now, extend));
                self.shared.elected.notify_waiters();
                None
            }
        }
    }
}

impl Default for EtcdModel {
    fn default() -> EtcdModel {
        EtcdModel::new()
    }
}

/// Revokes each lease when its time comes, so expiry deletes keys (and wakes watchers) with
/// no request to prompt it, and carries out leader changes. Ends when the model is dropped.
async fn expire_leases(shared: Weak<Shared>, wake: Arc<Notify>) {
    loop {
        let deadline = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let model = EtcdModel { shared };
            let electing = model.carry_out_leader_change();
            let next = lock(&model.shared.state).etcd.next_expiry();
            let next = next.map(|ms| model.shared.epoch + Duration::from_millis(ms));
            match (next, electing) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        };
        match deadline {
            Some(at) => {
                // Either way the same apply follows; the wake first takes its permit, so a
                // deadline and a wake together cost one apply, not two.
                tokio::select! {
                    biased;
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep_until(at) => {}
                }
            }
            None => wake.notified().await,
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        // Not `with_etcd`: that would wake this task again at once.
        EtcdModel { shared }.apply(|_, _| ());
    }
}

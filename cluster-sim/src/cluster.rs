//! What the simulation's hosts and its driver share on their one thread: each member's
//! running control side (while its process is up), each member's clock offset (kept across
//! restarts, as a wrong system clock is), the etcd model's fault knobs, the checker and the
//! trace. Owns this shared state
//! and the questions asked of it; it must not run anything itself.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use etcd_model::EtcdModel;
use tokio::sync::Notify;

use meridian::config::Config;
use meridian::server::sim::SimMember;

use crate::check::Checker;
use crate::trace::Trace;

/// The members' host names, in index order.
pub const MEMBERS: [&str; 5] = ["m1", "m2", "m3", "m4", "m5"];
/// The etcd host's name.
pub const ETCD: &str = "etcd";
/// etcd's default election timeout (`--election-timeout`, 1 s): a new leader lengthens every
/// lease by it.
pub const ETCD_ELECTION_TIMEOUT: Duration = Duration::from_secs(1);

pub struct Cluster {
    pub config: Config,
    members: RefCell<Vec<Option<Rc<SimMember>>>>,
    offsets: RefCell<Vec<i64>>,
    /// Per member: a graceful stop asked for (its host shuts the member down and exits).
    stops: RefCell<Vec<Rc<Notify>>>,
    /// The etcd model, once its host has started it.
    etcd: RefCell<Option<EtcdModel>>,
    /// etcd's delay in force, and when the last request delayed by an earlier one is answered
    /// at the latest: a slow spell lasts, for what was sent during it, past its end.
    etcd_delay_ms: Cell<u64>,
    etcd_drained_at: Cell<u64>,
    /// When the last change of etcd's leader stops showing: its election, plus the election
    /// timeout by which the new leader lengthened every lease.
    etcd_settled_at: Cell<u64>,
    pub checker: RefCell<Checker>,
    trace: RefCell<Trace>,
    /// Which members served after the last step, to trace only the changes.
    serving: RefCell<Vec<String>>,
}

impl Cluster {
    pub fn new(members: usize, config: Config) -> Cluster {
        Cluster {
            config,
            members: RefCell::new(vec![None; members]),
            offsets: RefCell::new(vec![0; members]),
            stops: RefCell::new((0..members).map(|_| Rc::new(Notify::new())).collect()),
            etcd: RefCell::default(),
            etcd_delay_ms: Cell::new(0),
            etcd_drained_at: Cell::new(0),
            etcd_settled_at: Cell::new(0),
            checker: RefCell::default(),
            trace: RefCell::default(),
            serving: RefCell::default(),
        }
    }

    pub fn size(&self) -> usize {
        self.members.borrow().len()
    }

    /// Member `i`'s control side, if its process is up and has started.
    pub fn member(&self, i: usize) -> Option<Rc<SimMember>> {
        self.members.borrow().get(i).cloned().flatten()
    }

    /// Member `i` has started.
    pub fn up(&self, i: usize, member: SimMember) {
        self.members.borrow_mut()[i] = Some(Rc::new(member));
    }

    /// Asks member `i` to shut down gracefully, as SIGTERM does.
    pub fn request_stop(&self, i: usize) {
        self.stops.borrow()[i].notify_one();
    }

    /// What member `i`'s host waits on for a graceful stop.
    pub fn stop_signal(&self, i: usize) -> Rc<Notify> {
        self.stops.borrow()[i].clone()
    }

    /// Member `i`'s process is started afresh: a stop asked of the one before is not its.
    pub fn restarting(&self, i: usize) {
        self.down(i);
        self.stops.borrow_mut()[i] = Rc::new(Notify::new());
    }

    /// Member `i`'s process is gone: what it held in memory serves nothing any more (a request
    /// it was answering never gets its answer).
    pub fn down(&self, i: usize) {
        if let Some(member) = self.members.borrow_mut()[i].take() {
            member.shared.allocator.suspend();
        }
    }

    /// The etcd host has started `model`.
    pub fn etcd_up(&self, model: EtcdModel) {
        *self.etcd.borrow_mut() = Some(model);
    }

    /// From `now`, delays every etcd request by `delay` (zero: etcd answers at once again).
    pub fn etcd_delay(&self, now_ms: u64, delay: Duration) {
        let before = self.etcd_delay_ms.replace(delay.as_millis() as u64);
        self.etcd_drained_at
            .set(self.etcd_drained_at.get().max(now_ms + before));
        if let Some(model) = self.etcd.borrow().as_ref() {
            model.set_delay(delay);
        }
    }

    /// When every request a slow spell delayed has been answered.
    pub fn etcd_drained_at(&self) -> u64 {
        self.etcd_drained_at.get()
    }

    /// From `now`, etcd has no leader for `gap`; the next one lengthens every lease by
    /// etcd's election timeout.
    pub fn etcd_leader_change(&self, now_ms: u64, gap: Duration) {
        let settled = now_ms + gap.as_millis() as u64 + ETCD_ELECTION_TIMEOUT.as_millis() as u64;
        self.etcd_settled_at
            .set(self.etcd_settled_at.get().max(settled));
        if let Some(model) = self.etcd.borrow().as_ref() {
            model.change_leader(gap, ETCD_ELECTION_TIMEOUT);
        }
    }

    /// From now, etcd loses `per_mille` of every thousand requests, picked from `seed`.
    pub fn etcd_loss(&self, per_mille: u32, seed: u64) {
        if let Some(model) = self.etcd.borrow().as_ref() {
            model.set_loss(per_mille, seed);
        }
    }

    /// etcd elects a leader at once if it has none.
    pub fn etcd_elect_now(&self) {
        if let Some(model) = self.etcd.borrow().as_ref() {
            model.elect_now();
        }
    }

    /// When the last change of etcd's leader stops showing in leases' expiries.
    pub fn etcd_settled_at(&self) -> u64 {
        self.etcd_settled_at.get()
    }

    /// The TSO limit etcd holds now for cluster `cluster_id`, read from the model's state as
    /// last applied (what a new leader would read); `None` if none is persisted or the value
    /// is not a number.
    pub fn persisted_limit(&self, cluster_id: u64) -> Option<u64> {
        let key = meridian::meta::Keys::new(cluster_id).tso_limit();
        let value = self.etcd.borrow().as_ref()?.value(&key)?;
        std::str::from_utf8(&value).ok()?.parse().ok()
    }

    /// Member `i`'s clock offset, which a restarted process keeps.
    pub fn offset(&self, i: usize) -> i64 {
        self.offsets.borrow()[i]
    }

    /// Moves member `i`'s wall clock by `delta_ms`, now and after any restart.
    pub fn shift(&self, i: usize, delta_ms: i64) {
        self.offsets.borrow_mut()[i] += delta_ms;
        if let Some(member) = self.member(i) {
            member.clock.shift(delta_ms);
        }
    }

    /// The member that serves now, if any (the lowest index if several do), and its handle:
    /// whom the nemesis asks to transfer or resign, as an operator would ask the leader.
    pub fn leader(&self) -> Option<(usize, Rc<SimMember>)> {
        (0..self.size()).find_map(|i| self.member(i).filter(|m| m.is_serving()).map(|m| (i, m)))
    }

    /// The members (other than `except`) whose allocators hand out timestamps now.
    pub fn serving_except(&self, except: Option<usize>) -> Vec<String> {
        let members = self.members.borrow();
        members
            .iter()
            .enumerate()
            .filter(|(i, m)| Some(*i) != except && m.as_ref().is_some_and(|m| m.is_serving()))
            .map(|(i, _)| MEMBERS[i].to_string())
            .collect()
    }

    /// Checks who serves at `at_ms`, and traces a change.
    pub fn observe_serving(&self, at_ms: u64) {
        let now = self.serving_except(None);
        self.checker.borrow_mut().serving(at_ms, &now);
        let mut last = self.serving.borrow_mut();
        if *last != now {
            let who = if now.is_empty() {
                "none".to_string()
            } else {
                now.join(",")
            };
            self.note(at_ms, format!("serving {who}"));
            *last = now;
        }
    }

    pub fn note(&self, at_ms: u64, event: impl AsRef<str>) {
        self.trace.borrow_mut().at(at_ms, event);
    }

    pub fn take_trace(&self) -> Trace {
        std::mem::take(&mut *self.trace.borrow_mut())
    }
}

/// Simulated milliseconds on the current host.
pub fn sim_ms() -> u64 {
    turmoil::sim_elapsed()
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

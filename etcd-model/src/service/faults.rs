//! The faults a simulation puts into the model's answers: a delay before each request of a
//! kind, and one-shot faults queued per kind (fail before applying, apply then fail, apply
//! and never answer). Owns the knobs only; the services consult them per request.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// The kinds of request a fault can be aimed at. A keep-alive fault hits one keep-alive
/// message; a watch fault hits the opening of a watch stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rpc {
    Range,
    Put,
    DeleteRange,
    Txn,
    Compact,
    LeaseGrant,
    LeaseRevoke,
    LeaseKeepAlive,
    LeaseTimeToLive,
    LeaseLeases,
    Watch,
}

/// What happens to one request.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Refused with this status before anything is applied (a request that never reached
    /// etcd, or that etcd turned away).
    FailBeforeApply { code: tonic::Code, message: String },
    /// Applied, then answered with this status instead of the response (the answer was lost
    /// and the client was told so, e.g. a connection reset after the commit).
    FailAfterApply { code: tonic::Code, message: String },
    /// Applied, and never answered: the client waits until its own deadline. On a stream,
    /// the message's answer is simply not sent.
    DropReply,
}

impl Fault {
    /// etcd's "request timed out", before the request is applied.
    pub fn timeout_before_apply() -> Fault {
        Fault::FailBeforeApply {
            code: tonic::Code::Unavailable,
            message: "etcdserver: request timed out".into(),
        }
    }

    /// etcd's "request timed out", after the request was applied (the commit happened; the
    /// client does not know).
    pub fn timeout_after_apply() -> Fault {
        Fault::FailAfterApply {
            code: tonic::Code::Unavailable,
            message: "etcdserver: request timed out".into(),
        }
    }
}

/// Every knob's setting.
#[derive(Debug, Default)]
pub(super) struct Faults {
    delay: Duration,
    delays: BTreeMap<Rpc, Duration>,
    queued: BTreeMap<Rpc, VecDeque<Fault>>,
}

impl Faults {
    pub(super) fn set_delay(&mut self, delay: Duration) {
        self.delay = delay;
    }

    pub(super) fn set_rpc_delay(&mut self, rpc: Rpc, delay: Duration) {
        self.delays.insert(rpc, delay);
    }

    pub(super) fn inject(&mut self, rpc: Rpc, fault: Fault) {
        self.queued.entry(rpc).or_default().push_back(fault);
    }

    pub(super) fn clear(&mut self) {
        *self = Faults::default();
    }

    /// The delay and the fault (if one is queued) for the next request of kind `rpc`.
    pub(super) fn next(&mut self, rpc: Rpc) -> (Duration, Option<Fault>) {
        let delay = self.delay + self.delays.get(&rpc).copied().unwrap_or_default();
        let fault = self.queued.get_mut(&rpc).and_then(VecDeque::pop_front);
        (delay, fault)
    }
}

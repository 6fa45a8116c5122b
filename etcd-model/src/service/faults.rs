//! The faults a simulation puts into the model's answers: a delay before each request of a
//! kind, one-shot faults queued per kind (fail before applying, apply then fail, apply and
//! never answer), and a share of all requests lost at random (half before they apply, half
//! applied with the answer lost). Owns the knobs only; the services consult them per request.

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
    /// Requests lost per thousand, and the state of the stream that picks them.
    loss_per_mille: u32,
    loss_state: u64,
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

    pub(super) fn set_loss(&mut self, per_mille: u32, seed: u64) {
        self.loss_per_mille = per_mille.min(1_000);
        self.loss_state = seed;
    }

    /// One draw in 0..2000 from a SplitMix64 stream: the same seed and the same order of
    /// requests lose the same requests.
    fn draw(&mut self) -> u64 {
        self.loss_state = self.loss_state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.loss_state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % 2_000
    }

    pub(super) fn clear(&mut self) {
        *self = Faults::default();
    }

    /// The delay and the fault (if one is queued) for the next request of kind `rpc`.
    pub(super) fn next(&mut self, rpc: Rpc) -> (Duration, Option<Fault>) {
        let delay = self.delay + self.delays.get(&rpc).copied().unwrap_or_default();
        let mut fault = self.queued.get_mut(&rpc).and_then(VecDeque::pop_front);
        if fault.is_none() && self.loss_per_mille > 0 {
            let draw = self.draw();
            let lost = u64::from(self.loss_per_mille);
            fault = if draw < lost {
                Some(Fault::timeout_before_apply())
            } else if draw < 2 * lost {
                Some(Fault::timeout_after_apply())
            } else {
                None
            };
        }
        (delay, fault)
    }
}

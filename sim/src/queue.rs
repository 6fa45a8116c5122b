//! The event queue: simulated time, and events in the order they were scheduled when their
//! times tie, so a run depends on nothing but its inputs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Something that happens at a simulated time. Regions and stores are indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// A leader's heartbeat: periodic ones schedule the next.
    RegionBeat {
        region: u32,
        periodic: bool,
    },
    StoreBeat {
        store: u32,
    },
    Patrol,
    /// A learner's snapshot is applied; it now catches up.
    SnapshotApplied {
        region: u32,
        peer: u64,
    },
    CaughtUp {
        region: u32,
        peer: u64,
    },
    LeaderMoved {
        region: u32,
        peer: u64,
    },
    /// A region whose leader was lost elects one among its live voters.
    Elect {
        region: u32,
    },
    /// A merge TiKV accepted is committed: the source's range joins the target.
    Merged {
        source: u32,
        target: u32,
    },
    /// The scenario's n-th action.
    Action(u32),
    /// Once a simulated second: Down marks, sampling, convergence.
    Second,
}

#[derive(Default)]
pub struct Queue {
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
}

impl Queue {
    pub fn push(&mut self, at_ms: u64, e: Event) {
        self.seq += 1;
        self.heap.push(Reverse((at_ms, self.seq, e)));
    }

    pub fn pop(&mut self) -> Option<(u64, Event)> {
        self.heap.pop().map(|Reverse((t, _, e))| (t, e))
    }
}

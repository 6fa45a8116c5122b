//! What GetOperator reports of a region's operator (PD's `OpStatusTracker` and the operator
//! controller's records): the operator running now, or how the last one ended, kept in memory
//! only, as PD keeps it. An ended operator's record is forgotten [`RECORD_TTL_MS`] after it
//! ended (PD's `operatorStatusRemainTime`), and a shard keeps at most [`MAX_RECORDS`]: past
//! it, the ended records that ended first are dropped (a running operator's record is kept:
//! the in-flight caps bound those). Owns no operator: its shard tells it what each
//! scheduling call started and ended (`observe`) and what an order started or replaced.

use std::collections::HashMap;

use super::operator::{OpKind, Pending};
use super::region::Epoch;
use super::schedule::Dispatch;

/// An ended operator's record is kept this long (PD's ten minutes).
pub const RECORD_TTL_MS: u64 = 10 * 60 * 1000;
/// The most records one shard keeps.
pub const MAX_RECORDS: usize = 16 * 1024;

/// PD's `pdpb.OperatorStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpStatus {
    Running,
    Success,
    Timeout,
    Cancel,
    /// A higher-priority operator took its place.
    Replace,
}

/// One region's operator as GetOperator reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpRecord {
    /// PD's description: `scatter-region`, `region-splitter`, or the scheduler that made it.
    pub desc: &'static str,
    /// PD's kind flags, comma-separated (`admin,region,leader`).
    pub kind: &'static str,
    pub status: OpStatus,
    /// The scatter group, for an admin scatter.
    pub group: Option<Box<str>>,
    /// The region's epoch when the operator started.
    pub epoch: Epoch,
    /// When it started, or when it ended once it has.
    pub at_ms: u64,
}

impl OpRecord {
    /// The record of an operator the scheduler started, described by its kind.
    pub fn scheduled(kind: OpKind, epoch: Epoch, now_ms: u64) -> OpRecord {
        let (desc, flags) = match kind {
            OpKind::Leader => ("balance-leader", "leader"),
            OpKind::Replica => ("replica-checker", "replica,region"),
            OpKind::Region => ("balance-region", "region"),
            OpKind::Merge => ("merge-region", "merge"),
            OpKind::Hot => ("hot-write-region", "hot-region"),
            OpKind::Admin => ("admin", "admin"),
        };
        OpRecord {
            desc,
            kind: flags,
            status: OpStatus::Running,
            group: None,
            epoch,
            at_ms: now_ms,
        }
    }

    pub fn is_running(&self) -> bool {
        self.status == OpStatus::Running
    }
}

#[derive(Debug, Default)]
pub struct OpStatusTracker {
    records: HashMap<u64, OpRecord>,
}

impl OpStatusTracker {
    #[cfg(test)]
    fn len(&self) -> usize {
        self.records.len()
    }

    /// An operator started on `region` (replacing any record it had).
    pub fn start(&mut self, region: u64, record: OpRecord) {
        let now_ms = record.at_ms;
        self.records.insert(region, record);
        self.bound(now_ms);
    }

    /// The running operator of `region` ended so.
    pub fn end(&mut self, region: u64, status: OpStatus, now_ms: u64) {
        if let Some(r) = self.records.get_mut(&region).filter(|r| r.is_running()) {
            r.status = status;
            r.at_ms = now_ms;
        }
    }

    /// What a scheduling call did to `region`'s operator: an end (done, past `deadline_ms`,
    /// or cancelled) and a start (the operator now in `slot`).
    pub fn observe(
        &mut self,
        region: u64,
        d: &Dispatch,
        deadline_ms: Option<u64>,
        slot: &Option<Box<Pending>>,
        epoch: Epoch,
        now_ms: u64,
    ) {
        if let Some((_, done)) = d.ended {
            let status = if done {
                OpStatus::Success
            } else if deadline_ms.is_some_and(|t| now_ms >= t) {
                OpStatus::Timeout
            } else {
                OpStatus::Cancel
            };
            self.end(region, status, now_ms);
        }
        if d.started {
            if let Some(p) = slot {
                self.start(region, OpRecord::scheduled(p.kind, epoch, now_ms));
            }
        }
    }

    /// The record of `region`, unless it ended too long ago.
    pub fn get(&self, region: u64, now_ms: u64) -> Option<&OpRecord> {
        self.records
            .get(&region)
            .filter(|r| r.is_running() || now_ms.saturating_sub(r.at_ms) < RECORD_TTL_MS)
    }

    /// The records of operators that ended at or after `from_ms` and are still kept.
    pub fn ended_since(&self, from_ms: u64, now_ms: u64) -> impl Iterator<Item = (u64, &OpRecord)> {
        self.records.iter().filter_map(move |(id, r)| {
            let kept = now_ms.saturating_sub(r.at_ms) < RECORD_TTL_MS;
            (!r.is_running() && r.at_ms >= from_ms && kept).then_some((*id, r))
        })
    }

    /// Forgets everything (a new term).
    pub fn clear(&mut self) {
        self.records.clear();
    }

    /// Drops expired records once the map is full, then the oldest ended ones if it still is.
    fn bound(&mut self, now_ms: u64) {
        if self.records.len() <= MAX_RECORDS {
            return;
        }
        self.records
            .retain(|_, r| r.is_running() || now_ms.saturating_sub(r.at_ms) < RECORD_TTL_MS);
        let over = self.records.len().saturating_sub(MAX_RECORDS * 3 / 4);
        if over == 0 {
            return;
        }
        let mut ended: Vec<(u64, u64)> = self
            .records
            .iter()
            .filter(|(_, r)| !r.is_running())
            .map(|(id, r)| (r.at_ms, *id))
            .collect();
        let n = over.min(ended.len());
        if n == 0 {
            return;
        }
        ended.select_nth_unstable(n - 1);
        for (_, id) in &ended[..n] {
            self.records.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(at_ms: u64) -> OpRecord {
        OpRecord {
            desc: "scatter-region",
            kind: "admin,region",
            status: OpStatus::Running,
            group: Some("g".into()),
            epoch: Epoch::default(),
            at_ms,
        }
    }

    #[test]
    fn running_then_ended_then_forgotten() {
        let mut t = OpStatusTracker::default();
        assert!(t.get(1, 0).is_none());
        t.start(1, record(0));
        assert_eq!(
            t.get(1, RECORD_TTL_MS * 5).unwrap().status,
            OpStatus::Running
        );
        assert_eq!(
            t.ended_since(0, 50).count(),
            0,
            "a running one has not ended"
        );
        t.end(1, OpStatus::Success, 100);
        assert_eq!(t.get(1, 100).unwrap().status, OpStatus::Success);
        assert_eq!(
            t.ended_since(100, 100)
                .map(|(id, _)| id)
                .collect::<Vec<_>>(),
            vec![1]
        );
        assert_eq!(t.ended_since(101, 101).count(), 0);
        // A second end does not overwrite the first.
        t.end(1, OpStatus::Cancel, 200);
        assert_eq!(t.get(1, 200).unwrap().status, OpStatus::Success);
        assert!(t.get(1, 100 + RECORD_TTL_MS).is_none());
    }

    #[test]
    fn bounded_by_dropping_the_oldest_ended() {
        let mut t = OpStatusTracker::default();
        t.start(0, record(0));
        for id in 1..=MAX_RECORDS as u64 + 1 {
            t.start(id, record(id));
            t.end(id, OpStatus::Success, id);
        }
        assert!(t.len() <= MAX_RECORDS, "{}", t.len());
        assert!(t.get(0, 0).is_some(), "a running record stays");
        assert!(t.get(1, 1).is_none(), "the oldest ended went first");
        assert!(t.get(MAX_RECORDS as u64, MAX_RECORDS as u64).is_some());
    }
}

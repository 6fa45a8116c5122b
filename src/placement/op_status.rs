//! What GetOperator reports of a region's operator (PD's `OpStatusTracker` and the operator
//! controller's records): the operator running now, or how the last one ended, kept in memory
//! only, as PD keeps it. An ended operator's record is forgotten [`RECORD_TTL_MS`] after it
//! ended (PD's `operatorStatusRemainTime`), and a shard keeps at most [`MAX_RECORDS`]: past
//! it, the ended records that ended first are dropped (a running operator's record is kept:
//! the in-flight caps bound those). A record also keeps what PD keeps in an operator's
//! additional infos and writes in its log when the operator ends: a merge half's related merge
//! region and why it was cancelled ([`OpRecord::additional_info`]). Every start and end is
//! also kept, as the record stood then and with a copy of the operator as it stood then
//! (its steps, for PD's `Operator.String()`), until the caller takes it
//! ([`OpStatusTracker::take_events`]) to log it as PD's operator controller logs it. A merge
//! half may be recorded before it is added (`hold`): its start is kept for the log only once
//! the pair is added (`announce`), as PD logs no add for a pair it refuses. Owns no operator:
//! its shard tells it what each scheduling call started and ended (`observe`) and what an
//! order started, replaced or cancelled.

use std::collections::HashMap;

pub use super::cancel_reason::CancelReason;
use super::operator::{OpKind, Pending};
use super::region::Epoch;
use super::running_op::RunningOp;
use super::schedule::{Dispatch, Ended, Stale};

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
    /// When it started.
    pub started_ms: u64,
    /// The other region of the merge it is a half of (PD's `related merge region`).
    pub related_merge: Option<u64>,
    /// Why it was cancelled, once it was for a reason told apart (PD's `cancel-reason`).
    pub cancel_reason: Option<CancelReason>,
    /// The region's size (MiB) when the operator was added, which PD's operator keeps and
    /// shows for the rest of its life; unknown until the log first sees the operator.
    pub size_mib: Option<u64>,
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
            started_ms: now_ms,
            related_merge: None,
            cancel_reason: None,
            size_mib: None,
        }
    }

    /// How long it ran: PD's `takes` (nothing yet while it runs).
    pub fn takes_ms(&self) -> u64 {
        if self.is_running() {
            return 0;
        }
        self.at_ms.saturating_sub(self.started_ms)
    }

    pub fn is_running(&self) -> bool {
        self.status == OpStatus::Running
    }

    /// PD's `LogAdditionalInfo`: the operator's additional infos as Go's `json.Marshal` writes
    /// a `map[string]string` (keys sorted; `<`, `>` and `&` escaped), or nothing without any.
    pub fn additional_info(&self) -> String {
        let related = self.related_merge.map(|id| id.to_string());
        let infos = [
            (
                "cancel-reason",
                self.cancel_reason.map(CancelReason::as_str),
            ),
            ("group", self.group.as_deref()),
            ("related merge region", related.as_deref()),
        ];
        let fields: Vec<String> = infos
            .into_iter()
            .filter_map(|(key, value)| Some(format!("{}:{}", go_json(key), go_json(value?))))
            .collect();
        if fields.is_empty() {
            return String::new();
        }
        format!("{{{}}}", fields.join(","))
    }
}

/// A string as Go's `encoding/json` writes it, HTML-safe.
fn go_json(s: &str) -> String {
    let quoted = serde_json::Value::from(s).to_string();
    quoted
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// A start or an end, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpEvent {
    pub region: u64,
    /// The record as it stood then (running, for a start).
    pub record: OpRecord,
    /// The operator as it stood then, when the caller had it.
    pub op: Option<RunningOp>,
    /// Why its step was found stale, for a cancel of that kind (PD's `operator is stale`).
    pub stale: Option<Stale>,
    /// An end of an operator never added (a merge half refused with its pair): PD logs only
    /// its cancel.
    pub refused: bool,
}

/// An operator as the caller hands it over with a start or an end: the operator and its
/// region's size (MiB).
pub type Shown<'a> = Option<(&'a Pending, u64)>;

#[derive(Debug, Default)]
pub struct OpStatusTracker {
    records: HashMap<u64, OpRecord>,
    /// Each start and end since the caller last took them.
    events: Vec<OpEvent>,
    /// The regions whose running record is held: recorded, not yet added (few at a time).
    held: Vec<u64>,
}

impl OpStatusTracker {
    #[cfg(test)]
    fn len(&self) -> usize {
        self.records.len()
    }

    /// An operator started on `region` (replacing any record it had), `op` being it.
    pub fn start(&mut self, region: u64, mut record: OpRecord, op: Shown<'_>) {
        record.size_mib = record.size_mib.or(op.map(|(_, size)| size));
        self.note(region, &record, op);
        self.keep(region, record);
    }

    /// An operator recorded as running on `region` but not yet added, so not logged: a
    /// merge's half whose partner is yet to be placed. [`OpStatusTracker::announce`] logs
    /// its start once the pair is added; a cancel before then logs only the cancel.
    pub fn hold(&mut self, region: u64, record: OpRecord) {
        self.keep(region, record);
        self.held.push(region);
    }

    fn keep(&mut self, region: u64, record: OpRecord) {
        let now_ms = record.at_ms;
        self.held.retain(|&id| id != region);
        self.records.insert(region, record);
        self.bound(now_ms);
    }

    /// The start of `region`'s held operator, `op`, for the log: the pair it is a half of
    /// was added.
    pub fn announce(&mut self, region: u64, op: Shown<'_>) {
        if !self.held.contains(&region) {
            return;
        }
        self.held.retain(|&id| id != region);
        if let Some(r) = self.records.get_mut(&region).filter(|r| r.is_running()) {
            r.size_mib = r.size_mib.or(op.map(|(_, size)| size));
            let r = r.clone();
            self.note(region, &r, op);
        }
    }

    /// The running operator of `region`, `op`, ended so: done (PD records an empty cancel
    /// reason as it removes it), timed out (PD's `timeout` reason) or replaced (none).
    pub fn end(&mut self, region: u64, status: OpStatus, now_ms: u64, op: Shown<'_>) {
        let reason = match status {
            OpStatus::Success => Some(CancelReason::Unnamed),
            OpStatus::Timeout => Some(CancelReason::Timeout),
            _ => None,
        };
        self.end_for(region, status, reason, now_ms, op);
    }

    /// The running operator of `region`, `op`, was cancelled for `reason`: its record, now
    /// ended, when it had one running.
    pub fn cancel(
        &mut self,
        region: u64,
        reason: CancelReason,
        now_ms: u64,
        op: Shown<'_>,
    ) -> Option<&OpRecord> {
        self.end_for(region, OpStatus::Cancel, Some(reason), now_ms, op)?;
        self.records.get(&region)
    }

    fn end_for(
        &mut self,
        region: u64,
        status: OpStatus,
        reason: Option<CancelReason>,
        now_ms: u64,
        op: Shown<'_>,
    ) -> Option<()> {
        let r = self.records.get_mut(&region).filter(|r| r.is_running())?;
        r.status = status;
        // PD keeps the first reason given.
        r.cancel_reason = r.cancel_reason.or(reason);
        r.at_ms = now_ms;
        let r = r.clone();
        let refused = self.held.contains(&region);
        self.held.retain(|&id| id != region);
        self.note(region, &r, op);
        if let Some(e) = self.events.last_mut().filter(|e| e.region == region) {
            e.refused = refused;
        }
        Some(())
    }

    /// Keeps a start or an end for the caller's log; past [`MAX_RECORDS`] not taken, the
    /// newest are lost rather than memory. The copy of the operator shows what PD's would:
    /// the size when it was added, and at a start no step yet run (PD logs its add before
    /// dispatching the operator, so at step 0), whatever the call that started it did.
    fn note(&mut self, region: u64, r: &OpRecord, op: Shown<'_>) {
        if self.events.len() < MAX_RECORDS {
            let names = (r.desc, r.kind, r.epoch);
            let op = op.map(|(p, size_now)| {
                let mut op = RunningOp::of(region, names, p, r.size_mib.unwrap_or(size_now));
                if r.is_running() {
                    op.at = 0;
                }
                op
            });
            self.events.push(OpEvent {
                region,
                record: r.clone(),
                op,
                stale: None,
                refused: false,
            });
        }
    }

    /// The starts and ends since this was last called, in order. Taken out.
    pub fn take_events(&mut self) -> Vec<OpEvent> {
        std::mem::take(&mut self.events)
    }

    /// What a scheduling call did to `region`'s operator, the region being `size_mib` large:
    /// an end (done, timed out or cancelled for a reason) and a start (the operator now in
    /// `slot`). A merge's source half is held: the caller announces it once the target's
    /// half is placed beside it.
    pub fn observe(
        &mut self,
        region: u64,
        d: &Dispatch,
        slot: &Option<Box<Pending>>,
        (epoch, size_mib): (Epoch, u64),
        now_ms: u64,
    ) {
        if let Some((_, ended)) = d.ended {
            let op = d.ended_op.as_deref().map(|p| (p, size_mib));
            match ended {
                Ended::Done => self.end(region, OpStatus::Success, now_ms, op),
                Ended::TimedOut => self.end(region, OpStatus::Timeout, now_ms, op),
                Ended::Cancelled(reason) => {
                    if self.cancel(region, reason, now_ms, op).is_some() {
                        let last = self
                            .events
                            .last_mut()
                            .filter(|e| e.region == region && e.record.status == OpStatus::Cancel);
                        if let Some(e) = last {
                            e.stale = d.stale;
                        }
                    }
                }
            }
        }
        if d.started {
            if let Some(p) = slot {
                let record = OpRecord {
                    related_merge: p.merge_partner(),
                    size_mib: Some(size_mib),
                    ..OpRecord::scheduled(p.kind, epoch, now_ms)
                };
                if d.merge_target.is_some() {
                    self.hold(region, record);
                } else {
                    self.start(region, record, Some((&**p, size_mib)));
                }
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

    /// Forgets every record (a new term). What happened before and is not yet logged stays
    /// for the log: PD logged it as it happened. The operators the term drops are not
    /// logged, as PD's new coordinator starts with none and logs nothing of the old one's.
    pub fn clear(&mut self) {
        self.records.clear();
        self.held.clear();
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
            started_ms: at_ms,
            related_merge: None,
            cancel_reason: None,
            size_mib: None,
        }
    }

    #[test]
    fn running_then_ended_then_forgotten() {
        let mut t = OpStatusTracker::default();
        assert!(t.get(1, 0).is_none());
        t.start(1, record(0), None);
        assert_eq!(
            t.get(1, RECORD_TTL_MS * 5).unwrap().status,
            OpStatus::Running
        );
        assert_eq!(
            t.ended_since(0, 50).count(),
            0,
            "a running one has not ended"
        );
        t.end(1, OpStatus::Success, 100, None);
        assert_eq!(t.get(1, 100).unwrap().status, OpStatus::Success);
        assert_eq!(
            t.ended_since(100, 100)
                .map(|(id, _)| id)
                .collect::<Vec<_>>(),
            vec![1]
        );
        assert_eq!(t.ended_since(101, 101).count(), 0);
        // A second end does not overwrite the first.
        t.end(1, OpStatus::Cancel, 200, None);
        assert_eq!(t.get(1, 200).unwrap().status, OpStatus::Success);
        assert!(t.get(1, 100 + RECORD_TTL_MS).is_none());
    }

    /// PD keeps the first reason an operator was cancelled for, and logs it beside the other
    /// additional infos as Go writes a map.
    #[test]
    fn a_cancel_keeps_its_reason_and_reads_as_pds_additional_info() {
        let mut t = OpStatusTracker::default();
        assert_eq!(
            t.cancel(1, CancelReason::AdminStop, 5, None),
            None,
            "none running"
        );
        let merge_half = OpRecord {
            group: None,
            related_merge: Some(10),
            ..record(0)
        };
        assert_eq!(
            merge_half.additional_info(),
            r#"{"related merge region":"10"}"#
        );
        t.start(1, merge_half, None);
        let ended = t
            .cancel(1, CancelReason::RelatedMergeRegion, 5, None)
            .cloned();
        let ended = ended.unwrap();
        assert_eq!(
            (ended.status, ended.at_ms, ended.cancel_reason),
            (OpStatus::Cancel, 5, Some(CancelReason::RelatedMergeRegion))
        );
        assert_eq!(
            ended.additional_info(),
            r#"{"cancel-reason":"related merge region","related merge region":"10"}"#
        );
        assert_eq!(t.cancel(1, CancelReason::AdminStop, 6, None), None);
        assert_eq!(
            t.get(1, 6).unwrap().cancel_reason,
            Some(CancelReason::RelatedMergeRegion),
            "the first reason stays"
        );
        let scatter = OpRecord {
            group: Some("a<b>&\"c".into()),
            cancel_reason: Some(CancelReason::AdminStop),
            ..record(0)
        };
        assert_eq!(
            scatter.additional_info(),
            r#"{"cancel-reason":"admin stop","group":"a\u003cb\u003e\u0026\"c"}"#
        );
        assert_eq!(
            OpRecord {
                group: None,
                ..record(0)
            }
            .additional_info(),
            ""
        );
        assert_eq!(CancelReason::RegionNotFound.as_str(), "region not found");
    }

    /// A held record is running but not logged; announced, its start is; cancelled before
    /// that, only its cancel is, marked as never added. A new term forgets the records, not
    /// what happened before it and is still to be logged.
    #[test]
    fn a_held_start_is_logged_once_announced_and_a_new_term_keeps_the_log() {
        let lines = |t: &mut OpStatusTracker| -> Vec<(u64, OpStatus, bool)> {
            let events = t.take_events();
            events
                .into_iter()
                .map(|e| (e.region, e.record.status, e.refused))
                .collect()
        };
        let mut t = OpStatusTracker::default();
        t.hold(1, record(0));
        t.hold(2, record(0));
        assert!(t.get(1, 0).unwrap().is_running());
        assert!(lines(&mut t).is_empty(), "held: not logged");
        t.announce(1, None);
        t.announce(1, None);
        t.cancel(2, CancelReason::RelatedMergeRegion, 5, None);
        t.cancel(1, CancelReason::AdminStop, 6, None);
        assert_eq!(
            lines(&mut t),
            vec![
                (1, OpStatus::Running, false),
                (2, OpStatus::Cancel, true),
                (1, OpStatus::Cancel, false),
            ]
        );
        t.start(3, record(7), None);
        t.clear();
        assert!(t.get(3, 7).is_none(), "records forgotten");
        assert_eq!(lines(&mut t), vec![(3, OpStatus::Running, false)]);
    }

    /// A start's copy of the operator is at step 0 whatever the starting call ran, as PD
    /// logs its add before dispatching; every line shows the region's size when the operator
    /// was added, as PD's operator keeps it, not the size when the line is written.
    #[test]
    fn the_log_shows_step_0_at_a_start_and_the_size_at_the_add() {
        use crate::placement::operator::Step;
        use crate::placement::{Peer, PeerRole};
        let learner = Peer {
            id: 5,
            store_id: 4,
            role: PeerRole::Learner,
        };
        let mut op = Pending {
            kind: OpKind::Region,
            steps: vec![
                Step::AddLearner(learner.clone()),
                Step::PromoteLearner(learner),
            ],
            at: 1,
            leader_store: 1,
            created_ms: 0,
            deadline_ms: 600_000,
            flow: 0,
            held: false,
        };
        let shown = |e: &OpEvent| {
            let op = e.op.as_ref().expect("the operator was at hand");
            (e.record.status, op.at, op.size_mib)
        };
        let mut t = OpStatusTracker::default();
        t.start(1, record(0), Some((&op, 96)));
        op.at = 2;
        t.end(1, OpStatus::Success, 10, Some((&op, 200)));
        // A held half: its size when it was held, its step 0 when announced.
        op.at = 1;
        let held = OpRecord {
            size_mib: Some(64),
            ..record(20)
        };
        t.hold(2, held);
        t.announce(2, Some((&op, 80)));
        t.end(2, OpStatus::Timeout, 30, Some((&op, 81)));
        let lines: Vec<_> = t.take_events().iter().map(shown).collect();
        assert_eq!(
            lines,
            vec![
                (OpStatus::Running, 0, 96),
                (OpStatus::Success, 2, 96),
                (OpStatus::Running, 0, 64),
                (OpStatus::Timeout, 1, 64),
            ]
        );
        assert_eq!(t.get(1, 10).unwrap().size_mib, Some(96));
    }

    #[test]
    fn bounded_by_dropping_the_oldest_ended() {
        let mut t = OpStatusTracker::default();
        t.start(0, record(0), None);
        for id in 1..=MAX_RECORDS as u64 + 1 {
            t.start(id, record(id), None);
            t.end(id, OpStatus::Success, id, None);
        }
        assert!(t.len() <= MAX_RECORDS, "{}", t.len());
        assert!(t.get(0, 0).is_some(), "a running record stays");
        assert!(t.get(1, 1).is_none(), "the oldest ended went first");
        assert!(t.get(MAX_RECORDS as u64, MAX_RECORDS as u64).is_some());
    }
}

//! PD's operator controller lines in the node's log, for each operator a shard started or
//! ended (`Shard::take_op_events`): `add operator`, `operator finish`, `operator timeout`,
//! `replace old operator`, and for a cancel `operator is stale` (a step found stale, with
//! PD's `error`, or the region's epoch moved on, with PD's `diff` and `latest-epoch`), then
//! `operator removed` (PD's `RemoveOperator` with a reason) or `remove operator because region
//! disappeared`, then `operator canceled`. An operator never added (a merge half refused with
//! its pair, or timed out before its pair was placed) gets only its cancel, as PD logs it. Each with PD's fields: `region-id`, `takes`
//! (how long it ran, as Go writes a duration), `operator` (Go's `Operator.String()`,
//! `operator_string`) and `additional-info` (PD's `LogAdditionalInfo`), last.
//!
//! PD's `operator expired` has no counterpart: PD writes it for an operator that waited in its
//! queue of waiting operators for 3 s without being started, and Meridian starts an operator
//! in the call that makes it or not at all. Nor is anything written for the operators a term's
//! end drops: PD's new coordinator starts with none and logs nothing of the old one's.
//!
//! Must not touch: the shards (it is handed what they did), any decision.

use crate::placement::schedule::Stale;
use crate::placement::{CancelReason, Epoch, OpEvent, OpStatus};
use crate::server::grpc::go_duration_ms;
use crate::server::grpc::operator_string::{end_suffix, operator_string};

/// The status an event is logged with: its record's, except that an operator never added (a
/// merge half whose pair was not placed) is logged as PD logs an operator it refused to add,
/// cancelled, however it ended (a held half can time out before its pair is placed).
pub fn logged_status(e: &OpEvent) -> OpStatus {
    if e.refused {
        OpStatus::Cancel
    } else {
        e.record.status
    }
}

/// Go's `Operator.String()` of an event's operator; by what its record keeps when the
/// operator itself was not at hand.
pub fn operator_text(e: &OpEvent) -> String {
    let r = &e.record;
    let status = logged_status(e);
    match &e.op {
        Some(op) => operator_string(op, status),
        None => format!(
            "{} (kind:{}, region:{}({}, {})){}",
            r.desc,
            r.kind,
            e.region,
            r.epoch.version,
            r.epoch.conf_ver,
            end_suffix(status)
        ),
    }
}

/// PD's message for an operator's start or end, logged with `status` ([`logged_status`]).
pub fn message(status: OpStatus) -> &'static str {
    match status {
        OpStatus::Running => "add operator",
        OpStatus::Success => "operator finish",
        OpStatus::Timeout => "operator timeout",
        OpStatus::Replace => "replace old operator",
        OpStatus::Cancel => "operator canceled",
    }
}

/// PD's line when its heartbeat check finds an operator stale.
const STALE: &str = "operator is stale";
/// PD's `RemoveOperator` with a reason, at info level.
const REMOVED: &str = "operator removed";
/// PD's light check finding the region gone or changed, at warn level.
const DISAPPEARED: &str = "remove operator because region disappeared";

/// The line PD writes before `operator canceled`, if any: its `RemoveOperator` with a reason
/// (an admin stop, a step found stale, an epoch moved on) says it removed the operator; its
/// light check (a region gone, a merge's region whose range changed) says a region
/// disappeared. A cancel of an operator never added, or through its merge partner, has none.
pub fn removal(e: &OpEvent) -> Option<&'static str> {
    if e.refused {
        return None;
    }
    match e.record.cancel_reason? {
        CancelReason::AdminStop | CancelReason::StaleStatus => Some(REMOVED),
        CancelReason::EpochNotMatch if e.stale.is_some() => Some(REMOVED),
        CancelReason::EpochNotMatch | CancelReason::RegionNotFound => Some(DISAPPEARED),
        _ => None,
    }
}

/// kvproto's `metapb.RegionEpoch` as Go's `encoding/json` writes it (zero fields left out),
/// as PD's `latest-epoch` field has it.
pub fn epoch_json(e: Epoch) -> String {
    let mut fields = Vec::with_capacity(2);
    if e.conf_ver != 0 {
        fields.push(format!("\"conf_ver\":{}", e.conf_ver));
    }
    if e.version != 0 {
        fields.push(format!("\"version\":{}", e.version));
    }
    format!("{{{}}}", fields.join(","))
}

/// PD's `operator is stale` line, for a cancel whose step was found stale.
fn log_stale(e: &OpEvent) {
    let id = e.region;
    match e.stale {
        Some(Stale::Epoch(latest)) => {
            let diff = latest.conf_ver.saturating_sub(e.record.epoch.conf_ver);
            let latest = epoch_json(latest);
            tracing::info!("region-id" = id, diff, "latest-epoch" = %latest, "{STALE}");
        }
        Some(stale) => {
            let error = stale.error().unwrap_or_default();
            tracing::info!("region-id" = id, error = %error, "{STALE}");
        }
        None => {}
    }
}

/// Logs each start and end, in order.
pub fn log(events: Vec<OpEvent>) {
    for e in events {
        let id = e.region;
        let r = &e.record;
        let operator = operator_text(&e);
        let takes = go_duration_ms(r.takes_ms());
        let status = logged_status(&e);
        if status == OpStatus::Cancel {
            log_stale(&e);
            match removal(&e) {
                Some(REMOVED) => {
                    tracing::info!("region-id" = id, takes = %takes, operator = %operator, "{REMOVED}")
                }
                Some(_) => tracing::warn!("region-id" = id, operator = %operator, "{DISAPPEARED}"),
                None => {}
            }
        }
        let info = r.additional_info();
        let msg = message(status);
        if status == OpStatus::Running {
            tracing::info!("region-id" = id, operator = %operator, "additional-info" = %info, "{msg}");
        } else {
            tracing::info!(
                "region-id" = id,
                takes = %takes,
                operator = %operator,
                "additional-info" = %info,
                "{msg}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{OpKind, OpRecord, Peer, PeerRole, RunningOp, Step};

    fn record(status: OpStatus, reason: Option<CancelReason>) -> OpRecord {
        let mut r = OpRecord::scheduled(
            OpKind::Region,
            Epoch {
                conf_ver: 3,
                version: 2,
            },
            1_000,
        );
        r.status = status;
        r.cancel_reason = reason;
        r.at_ms = 2_500;
        r
    }

    fn event(status: OpStatus, reason: Option<CancelReason>) -> OpEvent {
        OpEvent {
            region: 7,
            record: record(status, reason),
            op: None,
            stale: None,
            refused: false,
        }
    }

    /// PD's words for each end, and the line it writes before a cancel of each reason.
    #[test]
    fn each_end_reads_as_pds_line() {
        let cases = [
            (OpStatus::Running, None, "add operator"),
            (
                OpStatus::Success,
                Some(CancelReason::Unnamed),
                "operator finish",
            ),
            (
                OpStatus::Timeout,
                Some(CancelReason::Timeout),
                "operator timeout",
            ),
            (OpStatus::Replace, None, "replace old operator"),
            (
                OpStatus::Cancel,
                Some(CancelReason::StaleStatus),
                "operator canceled",
            ),
        ];
        for (status, reason, want) in cases {
            let e = event(status, reason);
            assert_eq!(logged_status(&e), status);
            assert_eq!(message(logged_status(&e)), want);
        }
        let done = event(OpStatus::Success, Some(CancelReason::Unnamed));
        assert_eq!(
            operator_text(&done),
            "balance-region (kind:region, region:7(2, 3)) finished"
        );
        assert_eq!(go_duration_ms(done.record.takes_ms()), "1.5s");
        assert_eq!(done.record.additional_info(), r#"{"cancel-reason":""}"#);
        assert_eq!(
            record(OpStatus::Running, None).takes_ms(),
            0,
            "nothing taken yet"
        );
        let cancel = |reason| event(OpStatus::Cancel, Some(reason));
        assert_eq!(
            removal(&cancel(CancelReason::AdminStop)),
            Some("operator removed")
        );
        assert_eq!(
            removal(&cancel(CancelReason::StaleStatus)),
            Some("operator removed")
        );
        assert_eq!(
            removal(&cancel(CancelReason::RegionNotFound)),
            Some("remove operator because region disappeared")
        );
        // A merge's source whose range changed goes as PD's light check drops it; one whose
        // peers changed, as its heartbeat check finds the epoch stale.
        let moved = cancel(CancelReason::EpochNotMatch);
        assert_eq!(
            removal(&moved),
            Some("remove operator because region disappeared")
        );
        let latest = Epoch {
            conf_ver: 5,
            version: 2,
        };
        let changed = OpEvent {
            stale: Some(Stale::Epoch(latest)),
            ..moved
        };
        assert_eq!(removal(&changed), Some("operator removed"));
        assert_eq!(removal(&cancel(CancelReason::RelatedMergeRegion)), None);
        assert_eq!(removal(&cancel(CancelReason::Timeout)), None);
        // Never added: only its cancel, whatever the reason.
        let refused = OpEvent {
            refused: true,
            ..cancel(CancelReason::RegionNotFound)
        };
        assert_eq!(removal(&refused), None);
        // A held half that timed out before its pair was placed was never added either.
        let timed_out_unplaced = OpEvent {
            refused: true,
            ..event(OpStatus::Timeout, Some(CancelReason::Timeout))
        };
        assert_eq!(
            message(logged_status(&timed_out_unplaced)),
            "operator canceled"
        );
        assert_eq!(
            operator_text(&timed_out_unplaced),
            "balance-region (kind:region, region:7(2, 3))",
            "no ` timeout` suffix"
        );
        assert_eq!(epoch_json(latest), r#"{"conf_ver":5,"version":2}"#);
        assert_eq!(epoch_json(Epoch::default()), "{}");
    }

    /// With the operator at hand, the operator field is PD's whole `Operator.String()`, with
    /// PD's suffix for how it ended.
    #[test]
    fn the_operator_field_is_pds_whole_string() {
        let learner = Peer {
            id: 5,
            store_id: 4,
            role: PeerRole::Learner,
        };
        let op = RunningOp {
            region_id: 7,
            epoch: Epoch {
                conf_ver: 3,
                version: 2,
            },
            desc: "balance-region",
            kind: "region",
            steps: vec![
                Step::AddLearner(learner.clone()),
                Step::PromoteLearner(learner),
            ],
            at: 2,
            leader_store: 1,
            created_ms: 1_000,
            deadline_ms: 601_000,
            size_mib: 1,
        };
        let done = OpEvent {
            op: Some(op),
            ..event(OpStatus::Success, Some(CancelReason::Unnamed))
        };
        assert_eq!(
            operator_text(&done),
            "balance-region {add peer: store [4]} (kind:region, region:7(2, 3), \
             createAt:1970-01-01 00:00:01 +0000 UTC, startAt:1970-01-01 00:00:01 +0000 UTC, \
             currentStep:2, size:1, steps:[0:{add learner peer 5 on store 4}, \
             1:{promote learner peer 5 on store 4 to voter}], timeout:[10m0s]) finished"
        );
    }
}

//! PD's operator controller lines in the node's log, for each operator a shard started or
//! ended (`Shard::take_op_events`): `add operator`, `operator finish`, `operator timeout`,
//! `replace old operator`, and for a cancel `operator removed` (PD's `RemoveOperator` with a
//! reason) or `remove operator because region disappeared`, then `operator canceled`. Each
//! with PD's fields: `region-id`, `takes` (how long it ran, as Go writes a duration),
//! `operator` (Go's `Operator.String()` by what the record keeps: its steps are not kept) and
//! `additional-info` (PD's `LogAdditionalInfo`), last.
//!
//! Must not touch: the shards (it is handed what they did), any decision.

use crate::placement::{CancelReason, OpRecord, OpStatus};
use crate::server::grpc::go_duration_ms;

/// Go's `Operator.String()` of region `id`'s operator, as far as its record keeps it, with
/// PD's `finished` and `timeout` suffixes.
pub fn operator_text(id: u64, r: &OpRecord) -> String {
    let suffix = match r.status {
        OpStatus::Success => " finished",
        OpStatus::Timeout => " timeout",
        _ => "",
    };
    format!(
        "{} (kind:{}, region:{}({}, {})){suffix}",
        r.desc, r.kind, id, r.epoch.version, r.epoch.conf_ver
    )
}

/// PD's message for an operator's start or end, as its record now stands.
pub fn message(r: &OpRecord) -> &'static str {
    match r.status {
        OpStatus::Running => "add operator",
        OpStatus::Success => "operator finish",
        OpStatus::Timeout => "operator timeout",
        OpStatus::Replace => "replace old operator",
        OpStatus::Cancel => "operator canceled",
    }
}

/// PD's `RemoveOperator` with a reason, at info level.
const REMOVED: &str = "operator removed";
/// PD's dispatch finding no region, at warn level.
const DISAPPEARED: &str = "remove operator because region disappeared";

/// The line PD writes before `operator canceled` for a cancel of this reason, if any: its
/// `RemoveOperator` with a reason (an admin stop, a stale step, a changed epoch) says it
/// removed the operator; its dispatch says a region disappeared.
pub fn removal(reason: Option<CancelReason>) -> Option<&'static str> {
    match reason? {
        CancelReason::AdminStop | CancelReason::StaleStatus | CancelReason::EpochNotMatch => {
            Some(REMOVED)
        }
        CancelReason::RegionNotFound => Some(DISAPPEARED),
        _ => None,
    }
}

/// Logs each start and end, in order.
pub fn log(events: Vec<(u64, OpRecord)>) {
    for (id, r) in events {
        let operator = operator_text(id, &r);
        let takes = go_duration_ms(r.takes_ms());
        if r.status == OpStatus::Cancel {
            match removal(r.cancel_reason) {
                Some(REMOVED) => {
                    tracing::info!("region-id" = id, takes = %takes, operator = %operator, "{REMOVED}")
                }
                Some(_) => tracing::warn!("region-id" = id, operator = %operator, "{DISAPPEARED}"),
                None => {}
            }
        }
        let info = r.additional_info();
        let msg = message(&r);
        if r.status == OpStatus::Running {
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
    use crate::placement::{Epoch, OpKind};

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
            assert_eq!(message(&record(status, reason)), want);
        }
        let done = record(OpStatus::Success, Some(CancelReason::Unnamed));
        assert_eq!(
            operator_text(7, &done),
            "balance-region (kind:region, region:7(2, 3)) finished"
        );
        assert_eq!(go_duration_ms(done.takes_ms()), "1.5s");
        assert_eq!(done.additional_info(), r#"{"cancel-reason":""}"#);
        assert_eq!(
            record(OpStatus::Running, None).takes_ms(),
            0,
            "nothing taken yet"
        );
        assert_eq!(
            removal(Some(CancelReason::AdminStop)),
            Some("operator removed")
        );
        assert_eq!(
            removal(Some(CancelReason::RegionNotFound)),
            Some("remove operator because region disappeared")
        );
        assert_eq!(removal(Some(CancelReason::RelatedMergeRegion)), None);
        assert_eq!(removal(Some(CancelReason::Timeout)), None);
    }
}

//! PD's operator as its HTTP API writes one: Go's `Operator.String()` (each item of `GET
//! /operators`, a JSON string; written by `operator_string`), `OpWithStatus` (`status: RUNNING, operator: ...`, the answer of
//! `GET /operators/{id}`), `OpObject` (`GET /operators?object`), the kind flags as PD names and
//! numbers them, and PD's words for a refused admin operator. Pure: no I/O, no state.

use serde::Serialize;

use super::operator_string::{brief, end_suffix, go_time, operator_text, timeout};
use crate::placement::schedule::AdminRefused;
use crate::placement::{OpRecord, OpStatus, RunningOp};

/// PD's operator kind flags, by bit (`pkg/schedule/operator/kind.go`).
const KIND_BITS: [(&str, u32); 12] = [
    ("admin", 1),
    ("affinity", 1 << 1),
    ("merge", 1 << 2),
    ("range", 1 << 3),
    ("replica", 1 << 4),
    ("split", 1 << 5),
    ("hot-region", 1 << 6),
    ("region", 1 << 7),
    ("leader", 1 << 8),
    ("witness-leader", 1 << 9),
    ("witness", 1 << 10),
    ("split-scatter", 1 << 11),
];

/// PD's `OpKind` number for flags written `admin,region`.
pub fn kind_bits(kind: &str) -> u32 {
    kind.split(',')
        .filter_map(|flag| KIND_BITS.iter().find(|(name, _)| *name == flag))
        .fold(0, |bits, (_, bit)| bits | bit)
}

/// Whether an operator of `kind` is listed for `?kind=asked` (PD's `GetOperatorsByKinds`:
/// `admin`, `leader` and `region` by flag; `waiting` lists waiting operators, of which
/// Meridian has none; anything else lists nothing).
pub fn kind_matches(kind: &str, asked: &str) -> bool {
    matches!(asked, "admin" | "leader" | "region") && kind.split(',').any(|f| f == asked)
}

/// `pdpb.OperatorStatus`'s name.
pub fn status_name(s: OpStatus) -> &'static str {
    match s {
        OpStatus::Success => "SUCCESS",
        OpStatus::Timeout => "TIMEOUT",
        OpStatus::Cancel => "CANCEL",
        OpStatus::Replace => "REPLACE",
        OpStatus::Running => "RUNNING",
    }
}

/// PD's `OpWithStatus` of region `id`: the running operator in full; an ended one by what its
/// record keeps (its steps are not kept once it ends).
pub fn with_status(
    id: u64,
    running: Option<&RunningOp>,
    record: Option<&OpRecord>,
) -> Option<String> {
    if let Some(op) = running {
        return Some(format!("status: RUNNING, operator: {}", operator_text(op)));
    }
    let r = record?;
    let suffix = end_suffix(r.status);
    Some(format!(
        "status: {}, operator: {} (kind:{}, region:{}({}, {}), endAt:{}){suffix}",
        status_name(r.status),
        r.desc,
        r.kind,
        id,
        r.epoch.version,
        r.epoch.conf_ver,
        go_time(r.at_ms)
    ))
}

/// PD's `OpRecord` of an ended operator (`GET /operators/records`), by what its record keeps.
pub fn record_text(id: u64, r: &OpRecord) -> String {
    format!(
        "{} (kind:{}, region:{}({}, {})) (finishAt:{}, status:{})",
        r.desc,
        r.kind,
        id,
        r.epoch.version,
        r.epoch.conf_ver,
        go_time(r.at_ms),
        status_name(r.status)
    )
}

/// kvproto's `metapb.RegionEpoch` as Go encodes it (zero fields left out).
#[derive(Debug, Serialize, PartialEq)]
pub struct EpochJson {
    #[serde(skip_serializing_if = "is_zero")]
    pub conf_ver: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub version: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// PD's `OpObject`.
#[derive(Debug, Serialize, PartialEq)]
pub struct OpObject {
    pub desc: &'static str,
    pub brief: String,
    pub region_id: u64,
    pub region_epoch: EpochJson,
    pub kind: u32,
    pub timeout: String,
    /// PD's internal status number: 1 is STARTED, what every running operator is.
    pub status: u32,
}

pub fn object(op: &RunningOp) -> OpObject {
    OpObject {
        desc: op.desc,
        brief: brief(op),
        region_id: op.region_id,
        region_epoch: EpochJson {
            conf_ver: op.epoch.conf_ver,
            version: op.epoch.version,
        },
        kind: kind_bits(op.kind),
        timeout: timeout(op),
        status: 1,
    }
}

/// PD's words for a refused admin operator, with its error codes.
pub fn refusal_text(e: &AdminRefused) -> String {
    let code = match e {
        AdminRefused::RegionNotFound(_) => "[PD:region:ErrRegionNotFound]",
        AdminRefused::StoreNotFound(_) => "[PD:core:ErrStoreNotFound]",
        AdminRefused::StoreRemoved(_) => "[PD:core:ErrStoreRemoved]",
        AdminRefused::StoreUnhealthy(_) => "[PD:core:ErrStoreUnhealthy]",
        AdminRefused::AbnormalPeer(_) => "[PD:region:ErrRegionAbnormalPeer]",
        AdminRefused::NotAdjacent => "[PD:region:ErrRegionNotAdjacent]",
        AdminRefused::AddOperator => "[PD:operator:ErrAddOperator]",
        AdminRefused::Build(_) => "",
    };
    format!("{code}{e}")
}

#[cfg(test)]
mod tests {
    use super::super::operator_string::tests::op;
    use super::*;
    use crate::placement::{Epoch, Peer, PeerRole, Step};

    fn peer(id: u64, store_id: u64, role: PeerRole) -> Peer {
        Peer { id, store_id, role }
    }

    #[test]
    fn a_move_reads_as_pds_operator_string() {
        let new = peer(100, 4, PeerRole::Learner);
        let o = op(vec![
            Step::AddLearner(new.clone()),
            Step::PromoteLearner(new),
            Step::TransferLeader(peer(12, 2, PeerRole::Voter)),
            Step::RemovePeer(peer(11, 1, PeerRole::Voter)),
        ]);
        assert_eq!(brief(&o), "mv peer: store [1] to [4]");
        assert_eq!(
            operator_text(&o),
            "admin-move-peer {mv peer: store [1] to [4]} (kind:admin,region,leader, \
             region:7(2, 3), createAt:2026-11-27 01:02:03.45 +0000 UTC, \
             startAt:2026-11-27 01:02:03.45 +0000 UTC, currentStep:1, size:96, \
             steps:[0:{add learner peer 100 on store 4}, \
             1:{promote learner peer 100 on store 4 to voter}, \
             2:{transfer leader from store 1 to store 2}, 3:{remove peer on store 1}], \
             timeout:[10m0s])"
        );
        assert!(with_status(7, Some(&o), None)
            .unwrap()
            .starts_with("status: RUNNING, operator: admin-move-peer {mv peer"));
        let obj = serde_json::to_value(object(&o)).unwrap();
        assert_eq!(
            obj,
            serde_json::json!({
                "desc": "admin-move-peer",
                "brief": "mv peer: store [1] to [4]",
                "region_id": 7,
                "region_epoch": {"conf_ver": 3, "version": 2},
                "kind": 1 | 128 | 256,
                "timeout": "10m0s",
                "status": 1,
            })
        );
    }

    #[test]
    fn kinds_statuses_and_refusals_in_pds_terms() {
        assert_eq!(kind_bits("admin"), 1);
        assert_eq!(kind_bits("replica,region"), 16 | 128);
        assert_eq!(kind_bits("leader"), 256);
        assert!(kind_matches("admin,leader", "leader"));
        assert!(kind_matches("admin,leader", "admin"));
        assert!(!kind_matches("admin,leader", "region"));
        assert!(
            !kind_matches("replica,region", "replica"),
            "PD lists by admin, leader, region"
        );
        assert_eq!(go_time(0), "1970-01-01 00:00:00 +0000 UTC");
        assert_eq!(go_time(1_001), "1970-01-01 00:00:01.001 +0000 UTC");
        let record = OpRecord {
            desc: "admin-transfer-leader",
            kind: "admin,leader",
            status: OpStatus::Cancel,
            group: None,
            epoch: Epoch {
                conf_ver: 1,
                version: 4,
            },
            at_ms: 1_000,
            started_ms: 1_000,
            related_merge: None,
            cancel_reason: None,
            size_mib: None,
        };
        assert_eq!(
            with_status(3, None, Some(&record)).unwrap(),
            "status: CANCEL, operator: admin-transfer-leader (kind:admin,leader, region:3(4, 1), \
             endAt:1970-01-01 00:00:01 +0000 UTC)"
        );
        assert_eq!(with_status(3, None, None), None);
        assert_eq!(
            record_text(3, &record),
            "admin-transfer-leader (kind:admin,leader, region:3(4, 1)) \
             (finishAt:1970-01-01 00:00:01 +0000 UTC, status:CANCEL)"
        );
        assert_eq!(
            refusal_text(&AdminRefused::RegionNotFound(9)),
            "[PD:region:ErrRegionNotFound]region 9 not found"
        );
        assert_eq!(
            refusal_text(&AdminRefused::StoreNotFound(9)),
            "[PD:core:ErrStoreNotFound]store 9 not found"
        );
        assert_eq!(
            refusal_text(&AdminRefused::AddOperator),
            "[PD:operator:ErrAddOperator]failed to add operator, maybe already have one"
        );
        assert_eq!(
            refusal_text(&AdminRefused::Build(
                "region has no voter in store 4".into()
            )),
            "region has no voter in store 4"
        );
    }
}

//! PD's `Operator.String()`: how PD writes one operator in its HTTP API's list (a JSON string)
//! and in its operator controller's log lines (`zap.Reflect`, which calls its `MarshalJSON`,
//! which is this text): `desc {brief} (kind:..., region:ID(version, conf_ver), createAt:...,
//! startAt:..., currentStep:N, size:N, steps:[0:{...}, ...], timeout:[...])`, then ` finished`
//! or ` timeout` for an operator that ended so. Each step as PD's steps write themselves
//! (`pkg/schedule/operator/step.go`), the brief as PD's operator builder and splitter write it.
//! Times are Go's `time.Time.String()` in UTC, without Go's monotonic reading (`m=+...`), which
//! has no counterpart here. Pure: no I/O, no state.
//!
//! Must not touch: the operators (it is handed a copy), any other shape of PD's API.

use super::json::{go_duration_ms, hex_key};
use crate::placement::schedule::Joint;
use crate::placement::{OpStatus, RunningOp, Step};

/// Go's `%v` of a `[]uint64`: `[1 2 3]`.
fn list(ids: &[u64]) -> String {
    let items: Vec<String> = ids.iter().map(u64::to_string).collect();
    format!("[{}]", items.join(" "))
}

/// Each step as PD's steps print themselves, the leader followed from step to step.
pub fn step_texts(op: &RunningOp) -> Vec<String> {
    let mut leader = op.leader_store;
    op.steps
        .iter()
        .map(|s| match s {
            Step::AddLearner(p) => {
                format!("add learner peer {} on store {}", p.id, p.store_id)
            }
            Step::PromoteLearner(p) => format!(
                "promote learner peer {} on store {} to voter",
                p.id, p.store_id
            ),
            Step::RemovePeer(p) => format!("remove peer on store {}", p.store_id),
            Step::TransferLeader(p) => {
                let text = format!(
                    "transfer leader from store {leader} to store {}",
                    p.store_id
                );
                leader = p.store_id;
                text
            }
            Step::Split(s) => format!("split region with policy {}", s.policy.name()),
            Step::Merge(m) => format!("merge region {} into region {}", m.source.id, m.target.id),
            Step::JointEnter(j) => joint_text("use joint consensus", j),
            Step::JointLeave(j) => joint_text("leave joint state", j),
        })
        .collect()
}

/// PD's `ChangePeerV2Enter` and `ChangePeerV2Leave` strings: the head, then each promotion
/// and each demotion.
fn joint_text(head: &str, j: &Joint) -> String {
    let mut text = head.to_string();
    for p in &j.promote {
        text += &format!(
            ", promote learner peer {} on store {} to voter",
            p.id, p.store_id
        );
    }
    for p in &j.demote {
        text += &format!(
            ", demote voter peer {} on store {} to learner",
            p.id, p.store_id
        );
    }
    text
}

/// PD's brief (the operator builder's, or the splitter's).
pub fn brief(op: &RunningOp) -> String {
    let mut adds = Vec::new();
    let mut removes = Vec::new();
    let mut promotes = Vec::new();
    let mut leader_to = None;
    for s in &op.steps {
        match s {
            Step::AddLearner(p) => adds.push(p.store_id),
            Step::RemovePeer(p) => removes.push(p.store_id),
            // A new peer's promotion is part of adding it.
            Step::PromoteLearner(p) if !adds.contains(&p.store_id) => promotes.push(p.store_id),
            Step::PromoteLearner(_) => {}
            Step::TransferLeader(p) => leader_to = Some(p.store_id),
            Step::Split(split) => {
                let mut brief = format!(
                    "split: region {} use policy {}",
                    op.region_id,
                    split.policy.name()
                );
                if !split.keys.is_empty() {
                    let keys: Vec<String> = split.keys.iter().map(|k| hex_key(k)).collect();
                    brief += &format!(" and keys [{}]", keys.join(" "));
                }
                return brief;
            }
            Step::Merge(m) => {
                return format!("merge: region {} to {}", m.source.id, m.target.id);
            }
            // The joint steps carry the adds and removes written elsewhere in the operator;
            // an existing learner's promotion is one of its own.
            Step::JointEnter(j) => {
                for p in &j.promote {
                    if !adds.contains(&p.store_id) && !promotes.contains(&p.store_id) {
                        promotes.push(p.store_id);
                    }
                }
            }
            Step::JointLeave(_) => {}
        }
    }
    match (adds.is_empty(), removes.is_empty(), promotes.is_empty()) {
        (false, false, _) => format!("mv peer: store {} to {}", list(&removes), list(&adds)),
        (false, true, _) => format!("add peer: store {}", list(&adds)),
        // PD's builder names the two lists the other way round here.
        (true, false, false) => format!(
            "promote peer: store {}, rm peer: store {}",
            list(&removes),
            list(&promotes)
        ),
        (true, false, true) => format!("rm peer: store {}", list(&removes)),
        (true, true, false) => format!("promote peer: store {}", list(&promotes)),
        (true, true, true) => match leader_to {
            Some(to) => format!("transfer leader: store {} to {to}", op.leader_store),
            None => String::new(),
        },
    }
}

/// Go's `time.Time.String()` of a Unix time in milliseconds, in UTC.
pub fn go_time(ms: u64) -> String {
    let Ok(t) = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000) else {
        return "0001-01-01 00:00:00 +0000 UTC".into();
    };
    let fraction = match ms % 1000 {
        0 => String::new(),
        f => format!(".{}", format!("{f:03}").trim_end_matches('0')),
    };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}{fraction} +0000 UTC",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// The operator's timeout as Go writes a duration.
pub fn timeout(op: &RunningOp) -> String {
    go_duration_ms(op.deadline_ms.saturating_sub(op.created_ms))
}

/// Go's `Operator.String()` of a running operator (started when it was made, as an admin
/// operator is).
pub fn operator_text(op: &RunningOp) -> String {
    let steps: Vec<String> = step_texts(op)
        .into_iter()
        .enumerate()
        .map(|(i, s)| format!("{i}:{{{s}}}"))
        .collect();
    let at = go_time(op.created_ms);
    format!(
        "{} {{{}}} (kind:{}, region:{}({}, {}), createAt:{at}, startAt:{at}, currentStep:{}, \
         size:{}, steps:[{}], timeout:[{}])",
        op.desc,
        brief(op),
        op.kind,
        op.region_id,
        op.epoch.version,
        op.epoch.conf_ver,
        op.at,
        op.size_mib,
        steps.join(", "),
        timeout(op)
    )
}

/// PD's suffix for an operator that ended: ` finished` once every step is done (its
/// `CheckSuccess`), ` timeout` once it timed out; nothing otherwise (running, cancelled,
/// replaced).
pub fn end_suffix(status: OpStatus) -> &'static str {
    match status {
        OpStatus::Success => " finished",
        OpStatus::Timeout => " timeout",
        _ => "",
    }
}

/// Go's `Operator.String()` of `op`, which is or ended `status`.
pub fn operator_string(op: &RunningOp, status: OpStatus) -> String {
    let mut text = operator_text(op);
    text.push_str(end_suffix(status));
    text
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::placement::{Epoch, MergeStep, Peer, PeerRole, Region, SplitPolicy, SplitStep};

    fn peer(id: u64, store_id: u64, role: PeerRole) -> Peer {
        Peer { id, store_id, role }
    }

    fn voter(id: u64) -> Peer {
        peer(id, id, PeerRole::Voter)
    }

    fn learner(id: u64) -> Peer {
        peer(id, id, PeerRole::Learner)
    }

    /// An admin move of region 7 with `steps`, for the tests of PD's operator shapes.
    pub(in crate::server::grpc::http) fn op(steps: Vec<Step>) -> RunningOp {
        RunningOp {
            region_id: 7,
            epoch: Epoch {
                conf_ver: 3,
                version: 2,
            },
            desc: "admin-move-peer",
            kind: "admin,region,leader",
            steps,
            at: 1,
            leader_store: 1,
            // 2026-11-27 01:02:03.450 UTC
            created_ms: 1_795_741_323_450,
            deadline_ms: 1_795_741_323_450 + 600_000,
            size_mib: 96,
        }
    }

    /// The steps' strings PD's own tests (`step_test.go`) expect, each step as PD builds it
    /// there (peer `n` on store `n`).
    #[test]
    fn steps_read_as_in_pds_step_tests() {
        let one = |step: Step| step_texts(&op(vec![step])).remove(0);
        // TestTransferLeader: TransferLeader{FromStore: 1, ToStore: 2}.
        assert_eq!(
            one(Step::TransferLeader(voter(2))),
            "transfer leader from store 1 to store 2"
        );
        // TestAddLearner: AddLearner{ToStore: 2, PeerID: 2}.
        assert_eq!(
            one(Step::AddLearner(learner(2))),
            "add learner peer 2 on store 2"
        );
        // TestChangePeerV2Enter / TestChangePeerV2Leave: promote 3 and 4, demote 1 and 2.
        let joint = Joint {
            promote: vec![learner(3), learner(4)],
            demote: vec![voter(1), voter(2)],
        };
        assert_eq!(
            one(Step::JointEnter(Box::new(joint.clone()))),
            "use joint consensus, \
             promote learner peer 3 on store 3 to voter, promote learner peer 4 on store 4 to voter, \
             demote voter peer 1 on store 1 to learner, demote voter peer 2 on store 2 to learner"
        );
        assert_eq!(
            one(Step::JointLeave(Box::new(joint))),
            "leave joint state, \
             promote learner peer 3 on store 3 to voter, promote learner peer 4 on store 4 to voter, \
             demote voter peer 1 on store 1 to learner, demote voter peer 2 on store 2 to learner"
        );
        // TestChangePeerV2EnterWithSingleChange: one promotion, then one demotion.
        let promote = Joint {
            promote: vec![learner(3)],
            demote: vec![],
        };
        assert_eq!(
            one(Step::JointEnter(Box::new(promote))),
            "use joint consensus, promote learner peer 3 on store 3 to voter"
        );
        let demote = Joint {
            promote: vec![],
            demote: vec![voter(3)],
        };
        assert_eq!(
            one(Step::JointEnter(Box::new(demote))),
            "use joint consensus, demote voter peer 3 on store 3 to learner"
        );
        // The other steps by their `String()` in step.go.
        assert_eq!(
            one(Step::PromoteLearner(learner(5))),
            "promote learner peer 5 on store 5 to voter"
        );
        assert_eq!(one(Step::RemovePeer(voter(1))), "remove peer on store 1");
        let region = |id| Region {
            id,
            start_key: vec![],
            end_key: vec![],
            epoch: Epoch::default(),
            peers: vec![],
            leader: None,
        };
        let merge = MergeStep {
            source: region(9),
            target: region(7),
            passive: false,
        };
        assert_eq!(
            one(Step::Merge(Box::new(merge.clone()))),
            "merge region 9 into region 7"
        );
        // The target's (passive) half writes the same step.
        let passive = MergeStep {
            passive: true,
            ..merge
        };
        let o = op(vec![Step::Merge(Box::new(passive))]);
        assert_eq!(step_texts(&o), ["merge region 9 into region 7"]);
        assert_eq!(brief(&o), "merge: region 9 to 7");
    }

    /// The whole of PD's format (`operator.go`'s `String()`): desc, brief, kind, region and
    /// epoch (version, then conf_ver), the times, the current step, the size, the numbered
    /// steps and the timeout, then PD's suffix for an operator that ended so.
    #[test]
    fn an_operator_reads_as_pds_string_with_its_end() {
        let mut o = op(vec![
            Step::AddLearner(peer(5, 4, PeerRole::Learner)),
            Step::PromoteLearner(peer(5, 4, PeerRole::Learner)),
            Step::RemovePeer(voter(1)),
        ]);
        o.desc = "balance-region";
        o.kind = "region";
        o.region_id = 2;
        o.epoch = Epoch {
            conf_ver: 1,
            version: 1,
        };
        o.at = 0;
        o.deadline_ms = o.created_ms + 122_000;
        let text = "balance-region {mv peer: store [1] to [4]} (kind:region, region:2(1, 1), \
                    createAt:2026-11-27 01:02:03.45 +0000 UTC, \
                    startAt:2026-11-27 01:02:03.45 +0000 UTC, currentStep:0, size:96, \
                    steps:[0:{add learner peer 5 on store 4}, \
                    1:{promote learner peer 5 on store 4 to voter}, 2:{remove peer on store 1}], \
                    timeout:[2m2s])";
        assert_eq!(operator_string(&o, OpStatus::Running), text);
        o.at = 3;
        assert_eq!(
            operator_string(&o, OpStatus::Success),
            text.replace("currentStep:0", "currentStep:3") + " finished"
        );
        o.at = 1;
        let at_1 = text.replace("currentStep:0", "currentStep:1");
        assert_eq!(
            operator_string(&o, OpStatus::Timeout),
            at_1.clone() + " timeout"
        );
        assert_eq!(operator_string(&o, OpStatus::Cancel), at_1);
        assert_eq!(operator_string(&o, OpStatus::Replace), at_1);
    }

    /// PD's `ChangePeerV2Enter` and `ChangePeerV2Leave` strings, and the brief of the move.
    #[test]
    fn a_joint_move_reads_as_pds_steps() {
        let new = peer(100, 4, PeerRole::Learner);
        let joint = crate::placement::schedule::Joint {
            promote: vec![new.clone()],
            demote: vec![peer(11, 1, PeerRole::Voter)],
        };
        let o = op(vec![
            Step::AddLearner(new),
            Step::TransferLeader(peer(12, 2, PeerRole::Voter)),
            Step::JointEnter(Box::new(joint.clone())),
            Step::JointLeave(Box::new(joint)),
            Step::RemovePeer(peer(11, 1, PeerRole::Voter)),
        ]);
        assert_eq!(brief(&o), "mv peer: store [1] to [4]");
        assert_eq!(
            step_texts(&o),
            [
                "add learner peer 100 on store 4",
                "transfer leader from store 1 to store 2",
                "use joint consensus, promote learner peer 100 on store 4 to voter, \
                 demote voter peer 11 on store 1 to learner",
                "leave joint state, promote learner peer 100 on store 4 to voter, \
                 demote voter peer 11 on store 1 to learner",
                "remove peer on store 1",
            ]
        );
    }

    #[test]
    fn briefs_as_pds_builder_writes_them() {
        let to2 = Step::TransferLeader(peer(12, 2, PeerRole::Voter));
        assert_eq!(
            brief(&op(vec![to2.clone()])),
            "transfer leader: store 1 to 2"
        );
        let rm = Step::RemovePeer(peer(13, 3, PeerRole::Voter));
        assert_eq!(brief(&op(vec![to2, rm.clone()])), "rm peer: store [3]");
        let learner = Step::AddLearner(peer(100, 4, PeerRole::Learner));
        assert_eq!(brief(&op(vec![learner])), "add peer: store [4]");
        let promote = Step::PromoteLearner(peer(15, 5, PeerRole::Learner));
        assert_eq!(brief(&op(vec![promote.clone()])), "promote peer: store [5]");
        assert_eq!(
            brief(&op(vec![promote, rm])),
            "promote peer: store [3], rm peer: store [5]"
        );
        let split = Step::Split(Box::new(SplitStep {
            start_key: vec![],
            end_key: vec![],
            policy: SplitPolicy::UseKey,
            keys: vec![b"a".to_vec(), vec![0x80, 0x01]],
        }));
        let o = op(vec![split]);
        assert_eq!(
            brief(&o),
            "split: region 7 use policy USEKEY and keys [61 8001]"
        );
        assert_eq!(step_texts(&o), vec!["split region with policy USEKEY"]);
        // The leader picks the key: PD's brief names none.
        let scan = Step::Split(Box::new(SplitStep {
            start_key: vec![],
            end_key: vec![],
            policy: SplitPolicy::Approximate,
            keys: vec![],
        }));
        let o = op(vec![scan]);
        assert_eq!(brief(&o), "split: region 7 use policy APPROXIMATE");
        assert_eq!(step_texts(&o), vec!["split region with policy APPROXIMATE"]);
    }
}

//! A simulated region leader carrying out one operator step as TiKV does: a conf change
//! (add a learner or a voter, promote a learner, remove a peer; with `ChangePeerV2`, enter a
//! joint state promoting learners and demoting voters at once, then leave it) bumps `conf_ver`; a leader
//! transfer moves the leader to a voter whose store is live; a split names the keys that fall
//! inside the region (the caller asks the cluster for the new ids), or, asked by SCAN or
//! APPROXIMATE with no key, the region's middle key, as TiKV picks one. A step already made (PD
//! sends a pending step again until it sees it done) changes nothing. Checks each step against
//! the safety rules as it is made, so a broken rule is seen where it happens. Owns no I/O and
//! no store state: which stores are live is asked of the caller.

use meridian::placement::{Operator, Peer, PeerRole, Region, SplitPolicy};

/// What a step changed in the region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Nothing: the step was already made, or TiKV would not make it.
    None,
    Added(Peer),
    Promoted(Peer),
    /// A joint-consensus change: the region entered a joint state (or made one change at
    /// once), or left it. Roles change; no peer comes or goes.
    Joint,
    Removed(Peer),
    /// The leader moved between these stores (a transfer, or an election after the old
    /// leader's store stopped).
    Leader {
        from: u64,
        to: u64,
    },
    /// Split at these keys, each strictly inside the region, in order.
    Split(Vec<Vec<u8>>),
}

impl Change {
    /// Whether the leader reports the region again at once (TiKV heartbeats after each applied
    /// conf change, split or leader change).
    pub fn is_some(&self) -> bool {
        *self != Change::None
    }
}

/// A step, carried out: the change, and the safety rule it broke, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub change: Change,
    pub violation: Option<String>,
}

impl Applied {
    fn ok(change: Change) -> Applied {
        Applied {
            change,
            violation: None,
        }
    }

    fn refused(why: String) -> Applied {
        Applied {
            change: Change::None,
            violation: Some(why),
        }
    }
}

/// Voters on live stores: the ones a quorum can count on. In a joint state a change needs a
/// quorum of the incoming voters and one of the outgoing ones: the fewer of the two counts.
pub fn healthy_voters(region: &Region, live: &dyn Fn(u64) -> bool) -> usize {
    let count = |votes: fn(PeerRole) -> bool| {
        region
            .peers
            .iter()
            .filter(|p| votes(p.role) && live(p.store_id))
            .count()
    };
    count(PeerRole::votes_incoming).min(count(PeerRole::votes_outgoing))
}

fn leader_store(region: &Region) -> Option<u64> {
    region.leader_peer().map(|p| p.store_id)
}

/// Carries out `op` on `region`, which its leader holds, with `live` telling which stores run.
pub fn carry_out(region: &mut Region, op: &Operator, live: &dyn Fn(u64) -> bool) -> Applied {
    match op {
        Operator::AddPeer(p) => add(region, p),
        Operator::RemovePeer(p) => remove(region, p, live),
        Operator::TransferLeader(p) => transfer(region, p, live),
        Operator::Split(split) if split.policy != SplitPolicy::UseKey => {
            match middle_key(&region.start_key, &region.end_key) {
                Some(key) => Applied::ok(Change::Split(vec![key])),
                // Too narrow to hold a key between its bounds: TiKV finds none, and splits not.
                None => Applied::ok(Change::None),
            }
        }
        Operator::Split(split) => {
            let mut inside: Vec<Vec<u8>> = split
                .keys
                .iter()
                .filter(|k| {
                    k.as_slice() > region.start_key.as_slice()
                        && (region.end_key.is_empty() || k.as_slice() < region.end_key.as_slice())
                })
                .cloned()
                .collect();
            inside.sort();
            inside.dedup();
            if inside.is_empty() {
                Applied::ok(Change::None)
            } else {
                Applied::ok(Change::Split(inside))
            }
        }
        // This cluster's regions never merge: the step is left unmade, as TiKV leaves a merge
        // it refuses, and the scheduler's operator times out.
        Operator::Merge(_) => Applied::ok(Change::None),
        Operator::ChangePeerV2(changes) => change_v2(region, changes, live),
    }
}

/// The key halfway between `start` and `end` (empty: the end of the key space), the keys read
/// as fractions, a byte a digit; `None` when no key lies strictly between them. This
/// cluster's stores hold no data to scan, so the middle of the range stands for the middle of
/// the data TiKV would find.
pub fn middle_key(start: &[u8], end: &[u8]) -> Option<Vec<u8>> {
    let len = start.len().max(end.len()) + 1;
    let digits = |k: &[u8]| {
        let mut d: Vec<u16> = k.iter().map(|b| u16::from(*b)).collect();
        d.resize(len, 0);
        d
    };
    let a = digits(start);
    // The end of the key space is 1: a carry above the first digit.
    let (b, mut top) = if end.is_empty() {
        (vec![0; len], 1u16)
    } else {
        (digits(end), 0)
    };
    let mut sum = vec![0u16; len];
    let mut carry = 0;
    for i in (0..len).rev() {
        let s = a[i] + b[i] + carry;
        sum[i] = s & 0xff;
        carry = s >> 8;
    }
    top += carry;
    let mut mid = Vec::with_capacity(len);
    for digit in sum {
        let v = (top << 8) | digit;
        mid.push((v >> 1) as u8);
        top = v & 1;
    }
    // Trailing zeros only make a key longer than the same point needs.
    while mid.last() == Some(&0) {
        mid.pop();
    }
    let inside = mid.as_slice() > start && (end.is_empty() || mid.as_slice() < end);
    inside.then_some(mid)
}

/// TiKV's `ChangePeerV2`: no change leaves the joint state (refused while the leader is
/// demoting: raft cannot leave with it); one change is made at once; more enter a joint
/// state, learners becoming incoming voters and voters demoting ones. Each change must start
/// from the role it changes (a learner to promote, a voter to demote); sent again once made,
/// it changes nothing.
fn change_v2(region: &mut Region, changes: &[Peer], live: &dyn Fn(u64) -> bool) -> Applied {
    let joint = region.peers.iter().any(|p| p.role.is_joint());
    let before = healthy_voters(region, live);
    if changes.is_empty() {
        if !joint {
            return Applied::ok(Change::None);
        }
        if region
            .leader_peer()
            .is_some_and(|l| l.role == PeerRole::DemotingVoter)
        {
            return Applied::refused(format!(
                "region {}: leaving a joint state that demotes the leader",
                region.id
            ));
        }
        let changed = region.peers.iter().filter(|p| p.role.is_joint()).count() as u64;
        for q in &mut region.peers {
            q.role = match q.role {
                PeerRole::IncomingVoter => PeerRole::Voter,
                PeerRole::DemotingVoter => PeerRole::Learner,
                role => role,
            };
        }
        region.epoch.conf_ver += changed;
    } else {
        let from_ok = changes.iter().all(|c| {
            region.peers.iter().any(|q| {
                q.id == c.id
                    && if c.role == PeerRole::Voter {
                        q.role == PeerRole::Learner
                    } else {
                        q.role == PeerRole::Voter
                    }
            })
        });
        if joint || !from_ok {
            return Applied::ok(Change::None);
        }
        let simple = changes.len() == 1;
        for c in changes {
            if let Some(q) = region.peers.iter_mut().find(|q| q.id == c.id) {
                q.role = match (c.role == PeerRole::Voter, simple) {
                    (true, true) => PeerRole::Voter,
                    (true, false) => PeerRole::IncomingVoter,
                    (false, true) => PeerRole::Learner,
                    (false, false) => PeerRole::DemotingVoter,
                };
            }
        }
        region.epoch.conf_ver += changes.len() as u64;
    }
    let after = healthy_voters(region, live);
    let violation = (before >= 2 && after < 2).then(|| {
        format!(
            "region {}: a joint change left {after} healthy voter(s) of {before} in a configuration",
            region.id
        )
    });
    Applied {
        change: Change::Joint,
        violation,
    }
}

fn add(region: &mut Region, p: &Peer) -> Applied {
    if let Some(q) = region.peers.iter_mut().find(|q| q.id == p.id) {
        // A learner asked to be a voter is promoted; anything else is a step already made (a
        // voter is never demoted by an AddLearner sent again).
        if q.role == PeerRole::Learner && p.role == PeerRole::Voter {
            q.role = PeerRole::Voter;
            region.epoch.conf_ver += 1;
            return Applied::ok(Change::Promoted(q.clone()));
        }
        return Applied::ok(Change::None);
    }
    if let Some(q) = region.peers.iter().find(|q| q.store_id == p.store_id) {
        return Applied::refused(format!(
            "region {}: peer {} added on store {}, which already holds its peer {}",
            region.id, p.id, p.store_id, q.id
        ));
    }
    region.peers.push(p.clone());
    region.epoch.conf_ver += 1;
    Applied::ok(Change::Added(p.clone()))
}

fn remove(region: &mut Region, p: &Peer, live: &dyn Fn(u64) -> bool) -> Applied {
    let Some(at) = region.peers.iter().position(|q| q.id == p.id) else {
        return Applied::ok(Change::None);
    };
    if Some(p.id) == region.leader {
        // TiKV refuses to remove the peer that leads; PD must move the leader first.
        return Applied::refused(format!(
            "region {}: removing peer {} on store {}, the leader's",
            region.id, p.id, p.store_id
        ));
    }
    let before = healthy_voters(region, live);
    let gone = region.peers.remove(at);
    region.epoch.conf_ver += 1;
    let after = healthy_voters(region, live);
    let violation = (before >= 2 && after < 2).then(|| {
        format!(
            "region {}: removing peer {} on store {} left {after} healthy voter(s) of {before}",
            region.id, gone.id, gone.store_id
        )
    });
    Applied {
        change: Change::Removed(gone),
        violation,
    }
}

fn transfer(region: &mut Region, p: &Peer, live: &dyn Fn(u64) -> bool) -> Applied {
    if region.leader == Some(p.id) {
        return Applied::ok(Change::None);
    }
    // Raft transfers leadership only to a voter that answers.
    let to = region
        .peers
        .iter()
        .find(|q| q.id == p.id && q.role != PeerRole::Learner && live(q.store_id))
        .map(|q| q.store_id);
    match (to, leader_store(region)) {
        (Some(to), Some(from)) => {
            region.leader = Some(p.id);
            Applied::ok(Change::Leader { from, to })
        }
        _ => Applied::ok(Change::None),
    }
}

/// The region's leader is on a store that stopped: the live voters elect one of their own if
/// they are a quorum (the first in peer order, so runs repeat). `Change::None` if the leader
/// is live, or no quorum is left (the region falls silent).
pub fn elect(region: &mut Region, live: &dyn Fn(u64) -> bool) -> Change {
    let Some(from) = leader_store(region) else {
        return Change::None;
    };
    if live(from) {
        return Change::None;
    }
    // A quorum of each configuration (both are the voters outside a joint state).
    let quorum = |votes: fn(PeerRole) -> bool| {
        let all = region.peers.iter().filter(|p| votes(p.role));
        let (n, up) = all.fold((0, 0), |(n, up), p| {
            (n + 1, up + usize::from(live(p.store_id)))
        });
        up > n / 2
    };
    if !quorum(PeerRole::votes_incoming) || !quorum(PeerRole::votes_outgoing) {
        return Change::None;
    }
    let Some(next) = region
        .peers
        .iter()
        .find(|p| p.role != PeerRole::Learner && live(p.store_id))
    else {
        return Change::None;
    };
    let to = next.store_id;
    region.leader = Some(next.id);
    Change::Leader { from, to }
}

/// Whether the region's leader is on a live store (it can report the region).
pub fn has_live_leader(region: &Region, live: &dyn Fn(u64) -> bool) -> bool {
    leader_store(region).is_some_and(live)
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian::placement::{Epoch, Split};

    fn peer(id: u64, store_id: u64, role: PeerRole) -> Peer {
        Peer { id, store_id, role }
    }

    fn region() -> Region {
        Region {
            id: 1,
            start_key: b"b".to_vec(),
            end_key: b"m".to_vec(),
            epoch: Epoch {
                conf_ver: 3,
                version: 1,
            },
            peers: vec![
                peer(11, 1, PeerRole::Voter),
                peer(12, 2, PeerRole::Voter),
                peer(13, 3, PeerRole::Voter),
            ],
            leader: Some(11),
        }
    }

    fn all_live(_: u64) -> bool {
        true
    }

    #[test]
    fn a_learner_is_added_promoted_and_the_old_peer_removed_each_a_conf_change() {
        let mut r = region();
        let learner = peer(14, 4, PeerRole::Learner);
        let a = carry_out(&mut r, &Operator::AddPeer(learner.clone()), &all_live);
        assert_eq!(a.change, Change::Added(learner.clone()));
        assert_eq!(r.epoch.conf_ver, 4);
        assert!(r.peers.contains(&learner), "reported with its role");
        // Sent again while pending: nothing more.
        let again = carry_out(&mut r, &Operator::AddPeer(learner.clone()), &all_live);
        assert_eq!((again.change, r.epoch.conf_ver), (Change::None, 4));
        let voter = peer(14, 4, PeerRole::Voter);
        let p = carry_out(&mut r, &Operator::AddPeer(voter.clone()), &all_live);
        assert_eq!(p.change, Change::Promoted(voter.clone()));
        assert_eq!(r.epoch.conf_ver, 5);
        // An AddLearner sent late never demotes the voter.
        carry_out(&mut r, &Operator::AddPeer(learner), &all_live);
        assert!(r.peers.contains(&voter));
        let gone = peer(13, 3, PeerRole::Voter);
        let rm = carry_out(&mut r, &Operator::RemovePeer(gone.clone()), &all_live);
        assert_eq!(rm, Applied::ok(Change::Removed(gone)));
        assert_eq!(r.epoch.conf_ver, 6);
        assert_eq!(r.peers.len(), 3);
    }

    #[test]
    fn a_leader_moves_only_to_a_live_voter() {
        let mut r = region();
        let dead_three = |s: u64| s != 3;
        let to3 = Operator::TransferLeader(peer(13, 3, PeerRole::Voter));
        assert_eq!(carry_out(&mut r, &to3, &dead_three).change, Change::None);
        let to2 = Operator::TransferLeader(peer(12, 2, PeerRole::Voter));
        assert_eq!(
            carry_out(&mut r, &to2, &all_live).change,
            Change::Leader { from: 1, to: 2 }
        );
        assert_eq!((r.leader, r.epoch.conf_ver), (Some(12), 3));
    }

    #[test]
    fn broken_rules_are_named_where_they_happen() {
        let mut r = region();
        let leaders = carry_out(
            &mut r,
            &Operator::RemovePeer(peer(11, 1, PeerRole::Voter)),
            &all_live,
        );
        assert_eq!(leaders.change, Change::None, "TiKV refuses");
        assert!(leaders.violation.unwrap().contains("the leader's"));
        let twice = carry_out(
            &mut r,
            &Operator::AddPeer(peer(20, 2, PeerRole::Learner)),
            &all_live,
        );
        assert!(twice
            .violation
            .unwrap()
            .contains("already holds its peer 12"));
        assert_eq!(r.peers.len(), 3);
        // Store 3 stopped: removing the voter on store 2 leaves one healthy voter.
        let dead_three = |s: u64| s != 3;
        let last = carry_out(
            &mut r,
            &Operator::RemovePeer(peer(12, 2, PeerRole::Voter)),
            &dead_three,
        );
        assert!(last
            .violation
            .unwrap()
            .contains("left 1 healthy voter(s) of 2"));
    }

    #[test]
    fn the_live_voters_elect_a_leader_when_its_store_stops() {
        let mut r = region();
        assert_eq!(elect(&mut r, &all_live), Change::None);
        let dead_one = |s: u64| s != 1;
        assert_eq!(elect(&mut r, &dead_one), Change::Leader { from: 1, to: 2 });
        assert_eq!(r.leader, Some(12));
        let mut r = region();
        let only_three = |s: u64| s == 3;
        assert_eq!(elect(&mut r, &only_three), Change::None, "no quorum");
        assert!(!has_live_leader(&r, &only_three));
    }

    #[test]
    fn a_split_keeps_the_keys_inside_the_region_in_order() {
        let mut r = region();
        let op = Operator::Split(Box::new(Split::at(vec![
            b"k".to_vec(),
            b"a".to_vec(),
            b"c".to_vec(),
            b"m".to_vec(),
            b"c".to_vec(),
        ])));
        assert_eq!(
            carry_out(&mut r, &op, &all_live).change,
            Change::Split(vec![b"c".to_vec(), b"k".to_vec()])
        );
        let outside = Operator::Split(Box::new(Split::at(vec![b"b".to_vec()])));
        assert_eq!(carry_out(&mut r, &outside, &all_live).change, Change::None);
        // USEKEY with no key: nowhere to split.
        let none = Operator::Split(Box::new(Split::at(vec![])));
        assert_eq!(carry_out(&mut r, &none, &all_live).change, Change::None);
    }

    #[test]
    fn a_split_by_scan_or_approximate_cuts_the_region_in_the_middle() {
        for policy in [SplitPolicy::Scan, SplitPolicy::Approximate] {
            let mut r = region();
            let op = Operator::Split(Box::new(Split {
                policy,
                keys: vec![],
            }));
            // Halfway between "b" and "m".
            let want = vec![(b'b' + b'm') / 2, 0x80];
            assert_eq!(
                carry_out(&mut r, &op, &all_live).change,
                Change::Split(vec![want])
            );
        }
        assert_eq!(middle_key(b"", b""), Some(vec![0x80]));
        assert_eq!(middle_key(b"a", b""), Some(vec![0xb0, 0x80]));
        assert_eq!(middle_key(b"", b"\x02"), Some(vec![0x01]));
        assert_eq!(middle_key(b"a", b"c"), Some(b"b".to_vec()));
        assert_eq!(middle_key(b"a", b"b"), Some(vec![b'a', 0x80]));
        assert_eq!(middle_key(b"a", b"a\x00"), None, "no key between them");
        for (s, e) in [
            (&b"k"[..], &b"k\x01"[..]),
            (&b""[..], &b"\x00\x01"[..]),
            (&b"\xff"[..], &b""[..]),
        ] {
            let m = middle_key(s, e).unwrap();
            assert!(
                m.as_slice() > s && (e.is_empty() || m.as_slice() < e),
                "{m:?}"
            );
        }
    }

    #[test]
    fn a_joint_change_is_entered_then_left_and_never_with_the_leader_demoted() {
        let mut r = region();
        carry_out(
            &mut r,
            &Operator::AddPeer(peer(14, 4, PeerRole::Learner)),
            &all_live,
        );
        let enter = Operator::ChangePeerV2(Box::new(vec![
            peer(14, 4, PeerRole::Voter),
            peer(13, 3, PeerRole::Learner),
        ]));
        let a = carry_out(&mut r, &enter, &all_live);
        assert_eq!(a, Applied::ok(Change::Joint));
        assert_eq!(r.peers[2].role, PeerRole::DemotingVoter);
        assert_eq!(r.peers[3].role, PeerRole::IncomingVoter);
        assert_eq!(carry_out(&mut r, &enter, &all_live).change, Change::None);
        let leave = Operator::ChangePeerV2(Box::default());
        // Store 3 stops: the outgoing voters {11, 12, 13} still have two of three.
        let live = |s: u64| s != 3;
        assert_eq!(healthy_voters(&r, &live), 2);
        let mut demoted_leader = r.clone();
        demoted_leader.leader = Some(13);
        assert!(carry_out(&mut demoted_leader, &leave, &all_live)
            .violation
            .is_some());
        assert_eq!(carry_out(&mut r, &leave, &live), Applied::ok(Change::Joint));
        assert_eq!(r.peers[2].role, PeerRole::Learner);
        assert_eq!(r.peers[3].role, PeerRole::Voter);
        let rm = carry_out(
            &mut r,
            &Operator::RemovePeer(peer(13, 3, PeerRole::Learner)),
            &live,
        );
        assert_eq!(rm.violation, None);
    }
}

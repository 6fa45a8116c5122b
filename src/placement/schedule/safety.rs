//! The four safety rules as an independent check of one step against the region it is applied
//! to, for the simulator and the property tests (the scheduler's own guards are in
//! `scheduler.rs`; this must not share them, so that a broken guard is caught): a step must not
//! leave fewer than two healthy voters where there were at least two; must not put two peers
//! of a region on one store; must not remove the leader's peer. The fourth rule (limits and
//! caps) is counted by whoever sees operators start, over time.

use crate::placement::operator::Operator;
use crate::placement::region::{Peer, PeerRole, Region};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    FewerThanTwoHealthyVoters,
    TwoPeersOnOneStore,
    RemovesLeader,
    PastLimit,
    /// A merge sent while the source's peers are not where the target's are.
    MergePeersDiffer,
}

/// `region` after the leader carries out `op`, as TiKV would.
pub fn apply(region: &Region, op: &Operator) -> Region {
    let mut r = region.clone();
    match op {
        Operator::AddPeer(p) => match r.peers.iter_mut().find(|q| q.id == p.id) {
            Some(q) => q.role = p.role,
            None => r.peers.push(p.clone()),
        },
        Operator::RemovePeer(p) => r.peers.retain(|q| q.id != p.id),
        Operator::TransferLeader(p) => r.leader = Some(p.id),
        // The split region keeps its peers; the new regions report themselves. A merge
        // leaves the source's peers as they are until the source is gone.
        Operator::Split(_) | Operator::Merge(_) => {}
    }
    r
}

/// The first rule `op` breaks on `region`; `healthy` says whether a voter serves and has
/// caught up.
pub fn check(region: &Region, op: &Operator, healthy: &dyn Fn(&Peer) -> bool) -> Option<Rule> {
    if let Operator::Merge(target) = op {
        return check_merge(region, target);
    }
    if let Operator::RemovePeer(p) = op {
        if region.leader == Some(p.id) {
            return Some(Rule::RemovesLeader);
        }
    }
    let after = apply(region, op);
    let count = |r: &Region| {
        r.peers
            .iter()
            .filter(|p| p.role == PeerRole::Voter && healthy(p))
            .count()
    };
    if count(region) >= 2 && count(&after) < 2 {
        return Some(Rule::FewerThanTwoHealthyVoters);
    }
    for (i, p) in after.peers.iter().enumerate() {
        if after.peers[..i].iter().any(|q| q.store_id == p.store_id) {
            return Some(Rule::TwoPeersOnOneStore);
        }
    }
    None
}

/// A merge of `source` into `target` (each as it stands) breaks a rule unless every peer of
/// one has a peer of the same role on the same store in the other.
pub fn check_merge(source: &Region, target: &Region) -> Option<Rule> {
    let covered = |a: &Region, b: &Region| {
        a.peers.iter().all(|p| {
            b.peers
                .iter()
                .any(|q| q.store_id == p.store_id && q.role == p.role)
        })
    };
    if covered(source, target) && covered(target, source) {
        None
    } else {
        Some(Rule::MergePeersDiffer)
    }
}

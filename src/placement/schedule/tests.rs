//! The scheduler against the four safety rules, over random clusters and random sequences of
//! heartbeats, patrols (with the merge checker, small regions beside each other), leader
//! elections, store failures and time, in the simulated world of `test_world`; against
//! liveness in the same worlds once their stores settle (no operator stuck); and fixed
//! worlds in which PD's repair and balance orders are asserted step by step.

use proptest::prelude::*;

use super::test_world::{fixed, world, Event, Fate, Sim};
use super::*;
use crate::placement::PeerRole;

/// No step breaks a safety rule, no merge is sent while its peers differ from its target's,
/// and nothing starts past a cap or a store limit; and the worlds do merge regions, so the
/// merge checker is among what is checked.
#[test]
fn no_step_breaks_a_safety_rule() {
    let merges = std::cell::Cell::new(0u64);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(512));
    let run = runner.run(&world(), |w| {
        let mut sim = Sim::new(&w);
        for e in &w.events {
            sim.step(e);
        }
        merges.set(merges.get() + sim.merges);
        Ok(())
    });
    if let Err(e) = run {
        panic!("{e}");
    }
    assert!(merges.get() > 0, "no world merged a region");
}

/// After random events, once no store changes its fate any more, every operator ends within a
/// few rounds of reports and patrols (`Sim::settle`): none is stuck on a step the scheduler
/// holds or TiKV refuses, whatever the stores' health (some Down or Offline for good).
#[test]
fn no_operator_is_stuck_once_the_stores_settle() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(256));
    let run = runner.run(&world(), |w| {
        let mut sim = Sim::new(&w);
        for e in &w.events {
            sim.step(e);
        }
        sim.settle();
        Ok(())
    });
    if let Err(e) = run {
        panic!("{e}");
    }
}

/// A region on a Down store is repaired as PD does: a learner on the best-separated store,
/// promoted, and only then the old peer removed.
#[test]
fn a_down_peer_is_replaced_by_learner_promotion_then_removal() {
    let mut sim = fixed(
        &[
            (0, Fate::Up),
            (1, Fate::Up),
            (2, Fate::Down),
            (2, Fate::Up),
            (0, Fate::Up),
        ],
        vec![vec![(0, false), (1, false), (2, false)]],
        true,
    );
    let mut steps = Vec::new();
    // Joint consensus (the default) adds an enter and a leave step to the move.
    for _ in 0..6 {
        sim.step(&Event::Heartbeat(0));
        if let Some(p) = &sim.slots[0] {
            steps.push(p.current().cloned());
        }
    }
    let r = &sim.regions[0];
    let mut stores: Vec<u64> = r.peers.iter().map(|p| p.store_id).collect();
    stores.sort_unstable();
    // Store 4 is the Down store's zone's other store: isolation keeps the zones distinct.
    assert_eq!(stores, vec![1, 2, 4], "{r:?} after {steps:?}");
    assert!(r.peers.iter().all(|p| p.role == PeerRole::Voter));
    assert!(sim.slots[0].is_none());
}

/// A move's last step removes the old peer, which the joint change has demoted to a learner.
/// When another voter's store stops serving just then, the removal is still sent (a learner's
/// removal takes no vote away). It is not held until the operator times out, which would leave
/// the region with a peer too many and its lost voter unrepaired.
#[test]
fn a_demoted_peer_is_removed_while_another_voter_is_unhealthy() {
    let mut sim = fixed(
        &[
            (0, Fate::Up),
            (1, Fate::Up),
            (2, Fate::Offline),
            (2, Fate::Up),
        ],
        vec![vec![(0, false), (1, false), (2, false)]],
        true,
    );
    // The learner on store 4, the joint state entered, then left.
    for _ in 0..3 {
        sim.step(&Event::Heartbeat(0));
    }
    let r = &sim.regions[0];
    let role = |store: u64| r.peers.iter().find(|p| p.store_id == store).map(|p| p.role);
    assert_eq!(role(3), Some(PeerRole::Learner), "{r:?}");
    assert_eq!(role(4), Some(PeerRole::Voter), "{r:?}");
    assert!(sim.slots[0].is_some(), "the removal is still to come");
    // Store 2 falls silent: Disconnected after 20 s, so two healthy voters are left.
    sim.step(&Event::Store(1, Fate::Disconnected));
    sim.step(&Event::Wait(21_000));
    sim.step(&Event::Heartbeat(0));
    let r = &sim.regions[0];
    let mut stores: Vec<u64> = r.peers.iter().map(|p| p.store_id).collect();
    stores.sort_unstable();
    assert_eq!(stores, vec![1, 2, 4], "{r:?}");
    // The next report shows it made: the operator ends.
    sim.step(&Event::Heartbeat(0));
    assert!(sim.slots[0].is_none(), "the move is done");
}

/// With isolation at zone level and a zone gone, nothing goes into the surviving zones.
#[test]
fn a_lost_zone_is_not_repaired_into_the_others() {
    let mut sim = fixed(
        &[
            (0, Fate::Up),
            (1, Fate::Up),
            (2, Fate::Down),
            (0, Fate::Up),
            (1, Fate::Up),
        ],
        vec![vec![(0, false), (1, false), (2, false)]],
        true,
    );
    for e in [Event::Heartbeat(0), Event::Patrol(0)] {
        sim.step(&e);
    }
    assert!(sim.slots[0].is_none());
    assert_eq!(sim.regions[0].peers.len(), 3);
}

/// A store silent past 20 s is Disconnected: its peers still count, but nothing new goes there.
#[test]
fn a_disconnected_store_is_no_target() {
    let mut sim = fixed(
        &[
            (0, Fate::Up),
            (1, Fate::Up),
            (2, Fate::Disconnected),
            (2, Fate::Up),
        ],
        vec![vec![(0, false), (1, false)]],
        true,
    );
    assert_eq!(
        sim.cluster().health(3),
        Health::Disconnected { removing: false }
    );
    sim.step(&Event::Heartbeat(0));
    let target = sim.slots[0].as_ref().and_then(|p| p.adds_to());
    assert_eq!(target, Some(4));
}

/// evict-leader moves leaders off the store, to the voter whose store leads fewest.
#[test]
fn evict_leader_empties_the_store() {
    let mut sim = fixed(
        &[(0, Fate::Up), (1, Fate::Up), (2, Fate::Up)],
        vec![vec![(0, false), (1, false), (2, false)]; 3],
        true,
    );
    sim.view.set_evicting(vec![1]);
    // One leader move in flight at a time: each region's report completes its move.
    for i in 0..3 {
        sim.step(&Event::Patrol(i));
        sim.step(&Event::Heartbeat(i));
    }
    for r in &sim.regions {
        assert_ne!(r.leader_peer().map(|p| p.store_id), Some(1), "{r:?}");
    }
}

/// A leader on a store being drained is replaced as PD's operator builder orders it: the leader
/// moves to a healthy follower first, so the learner's snapshot does not come from the store
/// that leaves; then the learner is added, promoted as the old peer is demoted (one joint
/// change), and the old peer removed.
#[test]
fn a_draining_leader_moves_before_its_replacement_is_added() {
    let mut sim = fixed(
        &[
            (2, Fate::Offline),
            (0, Fate::Up),
            (1, Fate::Up),
            (2, Fate::Up),
        ],
        // The first peer leads: the one on the Offline store.
        vec![vec![(0, false), (1, false), (2, false)]],
        true,
    );
    assert_eq!(sim.cluster().health(1), Health::Serving { removing: true });
    let mut steps = None;
    // The store leading when the learner was added: the one that sends its snapshot.
    let mut sender = None;
    for _ in 0..6 {
        let leader = sim.regions[0].leader_peer().map(|p| p.store_id);
        sim.step(&Event::Heartbeat(0));
        if steps.is_none() {
            steps = sim.slots[0].as_ref().map(|p| p.steps.clone());
        }
        if sender.is_none() && sim.regions[0].peers.iter().any(|p| p.store_id == 4) {
            sender = leader;
        }
    }
    let steps = steps.expect("a replacement started");
    assert!(
        matches!(
            steps.as_slice(),
            // Joint consensus is on by default: the learner is promoted and the old voter
            // demoted in one joint change.
            [
                Step::TransferLeader(to),
                Step::AddLearner(add),
                Step::JointEnter(enter),
                Step::JointLeave(_),
                Step::RemovePeer(old),
            ] if to.store_id != 1 && add.store_id == 4 && old.store_id == 1
                && enter.promote.len() == 1 && enter.demote.len() == 1
        ),
        "{steps:?}"
    );
    assert!(matches!(sender, Some(2 | 3)), "sent from {sender:?}");
    let r = &sim.regions[0];
    let mut stores: Vec<u64> = r.peers.iter().map(|p| p.store_id).collect();
    stores.sort_unstable();
    assert_eq!(stores, vec![2, 3, 4], "{r:?}");
    assert!(r.peers.iter().all(|p| p.role == PeerRole::Voter));
    assert!(sim.slots[0].is_none());
}

/// The patrol's test of the stores alone: nothing to balance in an even cluster, a leader to
/// evict once a store is evicted, and regions to move once an empty store joins.
#[test]
fn the_stores_alone_tell_when_no_balancer_can_act() {
    let turn = |k: usize| vec![(k % 3, false), ((k + 1) % 3, false), ((k + 2) % 3, false)];
    let mut sim = fixed(
        &[(0, Fate::Up), (1, Fate::Up), (2, Fate::Up)],
        (0..6).map(turn).collect(),
        false,
    );
    let none = balance::Sources {
        region: false,
        leader: false,
        evict: false,
    };
    assert_eq!(balance::Sources::of(&sim.cluster()), none);
    sim.view.set_evicting(vec![2]);
    let can = balance::Sources::of(&sim.cluster());
    assert_eq!(
        can,
        balance::Sources {
            evict: true,
            ..none
        }
    );

    let sim = fixed(
        &[(0, Fate::Up), (1, Fate::Up), (2, Fate::Up), (0, Fate::Up)],
        vec![vec![(0, false), (1, false), (2, false)]; 8],
        false,
    );
    let can = balance::Sources::of(&sim.cluster());
    assert!(can.region && can.leader, "{can:?}");
}

/// A region on two stores being drained, one of them leading, and one store that is gone: the
/// leader has no voter to move to, so the gone peer is replaced first (PD's order: down before
/// offline), rather than the region waiting for ever on its leader's replacement.
#[test]
fn a_gone_peer_is_replaced_first_when_the_draining_leader_cannot_move() {
    let mut sim = fixed(
        &[
            (0, Fate::Offline),
            (1, Fate::Offline),
            (2, Fate::Down),
            (0, Fate::Up),
            (1, Fate::Up),
            (2, Fate::Up),
        ],
        // The first peer leads: the one on store 1, being drained.
        vec![vec![(0, false), (1, false), (2, false)]],
        true,
    );
    assert_eq!(sim.cluster().health(3), Health::Down);
    sim.step(&Event::Heartbeat(0));
    let target = sim.slots[0].as_ref().and_then(|p| p.adds_to());
    assert_eq!(target, Some(6), "{:?}", sim.slots[0]);
    // Once repaired, the leader moves to the new voter and the drained ones are replaced.
    for _ in 0..30 {
        sim.step(&Event::Heartbeat(0));
    }
    let mut stores: Vec<u64> = sim.regions[0].peers.iter().map(|p| p.store_id).collect();
    stores.sort_unstable();
    assert_eq!(stores, vec![4, 5, 6], "{:?}", sim.regions[0]);
}

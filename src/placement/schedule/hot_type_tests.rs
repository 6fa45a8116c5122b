//! PD's draw between the two hot-write solvers (`schedulePeerPr`): two passes in three try a
//! peer move and then a leader transfer, the rest only a leader transfer. Checked on the draw
//! itself (its share, and that a region passed again is drawn afresh) and through the patrol
//! on worlds where one or both moves are open.

use super::hot_tests::{heat, patrol_drawn, region, world, RATE, ZONES};
use super::*;
use crate::placement::Region;

/// Over many regions and times the draw tries a peer first in 66 passes of 100, as PD's
/// `schedulePeerPr` (0.66) does; and each region gets both answers within a short while, so a
/// region that the patrol passes again is not stuck with one solver.
#[test]
fn the_draw_tries_a_peer_first_two_times_in_three_and_anew_each_pass() {
    let (mut peer_first, mut all) = (0u64, 0u64);
    for id in 1..=200u64 {
        for t in (0..20_000u64).step_by(97) {
            all += 1;
            peer_first += u64::from(hot::peer_first(id, 1_000_000 + t));
        }
        let answers: std::collections::BTreeSet<bool> =
            (0..50u64).map(|t| hot::peer_first(id, t)).collect();
        assert_eq!(answers.len(), 2, "region {id} drew one answer 50 times");
    }
    let share = peer_first as f64 / all as f64;
    assert!((0.64..=0.68).contains(&share), "peer first in {share:.3}");
    assert_eq!(hot::PEER_FIRST_PERCENT, 66);
}

/// Store 1 leads four hot regions whose followers are on stores 2 and 3, so it is a source
/// both as leader and as peer, and both moves are open: drawn for a peer, region 1's peer on
/// store 1 moves to store 4 (zone 0's cool store) and takes the lead along; drawn for a
/// leader, the lead goes to a follower.
#[test]
fn with_both_moves_open_the_draw_decides_which_is_made() {
    let w = world(&ZONES);
    let mut cache = HotCache::new();
    let hot: Vec<(Region, u64)> = (1..=4).map(|i| (region(i, &[1, 2, 3]), RATE)).collect();
    heat(&w, &mut cache, &hot);
    let peer = patrol_drawn(&w, &cache, &hot[0].0, true).expect("a hot operator");
    assert_eq!(
        (peer.adds_to(), peer.removes_from(), peer.leader_to()),
        (Some(4), Some(1), Some(4)),
        "{:?}",
        peer.steps
    );
    assert_eq!(hot::moved_flow(&peer), HotMove::Peer);
    let leader = patrol_drawn(&w, &cache, &hot[0].0, false).expect("a hot operator");
    assert!(
        matches!(leader.steps.as_slice(), [Step::TransferLeader(p)] if p.store_id == 2 || p.store_id == 3),
        "{:?}",
        leader.steps
    );
    assert_eq!(hot::moved_flow(&leader), HotMove::Leader);
}

/// Stores 1, 2 and 3 each lead two hot regions and follow four, so no follower's store is cool
/// enough as leader to take a lead, while as peers they are twice the mean. Drawn for a leader
/// transfer, the pass makes none and, as PD's, does not fall back to a peer move; drawn for a
/// peer, the peer moves.
#[test]
fn drawn_for_a_leader_a_pass_with_no_leader_move_makes_no_peer_move() {
    let w = world(&ZONES);
    let mut cache = HotCache::new();
    let hot: Vec<(Region, u64)> = (0..6u64)
        .map(|i| {
            let on = match i % 3 {
                0 => [1, 2, 3],
                1 => [2, 3, 1],
                _ => [3, 1, 2],
            };
            (region(i + 1, &on), RATE)
        })
        .collect();
    heat(&w, &mut cache, &hot);
    assert_eq!(patrol_drawn(&w, &cache, &hot[0].0, false), None);
    let op = patrol_drawn(&w, &cache, &hot[0].0, true).expect("a hot operator");
    assert_eq!(hot::moved_flow(&op), HotMove::Peer, "{:?}", op.steps);
}

//! The nemesis: a schedule of faults drawn from one seed before the run starts, then carried
//! out on the simulation by the driver. Faults: a partition or a hold (a pause: messages
//! queued, then delivered) between a member and etcd, a member crashed and later restarted or
//! bounced at once, stopped gracefully (a leader resigns) and later restarted, a member's wall
//! clock shifted, etcd slow to answer every request, etcd's own leader changing (an election
//! during which no lease expires and writes are refused, after which every lease runs its TTL
//! again), etcd losing a share of requests (each refused before it applies, or applied with its
//! answer lost), and the leader asked (as through the admin API) to transfer leadership to a
//! member or to resign. Each fault ends on its own, and
//! at the quiet time everything is restored. Owns only the schedule (pure, from the seed); it must
//! not touch the simulation itself.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// One thing the nemesis does at a moment of simulated time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Cuts the links between member `m` and etcd (segments in flight are lost).
    Partition(usize),
    Repair(usize),
    /// Holds the links between member `m` and etcd: nothing is delivered until released.
    Hold(usize),
    Release(usize),
    /// Kills member `m`'s process: its tasks and memory are gone.
    Crash(usize),
    /// Shuts member `m` down gracefully (as SIGTERM does: a leader resigns).
    Stop(usize),
    /// Starts member `m` again (after a crash or a stop, or as a crash and restart at once).
    Restart(usize),
    Bounce(usize),
    /// Moves member `m`'s wall clock by this many milliseconds.
    Shift(usize, i64),
    /// etcd answers every request this many milliseconds late, until `EtcdFast`.
    EtcdSlow(u64),
    EtcdFast,
    /// etcd's leader steps down; the next is elected this many milliseconds later.
    EtcdLeaderChange(u64),
    /// etcd loses this many of every thousand requests, picked by a stream from this seed,
    /// until `EtcdReliable`.
    EtcdLossy(u32, u64),
    EtcdReliable,
    /// Whoever serves then is asked to hand leadership over to member `m`.
    Transfer(usize),
    /// Whoever serves then is asked to resign.
    Resign,
    /// Every fault ends: links repaired and released, members up, clocks as they were.
    Quiet,
}

/// The schedule's shape.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub members: usize,
    /// Faults start no earlier than this (the cluster has elected a first leader).
    pub start_ms: u64,
    /// When the nemesis stops.
    pub quiet_ms: u64,
    /// The longest a fault lasts.
    pub max_fault_ms: u64,
    /// The largest clock shift, either way.
    pub max_shift_ms: i64,
    /// The longest etcd takes to answer while slow.
    pub max_etcd_delay_ms: u64,
    /// The longest etcd goes without a leader.
    pub max_etcd_election_ms: u64,
    /// The most requests etcd loses per thousand while lossy.
    pub max_etcd_loss_per_mille: u32,
    /// Whether etcd's leader changes and lossy spells are drawn too (off: the schedules every
    /// recorded seed ran, drawn exactly as before these faults existed).
    pub etcd_faults: bool,
}

/// The schedule for one seed: actions in time order (ties in the order drawn).
pub fn schedule(plan: &Plan, rng: &mut ChaCha8Rng) -> Vec<(u64, Action)> {
    let mut out = Vec::new();
    // A member is in at most one fault at a time, so each fault's end undoes exactly it.
    let mut busy_until = vec![0u64; plan.members];
    let mut etcd_busy_until = 0u64;
    let mut lossy_until = 0u64;
    let mut t = plan.start_ms;
    loop {
        t += rng.gen_range(100..1_500);
        if t >= plan.quiet_ms {
            break;
        }
        let m = rng.gen_range(0..plan.members);
        if busy_until[m] > t {
            continue;
        }
        let end = (t + rng.gen_range(200..=plan.max_fault_ms)).min(plan.quiet_ms);
        let kinds = if plan.etcd_faults { 11 } else { 10 };
        match rng.gen_range(0..kinds) {
            0 | 1 => {
                out.push((t, Action::Partition(m)));
                out.push((end, Action::Repair(m)));
                busy_until[m] = end;
            }
            2 => {
                out.push((t, Action::Hold(m)));
                out.push((end, Action::Release(m)));
                busy_until[m] = end;
            }
            3 => {
                out.push((t, Action::Crash(m)));
                out.push((end, Action::Restart(m)));
                busy_until[m] = end;
            }
            4 => out.push((t, Action::Bounce(m))),
            // One fault of etcd's at a time: slow, or between leaders.
            5 if etcd_busy_until <= t && (!plan.etcd_faults || rng.gen_bool(0.5)) => {
                out.push((
                    t,
                    Action::EtcdSlow(rng.gen_range(10..=plan.max_etcd_delay_ms)),
                ));
                out.push((end, Action::EtcdFast));
                etcd_busy_until = end;
            }
            5 if plan.etcd_faults && etcd_busy_until <= t => {
                let elected =
                    (t + rng.gen_range(100..=plan.max_etcd_election_ms)).min(plan.quiet_ms);
                out.push((t, Action::EtcdLeaderChange(elected - t)));
                etcd_busy_until = elected;
            }
            5 => {}
            6 => {
                out.push((t, Action::Stop(m)));
                out.push((end, Action::Restart(m)));
                busy_until[m] = end;
            }
            7 => {
                let delta = rng.gen_range(-plan.max_shift_ms..=plan.max_shift_ms);
                out.push((t, Action::Shift(m, delta)));
            }
            // Asked of the leader, not of `m`: `m` stays free for faults of its own.
            8 => out.push((t, Action::Transfer(m))),
            9 => out.push((t, Action::Resign)),
            _ if lossy_until <= t => {
                let per_mille = rng.gen_range(10..=plan.max_etcd_loss_per_mille);
                out.push((t, Action::EtcdLossy(per_mille, rng.gen())));
                out.push((end, Action::EtcdReliable));
                lossy_until = end;
            }
            _ => {}
        }
    }
    out.push((plan.quiet_ms, Action::Quiet));
    // Stable: actions at the same moment keep the order they were drawn in.
    out.sort_by_key(|(at, _)| *at);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn plan() -> Plan {
        Plan {
            members: 3,
            start_ms: 2_000,
            quiet_ms: 15_000,
            max_fault_ms: 5_000,
            max_shift_ms: 2_000,
            max_etcd_delay_ms: 1_500,
            max_etcd_election_ms: 2_000,
            max_etcd_loss_per_mille: 250,
            etcd_faults: true,
        }
    }

    #[test]
    fn a_seed_gives_one_schedule() {
        let a = schedule(&plan(), &mut ChaCha8Rng::seed_from_u64(7));
        let b = schedule(&plan(), &mut ChaCha8Rng::seed_from_u64(7));
        let c = schedule(&plan(), &mut ChaCha8Rng::seed_from_u64(8));
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn every_fault_ends_by_the_quiet_and_the_quiet_is_last() {
        for seed in 0..50 {
            let s = schedule(&plan(), &mut ChaCha8Rng::seed_from_u64(seed));
            assert_eq!(s.last(), Some(&(15_000, Action::Quiet)));
            assert!(s.iter().all(|(at, _)| (2_000..=15_000).contains(at)));
            for m in 0..3 {
                let opened = s
                    .iter()
                    .filter(|(_, a)| matches!(a, Action::Partition(x) | Action::Hold(x) | Action::Crash(x) | Action::Stop(x) if *x == m))
                    .count();
                let closed = s
                    .iter()
                    .filter(|(_, a)| matches!(a, Action::Repair(x) | Action::Release(x) | Action::Restart(x) if *x == m))
                    .count();
                assert_eq!(opened, closed, "seed {seed} member {m}: {s:?}");
            }
            let slow = s
                .iter()
                .filter(|(_, a)| matches!(a, Action::EtcdSlow(_)))
                .count();
            let fast = s
                .iter()
                .filter(|(_, a)| matches!(a, Action::EtcdFast))
                .count();
            assert_eq!(slow, fast, "seed {seed}: {s:?}");
            let lossy = s
                .iter()
                .filter(|(_, a)| matches!(a, Action::EtcdLossy(..)))
                .count();
            let reliable = s
                .iter()
                .filter(|(_, a)| matches!(a, Action::EtcdReliable))
                .count();
            assert_eq!(lossy, reliable, "seed {seed}: {s:?}");
            for (at, a) in &s {
                if let Action::EtcdLeaderChange(gap) = a {
                    assert!(
                        at + gap <= 15_000,
                        "seed {seed}: elected by the quiet: {s:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn without_etcd_faults_neither_leader_changes_nor_losses_are_drawn() {
        let plan = Plan {
            etcd_faults: false,
            ..plan()
        };
        for seed in 0..50 {
            let s = schedule(&plan, &mut ChaCha8Rng::seed_from_u64(seed));
            assert!(
                s.iter().all(|(_, a)| !matches!(
                    a,
                    Action::EtcdLeaderChange(_) | Action::EtcdLossy(..) | Action::EtcdReliable
                )),
                "seed {seed}: {s:?}"
            );
        }
    }

    #[test]
    fn etcd_faults_do_not_overlap_and_leader_changes_are_drawn() {
        let mut changes = 0;
        for seed in 0..50 {
            let s = schedule(&plan(), &mut ChaCha8Rng::seed_from_u64(seed));
            let mut busy_until = 0;
            for (at, a) in &s {
                let until = match a {
                    Action::EtcdLeaderChange(gap) => {
                        changes += 1;
                        at + gap
                    }
                    Action::EtcdSlow(_) => u64::MAX,
                    Action::EtcdFast => {
                        busy_until = *at;
                        continue;
                    }
                    _ => continue,
                };
                assert!(
                    *at >= busy_until,
                    "seed {seed}: two etcd faults at once: {s:?}"
                );
                busy_until = until;
            }
        }
        assert!(changes >= 20, "only {changes} leader changes in 50 seeds");
    }
}

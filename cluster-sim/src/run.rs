//! The driver of one seed: builds the turmoil simulation (etcd, the members, the client),
//! steps it one simulated millisecond at a time, carries out the nemesis's schedule between
//! steps, checks who serves after every step, and returns the trace and the violations.
//! Owns the order of things in a run; the hosts' programs, the schedule and the verdicts
//! live in their own modules.

use std::rc::Rc;
use std::time::Duration;

use meridian::config::Config;
use meridian::server::mutation::{self, Mutation};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::check::Checker;
use crate::cluster::{Cluster, ETCD, MEMBERS};
use crate::hosts;
use crate::nemesis::{self, Action, Plan};
use crate::placement_client;
use crate::trace::Trace;

/// One seed's settings.
#[derive(Debug, Clone, Copy)]
pub struct SimConfig {
    pub seed: u64,
    pub members: usize,
    /// Whether the nemesis runs (without it: a healthy cluster, for a baseline).
    pub faults: bool,
    /// When the nemesis stops; the run goes on for the liveness bound and a little more.
    pub quiet_ms: u64,
    /// A deliberate bug switched on in the members, for showing the checks find it.
    pub mutation: Option<Mutation>,
    /// Whether the nemesis also changes etcd's leader and makes etcd lose requests (on by
    /// default; off: the schedules of the ledger's first table).
    pub etcd_faults: bool,
    /// Whether a placement client registers stores and splits regions, checked never to lose
    /// an acknowledged one (on by default; off: the runs of the ledger's first table).
    pub placement: bool,
}

impl SimConfig {
    pub fn seed(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            members: 3,
            faults: true,
            quiet_ms: 15_000,
            mutation: None,
            etcd_faults: true,
            placement: true,
        }
    }
}

/// What one seed did.
#[derive(Debug)]
pub struct Outcome {
    pub seed: u64,
    pub trace: Trace,
    pub violations: Vec<String>,
    pub handed_out: u64,
    pub ids_handed_out: u64,
    /// Store registrations and splits acknowledged, and reads of them checked.
    pub placement_acknowledged: u64,
    pub placement_reads: u64,
}

/// When the first faults may come: after the first leader has served for a while.
const FAULTS_FROM_MS: u64 = 3_000;

/// Runs one seed to its end.
pub fn run(cfg: &SimConfig) -> Outcome {
    // The monotonic clock's epoch, before any of the simulation's runtimes exists.
    meridian::election::mono_ms();
    meridian::entropy::seed_this_thread(Some(cfg.seed));
    mutation::set(cfg.mutation);
    let outcome = run_seeded(cfg);
    mutation::set(None);
    meridian::entropy::seed_this_thread(None);
    outcome
}

fn run_seeded(cfg: &SimConfig) -> Outcome {
    assert!((1..=MEMBERS.len()).contains(&cfg.members));
    let config = Config::default();
    let ttl_ms = config.election.lease_ttl_secs as u64 * 1_000;
    let liveness_ms = ttl_ms + 1_000;
    let max_etcd_delay_ms = 1_500;
    // Faults stop at the quiet, or once the requests a slow etcd delayed are answered.
    let end_ms = cfg.quiet_ms + max_etcd_delay_ms + liveness_ms + 1_000;

    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let plan = Plan {
        members: cfg.members,
        start_ms: FAULTS_FROM_MS,
        quiet_ms: cfg.quiet_ms,
        max_fault_ms: 2 * ttl_ms,
        max_shift_ms: 2_000,
        max_etcd_delay_ms,
        max_etcd_election_ms: 2_000,
        max_etcd_loss_per_mille: 250,
        etcd_faults: cfg.etcd_faults,
    };
    let schedule = if cfg.faults {
        nemesis::schedule(&plan, &mut rng)
    } else {
        vec![(cfg.quiet_ms, Action::Quiet)]
    };
    let client_rng = ChaCha8Rng::seed_from_u64(rng.gen());
    let mut sim = turmoil::Builder::new()
        .rng_seed(rng.gen())
        .tick_duration(Duration::from_millis(1))
        .simulation_duration(Duration::from_millis(end_ms + 60_000))
        .min_message_latency(Duration::from_millis(0))
        .max_message_latency(Duration::from_millis(5))
        .enable_random_order()
        .build();

    let cluster = Rc::new(Cluster::new(cfg.members, config));
    let etcd_cluster = cluster.clone();
    sim.host(ETCD, move || hosts::etcd(etcd_cluster.clone()));
    for (i, name) in MEMBERS.iter().enumerate().take(cfg.members) {
        let cluster = cluster.clone();
        sim.host(*name, move || hosts::member(cluster.clone(), i));
    }
    sim.client("client", hosts::client(cluster.clone(), client_rng, end_ms));
    let id_rng = ChaCha8Rng::seed_from_u64(rng.gen());
    sim.client("ids", hosts::id_client(cluster.clone(), id_rng, end_ms));
    if cfg.placement {
        let placement_rng = ChaCha8Rng::seed_from_u64(rng.gen());
        sim.client(
            "placement",
            placement_client::client(cluster.clone(), placement_rng, end_ms),
        );
    }

    let mut actions = schedule.into_iter().peekable();
    loop {
        let now = sim.elapsed().as_millis() as u64;
        while let Some((_, action)) = actions.next_if(|(at, _)| *at <= now) {
            apply(&mut sim, &cluster, cfg.members, now, &action);
        }
        let finished = match sim.step() {
            Ok(finished) => finished,
            Err(e) => {
                cluster
                    .checker
                    .borrow_mut()
                    .violations
                    .push(format!("the simulation failed at {now} ms: {e}"));
                break;
            }
        };
        cluster.observe_serving(sim.elapsed().as_millis() as u64);
        if finished {
            break;
        }
    }
    let end = sim.elapsed().as_millis() as u64;
    let mut checker = std::mem::take(&mut *cluster.checker.borrow_mut());
    checker.finish(liveness_ms);
    let Checker {
        handed_out,
        ids_handed_out,
        placement_acknowledged,
        placement_reads,
        violations,
        ..
    } = checker;
    cluster.note(
        end,
        format!(
            "end handed_out={handed_out} ids={ids_handed_out} placement_acknowledged={placement_acknowledged} placement_reads={placement_reads} violations={}",
            violations.len()
        ),
    );
    for v in &violations {
        cluster.note(end, format!("violation: {v}"));
    }
    Outcome {
        seed: cfg.seed,
        trace: cluster.take_trace(),
        violations,
        handed_out,
        ids_handed_out,
        placement_acknowledged,
        placement_reads,
    }
}

/// Carries out one nemesis action at `now` and traces it.
fn apply(sim: &mut turmoil::Sim<'_>, cluster: &Cluster, members: usize, now: u64, action: &Action) {
    cluster.note(now, format!("nemesis {action:?}"));
    match *action {
        Action::Partition(m) => sim.partition(MEMBERS[m], ETCD),
        Action::Repair(m) => sim.repair(MEMBERS[m], ETCD),
        Action::Hold(m) => sim.hold(MEMBERS[m], ETCD),
        Action::Release(m) => sim.release(MEMBERS[m], ETCD),
        Action::Crash(m) => {
            cluster.down(m);
            sim.crash(MEMBERS[m]);
        }
        Action::Stop(m) => cluster.request_stop(m),
        Action::Restart(m) => {
            cluster.restarting(m);
            sim.bounce(MEMBERS[m]);
        }
        Action::Bounce(m) => {
            cluster.restarting(m);
            sim.bounce(MEMBERS[m]);
        }
        Action::Shift(m, delta) => cluster.shift(m, delta),
        Action::EtcdSlow(ms) => cluster.etcd_delay(now, Duration::from_millis(ms)),
        Action::EtcdFast => cluster.etcd_delay(now, Duration::ZERO),
        Action::EtcdLeaderChange(gap) => {
            cluster.etcd_leader_change(now, Duration::from_millis(gap))
        }
        Action::EtcdLossy(per_mille, seed) => cluster.etcd_loss(per_mille, seed),
        Action::EtcdReliable => cluster.etcd_loss(0, 0),
        Action::Transfer(target) => {
            let asked = cluster
                .leader()
                .filter(|(l, _)| *l != target)
                .map(|(l, m)| {
                    let sent = m.request_transfer(MEMBERS[target]);
                    format!(
                        "{} asked to transfer to {} sent={sent}",
                        MEMBERS[l], MEMBERS[target]
                    )
                });
            cluster.note(
                now,
                asked.unwrap_or_else(|| "no transfer: no other leader".into()),
            );
        }
        Action::Resign => {
            let asked = cluster.leader().map(|(l, m)| {
                let sent = m.request_resign();
                format!("{} asked to resign sent={sent}", MEMBERS[l])
            });
            cluster.note(
                now,
                asked.unwrap_or_else(|| "no resignation: no leader".into()),
            );
        }
        Action::Quiet => {
            for (m, name) in MEMBERS.iter().enumerate().take(members) {
                sim.repair(*name, ETCD);
                sim.release(*name, ETCD);
                if !sim.is_host_running(*name) {
                    cluster.restarting(m);
                    sim.bounce(*name);
                }
                let offset = cluster.offset(m);
                cluster.shift(m, -offset);
            }
            cluster.etcd_delay(now, Duration::ZERO);
            cluster.etcd_elect_now();
            cluster.etcd_loss(0, 0);
            // Faults stop once the last request etcd delayed is answered (a keep-alive sent
            // in a slow spell renews its lease when it is applied, after the spell) and once
            // the leases etcd's last new leader lengthened run on their own TTL again.
            let stopped = now
                .max(cluster.etcd_drained_at())
                .max(cluster.etcd_settled_at());
            cluster.note(now, format!("faults stopped at {stopped}"));
            cluster.checker.borrow_mut().quiet(stopped);
        }
    }
}

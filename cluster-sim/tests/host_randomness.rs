//! tokio's own randomness on a simulated host comes from the simulation's seed: the branch an
//! unbiased `select!` takes, and the waiter list a `watch` receiver waits on (so the order in
//! which a send wakes its receivers). tokio seeds its generator afresh in every process unless
//! told a seed, so the same seed must draw the same in separate processes.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// Set in a child process: the seed to draw from, and the file to write the draws to.
const SEED_VAR: &str = "HOST_RANDOMNESS_SEED";
const OUT_VAR: &str = "HOST_RANDOMNESS_OUT";
const TEST_NAME: &str = "a_hosts_select_and_watch_order_replay_from_the_seed_in_separate_processes";

/// On one host of a simulation seeded with `seed`: the branches 200 unbiased `select!`s of two
/// ready futures took, then for each of 8 sends on one `watch` the order in which its 16
/// receivers woke.
fn draws(seed: u64) -> String {
    let out = Rc::new(RefCell::new(String::new()));
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .tick_duration(Duration::from_millis(1))
        .build();
    let log = out.clone();
    sim.client("host", async move {
        for _ in 0..200 {
            let branch = tokio::select! {
                _ = std::future::ready(()) => 'a',
                _ = std::future::ready(()) => 'b',
            };
            log.borrow_mut().push(branch);
        }
        log.borrow_mut().push('\n');
        let (tx, rx) = tokio::sync::watch::channel(0u32);
        for receiver in 0..16u8 {
            let mut rx = rx.clone();
            let log = log.clone();
            tokio::task::spawn_local(async move {
                while rx.changed().await.is_ok() {
                    log.borrow_mut().push(char::from(b'a' + receiver));
                }
            });
        }
        // Every receiver waits before the first send, and again before each next one.
        tokio::time::sleep(Duration::from_millis(1)).await;
        for round in 1..=8 {
            tx.send_replace(round);
            tokio::time::sleep(Duration::from_millis(1)).await;
            log.borrow_mut().push('\n');
        }
        Ok(())
    });
    sim.run().expect("the simulation runs");
    out.take()
}

/// Runs [`draws`] for `seed` in a new process (this test binary, running only this test).
fn draws_in_a_process(seed: u64, dir: &std::path::Path, name: &str) -> String {
    let path = dir.join(name);
    let status = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads", "1"])
        .env(SEED_VAR, seed.to_string())
        .env(OUT_VAR, &path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run the test binary");
    assert!(status.success(), "{status}");
    std::fs::read_to_string(&path).expect("the draws")
}

#[test]
fn a_hosts_select_and_watch_order_replay_from_the_seed_in_separate_processes() {
    if let (Ok(seed), Ok(out)) = (std::env::var(SEED_VAR), std::env::var(OUT_VAR)) {
        let seed = seed.parse().expect("a seed");
        std::fs::write(out, draws(seed)).expect("write the draws");
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let a = draws_in_a_process(5, dir.path(), "a");
    let b = draws_in_a_process(5, dir.path(), "b");
    let lines: Vec<&str> = a.lines().collect();
    assert_eq!(lines.len(), 9, "{a}");
    assert!(
        lines[0].contains('a') && lines[0].contains('b'),
        "the select! took both branches: {}",
        lines[0]
    );
    assert!(
        lines[1..].iter().all(|l| l.len() == 16),
        "every receiver woke on every send:\n{a}"
    );
    assert_eq!(a, b, "two processes drew otherwise from seed 5");
    let other = draws_in_a_process(6, dir.path(), "c");
    assert_ne!(a, other, "another seed, other draws");
}

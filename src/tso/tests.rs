//! Property tests of the TSO invariants over an injected clock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Op {
    Allocate(u32),
    /// Moves the injected clock by a signed amount (a jump back is allowed).
    Clock(i64),
    Renew,
    /// Simulates a restart: a fresh allocator planned from the last persisted limit.
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop_oneof![1u32..=16, 1u32..=MAX_COUNT, Just(MAX_COUNT)].prop_map(Op::Allocate),
        2 => (-20_000i64..5_000).prop_map(Op::Clock),
        2 => Just(Op::Renew),
        1 => Just(Op::Restart),
    ]
}

fn config() -> impl Strategy<Value = WindowConfig> {
    (10u64..5_000, 0u64..2_000).prop_flat_map(|(window_ms, max_lead_ms)| {
        (1..window_ms).prop_map(move |renew_below_ms| WindowConfig {
            window_ms,
            renew_below_ms,
            max_lead_ms,
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// T1 (single thread), T2, T3, T5, T6 over random sequences, restarts included.
    #[test]
    fn invariants_hold_over_random_histories(cfg in config(), start in 1u64..1 << 40,
                                             ops in proptest::collection::vec(op(), 1..200)) {
        let mut now = start;
        let mut persisted = cfg.plan_start(now, None);
        let mut alloc = Allocator::new(cfg.max_lead_ms);
        alloc.begin(persisted.start_ms, persisted.limit_ms, now);
        let mut limit = persisted.limit_ms;
        let mut floor = persisted.start_ms;
        let mut highest: Option<Timestamp> = None;

        for op in ops {
            match op {
                Op::Allocate(count) => match alloc.allocate(count) {
                    Ok(range) => {
                        prop_assert_eq!(range.count, count);
                        if let Some(h) = highest {
                            prop_assert!(range.first > h, "T1: {:?} after {:?}", range.first, h);
                        }
                        prop_assert!(range.last().physical_ms() < limit, "T2");
                        prop_assert!(range.last().physical_ms() <= now.max(floor) + cfg.max_lead_ms, "T5");
                        highest = Some(range.last());
                    }
                    Err(AllocError::Exhausted) => {}
                    Err(e) => prop_assert!(false, "unexpected {e}"),
                },
                Op::Clock(delta) => {
                    now = now.saturating_add_signed(delta).max(1);
                    alloc.tick(now);
                }
                Op::Renew => {
                    if let Some(next) = cfg.plan_renewal(now, alloc.current().physical_ms(), limit) {
                        prop_assert!(next > limit);
                        limit = next;
                        alloc.raise_limit(next);
                    }
                }
                Op::Restart => {
                    persisted = cfg.plan_start(now, Some(limit));
                    prop_assert!(persisted.start_ms > limit, "T3");
                    prop_assert!(persisted.limit_ms > persisted.start_ms);
                    limit = persisted.limit_ms;
                    floor = persisted.start_ms;
                    alloc = Allocator::new(cfg.max_lead_ms);
                    alloc.begin(persisted.start_ms, persisted.limit_ms, now);
                }
            }
        }
        prop_assert_eq!(alloc.allocate(0), Err(AllocError::InvalidCount), "T6");
        prop_assert_eq!(alloc.allocate(MAX_COUNT + 1), Err(AllocError::InvalidCount), "T6");
    }

    /// T3 never waits for the clock and always starts above the old limit.
    #[test]
    fn start_is_above_last_limit(cfg in config(), now in 0u64..1 << 44, last in 0u64..1 << 44) {
        let plan = cfg.plan_start(now, Some(last));
        prop_assert_eq!(plan.start_ms, now.max(last + 1));
        prop_assert_eq!(plan.limit_ms, plan.start_ms + cfg.window_ms);
    }
}

#[test]
fn logical_overflow_carries_into_physical() {
    let alloc = Allocator::new(1_000);
    alloc.begin(100, 10_000, 100);
    let a = alloc.allocate(MAX_COUNT - 1).unwrap();
    let b = alloc.allocate(2).unwrap();
    assert_eq!(a.first, Timestamp::new(100, 0));
    assert_eq!(b.first, Timestamp::new(100, MAX_COUNT as u64 - 1));
    assert_eq!(b.last(), Timestamp::new(101, 0));
}

#[test]
fn lead_over_clock_is_bounded_then_waits_for_the_clock() {
    let alloc = Allocator::new(2);
    alloc.begin(100, 10_000, 100);
    // 100, 101, 102 are allowed (lead 2); the fourth millisecond must wait.
    for _ in 0..3 {
        alloc.allocate(MAX_COUNT).unwrap();
    }
    assert_eq!(alloc.allocate(1), Err(AllocError::Exhausted));
    assert!(!alloc.can_fit(1));
    alloc.tick(101);
    assert!(alloc.can_fit(1));
    let r = alloc.allocate(1).unwrap();
    assert!(r.first.physical_ms() <= 103);
}

#[test]
fn suspended_allocator_refuses_until_begun_again() {
    let alloc = Allocator::new(1_000);
    assert_eq!(alloc.allocate(1), Err(AllocError::NotServing));
    alloc.begin(10, 100, 10);
    let before = alloc.allocate(1).unwrap();
    alloc.suspend();
    alloc.tick(11);
    alloc.raise_limit(500);
    assert_eq!(alloc.allocate(1), Err(AllocError::NotServing));
    alloc.begin(5, 600, 5);
    assert!(alloc.allocate(1).unwrap().first > before.first);
}

#[test]
fn window_limit_is_never_crossed() {
    let alloc = Allocator::new(10_000);
    alloc.begin(100, 103, 100);
    alloc.tick(500);
    // The clock is past the limit: the physical part stops below it and nothing reaches it.
    let mut last = Timestamp::ZERO;
    while let Ok(r) = alloc.allocate(MAX_COUNT / 2) {
        last = r.last();
    }
    assert_eq!(last.physical_ms(), 102);
}

/// T1 under contention: two threads allocate while a third ticks and renews; every range is
/// disjoint from every other and each thread's ranges increase. A proptest over the window
/// shape and the request sizes, few cases since each races real threads.
fn race(cfg: WindowConfig, max_count: u32) {
    let alloc = Arc::new(Allocator::new(cfg.max_lead_ms));
    let clock = Arc::new(AtomicU64::new(1_000));
    let plan = cfg.plan_start(1_000, None);
    alloc.begin(plan.start_ms, plan.limit_ms, 1_000);
    let stop = Arc::new(AtomicBool::new(false));

    let ticker = {
        let (alloc, clock, stop) = (alloc.clone(), clock.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut limit = plan.limit_ms;
            while !stop.load(Ordering::Relaxed) {
                let now = clock.fetch_add(1, Ordering::Relaxed) + 1;
                alloc.tick(now);
                if let Some(next) = cfg.plan_renewal(now, alloc.current().physical_ms(), limit) {
                    limit = next;
                    alloc.raise_limit(next);
                }
                std::thread::yield_now();
            }
        })
    };
    let workers: Vec<_> = (0..2u32)
        .map(|w| {
            let alloc = alloc.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let mut i = 0u32;
                while got.len() < 200_000 {
                    i = i.wrapping_add(1);
                    let count = 1 + (i.wrapping_mul(2_654_435_761) ^ w) % max_count;
                    match alloc.allocate(count) {
                        Ok(r) => got.push(r),
                        Err(AllocError::Exhausted) => std::thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                }
                got
            })
        })
        .collect();
    let mut all = Vec::new();
    for w in workers {
        let got = w.join().unwrap();
        assert!(
            got.windows(2).all(|p| p[1].first > p[0].last()),
            "per-thread order"
        );
        all.extend(got);
    }
    stop.store(true, Ordering::Relaxed);
    ticker.join().unwrap();
    all.sort_by_key(|r| r.first);
    for pair in all.windows(2) {
        assert!(
            pair[1].first > pair[0].last(),
            "overlap: {:?} {:?}",
            pair[0],
            pair[1]
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn racing_allocations_and_ticks_never_overlap(window_ms in 20u64..200, lead in 1u64..100, max_count in 1u32..1024) {
        let cfg = WindowConfig { window_ms, renew_below_ms: window_ms / 2, max_lead_ms: lead };
        race(cfg, max_count);
    }
}

//! TSO allocator cost: uncontended, two threads contending on the one atomic, and a
//! mutex-guarded counter as the baseline measured in the same run.

use std::hint::black_box;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use meridian::tso::Allocator;

fn serving() -> Allocator {
    let alloc = Allocator::new(u64::MAX / 4);
    // A window far beyond what a bench can use up.
    alloc.begin(1_000, 1 << 40, 1_000);
    alloc
}

/// Runs `per_thread` operations on each of `threads` threads started together and returns the
/// wall time divided by the operations of one thread (so it is the time per operation as seen
/// by each caller).
fn contended(threads: usize, per_thread: u64, op: Arc<dyn Fn() + Send + Sync>) -> Duration {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (barrier, op) = (barrier.clone(), op.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..per_thread {
                    op();
                }
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tso_alloc");
    let alloc = serving();
    // As the server uses it: the reply needs the first timestamp.
    let first = |count: u32| alloc.allocate(count).map(|r| r.first.as_u64()).unwrap_or(0);
    g.bench_function("uncontended/count=1", |b| {
        b.iter(|| black_box(first(black_box(1))))
    });
    g.bench_function("uncontended/count=64", |b| {
        b.iter(|| black_box(first(black_box(64))))
    });
    // The whole `Result<TsRange, _>` forced to memory: adds a store the server never makes.
    g.bench_function("uncontended/whole-result", |b| {
        b.iter(|| black_box(alloc.allocate(black_box(1))))
    });

    let bare = std::sync::atomic::AtomicU64::new(0);
    g.bench_function("uncontended/bare-fetch-add-floor", |b| {
        b.iter(|| black_box(bare.fetch_add(black_box(1), std::sync::atomic::Ordering::AcqRel)))
    });
    let mutex = Mutex::new(0u64);
    g.bench_function("uncontended/mutex-baseline", |b| {
        b.iter(|| {
            let mut next = mutex.lock().unwrap();
            *next += black_box(1);
            black_box(*next)
        })
    });

    let shared = Arc::new(serving());
    g.bench_function("two-threads/count=1", |b| {
        b.iter_custom(|iters| {
            let a = shared.clone();
            let op = move || {
                black_box(a.allocate(1).map(|r| r.first.as_u64()).unwrap_or(0));
            };
            contended(2, iters, Arc::new(op))
        })
    });
    let mutex = Arc::new(Mutex::new(0u64));
    g.bench_function("two-threads/mutex-baseline", |b| {
        b.iter_custom(|iters| {
            let m = mutex.clone();
            contended(
                2,
                iters,
                Arc::new(move || {
                    let mut next = m.lock().unwrap();
                    *next += 1;
                    black_box(*next);
                }),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

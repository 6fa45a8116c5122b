//! Latency recording: one HDR histogram per thread rather than per worker task. Hundreds of
//! per-task histograms do not fit in cache and every record would miss; a thread's own
//! histogram stays hot and its mutex is never contended.
//!
//! For `--plot`, a thread also keeps one coarser histogram (two significant figures) per second
//! of the run, under the same uncontended mutex: the per-second throughput and percentiles are
//! merged from them at the end, with no shared state on the hot path.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;

/// A thread's histograms: the whole run, and (when per-second recording is on) each second.
struct Thread {
    total: Histogram<u64>,
    seconds: Vec<Histogram<u32>>,
}

type Shared = Arc<Mutex<Thread>>;

pub struct Latencies {
    /// Tells this set's thread histograms from an earlier set's (which may have had the
    /// same address) in a thread's cache.
    id: u64,
    threads: Mutex<Vec<Shared>>,
    /// Whether `Recorder::record_at` also keeps per-second histograms.
    per_second: bool,
}

impl Default for Latencies {
    fn default() -> Latencies {
        Latencies::per_second(false)
    }
}

thread_local! {
    static LOCAL: RefCell<Option<(u64, Shared)>> = const { RefCell::new(None) };
}

/// Nanoseconds from 1 ns to one minute, three significant figures.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("constant bounds are valid")
}

/// One second's latencies: two significant figures are plenty for a plot, and keep a second's
/// histogram small (about 15 KB) however long the run.
pub fn second_histogram() -> Histogram<u32> {
    Histogram::new_with_bounds(1, 60_000_000_000, 2).expect("constant bounds are valid")
}

/// A handle on the calling thread's histogram; a task on a single-threaded runtime takes it once.
///
/// Records wait in a small buffer of the handle's own and go into the thread's histogram
/// [`BUFFERED`] at a time, under one lock: a lock per record was two locked instructions per
/// operation, an eighth of the load generator's CPU at millions of operations a second. The
/// buffer is flushed when full and when the handle is dropped, so every record is counted
/// once the tasks holding recorders are done.
pub struct Recorder {
    thread: Shared,
    per_second: bool,
    buffer: RefCell<Vec<(u64, u64)>>,
}

/// Records a [`Recorder`] holds before taking its thread's lock.
pub const BUFFERED: usize = 64;

impl Clone for Recorder {
    fn clone(&self) -> Recorder {
        Recorder::new(self.thread.clone(), self.per_second)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.flush();
    }
}

impl Recorder {
    fn new(thread: Shared, per_second: bool) -> Recorder {
        Recorder {
            thread,
            per_second,
            buffer: RefCell::new(Vec::with_capacity(BUFFERED)),
        }
    }

    pub fn record(&self, nanos: u64) {
        self.record_at(0, nanos);
    }

    /// `record`, for an operation that completed `at_ns` after the run's start: with
    /// per-second recording on, it counts in that second's histogram too.
    pub fn record_at(&self, at_ns: u64, nanos: u64) {
        let mut buffer = self.buffer.borrow_mut();
        buffer.push((at_ns, nanos));
        if buffer.len() >= BUFFERED {
            self.record_all(&mut buffer);
        }
    }

    /// Moves the buffered records into the thread's histograms.
    pub fn flush(&self) {
        self.record_all(&mut self.buffer.borrow_mut());
    }

    fn record_all(&self, buffer: &mut Vec<(u64, u64)>) {
        if buffer.is_empty() {
            return;
        }
        let mut t = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        for (at_ns, nanos) in buffer.drain(..) {
            let nanos = nanos.clamp(1, 60_000_000_000);
            let _ = t.total.record(nanos);
            if self.per_second {
                let second = (at_ns / 1_000_000_000) as usize;
                if second >= t.seconds.len() {
                    t.seconds.resize_with(second + 1, second_histogram);
                }
                let _ = t.seconds[second].record(nanos);
            }
        }
    }
}

impl Latencies {
    /// Latencies that also keep a histogram per second of the run (see `Recorder::record_at`).
    pub fn per_second(on: bool) -> Latencies {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Latencies {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            threads: Mutex::new(Vec::new()),
            per_second: on,
        }
    }

    /// The calling thread's recorder, created on first use.
    pub fn recorder(&self) -> Recorder {
        let me = self.id;
        LOCAL.with(|local| {
            let mut local = local.borrow_mut();
            match local.as_ref() {
                Some((owner, h)) if *owner == me => Recorder::new(h.clone(), self.per_second),
                _ => {
                    let h: Shared = Arc::new(Mutex::new(Thread {
                        total: histogram(),
                        seconds: Vec::new(),
                    }));
                    self.threads
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(h.clone());
                    *local = Some((me, h.clone()));
                    Recorder::new(h, self.per_second)
                }
            }
        })
    }

    /// All threads' histograms added together.
    pub fn merged(&self) -> Histogram<u64> {
        let mut all = histogram();
        for h in self
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let _ = all.add(&h.lock().unwrap_or_else(|e| e.into_inner()).total);
        }
        all
    }

    /// Each second's histogram, all threads' added together (empty without per-second
    /// recording). A second in which nothing completed has an empty histogram.
    pub fn merged_seconds(&self) -> Vec<Histogram<u32>> {
        let mut all: Vec<Histogram<u32>> = Vec::new();
        for h in self
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let t = h.lock().unwrap_or_else(|e| e.into_inner());
            if all.len() < t.seconds.len() {
                all.resize_with(t.seconds.len(), second_histogram);
            }
            for (sum, s) in all.iter_mut().zip(&t.seconds) {
                let _ = sum.add(s);
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_from_several_threads_are_merged() {
        let l = Arc::new(Latencies::default());
        let l2 = l.clone();
        std::thread::spawn(move || l2.recorder().record(1_000))
            .join()
            .unwrap();
        l.recorder().record(3_000);
        let h = l.merged();
        assert_eq!(h.len(), 2);
        assert_eq!(h.max(), h.highest_equivalent(3_000));
        assert!(l.merged_seconds().is_empty(), "per-second recording is off");
    }

    #[test]
    fn per_second_histograms_are_merged_by_second() {
        let l = Arc::new(Latencies::per_second(true));
        let l2 = l.clone();
        std::thread::spawn(move || l2.recorder().record_at(2_500_000_000, 1_000))
            .join()
            .unwrap();
        let r = l.recorder();
        r.record_at(100, 2_000);
        r.record_at(999_999_999, 2_000);
        r.record_at(2_000_000_000, 4_000);
        drop(r);
        let seconds = l.merged_seconds();
        let counts: Vec<u64> = seconds.iter().map(|h| h.len()).collect();
        assert_eq!(counts, vec![2, 0, 2]);
        assert_eq!(l.merged().len(), 4);
    }

    #[test]
    fn a_new_set_on_the_same_thread_starts_empty() {
        for _ in 0..3 {
            // Each set on the stack, likely at the address of the one before.
            let l = Latencies::per_second(true);
            l.recorder().record_at(0, 1_000);
            assert_eq!(l.merged().len(), 1);
            assert_eq!(l.merged_seconds().len(), 1);
        }
    }

    #[test]
    fn buffered_records_count_once_full_or_dropped() {
        let l = Latencies::default();
        let r = l.recorder();
        for i in 0..BUFFERED as u64 + 5 {
            r.record(1_000 + i);
        }
        assert_eq!(l.merged().len(), BUFFERED as u64, "a full buffer goes in");
        let clone = r.clone();
        clone.record(7);
        drop(r);
        assert_eq!(
            l.merged().len(),
            BUFFERED as u64 + 5,
            "the rest at the drop"
        );
        clone.flush();
        assert_eq!(
            l.merged().len(),
            BUFFERED as u64 + 6,
            "a clone keeps its own"
        );
    }
}

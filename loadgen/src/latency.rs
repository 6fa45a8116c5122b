//! Latency recording: one HDR histogram per thread rather than per worker task. Hundreds of
//! per-task histograms do not fit in cache and every record would miss; a thread's own
//! histogram stays hot and its mutex is never contended.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;

type Shared = Arc<Mutex<Histogram<u64>>>;

#[derive(Default)]
pub struct Latencies {
    threads: Mutex<Vec<Shared>>,
}

thread_local! {
    static LOCAL: RefCell<Option<(usize, Shared)>> = const { RefCell::new(None) };
}

/// Nanoseconds from 1 ns to one minute, three significant figures.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("constant bounds are valid")
}

/// A handle on the calling thread's histogram; a task on a single-threaded runtime takes it once.
#[derive(Clone)]
pub struct Recorder(Shared);

impl Recorder {
    pub fn record(&self, nanos: u64) {
        let mut h = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = h.record(nanos.clamp(1, 60_000_000_000));
    }
}

impl Latencies {
    /// The calling thread's recorder, created on first use.
    pub fn recorder(&self) -> Recorder {
        let me = self as *const Latencies as usize;
        LOCAL.with(|local| {
            let mut local = local.borrow_mut();
            match local.as_ref() {
                Some((owner, h)) if *owner == me => Recorder(h.clone()),
                _ => {
                    let h: Shared = Arc::new(Mutex::new(histogram()));
                    self.threads
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(h.clone());
                    *local = Some((me, h.clone()));
                    Recorder(h)
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
            let _ = all.add(&*h.lock().unwrap_or_else(|e| e.into_inner()));
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
    }
}

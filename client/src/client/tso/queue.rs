//! The TSO waiter queue: where concurrent `get_ts` calls wait to be merged into one request.
//!
//! It owns the open batch (calls queued since a stream last took one), the batches closed at
//! [`MAX_COUNT`] and waiting for a stream, and each batch's outcome. It does no I/O and knows
//! nothing of streams or retries: the dispatcher's workers (`super`) take batches, ask the
//! server for that many timestamps and complete them here.
//!
//! A call costs one uncontended lock, one waker clone and one reference on its batch: no
//! per-call allocation and no channel. A batch's callers share one [`Batch`]; the worker
//! publishes its outcome once and wakes them all in one pass, and each caller reads
//! `first + position`. A caller that gives up leaves its position unused: a timestamp skipped,
//! never one handed out twice.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use crate::client::error::ClientError;
use crate::tso::{Timestamp, MAX_COUNT};

/// One request's worth of callers.
#[derive(Default)]
pub struct Batch {
    outcome: OnceLock<Result<u64, ClientError>>,
    /// Wakers of callers polled again before the outcome (a select, a spurious wake): the
    /// batch's own list has gone to the worker with the batch.
    late: Mutex<Vec<Waker>>,
}

/// A caller's place: its batch and its position in it.
pub struct Ticket {
    batch: Arc<Batch>,
    position: u32,
}

/// A closed batch handed to a worker: ask for `count()` timestamps, then [`Taken::complete`].
pub struct Taken {
    batch: Arc<Batch>,
    wakers: Vec<Waker>,
}

struct Open {
    batch: Arc<Batch>,
    wakers: Vec<Waker>,
}

impl Open {
    fn new() -> Open {
        Open {
            batch: Arc::default(),
            wakers: Vec::new(),
        }
    }
}

struct Inner {
    open: Open,
    /// Batches that reached [`MAX_COUNT`], oldest first.
    full: VecDeque<Open>,
    closed: bool,
}

pub struct Queue {
    inner: Mutex<Inner>,
}

impl Default for Queue {
    fn default() -> Queue {
        Queue {
            inner: Mutex::new(Inner {
                open: Open::new(),
                full: VecDeque::new(),
                closed: false,
            }),
        }
    }
}

/// What [`Queue::join`] tells the caller.
pub struct Joined {
    pub ticket: Ticket,
    /// The caller is the first waiter with no batch ahead of it: a worker may be idle and must
    /// be told.
    pub wake_worker: bool,
}

impl Queue {
    /// Queues a caller whose task `waker` wakes; `Err` once the queue is closed.
    pub fn join(&self, waker: &Waker) -> Result<Joined, ClientError> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.closed {
            return Err(ClientError::Closed);
        }
        if inner.open.wakers.len() == MAX_COUNT as usize {
            let full = std::mem::replace(&mut inner.open, Open::new());
            inner.full.push_back(full);
        }
        let wake_worker = inner.open.wakers.is_empty() && inner.full.is_empty();
        let position = inner.open.wakers.len() as u32;
        inner.open.wakers.push(waker.clone());
        Ok(Joined {
            ticket: Ticket {
                batch: inner.open.batch.clone(),
                position,
            },
            wake_worker,
        })
    }

    /// The oldest batch with callers, closed to new ones; `None` if nobody waits.
    pub fn take(&self) -> Option<Taken> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let open = match inner.full.pop_front() {
            Some(full) => full,
            None if inner.open.wakers.is_empty() => return None,
            None => std::mem::replace(&mut inner.open, Open::new()),
        };
        Some(Taken {
            batch: open.batch,
            wakers: open.wakers,
        })
    }

    /// Refuses new callers; the ones already queued are still taken and completed.
    pub fn close(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
    }

    pub fn is_closed(&self) -> bool {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).closed
    }
}

impl Taken {
    /// Timestamps to ask for: one per caller, within `1..=MAX_COUNT`.
    pub fn count(&self) -> u32 {
        self.wakers.len() as u32
    }

    /// Hands out `first..first + count()` (or the error) and wakes every caller.
    pub fn complete(mut self, outcome: Result<u64, ClientError>) {
        self.finish(outcome);
    }

    fn finish(&mut self, outcome: Result<u64, ClientError>) {
        let _ = self.batch.outcome.set(outcome);
        for waker in self.wakers.drain(..) {
            waker.wake();
        }
        let late = std::mem::take(&mut *self.batch.late.lock().unwrap_or_else(|e| e.into_inner()));
        for waker in late {
            waker.wake();
        }
    }
}

/// A batch dropped uncompleted (its worker's task cancelled) fails its callers rather than
/// leaving them waiting forever.
impl Drop for Taken {
    fn drop(&mut self) {
        if self.batch.outcome.get().is_none() {
            self.finish(Err(ClientError::Closed));
        }
    }
}

impl Ticket {
    /// The caller's timestamp once its batch is complete.
    pub fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<Timestamp, ClientError>> {
        if let Some(outcome) = self.ready() {
            return Poll::Ready(outcome);
        }
        // Checked again under the lock `complete` drains after publishing: either the outcome
        // is seen here or this waker is in the list it wakes.
        let mut late = self.batch.late.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(outcome) = self.ready() {
            return Poll::Ready(outcome);
        }
        if !late.iter().any(|w| w.will_wake(cx.waker())) {
            late.push(cx.waker().clone());
        }
        Poll::Pending
    }

    fn ready(&self) -> Option<Result<Timestamp, ClientError>> {
        self.batch.outcome.get().map(|outcome| match outcome {
            Ok(first) => Ok(Timestamp::from_u64(first + u64::from(self.position))),
            Err(e) => Err(e.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use proptest::prelude::*;

    use super::*;

    /// Counts its wakes.
    #[derive(Default)]
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    struct Caller {
        ticket: Ticket,
        wakes: Arc<Counter>,
        /// Timestamps already handed out when this caller joined.
        seen_before: Option<u64>,
        got: Option<Result<u64, ClientError>>,
    }

    fn poll(ticket: &Ticket, wakes: &Arc<Counter>) -> Poll<Result<Timestamp, ClientError>> {
        let waker = Waker::from(wakes.clone());
        ticket.poll(&mut Context::from_waker(&waker))
    }

    #[derive(Debug, Clone)]
    enum Step {
        Join,
        Take,
        /// Completes the `n`th batch in flight (modulo), with an error if `fail`.
        Complete {
            n: usize,
            fail: bool,
        },
        /// A worker's task cancelled with the `n`th batch in flight.
        Abandon {
            n: usize,
        },
        /// Polls the `n`th caller again before its batch is done.
        Repoll {
            n: usize,
        },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => Just(Step::Join),
            2 => Just(Step::Take),
            2 => (any::<usize>(), proptest::bool::weighted(0.1))
                .prop_map(|(n, fail)| Step::Complete { n, fail }),
            1 => any::<usize>().prop_map(|n| Step::Abandon { n }),
            1 => any::<usize>().prop_map(|n| Step::Repoll { n }),
        ]
    }

    proptest! {
        /// Against a server that hands out consecutive ranges in the order requests complete:
        /// every caller is woken and answered once its batch completes, no timestamp goes to
        /// two callers, a call made after another was answered gets a larger timestamp, and a
        /// batch asks for exactly its callers.
        #[test]
        fn every_caller_gets_its_own_timestamp_in_order(steps in proptest::collection::vec(step(), 1..200)) {
            let queue = Queue::default();
            let mut callers: Vec<Caller> = Vec::new();
            let mut in_flight: Vec<(Taken, Vec<usize>)> = Vec::new();
            // Callers joined since the last take, in order.
            let mut open: Vec<usize> = Vec::new();
            let mut next_ts = 1u64;
            let mut highest: Option<u64> = None;
            let settle = |callers: &mut Vec<Caller>, highest: &mut Option<u64>| {
                for c in callers.iter_mut().filter(|c| c.got.is_none()) {
                    if let Poll::Ready(r) = poll(&c.ticket, &c.wakes) {
                        let r = r.map(|ts| ts.as_u64());
                        if let Ok(ts) = r {
                            *highest = Some(highest.map_or(ts, |h| h.max(ts)));
                        }
                        c.got = Some(r);
                    }
                }
            };
            for s in steps {
                match s {
                    Step::Join => {
                        let wakes = Arc::new(Counter::default());
                        let joined = queue.join(&Waker::from(wakes.clone())).unwrap();
                        prop_assert_eq!(joined.wake_worker, open.is_empty());
                        open.push(callers.len());
                        callers.push(Caller { ticket: joined.ticket, wakes, seen_before: highest, got: None });
                    }
                    Step::Take => match queue.take() {
                        Some(t) => {
                            prop_assert_eq!(t.count() as usize, open.len());
                            in_flight.push((t, std::mem::take(&mut open)));
                        }
                        None => prop_assert!(open.is_empty()),
                    },
                    Step::Complete { n, fail } if !in_flight.is_empty() => {
                        let (t, members) = in_flight.remove(n % in_flight.len());
                        let count = u64::from(t.count());
                        let batch = Arc::as_ptr(&t.batch);
                        t.complete(if fail { Err(ClientError::Unavailable("test".into())) } else { Ok(next_ts) });
                        if !fail {
                            next_ts += count;
                        }
                        prop_assert!(!members.is_empty());
                        // Every waker of the batch, a re-polled caller's second one included.
                        for (i, c) in callers.iter().enumerate() {
                            if Arc::as_ptr(&c.ticket.batch) == batch {
                                prop_assert!(c.wakes.0.load(Ordering::SeqCst) >= 1, "caller {} not woken", i);
                            }
                        }
                        settle(&mut callers, &mut highest);
                    }
                    Step::Abandon { n } if !in_flight.is_empty() => {
                        let (t, members) = in_flight.remove(n % in_flight.len());
                        drop(t);
                        settle(&mut callers, &mut highest);
                        for m in members {
                            prop_assert!(matches!(callers[m].got, Some(Err(ClientError::Closed))));
                        }
                    }
                    Step::Repoll { n } if !callers.is_empty() => {
                        let c = &callers[n % callers.len()];
                        if c.got.is_none() {
                            // A second waker, as a select would give: it must be woken too.
                            let other = Arc::new(Counter::default());
                            prop_assert!(poll(&c.ticket, &other).is_pending());
                            callers.push(Caller {
                                ticket: Ticket { batch: c.ticket.batch.clone(), position: c.ticket.position },
                                wakes: other,
                                seen_before: c.seen_before,
                                got: None,
                            });
                        }
                    }
                    _ => {}
                }
            }
            // Every caller still waiting is waiting on a batch not yet completed.
            let mut seen = std::collections::HashMap::new();
            for (i, c) in callers.iter().enumerate() {
                if let Some(Ok(ts)) = c.got {
                    if let Some(before) = c.seen_before {
                        prop_assert!(ts > before, "caller {} got {} after {} was handed out", i, ts, before);
                    }
                    let key = (Arc::as_ptr(&c.ticket.batch), c.ticket.position);
                    if let Some(other) = seen.insert(ts, key) {
                        prop_assert_eq!(other, key, "timestamp {} went to two callers", ts);
                    }
                }
            }
        }
    }

    #[test]
    fn a_batch_never_asks_for_more_than_max_count() {
        let queue = Queue::default();
        let waker = Waker::from(Arc::new(Counter::default()));
        let tickets: Vec<_> = (0..MAX_COUNT as usize + 3)
            .map(|_| queue.join(&waker).unwrap().ticket)
            .collect();
        let first = queue.take().unwrap();
        let second = queue.take().unwrap();
        assert_eq!((first.count(), second.count()), (MAX_COUNT, 3));
        assert!(queue.take().is_none());
        second.complete(Ok(1));
        first.complete(Ok(10));
        let last = poll(&tickets[MAX_COUNT as usize + 2], &Arc::default());
        assert!(matches!(last, Poll::Ready(Ok(ts)) if ts.as_u64() == 3));
    }

    #[test]
    fn a_closed_queue_refuses_callers_but_serves_the_queued_ones() {
        let queue = Queue::default();
        let wakes = Arc::new(Counter::default());
        let ticket = queue.join(&Waker::from(wakes.clone())).unwrap().ticket;
        queue.close();
        assert!(matches!(
            queue.join(&Waker::from(wakes.clone())),
            Err(ClientError::Closed)
        ));
        queue.take().unwrap().complete(Ok(7));
        assert!(matches!(poll(&ticket, &wakes), Poll::Ready(Ok(ts)) if ts.as_u64() == 7));
        assert!(queue.take().is_none());
    }
}

//! What placement has changed and not yet made durable: the ids of regions and stores whose
//! persisted form is out of date, and the generation of flushes that made them durable.
//!
//! A set, not a queue of copies: a region changed a thousand times before the next flush is one
//! entry, and the persister writes what the index holds at flush time, so the set is bounded by
//! the number of regions and stores whatever the rate of changes. A caller that must not
//! acknowledge a change before it is durable (split reports, epoch changes) keeps the
//! generation its mark returned and waits for it; while etcd is slow those callers wait, which
//! slows the stores that report changes instead of growing memory.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{watch, Notify};

pub struct DirtySet {
    inner: Mutex<Inner>,
    /// Wakes the persister after a mark.
    pub wake: Notify,
    /// What is durable, as waiters read it.
    durable: watch::Sender<Durable>,
}

/// The latest generation whose marks are all durable, and where the current term's
/// generations start: a mark of an earlier term is durable only if it was before that term
/// ended, never by a later term's flush, which writes that term's own index (a change the old
/// term applied and never wrote may not be in it).
#[derive(Debug, Clone, Copy, Default)]
struct Durable {
    generation: u64,
    term_floor: u64,
    /// `generation` when the current term began.
    before_floor: u64,
}

#[derive(Default)]
struct Inner {
    regions: BTreeSet<u64>,
    stores: BTreeSet<u64>,
    /// The generation the next flush carries: every mark made now is in it.
    next: u64,
}

/// One flush's worth: what to write, and the generation it makes durable.
pub struct Taken {
    pub regions: BTreeSet<u64>,
    pub stores: BTreeSet<u64>,
    pub generation: u64,
}

impl Default for DirtySet {
    fn default() -> Self {
        DirtySet {
            inner: Mutex::new(Inner {
                next: 1,
                ..Inner::default()
            }),
            wake: Notify::new(),
            durable: watch::Sender::new(Durable::default()),
        }
    }
}

impl DirtySet {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every critical section leaves the sets valid, even if a panic interrupted its caller.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Region `id` changed or left the map; returns the generation to wait for.
    pub fn region(&self, id: u64) -> u64 {
        let generation = {
            let mut inner = self.inner();
            inner.regions.insert(id);
            inner.next
        };
        self.wake.notify_one();
        generation
    }

    /// Store `id` changed; returns the generation to wait for.
    pub fn store(&self, id: u64) -> u64 {
        let generation = {
            let mut inner = self.inner();
            inner.stores.insert(id);
            inner.next
        };
        self.wake.notify_one();
        generation
    }

    /// Takes everything marked so far for one flush (`None` if nothing is).
    pub fn take(&self) -> Option<Taken> {
        let mut inner = self.inner();
        if inner.regions.is_empty() && inner.stores.is_empty() {
            return None;
        }
        let generation = inner.next;
        inner.next += 1;
        Some(Taken {
            regions: std::mem::take(&mut inner.regions),
            stores: std::mem::take(&mut inner.stores),
            generation,
        })
    }

    /// A flush of `taken` failed: its ids go back, into the generation after it, and its
    /// waiters keep waiting (for that later generation, which covers theirs).
    pub fn put_back(&self, taken: Taken) {
        let mut inner = self.inner();
        inner.regions.extend(taken.regions);
        inner.stores.extend(taken.stores);
    }

    /// `generation` was written.
    pub fn durable(&self, generation: u64) {
        self.durable.send_if_modified(|d| {
            let newer = generation > d.generation;
            d.generation = d.generation.max(generation);
            newer
        });
    }

    /// Waits until every mark of `generation` is durable; false after `timeout`, or at once
    /// when its term ended before it was written.
    pub async fn wait(&self, generation: u64, timeout: Duration) -> bool {
        let mut rx = self.durable.subscribe();
        let reached = tokio::time::timeout(timeout, async {
            match rx
                .wait_for(|d| generation < d.term_floor || d.generation >= generation)
                .await
            {
                Ok(d) => generation >= d.term_floor || generation <= d.before_floor,
                Err(_) => false,
            }
        })
        .await;
        reached.unwrap_or(false)
    }

    /// The generation to wait for before acknowledging something already applied that a
    /// change marked earlier may still hold unwritten (a report that repeats a change, found
    /// at its epoch): every mark made so far is durable once it is. 0 when nothing marked in
    /// this term is unwritten.
    pub fn settled(&self) -> u64 {
        let inner = self.inner();
        if !inner.regions.is_empty() || !inner.stores.is_empty() {
            return inner.next;
        }
        // Nothing waits to be taken; the last generation taken may still be in flight.
        let taken = inner.next - 1;
        let d = *self.durable.borrow();
        if taken < d.term_floor || taken <= d.generation {
            0
        } else {
            taken
        }
    }

    /// Entries not yet written.
    pub fn len(&self) -> usize {
        let inner = self.inner();
        inner.regions.len() + inner.stores.len()
    }

    /// Forgets what is marked (a term ended, or a new one reloads everything): the marks
    /// made so far are durable only if they already were, and generations start again past
    /// them.
    pub fn clear(&self) {
        let mut inner = self.inner();
        inner.regions.clear();
        inner.stores.clear();
        inner.next += 1;
        let floor = inner.next;
        self.durable.send_modify(|d| {
            d.before_floor = d.generation;
            d.term_floor = floor;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change acknowledged only once durable must not be acknowledged by the flush of a later
    /// term, which writes that term's own index: a term that ends fails its waiters, unless
    /// their generation was written before it ended.
    #[tokio::test]
    async fn a_later_terms_flush_does_not_make_an_earlier_terms_marks_durable() {
        let d = DirtySet::default();
        let written = d.region(1);
        d.durable(d.take().unwrap().generation);
        let unwritten = d.region(2);
        d.clear();
        let next_term = d.region(3);
        assert!(next_term > unwritten);
        d.durable(d.take().unwrap().generation);
        assert!(!d.wait(unwritten, Duration::from_millis(10)).await);
        assert!(d.wait(written, Duration::from_millis(10)).await);
        assert!(d.wait(next_term, Duration::from_millis(10)).await);
    }

    /// A repeated change waits for whatever is marked and unwritten, in the set or in a flush
    /// under way, and not at all once everything is written or its term has ended.
    #[tokio::test]
    async fn settled_covers_every_mark_made_so_far() {
        let d = DirtySet::default();
        assert_eq!(d.settled(), 0, "nothing marked");
        let g = d.region(4);
        assert_eq!(d.settled(), g, "marked, not taken");
        let taken = d.take().unwrap();
        assert_eq!(d.settled(), g, "taken, in flight");
        assert!(!d.wait(d.settled(), Duration::from_millis(10)).await);
        d.put_back(taken);
        assert!(
            d.settled() > g,
            "a failed flush's marks wait for the next one"
        );
        let again = d.take().unwrap();
        d.durable(again.generation);
        assert_eq!(d.settled(), 0, "everything written");
        d.region(5);
        d.clear();
        assert_eq!(
            d.settled(),
            0,
            "an ended term's marks are not this term's to wait for"
        );
    }

    #[tokio::test]
    async fn marks_coalesce_and_are_durable_once_their_generation_is_written() {
        let d = DirtySet::default();
        let g = d.region(7);
        assert_eq!(
            d.region(7),
            g,
            "a second mark of the same region is the same entry"
        );
        d.store(3);
        assert_eq!(d.len(), 2);
        let taken = d.take().unwrap();
        assert_eq!(taken.generation, g);
        assert_eq!(taken.regions.into_iter().collect::<Vec<_>>(), vec![7]);
        // A mark made during the flush belongs to the next one.
        let later = d.region(9);
        assert!(later > g);
        d.durable(g);
        assert!(d.wait(g, Duration::from_millis(10)).await);
        assert!(!d.wait(later, Duration::from_millis(10)).await);
        assert!(d.take().is_some_and(|t| t.generation == later));
        assert!(d.take().is_none());
    }

    #[tokio::test]
    async fn a_failed_flush_keeps_its_waiters_until_a_later_one_succeeds() {
        let d = DirtySet::default();
        let g = d.region(1);
        let failed = d.take().unwrap();
        d.put_back(failed);
        assert!(!d.wait(g, Duration::from_millis(10)).await);
        let retry = d.take().unwrap();
        assert!(retry.regions.contains(&1) && retry.generation > g);
        d.durable(retry.generation);
        assert!(d.wait(g, Duration::from_millis(10)).await);
    }
}

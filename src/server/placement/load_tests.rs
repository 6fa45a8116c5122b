//! A term's load against a store whose every call takes a while: the records are read at
//! once, not one round trip after another.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::admin::Metrics;
use crate::clock::WallClock;
use crate::meta::{KeyValue, LocalStore, WriteOp};
use crate::placement::{Limits, ScheduleConfig};

/// A store whose calls each wait `DELAY` first, counting how many are in flight at once.
struct Slow {
    inner: LocalStore,
    in_flight: AtomicUsize,
    most: AtomicUsize,
    calls: AtomicUsize,
}

const DELAY: Duration = Duration::from_millis(5);

impl Slow {
    async fn call<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(DELAY).await;
        let out = f.await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        out
    }
}

impl MetaStore for Slow {
    async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, MetaError> {
        self.call(self.inner.get(key)).await
    }
    async fn put(&self, key: &[u8], value: &[u8]) -> Result<(), MetaError> {
        self.call(self.inner.put(key, value)).await
    }
    async fn delete(&self, key: &[u8]) -> Result<(), MetaError> {
        self.call(self.inner.delete(key)).await
    }
    async fn create(&self, key: &[u8], value: &[u8]) -> Result<Vec<u8>, MetaError> {
        self.call(self.inner.create(key, value)).await
    }
    async fn batch(&self, ops: Vec<WriteOp>) -> Result<(), MetaError> {
        self.call(self.inner.batch(ops)).await
    }
    async fn scan(&self, prefix: &[u8], page: usize) -> Result<Vec<KeyValue>, MetaError> {
        self.call(self.inner.scan(prefix, page)).await
    }
}

#[tokio::test]
async fn a_terms_records_are_read_at_once_not_one_after_another() {
    let dir = tempfile::tempdir().unwrap();
    let store = Slow {
        inner: LocalStore::open(dir.path()).unwrap(),
        in_flight: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
        calls: AtomicUsize::new(0),
    };
    let (state, _shards) = PlacementState::new(
        7,
        1,
        ScheduleConfig::default(),
        Limits::default(),
        Arc::new(WallClock::default()),
        Keys::new(1),
        Arc::new(Metrics::new(1)),
    );
    let keys = Keys::new(1);
    let from_copy = load(&state, &store, &keys, Some(b"controller"))
        .await
        .unwrap();
    assert!(
        !from_copy,
        "no syncer copy: the regions come from the store"
    );
    let (calls, most) = (
        store.calls.load(Ordering::SeqCst),
        store.most.load(Ordering::SeqCst),
    );
    assert!(calls >= 20, "a term reads about two dozen records: {calls}");
    assert!(
        most >= 10,
        "at most {most} of {calls} calls in flight at once: the records were read in turn"
    );
    // What was read is in place: a fresh cluster, an id block written, PD's default rule.
    assert!(!state.bootstrapped.load(Ordering::Acquire));
    assert_eq!(state.stores().len(), 0);
    assert!(store.inner.get_blocking(&keys.id_end()).unwrap().is_some());
    assert!(store.inner.get_blocking(b"controller").unwrap().is_some());
}

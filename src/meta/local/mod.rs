//! The embedded store: an in-memory map made durable by a write-ahead log (`meta.wal`, every
//! record checksummed and fsynced before `put` returns) and a snapshot (`meta.snap`, replaced
//! atomically by write, fsync, rename, fsync of the directory).
//!
//! - this file: the handle ([`LocalStore`]), its state under one lock, and the `MetaStore`
//!   contract over them;
//! - `open`: recovery, which tells a torn tail (cut) from damage in the middle (refused);
//! - `write`: the append path and fail-stop;
//! - `compact`: folding the log into a new snapshot;
//! - `slot`: where each value lives (memory or a file) and replaying records into the map.
//!
//! Values over `slot::INLINE_MAX` (region buckets) stay where the log or snapshot wrote them,
//! read back with `pread`: placement holds regions decoded and reads them only when a term
//! begins, so a copy here was ~190 B per region for nothing (tuning.md). Records:
//! `super::record`.
//!
//! Must not touch: what keys and values mean; decisions about what to write are the callers'.

mod compact;
mod open;
mod slot;
#[cfg(test)]
mod tests;
mod write;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use slot::Slot;

use super::record::{Record, OP_DELETE, OP_PUT};
// `crate::fuzzing` runs the parsers on fuzzed bytes through these paths.
pub(crate) use super::record::next_valid_record;
#[cfg(feature = "testkit")]
pub(crate) use super::record::parse_records;
use super::store::{KeyValue, MetaError, MetaStore, WriteOp};

const WAL: &str = "meta.wal";
const SNAP: &str = "meta.snap";

#[derive(Clone)]
pub struct LocalStore {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    dir: PathBuf,
    map: BTreeMap<Vec<u8>, Slot>,
    /// The current snapshot, open for reading the values it holds.
    snap: Option<File>,
    wal: File,
    /// The log's length: where the next record lands.
    wal_len: u64,
    wal_records: usize,
    compact_after: usize,
    /// Why writes are refused, once one failed.
    poisoned: Option<String>,
}

impl LocalStore {
    pub fn get_blocking(&self, key: &[u8]) -> Result<Option<Vec<u8>>, MetaError> {
        let inner = self.lock()?;
        inner.map.get(key).map(|slot| inner.read(slot)).transpose()
    }

    pub fn put_blocking(&self, key: &[u8], value: &[u8]) -> Result<(), MetaError> {
        self.lock()?.write(Record {
            op: OP_PUT,
            key: key.to_vec(),
            value: value.to_vec(),
        })
    }

    pub fn delete_blocking(&self, key: &[u8]) -> Result<(), MetaError> {
        self.lock()?.write(Record {
            op: OP_DELETE,
            key: key.to_vec(),
            value: Vec::new(),
        })
    }

    /// Writes `ops` in order with one append and one sync, as `MetaStore::batch` does, on
    /// the calling thread.
    pub fn batch_blocking(&self, ops: Vec<WriteOp>) -> Result<(), MetaError> {
        let records = ops.into_iter().map(|(key, value)| match value {
            Some(value) => Record {
                op: OP_PUT,
                key,
                value,
            },
            None => Record {
                op: OP_DELETE,
                key,
                value: Vec::new(),
            },
        });
        self.lock()?.write_many(records)
    }

    /// Calls `f` with each key under `prefix` and its value, in key order, one value read at
    /// a time (a scan's whole answer would hold every value at once).
    pub fn for_each_blocking(
        &self,
        prefix: &[u8],
        mut f: impl FnMut(&[u8], Vec<u8>) -> Result<(), MetaError>,
    ) -> Result<(), MetaError> {
        let inner = self.lock()?;
        let range = inner.map.range::<[u8], _>((
            std::ops::Bound::Included(prefix),
            std::ops::Bound::Unbounded,
        ));
        for (key, slot) in range.take_while(|(k, _)| k.starts_with(prefix)) {
            f(key, inner.read(slot)?)?;
        }
        Ok(())
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Inner>, MetaError> {
        // A panic during a write may have left the log and map disagreeing; refuse further use.
        self.inner
            .lock()
            .map_err(|_| MetaError::Io("store poisoned by an earlier failure".into()))
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&LocalStore) -> Result<T, MetaError> + Send + 'static,
    ) -> Result<T, MetaError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| MetaError::Io(format!("store task failed: {e}")))?
    }
}

impl MetaStore for LocalStore {
    async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, MetaError> {
        self.get_blocking(key)
    }

    async fn put(&self, key: &[u8], value: &[u8]) -> Result<(), MetaError> {
        let (key, value) = (key.to_vec(), value.to_vec());
        self.blocking(move |s| s.put_blocking(&key, &value)).await
    }

    async fn delete(&self, key: &[u8]) -> Result<(), MetaError> {
        let key = key.to_vec();
        self.blocking(move |s| s.delete_blocking(&key)).await
    }

    async fn batch(&self, ops: Vec<WriteOp>) -> Result<(), MetaError> {
        self.blocking(move |s| s.batch_blocking(ops)).await
    }

    async fn scan(&self, prefix: &[u8], _page: usize) -> Result<Vec<KeyValue>, MetaError> {
        let inner = self.lock()?;
        inner
            .map
            .range::<[u8], _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, slot)| Ok((k.clone(), inner.read(slot)?)))
            .collect()
    }

    async fn create(&self, key: &[u8], value: &[u8]) -> Result<Vec<u8>, MetaError> {
        let (key, value) = (key.to_vec(), value.to_vec());
        self.blocking(move |s| {
            let mut inner = s.lock()?;
            if let Some(existing) = inner.map.get(&key) {
                return inner.read(existing);
            }
            inner.write(Record {
                op: OP_PUT,
                key,
                value: value.clone(),
            })?;
            Ok(value)
        })
        .await
    }
}

/// Makes a directory's entries (a created or renamed file) durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

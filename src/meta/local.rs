//! The embedded store: an in-memory map made durable by a write-ahead log (`meta.wal`, every
//! record checksummed and fsynced before `put` returns) and a snapshot (`meta.snap`, replaced
//! atomically by write, fsync, rename, fsync of the directory).
//!
//! On open, a damaged record is cut off only when it is a torn tail: nothing valid follows it,
//! as after a crash in the middle of an append. A damaged record with a valid one after it is
//! damage in the middle, and opening fails with its offset: cutting there would drop records
//! that were acknowledged.
//!
//! Values over [`INLINE_MAX`] (region buckets) stay where the log or snapshot wrote them, read
//! back with `pread`: placement holds regions decoded and reads them only when a term begins,
//! so a copy here was ~190 B per region for nothing (tuning.md). Records: `super::record`.
//!
//! Fail-stop: once a write, fsync or compaction step fails, the store is poisoned and every
//! later write fails. Retrying is not safe: after a failed fsync the kernel may have dropped
//! the dirty pages and still report the next fsync as a success (PostgreSQL's fsync lesson), and
//! a half-written record left in the log would hide every record appended after it. A poisoned
//! node cannot renew its TSO window or id blocks, so it stops serving once they run out; a
//! restart replays the log and cuts the torn tail.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::record::{record_at, Record, HEADER, OP_DELETE, OP_PUT};
// `crate::fuzzing` runs the parsers on fuzzed bytes through these paths.
pub(crate) use super::record::next_valid_record;
#[cfg(feature = "testkit")]
pub(crate) use super::record::parse_records;
use super::store::{KeyValue, MetaError, MetaStore, WriteOp};
use crate::failpoint::{self, points};

const WAL: &str = "meta.wal";
const SNAP: &str = "meta.snap";
const SNAP_TMP: &str = "meta.snap.tmp";
/// Log records before the log is folded into a new snapshot.
const COMPACT_AFTER: usize = 4096;
/// Values up to this size are kept in memory; larger ones are read back from the files.
const INLINE_MAX: usize = 256;

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
    /// Opens (creating if needed) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Self, MetaError> {
        if !dir.exists() {
            fs::create_dir_all(dir)?;
            if let Some(parent) = dir.parent() {
                sync_dir(parent)?;
            }
        }
        let mut map = BTreeMap::new();
        let snap_path = dir.join(SNAP);
        let snap = if snap_path.exists() {
            let mut file = File::open(&snap_path)?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            let (_, good) = replay(&bytes, Source::Snap, &mut map);
            if good != bytes.len() {
                return Err(MetaError::Corrupt(format!(
                    "{} is damaged at byte {good}",
                    snap_path.display()
                )));
            }
            Some(file)
        } else {
            None
        };
        let wal_path = dir.join(WAL);
        let created = !wal_path.exists();
        let mut wal = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&wal_path)?;
        if created {
            sync_dir(dir)?;
        }
        let mut bytes = Vec::new();
        wal.read_to_end(&mut bytes)?;
        let (wal_records, good) = replay(&bytes, Source::Wal, &mut map);
        if good != bytes.len() {
            if let Some(at) = next_valid_record(&bytes, good) {
                return Err(MetaError::Corrupt(format!(
                    "{} is damaged at byte {good}, and a valid record follows at byte {at}: \
                     not a torn tail; refusing to cut acknowledged records",
                    wal_path.display()
                )));
            }
            tracing::warn!(path = %wal_path.display(), at = good, cut = bytes.len() - good, "cutting a torn record off the log tail");
            wal.set_len(good as u64)?;
            wal.sync_all()?;
        }
        Ok(LocalStore {
            inner: Arc::new(Mutex::new(Inner {
                dir: dir.to_path_buf(),
                map,
                snap,
                wal,
                wal_len: good as u64,
                wal_records,
                compact_after: COMPACT_AFTER,
                poisoned: None,
            })),
        })
    }

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
        self.blocking(move |s| {
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
            s.lock()?.write_many(records)
        })
        .await
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

impl Inner {
    fn write(&mut self, record: Record) -> Result<(), MetaError> {
        self.write_many(std::iter::once(record))
    }

    /// Appends the records with one sync, then applies them. A failure poisons the store.
    fn write_many(&mut self, records: impl Iterator<Item = Record>) -> Result<(), MetaError> {
        if let Some(why) = &self.poisoned {
            return Err(MetaError::Io(format!(
                "store poisoned by an earlier failure ({why}); restart the node"
            )));
        }
        let mut buf = Vec::new();
        let records: Vec<(Record, u64)> = records
            .map(|record| {
                let at = self.wal_len + buf.len() as u64;
                record.encode(&mut buf);
                (record, at)
            })
            .collect();
        self.append(&buf)
            .map_err(|e| self.poison("log append", e))?;
        self.wal_len += buf.len() as u64;
        self.wal_records += records.len();
        for (record, at) in records {
            apply(record, Source::Wal, at, &mut self.map);
        }
        // Compaction rewrites the whole map: wait until the log is as large as the map so
        // its cost stays proportional to what was written.
        if self.wal_records >= self.compact_after.max(self.map.len()) {
            self.compact().map_err(|e| self.poison("compaction", e))?;
        }
        Ok(())
    }

    fn append(&mut self, buf: &[u8]) -> std::io::Result<()> {
        failpoint::io(points::WAL_WRITE)?;
        self.wal.write_all(buf)?;
        failpoint::io(points::WAL_FSYNC)?;
        self.wal.sync_data()
    }

    fn poison(&mut self, step: &str, e: impl std::fmt::Display) -> MetaError {
        let why = format!("{step} failed: {e}");
        tracing::error!("meta store: {why}; refusing every later write (fail-stop)");
        self.poisoned = Some(why.clone());
        MetaError::Io(why)
    }

    /// A value, from memory or from the file that holds it.
    fn read(&self, slot: &Slot) -> Result<Vec<u8>, MetaError> {
        let (file, at, len) = match slot {
            Slot::Inline(value) => return Ok(value.to_vec()),
            Slot::At { source, at, len } => (
                match source {
                    Source::Wal => Some(&self.wal),
                    Source::Snap => self.snap.as_ref(),
                },
                *at,
                *len,
            ),
        };
        let file = file.ok_or_else(|| MetaError::Io("a value's snapshot is not open".into()))?;
        let mut value = vec![0; len as usize];
        file.read_exact_at(&mut value, at)?;
        Ok(value)
    }

    fn compact(&mut self) -> std::io::Result<()> {
        let tmp = self.dir.join(SNAP_TMP);
        // The handle that writes the new snapshot reads its values once it is renamed.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        let mut out = BufWriter::with_capacity(1 << 20, &file);
        let mut slots = Vec::with_capacity(self.map.len());
        let mut at = 0u64;
        let mut record = Vec::new();
        for (key, slot) in &self.map {
            let value = self.read(slot).map_err(std::io::Error::other)?;
            record.clear();
            Record {
                op: OP_PUT,
                key: key.clone(),
                value,
            }
            .encode(&mut record);
            let value = &record[HEADER + key.len()..];
            slots.push(Slot::of(value, key.len(), Source::Snap, at));
            at += record.len() as u64;
            out.write_all(&record)?;
        }
        failpoint::io(points::SNAPSHOT_WRITE)?;
        out.flush()?;
        drop(out);
        file.sync_all()?;
        failpoint::io(points::SNAPSHOT_RENAME)?;
        fs::rename(&tmp, self.dir.join(SNAP))?;
        sync_dir(&self.dir)?;
        // From here on the new snapshot holds every value: the old files may go.
        for (slot, new) in self.map.values_mut().zip(slots) {
            *slot = new;
        }
        self.snap = Some(file);
        // Replaying the old log over the new snapshot reaches the same state, so a crash
        // between the rename and this truncation loses nothing.
        failpoint::io(points::WAL_TRUNCATE)?;
        self.wal.set_len(0)?;
        self.wal.sync_all()?;
        self.wal_len = 0;
        self.wal_records = 0;
        Ok(())
    }
}

/// Which file a value was written to.
#[derive(Debug, Clone, Copy)]
enum Source {
    Snap,
    Wal,
}

/// A value as the map holds it.
#[derive(Debug)]
enum Slot {
    Inline(Box<[u8]>),
    At { source: Source, at: u64, len: u32 },
}

impl Slot {
    /// The slot of the value of a record with a key of `key_len` bytes, written at `at` in
    /// `source`.
    fn of(value: &[u8], key_len: usize, source: Source, at: u64) -> Slot {
        if value.len() <= INLINE_MAX {
            Slot::Inline(value.into())
        } else {
            Slot::At {
                source,
                at: at + (HEADER + key_len) as u64,
                // A record's body length is a u32, so its value's is too.
                len: value.len() as u32,
            }
        }
    }
}

/// Applies the records of a snapshot or log to `map`, leaving large values in the file;
/// returns how many were applied and the length of the good prefix.
fn replay(bytes: &[u8], source: Source, map: &mut BTreeMap<Vec<u8>, Slot>) -> (usize, usize) {
    let (mut count, mut pos) = (0, 0);
    while let Some((record, len)) = record_at(bytes, pos) {
        apply(record, source, pos as u64, map);
        count += 1;
        pos += len;
    }
    (count, pos)
}

/// Makes a directory's entries (a created or renamed file) durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Applies `record`, written at `at` in `source`, to `map`.
fn apply(record: Record, source: Source, at: u64, map: &mut BTreeMap<Vec<u8>, Slot>) {
    match record.op {
        OP_PUT => {
            let slot = Slot::of(&record.value, record.key.len(), source, at);
            map.insert(record.key, slot);
        }
        _ => {
            map.remove(&record.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arms `point` to fail with `errno` until the scenario ends. `fail`'s registry is one per
    /// process: the scenario's lock keeps the tests that arm failpoints from overlapping.
    #[cfg(feature = "failpoints")]
    fn fail(point: &str, errno: &str) {
        crate::failpoint::arm(point, &format!("return({errno})")).unwrap();
    }

    #[cfg(feature = "failpoints")]
    fn heal(point: &str) {
        crate::failpoint::arm(point, "").unwrap();
    }

    #[cfg(feature = "failpoints")]
    #[test]
    fn a_failed_write_or_fsync_poisons_the_store_and_loses_nothing_acknowledged() {
        let _scenario = fail::FailScenario::setup();
        for (point, errno) in [(points::WAL_WRITE, "enospc"), (points::WAL_FSYNC, "eio")] {
            let dir = tempfile::tempdir().unwrap();
            let store = LocalStore::open(dir.path()).unwrap();
            store.put_blocking(b"limit", b"100").unwrap();
            fail(point, errno);
            let err = store.put_blocking(b"limit", b"200").unwrap_err();
            assert!(
                err.to_string().contains("log append failed"),
                "{point}: {err}"
            );
            heal(point);
            // The step works again, but the store stays poisoned: no write after a failure.
            let err = store.put_blocking(b"other", b"1").unwrap_err();
            assert!(err.to_string().contains("poisoned"), "{err}");
            // What was acknowledged is what a reader sees, and what a restart finds.
            assert_eq!(store.get_blocking(b"limit").unwrap(), Some(b"100".to_vec()));
            drop(store);
            // After a restart: the acknowledged value, or the refused one if its bytes did
            // reach the disk (a failed fsync promises nothing either way), never anything else.
            let store = LocalStore::open(dir.path()).unwrap();
            let found = store.get_blocking(b"limit").unwrap().unwrap();
            assert!(found == b"100" || found == b"200", "{point}: {found:?}");
            store.put_blocking(b"limit", b"300").unwrap();
            drop(store);
            let store = LocalStore::open(dir.path()).unwrap();
            assert_eq!(store.get_blocking(b"limit").unwrap(), Some(b"300".to_vec()));
        }
    }

    #[cfg(feature = "failpoints")]
    #[test]
    fn a_failure_at_any_compaction_step_poisons_and_reopen_keeps_every_write() {
        let _scenario = fail::FailScenario::setup();
        for point in [
            points::SNAPSHOT_WRITE,
            points::SNAPSHOT_RENAME,
            points::WAL_TRUNCATE,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let store = LocalStore::open(dir.path()).unwrap();
            for i in 0..COMPACT_AFTER - 1 {
                store
                    .put_blocking(format!("k{i}").as_bytes(), b"v")
                    .unwrap();
            }
            fail(point, "eio");
            // This write is in the log (fsynced) but the compaction it triggers fails.
            let err = store.put_blocking(b"last", b"v").unwrap_err();
            assert!(err.to_string().contains("compaction"), "{point}: {err}");
            heal(point);
            assert!(
                store.put_blocking(b"after", b"v").is_err(),
                "{point}: not poisoned"
            );
            drop(store);
            let store = LocalStore::open(dir.path()).unwrap();
            assert_eq!(
                store.get_blocking(b"last").unwrap(),
                Some(b"v".to_vec()),
                "{point}"
            );
            let last = format!("k{}", COMPACT_AFTER - 2);
            assert_eq!(
                store.get_blocking(last.as_bytes()).unwrap(),
                Some(b"v".to_vec())
            );
            assert_eq!(store.get_blocking(b"after").unwrap(), None);
        }
    }

    #[test]
    fn damage_in_the_middle_of_the_log_is_an_error_naming_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        store.put_blocking(b"a", b"1").unwrap();
        let first_end = fs::metadata(dir.path().join(WAL)).unwrap().len();
        store.put_blocking(b"b", b"2").unwrap();
        store.put_blocking(b"c", b"3").unwrap();
        drop(store);
        let wal = dir.path().join(WAL);
        let mut bytes = fs::read(&wal).unwrap();
        // Flip a byte inside the second record's body: the third stays valid after it.
        bytes[first_end as usize + 10] ^= 0xff;
        fs::write(&wal, &bytes).unwrap();
        match LocalStore::open(dir.path()) {
            Err(MetaError::Corrupt(why)) => {
                assert!(
                    why.contains(&format!("damaged at byte {first_end}")),
                    "{why}"
                )
            }
            other => panic!("opened a log damaged in the middle: {:?}", other.err()),
        }
        // Nothing was cut: the bytes are as they were.
        assert_eq!(fs::read(&wal).unwrap(), bytes);
    }

    #[test]
    fn a_zero_filled_tail_is_torn_not_damage() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        store.put_blocking(b"a", b"1").unwrap();
        drop(store);
        let wal = dir.path().join(WAL);
        let mut bytes = fs::read(&wal).unwrap();
        bytes.extend_from_slice(&[0u8; 4096]);
        fs::write(&wal, &bytes).unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(store.get_blocking(b"a").unwrap(), Some(b"1".to_vec()));
    }

    #[test]
    fn survives_reopen_and_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        for i in 0..(COMPACT_AFTER + 10) {
            store
                .put_blocking(format!("k{}", i % 100).as_bytes(), &i.to_le_bytes())
                .unwrap();
        }
        store.delete_blocking(b"k50").unwrap();
        drop(store);
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(store.get_blocking(b"k50").unwrap(), None);
        let last = COMPACT_AFTER + 9;
        assert_eq!(
            store
                .get_blocking(format!("k{}", last % 100).as_bytes())
                .unwrap(),
            Some(last.to_le_bytes().to_vec())
        );
    }

    #[test]
    fn torn_tail_is_cut_and_earlier_records_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        store.put_blocking(b"a", b"1").unwrap();
        store.put_blocking(b"b", b"2").unwrap();
        drop(store);
        let wal = dir.path().join(WAL);
        let len = fs::metadata(&wal).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&wal)
            .unwrap()
            .set_len(len - 1)
            .unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(store.get_blocking(b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(store.get_blocking(b"b").unwrap(), None);
        store.put_blocking(b"c", b"3").unwrap();
        drop(store);
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(store.get_blocking(b"c").unwrap(), Some(b"3".to_vec()));
    }

    #[tokio::test]
    async fn create_keeps_the_first_value_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(store.create(b"id", b"1").await.unwrap(), b"1");
        assert_eq!(store.create(b"id", b"2").await.unwrap(), b"1");
        drop(store);
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(store.create(b"id", b"3").await.unwrap(), b"1");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u8, usize, u8),
        Delete(u8),
        Reopen,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (0u8..12, prop_oneof![0usize..INLINE_MAX + 2, 0usize..3000], any::<u8>())
                .prop_map(|(k, len, b)| Op::Put(k, len, b)),
            2 => (0u8..12).prop_map(Op::Delete),
            1 => Just(Op::Reopen),
        ]
    }

    fn value(len: usize, b: u8) -> Vec<u8> {
        (0..len).map(|i| b.wrapping_add(i as u8)).collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Against a plain map: every read, after every write, compaction and reopen, whether
        /// the value is held in memory or read back from the log or a snapshot.
        #[test]
        fn reads_what_was_written_wherever_the_value_lives(ops in proptest::collection::vec(op(), 1..120)) {
            let dir = tempfile::tempdir().unwrap();
            let open = || {
                let store = LocalStore::open(dir.path()).unwrap();
                // Compacts often, so values move from the log to snapshots and between them.
                store.inner.lock().unwrap().compact_after = 5;
                store
            };
            let mut store = open();
            let mut model = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Put(k, len, b) => {
                        store.put_blocking(&[b'k', k], &value(len, b)).unwrap();
                        model.insert(vec![b'k', k], value(len, b));
                    }
                    Op::Delete(k) => {
                        store.delete_blocking(&[b'k', k]).unwrap();
                        model.remove(&vec![b'k', k]);
                    }
                    Op::Reopen => {
                        drop(store);
                        store = open();
                    }
                }
                for k in 0..12u8 {
                    proptest::prop_assert_eq!(store.get_blocking(&[b'k', k]).unwrap(), model.get(&vec![b'k', k]).cloned());
                }
                let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
                let scanned = rt.block_on(store.scan(b"k", 0)).unwrap();
                let expected: Vec<KeyValue> = model.clone().into_iter().collect();
                proptest::prop_assert_eq!(scanned, expected);
            }
        }
    }

    #[test]
    fn large_values_are_read_back_from_the_files_not_held() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let big = value(10_000, 7);
        store.put_blocking(b"bucket", &big).unwrap();
        store.put_blocking(b"small", b"1").unwrap();
        {
            let inner = store.inner.lock().unwrap();
            assert!(matches!(
                inner.map[&b"bucket"[..]],
                Slot::At {
                    source: Source::Wal,
                    ..
                }
            ));
            assert!(matches!(inner.map[&b"small"[..]], Slot::Inline(_)));
        }
        store.inner.lock().unwrap().compact().unwrap();
        assert!(matches!(
            store.inner.lock().unwrap().map[&b"bucket"[..]],
            Slot::At {
                source: Source::Snap,
                ..
            }
        ));
        assert_eq!(store.get_blocking(b"bucket").unwrap(), Some(big.clone()));
        drop(store);
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(store.get_blocking(b"bucket").unwrap(), Some(big));
    }

    #[test]
    fn damaged_snapshot_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(SNAP), b"garbage!garbage!").unwrap();
        assert!(matches!(
            LocalStore::open(dir.path()),
            Err(MetaError::Corrupt(_))
        ));
    }
}

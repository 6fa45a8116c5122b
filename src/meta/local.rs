//! The embedded store: an in-memory map made durable by a write-ahead log (`meta.wal`, every
//! record checksummed and fsynced before `put` returns) and a snapshot (`meta.snap`, replaced
//! atomically by write, fsync, rename, fsync of the directory). A torn record at the log's tail,
//! left by a crash in the middle of a write, is cut off on open; damage anywhere else is an error,
//! never silently dropped data.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::store::{KeyValue, MetaError, MetaStore, WriteOp};

const WAL: &str = "meta.wal";
const SNAP: &str = "meta.snap";
const SNAP_TMP: &str = "meta.snap.tmp";
const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;
/// Log records before the log is folded into a new snapshot.
const COMPACT_AFTER: usize = 4096;

#[derive(Clone)]
pub struct LocalStore {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    dir: PathBuf,
    map: BTreeMap<Vec<u8>, Vec<u8>>,
    wal: File,
    wal_records: usize,
}

impl LocalStore {
    /// Opens (creating if needed) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Self, MetaError> {
        fs::create_dir_all(dir)?;
        let mut map = BTreeMap::new();
        let snap = dir.join(SNAP);
        if snap.exists() {
            let bytes = fs::read(&snap)?;
            let (records, good) = parse_records(&bytes);
            if good != bytes.len() {
                return Err(MetaError::Corrupt(format!(
                    "{} is damaged at byte {good}",
                    snap.display()
                )));
            }
            records.into_iter().for_each(|r| r.apply(&mut map));
        }
        let wal_path = dir.join(WAL);
        let mut wal = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&wal_path)?;
        let mut bytes = Vec::new();
        wal.read_to_end(&mut bytes)?;
        let (records, good) = parse_records(&bytes);
        let wal_records = records.len();
        records.into_iter().for_each(|r| r.apply(&mut map));
        if good != bytes.len() {
            tracing::warn!(path = %wal_path.display(), cut = bytes.len() - good, "cutting a torn record off the log tail");
            wal.set_len(good as u64)?;
            wal.sync_all()?;
        }
        Ok(LocalStore {
            inner: Arc::new(Mutex::new(Inner {
                dir: dir.to_path_buf(),
                map,
                wal,
                wal_records,
            })),
        })
    }

    pub fn get_blocking(&self, key: &[u8]) -> Result<Option<Vec<u8>>, MetaError> {
        Ok(self.lock()?.map.get(key).cloned())
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
        Ok(inner
            .map
            .range::<[u8], _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    async fn create(&self, key: &[u8], value: &[u8]) -> Result<Vec<u8>, MetaError> {
        let (key, value) = (key.to_vec(), value.to_vec());
        self.blocking(move |s| {
            let mut inner = s.lock()?;
            if let Some(existing) = inner.map.get(&key) {
                return Ok(existing.clone());
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

    /// Appends the records with one sync, then applies them.
    fn write_many(&mut self, records: impl Iterator<Item = Record>) -> Result<(), MetaError> {
        let mut buf = Vec::new();
        let records: Vec<Record> = records.collect();
        for record in &records {
            record.encode(&mut buf);
        }
        self.wal.write_all(&buf)?;
        self.wal.sync_data()?;
        self.wal_records += records.len();
        for record in records {
            record.apply(&mut self.map);
        }
        // Compaction rewrites the whole map: wait until the log is as large as the map so
        // its cost stays proportional to what was written.
        if self.wal_records >= COMPACT_AFTER.max(self.map.len()) {
            self.compact()?;
        }
        Ok(())
    }

    fn compact(&mut self) -> Result<(), MetaError> {
        let mut buf = Vec::new();
        for (key, value) in &self.map {
            Record {
                op: OP_PUT,
                key: key.clone(),
                value: value.clone(),
            }
            .encode(&mut buf);
        }
        let tmp = self.dir.join(SNAP_TMP);
        let mut file = File::create(&tmp)?;
        file.write_all(&buf)?;
        file.sync_all()?;
        fs::rename(&tmp, self.dir.join(SNAP))?;
        File::open(&self.dir)?.sync_all()?;
        // Replaying the old log over the new snapshot reaches the same state, so a crash
        // between the rename and this truncation loses nothing.
        self.wal.set_len(0)?;
        self.wal.sync_all()?;
        self.wal_records = 0;
        Ok(())
    }
}

struct Record {
    op: u8,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Record {
    /// `crc32 | body_len | op | key_len | key | value`, integers little-endian.
    fn encode(&self, out: &mut Vec<u8>) {
        let mut body = Vec::with_capacity(5 + self.key.len() + self.value.len());
        body.push(self.op);
        body.extend_from_slice(&(self.key.len() as u32).to_le_bytes());
        body.extend_from_slice(&self.key);
        body.extend_from_slice(&self.value);
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
    }

    fn decode(body: &[u8]) -> Option<Record> {
        let (&op, rest) = body.split_first()?;
        let key_len = u32::from_le_bytes(*rest.first_chunk::<4>()?) as usize;
        let rest = &rest[4..];
        if key_len > rest.len() || !(op == OP_PUT || op == OP_DELETE) {
            return None;
        }
        let (key, value) = rest.split_at(key_len);
        Some(Record {
            op,
            key: key.to_vec(),
            value: value.to_vec(),
        })
    }

    fn apply(self, map: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
        match self.op {
            OP_PUT => {
                map.insert(self.key, self.value);
            }
            _ => {
                map.remove(&self.key);
            }
        }
    }
}

/// Parses records until the first incomplete or damaged one; returns them and the length of the
/// good prefix.
fn parse_records(bytes: &[u8]) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    let mut pos = 0;
    while let Some(header) = bytes.get(pos..pos + 8) {
        let crc = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
        let Some(body) = bytes.get(pos + 8..pos + 8 + len) else {
            break;
        };
        if crc32fast::hash(body) != crc {
            break;
        }
        let Some(record) = Record::decode(body) else {
            break;
        };
        records.push(record);
        pos += 8 + len;
    }
    (records, pos)
}

#[cfg(test)]
mod tests {
    use super::*;

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

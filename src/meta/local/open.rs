//! Opening the store: the snapshot and then the log replayed into the map. A damaged record
//! is cut off only when it is a torn tail: nothing valid follows it, as after a crash in the
//! middle of an append. A damaged record with a valid one after it is damage in the middle,
//! and opening fails with its offset: cutting there would drop records that were
//! acknowledged. A damaged snapshot is always an error (it is renamed into place whole).
//!
//! Must not touch: the write path; the bytes of a log it refuses to open.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::compact::COMPACT_AFTER;
use super::slot::{replay, Source};
use super::{next_valid_record, sync_dir, Inner, LocalStore, SNAP, WAL};
use crate::meta::store::MetaError;

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
}

//! The write path: records appended to the log with one fsync, then applied to the map, and
//! the compaction they trigger. Fail-stop: once a write, fsync or compaction step fails, the
//! store is poisoned and every later write fails. Retrying is not safe: after a failed fsync
//! the kernel may have dropped the dirty pages and still report the next fsync as a success
//! (PostgreSQL's fsync lesson), and a half-written record left in the log would hide every
//! record appended after it. A poisoned node cannot renew its TSO window or id blocks, so it
//! stops serving once they run out; a restart replays the log and cuts the torn tail.
//!
//! Must not touch: reads, recovery on open.

use std::io::Write;

use super::slot::{apply, Source};
use super::Inner;
use crate::failpoint::{self, points};
use crate::meta::record::Record;
use crate::meta::store::MetaError;

impl Inner {
    pub(super) fn write(&mut self, record: Record) -> Result<(), MetaError> {
        self.write_many(std::iter::once(record))
    }

    /// Appends the records with one sync, then applies them. A failure poisons the store.
    pub(super) fn write_many(
        &mut self,
        records: impl Iterator<Item = Record>,
    ) -> Result<(), MetaError> {
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
}

//! Compaction: the map written out as a new snapshot (write, fsync, rename, fsync of the
//! directory), then the log emptied. Each step is a failpoint; a crash or failure between
//! any two leaves files that reopen to the same map.
//!
//! Must not touch: when to compact (the write path decides), the poison (the caller's).

use std::fs::{self, OpenOptions};
use std::io::{BufWriter, Write};

use super::slot::{Slot, Source};
use super::{sync_dir, Inner, SNAP};
use crate::failpoint::{self, points};
use crate::meta::record::{Record, HEADER, OP_PUT};

const SNAP_TMP: &str = "meta.snap.tmp";
/// Log records before the log is folded into a new snapshot.
pub(super) const COMPACT_AFTER: usize = 4096;

impl Inner {
    pub(super) fn compact(&mut self) -> std::io::Result<()> {
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

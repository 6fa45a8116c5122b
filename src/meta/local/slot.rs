//! Where each value lives: in memory when it is small, else at its offset in the log or the
//! snapshot that wrote it (read back with `pread`); and replaying a file's records into the
//! map that way.
//!
//! Must not touch: writing or cutting files.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;

use super::Inner;
use crate::meta::record::{record_at, Record, HEADER, OP_PUT};
use crate::meta::store::MetaError;

/// Values up to this size are kept in memory; larger ones are read back from the files.
pub(super) const INLINE_MAX: usize = 256;

/// Which file a value was written to.
#[derive(Debug, Clone, Copy)]
pub(super) enum Source {
    Snap,
    Wal,
}

/// A value as the map holds it.
#[derive(Debug)]
pub(super) enum Slot {
    Inline(Box<[u8]>),
    At { source: Source, at: u64, len: u32 },
}

impl Slot {
    /// The slot of the value of a record with a key of `key_len` bytes, written at `at` in
    /// `source`.
    pub(super) fn of(value: &[u8], key_len: usize, source: Source, at: u64) -> Slot {
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

impl Inner {
    /// A value, from memory or from the file that holds it.
    pub(super) fn read(&self, slot: &Slot) -> Result<Vec<u8>, MetaError> {
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
}

/// Applies the records of a snapshot or log to `map`, leaving large values in the file;
/// returns how many were applied and the length of the good prefix.
pub(super) fn replay(
    bytes: &[u8],
    source: Source,
    map: &mut BTreeMap<Vec<u8>, Slot>,
) -> (usize, usize) {
    let (mut count, mut pos) = (0, 0);
    while let Some((record, len)) = record_at(bytes, pos) {
        apply(record, source, pos as u64, map);
        count += 1;
        pos += len;
    }
    (count, pos)
}

/// Applies `record`, written at `at` in `source`, to `map`.
pub(super) fn apply(record: Record, source: Source, at: u64, map: &mut BTreeMap<Vec<u8>, Slot>) {
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

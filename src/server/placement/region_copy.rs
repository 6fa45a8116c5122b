//! A follower's copy of the region index on its own disk, so that a member started again goes
//! on from the leader's log where its syncer stopped instead of asking for a snapshot of every
//! region. PD keeps such a local region store (`pkg/storage/leveldb_backend.go`): its syncer
//! saves what it receives there and, on start, loads it and asks the leader from its saved
//! index.
//!
//! The copy lives in the embedded store (`meta::local`, in `<data-dir>/region-copy`), in the
//! buckets the leader writes to the meta store (`persist::encode_regions`, `BUCKET_IDS` ids a
//! bucket; values that large stay out of memory), and one more key names the leader's log
//! stream and the next index: the buckets hold every record before it and none from it. Each
//! write is one append with one sync: the position first marked unknown, then the buckets,
//! then the position, when the write brings the buckets to one. A crash that tears a write
//! leaves the position unknown (the store cuts a torn tail record by record), and a copy at
//! an unknown position is not loaded; nor is one whose store does not open, whose buckets do
//! not decode or hold a region of another bucket, or whose regions overlap. Such a copy is
//! refused with its reason logged, and the syncer's snapshot replaces it whole: every bucket
//! on disk is rewritten or deleted before the position is named again.
//!
//! The syncer marks what it changed ([`CopyMarks`], under the gate it writes the index
//! under); the persister ([`persist`]) writes the marked buckets as the index holds them, at
//! most [`CHUNK`] buckets a write, every [`FLUSH_EVERY`], so the apply path never waits for
//! the disk and what a write holds in memory is bounded.
//!
//! Owns: the copy's files and format, the marks, the persister. Must not touch: the index's
//! rules, the stream, whether a copy is served (`sync_status`).

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

use super::persist::{decode_regions, encode_regions, BUCKET_IDS};
use super::state::PlacementState;
use crate::meta::{LocalStore, MetaError, WriteOp};
use crate::placement::Region;

/// The position key: 24 bytes (the cluster's id, the stream, the next index; big-endian), or
/// empty while unknown.
const AT_KEY: &[u8] = b"at";
const BUCKET_PREFIX: &[u8] = b"b/";
/// How often the persister writes what the syncer applied.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// Buckets a write holds at most (a bucket holds about 64 regions, ~10 KB).
pub const CHUNK: usize = 256;
/// The copy's directory under the data dir.
pub const DIR: &str = "region-copy";

fn bucket_key(bucket: u64) -> Vec<u8> {
    let mut key = BUCKET_PREFIX.to_vec();
    key.extend_from_slice(&bucket.to_be_bytes());
    key
}

fn bucket_of_key(key: &[u8]) -> Option<u64> {
    let id = key.strip_prefix(BUCKET_PREFIX)?;
    Some(u64::from_be_bytes(id.try_into().ok()?))
}

/// The bucket region `id` is kept in.
pub fn bucket_of(id: u64) -> u64 {
    id / BUCKET_IDS
}

/// Where a copy stands in the leader's log: its stream, and the next index (the copy holds
/// every record before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogAt {
    pub stream: u64,
    pub next: u64,
}

fn encode_at(cluster_id: u64, at: LogAt) -> Vec<u8> {
    let mut v = cluster_id.to_be_bytes().to_vec();
    v.extend_from_slice(&at.stream.to_be_bytes());
    v.extend_from_slice(&at.next.to_be_bytes());
    v
}

/// The position on disk, if it is one of cluster `cluster_id`'s.
fn decode_at(bytes: &[u8], cluster_id: u64) -> Result<LogAt, String> {
    if bytes.is_empty() {
        return Err("its last write did not finish".into());
    }
    let word = |i: usize| {
        bytes
            .get(i * 8..i * 8 + 8)
            .and_then(|w| w.try_into().ok())
            .map(u64::from_be_bytes)
    };
    let (Some(cluster), Some(stream), Some(next), 24) = (word(0), word(1), word(2), bytes.len())
    else {
        return Err(format!("its position is {} bytes, not 24", bytes.len()));
    };
    if cluster != cluster_id {
        return Err(format!("it is a copy of another cluster ({cluster})"));
    }
    if next == 0 {
        return Err("its position names no index".into());
    }
    Ok(LogAt { stream, next })
}

/// A copy read from disk.
#[derive(Debug)]
pub struct Loaded {
    pub at: LogAt,
    pub regions: Vec<Region>,
}

/// The copy's store, with what this process knows of it.
pub struct CopyStore {
    store: LocalStore,
    /// The cluster the copy is of: a data dir used again for another cluster holds none.
    cluster_id: u64,
    /// The buckets on disk: a snapshot's write rewrites or deletes each.
    on_disk: HashSet<u64>,
    /// Whether the position on disk is known (else every write leaves it unknown until one
    /// names it).
    known: bool,
}

impl CopyStore {
    /// Opens cluster `cluster_id`'s copy in `dir` and reads it: the copy, or why it is
    /// refused. A store that does not open (damage that is not a torn tail) is removed and
    /// started empty. Fails only when no store can be kept there at all.
    pub fn open(
        dir: &Path,
        cluster_id: u64,
    ) -> Result<(CopyStore, Result<Loaded, String>), MetaError> {
        let (store, refused) = match LocalStore::open(dir) {
            Ok(store) => (store, None),
            Err(e) => {
                std::fs::remove_dir_all(dir)?;
                (
                    LocalStore::open(dir)?,
                    Some(format!("its store does not open: {e}")),
                )
            }
        };
        let mut copy = CopyStore {
            store,
            cluster_id,
            on_disk: HashSet::new(),
            known: false,
        };
        let loaded = copy.read();
        Ok((copy, refused.map_or(loaded, Err)))
    }

    /// Reads the buckets (noting every one on disk) and, at a known position, their regions.
    fn read(&mut self) -> Result<Loaded, String> {
        let at = match self.store.get_blocking(AT_KEY) {
            Ok(Some(bytes)) => decode_at(&bytes, self.cluster_id),
            Ok(None) => Err("there is none".into()),
            Err(e) => Err(format!("its position does not read: {e}")),
        };
        let mut regions = Vec::new();
        let mut bad: Option<String> = None;
        let on_disk = &mut self.on_disk;
        let wanted = at.is_ok();
        let scanned = self.store.for_each_blocking(BUCKET_PREFIX, |key, value| {
            let Some(bucket) = bucket_of_key(key) else {
                bad.get_or_insert_with(|| format!("a key names no bucket: {key:?}"));
                return Ok(());
            };
            on_disk.insert(bucket);
            if !wanted || bad.is_some() {
                return Ok(());
            }
            match decode_regions(&value) {
                Ok(rs) => {
                    let misplaced = rs.iter().map(|r| r.id).find(|id| bucket_of(*id) != bucket);
                    match misplaced {
                        Some(id) => bad = Some(format!("bucket {bucket} holds region {id}")),
                        None => regions.extend(rs),
                    }
                }
                Err(e) => bad = Some(format!("bucket {bucket}: {e}")),
            }
            Ok(())
        });
        let at = at?;
        if let Err(e) = scanned {
            return Err(format!("its buckets do not read: {e}"));
        }
        if let Some(why) = bad {
            return Err(why);
        }
        self.known = true;
        Ok(Loaded { at, regions })
    }

    /// Writes each bucket's regions as given (none: the bucket is gone), in one append, and,
    /// with `at`, names the position they now stand at. Without `at` the position on disk is
    /// left unknown.
    pub fn write(
        &mut self,
        buckets: Vec<(u64, Vec<Region>)>,
        at: Option<LogAt>,
    ) -> Result<(), MetaError> {
        let mut ops: Vec<WriteOp> = Vec::with_capacity(buckets.len() + 2);
        if self.known {
            ops.push((AT_KEY.to_vec(), Some(Vec::new())));
        }
        for (bucket, regions) in &buckets {
            let value = if regions.is_empty() {
                None
            } else {
                Some(encode_regions(regions)?)
            };
            ops.push((bucket_key(*bucket), value));
        }
        if let Some(at) = at {
            ops.push((AT_KEY.to_vec(), Some(encode_at(self.cluster_id, at))));
        }
        // Known no more from here: if the write fails part of it may be on disk.
        self.known = false;
        self.store.batch_blocking(ops)?;
        self.known = at.is_some();
        for (bucket, regions) in buckets {
            if regions.is_empty() {
                self.on_disk.remove(&bucket);
            } else {
                self.on_disk.insert(bucket);
            }
        }
        Ok(())
    }

    pub fn on_disk(&self) -> impl Iterator<Item = u64> + '_ {
        self.on_disk.iter().copied()
    }
}

/// Where the syncer left the index: the leader's log position, and the index's own log
/// position then (if anything else wrote the index since, such as a term of this member's own,
/// the index is not that copy any more).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub at: LogAt,
    pub local: (u64, u64),
}

#[derive(Default)]
struct Marks {
    dirty: BTreeSet<u64>,
    /// A snapshot replaced the index: every bucket on disk is to be rewritten or deleted.
    replaced: bool,
    at: Option<Position>,
}

/// What the syncer changed in the index since the persister last wrote, and where the index
/// stands. Called under the syncer's gate, with the index write.
#[derive(Default)]
pub struct CopyMarks {
    marks: Mutex<Marks>,
}

impl CopyMarks {
    fn lock(&self) -> MutexGuard<'_, Marks> {
        // Marks are sets and a position: a panic leaves nothing half-made that matters.
        self.marks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Regions `ids` changed (applied or displaced), and the index is now at `at`.
    pub fn changed(&self, ids: impl IntoIterator<Item = u64>, at: Position) {
        let mut m = self.lock();
        m.dirty.extend(ids.into_iter().map(bucket_of));
        m.at = Some(at);
    }

    /// A snapshot holding regions `ids` replaced the index, now at `at`.
    pub fn replaced(&self, ids: impl IntoIterator<Item = u64>, at: Position) {
        let mut m = self.lock();
        m.dirty.extend(ids.into_iter().map(bucket_of));
        m.replaced = true;
        m.at = Some(at);
    }

    /// The index was loaded from the copy on disk, which stands at `at`.
    pub fn loaded(&self, at: Position) {
        self.lock().at = Some(at);
    }
}

/// One write's worth: the buckets with their regions, and the position if they bring the
/// copy to one.
type Chunk = (Vec<(u64, Vec<Region>)>, Option<LogAt>);

/// Takes the next write from the marks, reading the buckets from the index: under the gate, so
/// the index and the marks agree. `persisted` is the position the disk names.
fn take(
    state: &PlacementState,
    marks: &CopyMarks,
    copy: &CopyStore,
    may_write: bool,
    persisted: Option<LogAt>,
) -> Option<Chunk> {
    let mut m = marks.lock();
    let position = m.at?;
    if !may_write || state.index.log_position() != position.local {
        // The index is not the syncer's copy any more: nothing to write until a snapshot.
        m.at = None;
        return None;
    }
    if std::mem::take(&mut m.replaced) {
        m.dirty.extend(copy.on_disk());
    }
    if m.dirty.is_empty() && persisted == Some(position.at) {
        return None;
    }
    let mut buckets = Vec::with_capacity(CHUNK.min(m.dirty.len()));
    while buckets.len() < CHUNK {
        let Some(b) = m.dirty.pop_first() else { break };
        let ids = b * BUCKET_IDS..(b + 1) * BUCKET_IDS;
        buckets.push((b, state.index.regions_in(ids)));
    }
    Some((buckets, m.dirty.is_empty().then_some(position.at)))
}

/// Writes what the syncer marks to the copy until the node stops. `may_write` says whether
/// the index is still the syncer's (this member neither leads nor serves a term). A write
/// that fails stops it (the store refuses every later write): the copy on disk is then left
/// at an unknown position, and a restart takes a snapshot.
pub async fn persist(
    state: Arc<PlacementState>,
    marks: Arc<CopyMarks>,
    mut copy: CopyStore,
    may_write: impl Fn() -> bool + Send + 'static,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut persisted: Option<LogAt> = if copy.known {
        marks.lock().at.map(|p| p.at)
    } else {
        None
    };
    loop {
        let chunk = {
            let _gate = state.sync.gate.lock().await;
            take(&state, &marks, &copy, may_write(), persisted)
        };
        let Some((buckets, at)) = chunk else {
            tokio::select! {
                _ = tokio::time::sleep(FLUSH_EVERY) => {}
                _ = shutdown.wait_for(|s| *s) => return,
            }
            continue;
        };
        let written = tokio::task::spawn_blocking(move || {
            let result = copy.write(buckets, at);
            (copy, result)
        })
        .await;
        match written {
            Ok((back, Ok(()))) => {
                copy = back;
                persisted = at;
            }
            Ok((_, Err(e))) => {
                tracing::error!(
                    "the region copy on disk is not written any more ({e}); a restart takes \
                     a snapshot"
                );
                return;
            }
            Err(e) => {
                tracing::error!(
                    "the region copy's writer failed ({e}); a restart takes a snapshot"
                );
                return;
            }
        }
    }
}

/// The copy's directory in `data_dir`.
pub fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join(DIR)
}

#[cfg(test)]
mod tests;

//! The key-range index every core routes with: start key -> region, read without locks and
//! written one change set at a time under the heartbeat rules P1 and P2.
//!
//! Readers load one immutable [`Snapshot`] through an atomic pointer (`arc-swap`), so a reader
//! sees either all of a change set or none of it: never two regions for one key, never a gap a
//! split did not create. The spine has two levels: the snapshot holds chunks of up to 2 *
//! [`CHUNK`] segments (per chunk a first start and a shared pointer), a chunk holds its
//! segments' first starts and one-line `Segment`s of up to 2 * [`SEGMENT`] regions. The writer
//! copies the snapshot's chunk pointers, copies only the chunks a change touches and within
//! them edits only the segments it touches (copy-on-write), and publishes: a change set costs
//! the same at 10M regions as at 1M, about 250 chunk pointers per million regions plus the
//! chunks touched. Lookups search 16-byte big-endian key prefixes without data-dependent
//! branches: the chunks' first starts (a dense array, 4 KB at 1M regions), then the chunk's
//! first starts (padded so that every chunk is searched in the same steps), then the segment's
//! line (its group pivots and blocks pointer), then one group's block (8 starts and their
//! route pointers), then the route, whose end prefix it carries. Memory is what a lookup waits
//! on (a cache miss costs 100-215 ns on the machines this runs on, and a core has about ten
//! misses in flight at most: tuning.md), so past the spine a lookup reads five cache lines in
//! three dependent steps, each requested whole; full keys are compared only when prefixes tie.
//!
//! The snapshot's layout and lock-free reads are `snapshot.rs`; this file is the writer: the
//! heartbeat rules, the id map and the change log.
//!
//! Owns: the range -> region mapping and P1/P2. Must not hold per-region statistics, pending
//! operators or anything a heartbeat changes without changing the route: those belong to the
//! owning shard, so the index is written only when a route changes.

use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;

mod snapshot;

use super::change_log::{ChangeLog, Since};
use super::dense_map::DenseIdMap;
use super::region::{Region, RegionError, RegionShape};
pub use super::route::Route;
use super::segment::{Entries, MAX_SEGMENT};
pub use snapshot::Snapshot;

/// Regions per segment; a segment splits at twice this.
pub const SEGMENT: usize = 16;
const _: () = assert!(SEGMENT <= MAX_SEGMENT);

/// Segments per chunk; a chunk splits at twice this. A change set copies one pointer per
/// chunk and every segment of each chunk it touches, so the two costs balance near the square
/// root of the segment count: 256 fits 1M to 16M regions (250 to 4,000 chunks). A chunk's
/// first starts (8 KB) are searched in 9 steps, the chunks' in 8 at 1M regions.
pub const CHUNK: usize = 256;

/// Keys searched in lockstep by `locate_many`: a lookup reads 5 lines past the spine, and 12
/// keys keep more of those misses in flight than 8 (measured: docs/tuning-history.md).
pub const LANES: usize = 12;

/// What a change did.
#[derive(Debug, Clone)]
pub struct Change {
    /// The route now in the index.
    pub route: Arc<Route>,
    /// Regions displaced (overlapped by a newer report), other than the region itself.
    pub removed: Vec<u64>,
    /// Whether range or epoch changed (what must be persisted), as opposed to the leader or
    /// peer roles under the same epoch.
    pub epoch_changed: bool,
}

#[derive(Default)]
struct Writer {
    by_id: DenseIdMap<Arc<Route>>,
    /// Every route published, numbered in publishing order (what followers replay).
    log: ChangeLog,
}

/// The shared index. Reads never block; writes are serialized among themselves.
#[derive(Default)]
pub struct RangeIndex {
    current: ArcSwap<Snapshot>,
    writer: Mutex<Writer>,
}

impl RangeIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// An index with segments of `segment` regions, at most [`MAX_SEGMENT`], and chunks of
    /// two segments (tests use small ones to exercise segment and chunk boundaries).
    pub fn with_segment_size(segment: usize) -> Self {
        Self::with_sizes(segment, 2)
    }

    /// An index with segments of `segment` regions, at most [`MAX_SEGMENT`], and chunks of
    /// `chunk` segments, at most [`CHUNK`].
    pub fn with_sizes(segment: usize, chunk: usize) -> Self {
        let index = Self::default();
        index.current.store(Arc::new(Snapshot {
            segment: segment.clamp(1, MAX_SEGMENT),
            chunk: chunk.clamp(1, CHUNK),
            ..Snapshot::default()
        }));
        index
    }

    /// A consistent view for a series of reads.
    pub fn snapshot(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.current.load()
    }

    pub fn locate(&self, key: &[u8]) -> Option<Arc<Route>> {
        self.current.load().locate(key).cloned()
    }

    pub fn len(&self) -> usize {
        self.current.load().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The current route of region `id`: one hash lookup, but under the writer's (blocking)
    /// lock, so it waits while a change set is built (a copy of the chunk pointers, 2 KB at 1M
    /// regions, and of the chunks it edits, up to 40 KB each) or the persister reads a bucket, and stalls the calling core meanwhile.
    /// Routing by key never comes here (`snapshot` does not block). Request handlers call it
    /// only on rare paths, where an occasional wait costs little: GetRegionById when the
    /// owning shard has not seen the region since this leader loaded, and AskBatchSplit, once
    /// per split.
    pub fn get(&self, id: u64) -> Option<Arc<Route>> {
        self.writer().by_id.get(&id).cloned()
    }

    /// The current regions with ids in `ids`, in id order (the persister's view of a bucket).
    pub fn regions_in(&self, ids: std::ops::Range<u64>) -> Vec<Region> {
        let writer = self.writer();
        ids.filter_map(|id| writer.by_id.get(&id).map(|r| r.region()))
            .collect()
    }

    fn writer(&self) -> MutexGuard<'_, Writer> {
        // A panic while holding the lock happens before anything is published (edits go to
        // a private draft), so the state behind a poisoned lock is still the published one.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one leader's report (P1, P2). On error nothing changed.
    pub fn apply(&self, region: Region) -> Result<Change, RegionError> {
        self.apply_batch(vec![region])
            .pop()
            .unwrap_or_else(|| Err(RegionError::Invalid(0, "empty batch".into())))
    }

    /// Applies reports in order, as if one by one, and publishes once: readers see the whole
    /// batch or none of it. Each report succeeds or fails on its own.
    pub fn apply_batch(&self, regions: Vec<Region>) -> Vec<Result<Change, RegionError>> {
        let mut writer = self.writer();
        let mut draft: Snapshot = Snapshot::clone(&self.current.load());
        let mut retired = Vec::new();
        let results: Vec<_> = regions
            .into_iter()
            .map(|r| apply_one(&mut writer, &mut draft, r, &mut retired))
            .collect();
        if !retired.is_empty() || results.iter().any(|r| r.is_ok()) {
            for route in &retired {
                route.retire();
            }
            draft.trim();
            self.current.store(Arc::new(draft));
            for change in results.iter().flatten() {
                writer.log.record(change.route.clone());
            }
        }
        results
    }

    /// Applies, of `regions` (a store's copy), those the index does not know or knows under an
    /// older epoch, by the heartbeat rules; one it knows at the same or a newer epoch is left
    /// as the index has it (its leader may be newer than the store's). Returns how many were
    /// applied.
    pub fn apply_newer(&self, regions: Vec<Region>) -> usize {
        let mut writer = self.writer();
        let mut draft: Snapshot = Snapshot::clone(&self.current.load());
        let mut retired = Vec::new();
        let mut applied = Vec::new();
        for region in regions {
            let newer = match writer.by_id.get(&region.id) {
                Some(known) => {
                    let known = known.epoch();
                    region.epoch != known && !region.epoch.is_stale_against(&known)
                }
                None => true,
            };
            if newer {
                if let Ok(change) = apply_one(&mut writer, &mut draft, region, &mut retired) {
                    applied.push(change.route);
                }
            }
        }
        if !applied.is_empty() {
            for route in &retired {
                route.retire();
            }
            draft.trim();
            self.current.store(Arc::new(draft));
            for route in &applied {
                writer.log.record(route.clone());
            }
        }
        applied.len()
    }

    /// The published snapshot with the change log's stream and next index, read together:
    /// the snapshot holds every record before that index and none from it.
    pub fn snapshot_at(&self) -> (Arc<Snapshot>, u64, u64) {
        let writer = self.writer();
        (
            self.current.load_full(),
            writer.log.stream(),
            writer.log.next_index(),
        )
    }

    /// The change log's stream and next index.
    pub fn log_position(&self) -> (u64, u64) {
        let writer = self.writer();
        (writer.log.stream(), writer.log.next_index())
    }

    /// Up to `max` routes published from index `from` of log `stream` on.
    pub fn changes_since(&self, stream: u64, from: u64, max: usize) -> Since {
        self.writer().log.since(stream, from, max)
    }

    /// Starts a new change log numbered `stream` (a new term: followers of an earlier log
    /// start again from a snapshot).
    pub fn restart_log(&self, stream: u64) {
        self.writer().log.restart(stream);
    }

    /// Replaces everything with `regions` (a new leader's load). Overlapping or malformed
    /// entries are resolved by the heartbeat rules; the count of refused ones is returned.
    pub fn reset(&self, mut regions: Vec<Region>) -> usize {
        let mut writer = self.writer();
        for route in writer.by_id.values() {
            route.retire();
        }
        writer.by_id.clear();
        let stream = writer.log.stream().wrapping_add(1);
        writer.log.restart(stream);
        regions.sort_by(|a, b| a.start_key.cmp(&b.start_key));
        // Fast path: build sorted segments directly from the disjoint, well-formed prefix;
        // anything else goes through the rules one by one.
        let (segment, chunk) = {
            let current = self.current.load();
            (current.segment, current.chunk)
        };
        let mut draft = Snapshot {
            segment,
            chunk,
            ..Snapshot::default()
        };
        let mut seg = Entries::default();
        let mut rest = Vec::new();
        let mut last_end: Option<Vec<u8>> = None;
        for region in regions {
            let disjoint = match &last_end {
                None => true,
                Some(end) => !end.is_empty() && end.as_slice() <= region.start_key.as_slice(),
            };
            if region.validate().is_err() || !disjoint || writer.by_id.contains_key(&region.id) {
                rest.push(region);
                continue;
            }
            last_end = Some(region.end_key.clone());
            let route = Route::new(region);
            writer.by_id.insert(route.id(), route.clone());
            let at = seg.len();
            seg.insert(at, route);
            if seg.len() == segment {
                draft.push(std::mem::take(&mut seg));
            }
        }
        if seg.len() > 0 {
            draft.push(seg);
        }
        let mut retired = Vec::new();
        let refused = rest
            .into_iter()
            .filter(|r| apply_one(&mut writer, &mut draft, r.clone(), &mut retired).is_err())
            .count();
        for route in &retired {
            route.retire();
        }
        debug_assert!(draft.disjoint(), "P2: the loaded index covers a key twice");
        draft.trim();
        self.current.store(Arc::new(draft));
        refused
    }
}

fn apply_one(
    writer: &mut Writer,
    draft: &mut Snapshot,
    region: Region,
    retired: &mut Vec<Arc<Route>>,
) -> Result<Change, RegionError> {
    region.validate()?;
    let known = writer.by_id.get(&region.id).cloned();
    if let Some(known) = &known {
        if region.epoch.is_stale_against(&known.epoch()) {
            return Err(RegionError::StaleEpoch {
                id: region.id,
                got: region.epoch,
                known: known.epoch(),
            });
        }
    }
    let run = draft.overlap_run(&region);
    let mut removed = Vec::new();
    if let Some((a, b)) = run {
        let mut p = a;
        loop {
            let other = draft.route(p);
            if other.id() != region.id {
                if region.epoch.version < other.epoch().version {
                    return Err(RegionError::StaleEpoch {
                        id: region.id,
                        got: region.epoch,
                        known: other.epoch(),
                    });
                }
                removed.push(other.id());
            }
            if p == b {
                break;
            }
            match draft.next(p) {
                Some(n) => p = n,
                None => break,
            }
        }
    }
    let epoch_changed = known.as_ref().is_none_or(|k| {
        k.epoch() != region.epoch
            || k.start_key() != region.start_key.as_slice()
            || k.end_key() != region.end_key.as_slice()
    });
    if let Some((a, b)) = run {
        draft.remove_run(a, b);
    }
    if let Some(known) = known {
        // Its old range may lie outside the new one (a merge reported by the survivor).
        draft.remove_route(&known);
        retired.push(known);
    }
    for id in &removed {
        if let Some(old) = writer.by_id.remove(id) {
            retired.push(old);
        }
    }
    let route = Route::new(region);
    writer.by_id.insert(route.id(), route.clone());
    draft.insert(route.clone());
    debug_assert!(
        draft.disjoint_from_neighbours(&route),
        "P2: region {} overlaps a neighbour once applied",
        route.id()
    );
    Ok(Change {
        route,
        removed,
        epoch_changed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Epoch, Peer, PeerRole};

    fn route(id: u64, start: &[u8], end: &[u8]) -> Arc<Route> {
        Route::new(Region {
            id,
            start_key: start.to_vec(),
            end_key: end.to_vec(),
            epoch: Epoch {
                conf_ver: 1,
                version: 1,
            },
            peers: vec![Peer {
                id: id * 10,
                store_id: 1,
                role: PeerRole::Voter,
            }],
            leader: Some(id * 10),
        })
    }

    /// The P2 checks `apply` and `reset` assert see an overlap that an edit let through
    /// (`insert` itself trusts its caller to have removed what overlaps).
    #[test]
    fn the_p2_checks_see_two_regions_covering_one_key() {
        let mut snapshot = Snapshot::default();
        let (a, b) = (route(1, b"", b"m"), route(2, b"m", b""));
        snapshot.insert(a.clone());
        snapshot.insert(b.clone());
        assert!(snapshot.disjoint());
        assert!(snapshot.disjoint_from_neighbours(&a) && snapshot.disjoint_from_neighbours(&b));

        let c = route(3, b"k", b"p");
        snapshot.insert(c.clone());
        assert!(!snapshot.disjoint());
        assert!(!snapshot.disjoint_from_neighbours(&c));
    }

    /// A key of the test's key space: 15 zero bytes, then `k` in two bytes, so that keys 16
    /// apart share a 16-byte prefix and the searches settle ties on full keys everywhere.
    fn key(k: u16) -> Vec<u8> {
        let mut key = vec![0u8; 15];
        key.extend([(k >> 4) as u8, (k & 0xf) as u8]);
        key
    }

    fn region(id: u64, start: &[u8], end: &[u8], version: u64) -> Region {
        Region {
            id,
            start_key: start.to_vec(),
            end_key: end.to_vec(),
            epoch: Epoch {
                conf_ver: 1,
                version,
            },
            peers: vec![Peer {
                id: id * 10,
                store_id: 1,
                role: PeerRole::Voter,
            }],
            leader: Some(id * 10),
        }
    }

    /// The model: start key -> region, and what a report does to it (every report the test
    /// makes is newer than all it overlaps).
    type Model = std::collections::BTreeMap<Vec<u8>, Region>;

    fn model_apply(model: &mut Model, r: &Region) {
        model.retain(|_, o| {
            let overlaps = (r.end_key.is_empty() || o.start_key < r.end_key)
                && (o.end_key.is_empty() || r.start_key < o.end_key);
            o.id != r.id && !overlaps
        });
        model.insert(r.start_key.clone(), r.clone());
    }

    fn model_locate<'a>(model: &'a Model, key: &[u8]) -> Option<&'a Region> {
        let (_, r) = model
            .range::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Included(key)))
            .next_back()?;
        (r.end_key.is_empty() || key < r.end_key.as_slice()).then_some(r)
    }

    /// An index built as a cluster grows (the last region split again and again, in batches,
    /// and regions split in the middle) holds no more room for segment pointers than it uses:
    /// inserts double a chunk's vector and a chunk that splits keeps the half it gave away.
    #[test]
    fn a_published_index_gives_back_the_room_its_edits_grew() {
        let index = RangeIndex::with_sizes(SEGMENT, 16);
        let key = |i: u64| {
            let mut k = b"t".to_vec();
            k.extend_from_slice(&(i * 1_000).to_be_bytes());
            k
        };
        index.apply(region(1, b"", b"", 1)).expect("first region");
        let (mut version, mut next_id) = (1, 2);
        for batch in 0..40u64 {
            version += 1;
            let mut reports: Vec<Region> = (0..256)
                .map(|j| {
                    let i = batch * 256 + j;
                    next_id += 1;
                    region(next_id, &key(i), &key(i + 1), version)
                })
                .collect();
            reports.push(region(1, &key(batch * 256 + 256), b"", version));
            assert!(index.apply_batch(reports).iter().all(Result::is_ok));
        }
        let room_left = |index: &RangeIndex, when: &str| {
            let snap = index.snapshot();
            assert_eq!(snap.layout_error(), None);
            let room = snap.chunk_room();
            assert!(room.len() > 4, "{} chunks: too few to split", room.len());
            let wasted: Vec<_> = room.iter().filter(|(len, cap)| cap > len).collect();
            assert!(
                wasted.is_empty(),
                "{when}: chunks with room left (segments, capacity): {wasted:?}"
            );
        };
        room_left(&index, "built");
        // Splits in the middle: each inserts a segment into a chunk built before.
        for i in (0..10_240).step_by(97) {
            let mid = {
                let mut k = key(i);
                k.push(1);
                k
            };
            let snap = index.snapshot();
            let r = snap.locate(&mid).expect("covered").region();
            next_id += 1;
            let left = Region {
                end_key: mid.clone(),
                epoch: Epoch {
                    version: r.epoch.version + 1,
                    ..r.epoch
                },
                ..r.clone()
            };
            let right = region(next_id, &mid, &r.end_key, r.epoch.version + 1);
            assert!(index
                .apply_batch(vec![right, left])
                .iter()
                .all(Result::is_ok));
        }
        room_left(&index, "split in the middle");
    }

    /// Every read the snapshot answers, against the model, and the layout's invariants.
    fn check(index: &RangeIndex, model: &Model, probes: &[Vec<u8>], step: usize) {
        let snap = index.snapshot();
        if let Some(e) = snap.layout_error() {
            panic!("step {step}: layout: {e}");
        }
        assert_eq!(snap.len(), model.len(), "step {step}: len");
        let ids: Vec<u64> = snap.iter().map(|r| r.id()).collect();
        let want: Vec<u64> = model.values().map(|r| r.id).collect();
        assert_eq!(ids, want, "step {step}: iter");
        let mut many = Vec::new();
        snap.locate_many(probes, &mut many);
        for (probe, found) in probes.iter().zip(many) {
            let want = model_locate(model, probe).map(|r| r.id);
            assert_eq!(
                snap.locate(probe).map(|r| r.id()),
                want,
                "step {step}: locate {probe:?}"
            );
            assert_eq!(
                found.map(|r| r.id()),
                want,
                "step {step}: locate_many {probe:?}"
            );
            let prev = model_locate(model, probe).and_then(|r| {
                let (_, before) = model
                    .range::<[u8], _>((
                        std::ops::Bound::Unbounded,
                        std::ops::Bound::Excluded(r.start_key.as_slice()),
                    ))
                    .next_back()?;
                (before.end_key == r.start_key).then_some(before.id)
            });
            assert_eq!(
                snap.prev(probe).map(|r| r.id()),
                prev,
                "step {step}: prev {probe:?}"
            );
        }
        for pair in probes.chunks(2).take(8) {
            let (a, b) = (&pair[0], pair.get(1).cloned().unwrap_or_default());
            for limit in [0, 3] {
                let got: Vec<u64> = snap.scan(a, &b, limit).iter().map(|r| r.id()).collect();
                let mut want: Vec<u64> = Vec::new();
                if b.is_empty() || a < &b {
                    let from = model_locate(model, a).map_or(a.clone(), |r| r.start_key.clone());
                    want = model
                        .range(from..)
                        .take_while(|(s, _)| b.is_empty() || s.as_slice() < b.as_slice())
                        .map(|(_, r)| r.id)
                        .collect();
                    if limit > 0 {
                        want.truncate(limit);
                    }
                }
                assert_eq!(got, want, "step {step}: scan {a:?}..{b:?} limit {limit}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Random splits (batches of many at once), merges of long runs and epoch bumps over
        /// tiny segments and chunks: chunks split, empty out and go, and every read agrees
        /// with a plain ordered map after every change set.
        #[test]
        fn reads_match_a_model_across_chunk_splits_and_removals(
            seed in proptest::prelude::any::<u64>(),
            segment in 1usize..4,
            chunk in 1usize..4,
        ) {
            let mut x = seed | 1;
            let mut rand = move |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n.max(1)
            };
            let index = RangeIndex::with_sizes(segment, chunk);
            let mut model = Model::new();
            // A load with gaps: every third boundary is skipped as a region's end.
            let mut version = 1;
            let mut next_id = 1;
            let mut bounds: Vec<u16> = (0..40).map(|_| rand(4000) as u16 + 1).collect();
            bounds.sort();
            bounds.dedup();
            let mut load = Vec::new();
            for w in bounds.windows(2).step_by(1) {
                if rand(3) == 0 {
                    continue;
                }
                load.push(region(next_id, &key(w[0]), &key(w[1]), version));
                next_id += 1;
            }
            load.push(region(next_id, b"", &key(bounds[0]), version));
            next_id += 1;
            for r in &load {
                model_apply(&mut model, r);
            }
            proptest::prop_assert_eq!(index.reset(load), 0);
            let mut most_chunks = 0;
            for step in 0..60 {
                version += 1;
                let regions: Vec<Region> = model.values().cloned().collect();
                let at = rand(regions.len() as u64) as usize;
                let r = &regions[at];
                let batch = match rand(5) {
                    // Split into up to 30 pieces, reported together (a batch split).
                    0..=2 => {
                        let lo = u64::from(r.start_key.last().map_or(0, |_| {
                            let k = &r.start_key;
                            (u16::from(k[15]) << 4) | u16::from(k[16])
                        }));
                        let hi = if r.end_key.is_empty() {
                            4096
                        } else {
                            let k = &r.end_key;
                            u64::from((u16::from(k[15]) << 4) | u16::from(k[16]))
                        };
                        let mut cuts: Vec<u16> = (0..rand(30) + 1)
                            .map(|_| (lo + 1 + rand(hi.saturating_sub(lo + 1))) as u16)
                            .filter(|&c| u64::from(c) > lo && u64::from(c) < hi)
                            .collect();
                        cuts.sort();
                        cuts.dedup();
                        let mut starts = vec![r.start_key.clone()];
                        starts.extend(cuts.iter().map(|&c| key(c)));
                        let mut ends: Vec<Vec<u8>> = starts[1..].to_vec();
                        ends.push(r.end_key.clone());
                        starts
                            .iter()
                            .zip(&ends)
                            .enumerate()
                            .map(|(j, (s, e))| {
                                let id = if j == 0 { r.id } else { next_id + j as u64 };
                                region(id, s, e, version)
                            })
                            .collect()
                    }
                    // Merge a run of up to 40 regions into the first (gaps included).
                    3 => {
                        let last = (at + rand(40) as usize).min(regions.len() - 1);
                        vec![region(r.id, &r.start_key, &regions[last].end_key, version)]
                    }
                    // An epoch bump in place.
                    _ => vec![region(r.id, &r.start_key, &r.end_key, version)],
                };
                next_id += batch.len() as u64 + 1;
                for result in index.apply_batch(batch.clone()) {
                    proptest::prop_assert!(result.is_ok(), "step {}: {:?}", step, result.err());
                }
                for r in &batch {
                    model_apply(&mut model, r);
                }
                let mut probes: Vec<Vec<u8>> = Vec::new();
                for r in model.values().take(200) {
                    probes.push(r.start_key.clone());
                    probes.push([r.start_key.as_slice(), &[0]].concat());
                    if !r.end_key.is_empty() {
                        probes.push(r.end_key.clone());
                    }
                }
                probes.extend((0..40).map(|_| key(rand(4200) as u16)));
                probes.extend([vec![], vec![0xff; 20]]);
                check(&index, &model, &probes, step);
                most_chunks = most_chunks.max(index.snapshot().chunks.len());
            }
            proptest::prop_assert!(most_chunks > 2, "the edits never made chunks: {}", most_chunks);
        }
    }
}

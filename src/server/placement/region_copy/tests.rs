//! The copy on disk: what is written loads back whole and equal; a write cut anywhere by a
//! crash, a snapshot's replacement stopped half-way, and damaged buckets are refused, never
//! loaded as a mix.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::meta::LocalStore;
use crate::placement::{Epoch, Peer, PeerRole};

const CLUSTER: u64 = 6_001;

fn region(id: u64, version: u64) -> Region {
    Region {
        id,
        start_key: format!("k{id:08}").into_bytes(),
        end_key: format!("k{:08}", id + 1).into_bytes(),
        epoch: Epoch {
            conf_ver: 1,
            version,
        },
        peers: vec![Peer {
            id: id + 1_000_000,
            store_id: 1,
            role: PeerRole::Voter,
        }],
        leader: Some(id + 1_000_000),
    }
}

/// The buckets of `regions`, as the persister writes them.
fn buckets(regions: &BTreeMap<u64, Region>) -> Vec<(u64, Vec<Region>)> {
    let mut out: BTreeMap<u64, Vec<Region>> = BTreeMap::new();
    for r in regions.values() {
        out.entry(bucket_of(r.id)).or_default().push(r.clone());
    }
    out.into_iter().collect()
}

/// Writes `regions` as a snapshot does: every bucket on disk rewritten or deleted, `chunk`
/// buckets a write, the position named by the last.
fn replace(copy: &mut CopyStore, regions: &BTreeMap<u64, Region>, at: LogAt, chunk: usize) {
    let mut all: BTreeMap<u64, Vec<Region>> = copy.on_disk().map(|b| (b, Vec::new())).collect();
    all.extend(buckets(regions));
    let all: Vec<_> = all.into_iter().collect();
    let n = all.len().div_ceil(chunk).max(1);
    for (i, part) in all.chunks(chunk).enumerate() {
        copy.write(part.to_vec(), (i + 1 == n).then_some(at))
            .unwrap();
    }
    if all.is_empty() {
        copy.write(Vec::new(), Some(at)).unwrap();
    }
}

fn load(dir: &Path) -> Result<Loaded, String> {
    CopyStore::open(dir, CLUSTER).unwrap().1
}

fn sorted(mut regions: Vec<Region>) -> Vec<Region> {
    regions.sort_by_key(|r| r.id);
    regions
}

fn wal_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("meta.wal")).unwrap().len()
}

fn cut_wal(dir: &Path, len: u64) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("meta.wal"))
        .unwrap();
    f.set_len(len).unwrap();
}

fn regions_of(ids: &[u64], version: u64) -> BTreeMap<u64, Region> {
    ids.iter().map(|&id| (id, region(id, version))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// A copy written (a snapshot, then records changing and removing regions) loads back
    /// equal to what was written last, at its position.
    #[test]
    fn what_is_written_loads_back(
        ids in prop::collection::btree_set(1u64..5_000, 0..300),
        changed in prop::collection::btree_set(1u64..5_000, 0..100),
        chunk in 1usize..40,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DIR);
        let (mut copy, first) = CopyStore::open(&dir, CLUSTER).unwrap();
        prop_assert!(first.is_err(), "a new store holds no copy");
        let ids: Vec<u64> = ids.into_iter().collect();
        let mut regions = regions_of(&ids, 1);
        replace(&mut copy, &regions, LogAt { stream: 7, next: 1 }, chunk);
        // Records: each changed id is added when absent, and else removed (as a displaced
        // region is) or updated.
        let mut touched = BTreeSet::new();
        for id in changed {
            match regions.remove(&id) {
                None => {
                    regions.insert(id, region(id, 1));
                }
                Some(_) if id % 2 == 0 => {}
                Some(_) => {
                    regions.insert(id, region(id, 2));
                }
            }
            touched.insert(bucket_of(id));
        }
        let writes: Vec<(u64, Vec<Region>)> = touched
            .iter()
            .map(|&b| (b, regions.range(b * BUCKET_IDS..(b + 1) * BUCKET_IDS).map(|(_, r)| r.clone()).collect()))
            .collect();
        copy.write(writes, Some(LogAt { stream: 7, next: 42 })).unwrap();
        drop(copy);
        let loaded = load(&dir).unwrap();
        prop_assert_eq!(loaded.at, LogAt { stream: 7, next: 42 });
        prop_assert_eq!(sorted(loaded.regions), regions.into_values().collect::<Vec<_>>());
    }

    /// A crash cuts the log anywhere in the last write: the copy is refused, unless the cut
    /// leaves nothing of the write but part of its first record, which leaves the copy before
    /// it.
    #[test]
    fn a_write_cut_anywhere_is_refused(
        ids in prop::collection::btree_set(1u64..3_000, 1..100),
        later in prop::collection::btree_set(1u64..3_000, 1..50),
        cut in 1u64..1_000_000,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DIR);
        let (mut copy, _) = CopyStore::open(&dir, CLUSTER).unwrap();
        let ids: Vec<u64> = ids.into_iter().collect();
        let before = regions_of(&ids, 1);
        replace(&mut copy, &before, LogAt { stream: 3, next: 10 }, 1_000);
        let start = wal_len(&dir);
        let later: Vec<u64> = later.into_iter().collect();
        copy.write(buckets(&regions_of(&later, 5)), Some(LogAt { stream: 3, next: 20 })).unwrap();
        drop(copy);
        let written = wal_len(&dir) - start;
        let cut = 1 + cut % written;
        cut_wal(&dir, start + written - cut);
        match load(&dir) {
            Ok(loaded) => {
                // Nothing of the write is left (at most part of its first record, the mark):
                // the copy before it, whole.
                prop_assert_eq!(loaded.at, LogAt { stream: 3, next: 10 });
                prop_assert_eq!(sorted(loaded.regions), before.into_values().collect::<Vec<_>>());
            }
            Err(why) => {
                prop_assert!(cut < written, "the copy before the write was refused: {}", why);
                prop_assert!(why.contains("did not finish"), "{}", why);
            }
        }
    }
}

/// A snapshot's replacement stopped between two writes leaves no copy to load, never the old
/// one mixed with part of the new; once whole, only the new regions are there.
#[test]
fn a_replacement_stopped_half_way_is_refused_and_a_whole_one_holds_only_the_new() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(DIR);
    let (mut copy, _) = CopyStore::open(&dir, CLUSTER).unwrap();
    let old = regions_of(&(1..2_000).step_by(3).collect::<Vec<_>>(), 1);
    replace(&mut copy, &old, LogAt { stream: 1, next: 5 }, 4);
    let new = regions_of(&(1_000..3_000).step_by(7).collect::<Vec<_>>(), 2);
    let mut all: BTreeMap<u64, Vec<Region>> = copy.on_disk().map(|b| (b, Vec::new())).collect();
    all.extend(buckets(&new));
    let all: Vec<_> = all.into_iter().collect();
    copy.write(all[..3].to_vec(), None).unwrap();
    drop(copy);
    let why = load(&dir).unwrap_err();
    assert!(why.contains("did not finish"), "{why}");

    let (mut copy, _) = CopyStore::open(&dir, CLUSTER).unwrap();
    replace(&mut copy, &new, LogAt { stream: 2, next: 9 }, 4);
    drop(copy);
    let loaded = load(&dir).unwrap();
    assert_eq!(loaded.at, LogAt { stream: 2, next: 9 });
    assert_eq!(
        sorted(loaded.regions),
        new.into_values().collect::<Vec<_>>()
    );
}

/// Bytes that are no bucket, a region in another region's bucket, a position of the wrong
/// size and a store damaged in the middle are each refused with a reason, without a panic.
#[test]
fn damaged_copies_are_refused() {
    let at = encode_at(CLUSTER, LogAt { stream: 1, next: 2 });
    let cases: Vec<(&str, Vec<WriteOp>)> = vec![
        (
            "bucket 0",
            vec![
                (bucket_key(0), Some(b"not a bucket".to_vec())),
                (AT_KEY.to_vec(), Some(at.clone())),
            ],
        ),
        (
            "holds region",
            vec![
                (
                    bucket_key(0),
                    Some(encode_regions(&[region(BUCKET_IDS * 3, 1)]).unwrap()),
                ),
                (AT_KEY.to_vec(), Some(at.clone())),
            ],
        ),
        ("not 24", vec![(AT_KEY.to_vec(), Some(vec![1, 2, 3]))]),
        (
            "another cluster",
            vec![(
                AT_KEY.to_vec(),
                Some(encode_at(CLUSTER + 1, LogAt { stream: 1, next: 2 })),
            )],
        ),
        (
            "names no bucket",
            vec![
                (b"b/x".to_vec(), Some(vec![1])),
                (AT_KEY.to_vec(), Some(at.clone())),
            ],
        ),
    ];
    for (want, ops) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DIR);
        LocalStore::open(&dir).unwrap().batch_blocking(ops).unwrap();
        let why = load(&dir).unwrap_err();
        assert!(why.contains(want), "{want}: {why}");
    }

    // Damage in the middle of the log, a valid record after it: the store does not open, and
    // the copy starts empty.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(DIR);
    let (mut copy, _) = CopyStore::open(&dir, CLUSTER).unwrap();
    replace(
        &mut copy,
        &regions_of(&[1, 2, 3], 1),
        LogAt { stream: 1, next: 2 },
        1,
    );
    copy.write(
        buckets(&regions_of(&[700], 1)),
        Some(LogAt { stream: 1, next: 3 }),
    )
    .unwrap();
    drop(copy);
    let mut bytes = std::fs::read(dir.join("meta.wal")).unwrap();
    bytes[10] ^= 0xff;
    std::fs::write(dir.join("meta.wal"), &bytes).unwrap();
    let (copy, loaded) = CopyStore::open(&dir, CLUSTER).unwrap();
    let why = loaded.unwrap_err();
    assert!(why.contains("does not open"), "{why}");
    assert_eq!(copy.on_disk().count(), 0);
}

/// The persister run as the syncer drives it: a snapshot, a second snapshot that replaces it,
/// then records that update regions and displace one. After each, the copy on disk (read as a
/// restarted member reads it, the persister started again over it) is the index at its
/// position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_persister_leaves_the_index_on_disk_at_its_position() {
    use crate::admin::Metrics;
    use crate::clock::WallClock;
    use crate::meta::Keys;
    use crate::placement::{Limits, ScheduleConfig};

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(DIR);
    let (state, _shards) = PlacementState::new(
        CLUSTER,
        1,
        ScheduleConfig::default(),
        Limits::default(),
        Arc::new(WallClock::default()),
        Keys::new(CLUSTER),
        Arc::new(Metrics::new(1)),
    );
    let marks = Arc::new(CopyMarks::default());
    // Runs the persister until the marks are written, stops it, and reads the copy back.
    let settle = |copy: CopyStore| {
        let (state, marks) = (state.clone(), marks.clone());
        let dir = dir.clone();
        async move {
            let (stop, stopped) = watch::channel(false);
            let task = tokio::spawn(persist(state, marks, copy, || true, stopped));
            tokio::time::sleep(FLUSH_EVERY * 5).await;
            stop.send(true).unwrap();
            task.await.unwrap();
            CopyStore::open(&dir, CLUSTER).unwrap()
        }
    };
    let index_now = |state: &PlacementState| {
        sorted(state.index.snapshot().iter().map(|r| r.region()).collect())
    };
    let (copy, _) = CopyStore::open(&dir, CLUSTER).unwrap();

    let snapshot = |regions: Vec<Region>, at: LogAt| {
        let (state, marks) = (state.clone(), marks.clone());
        async move {
            let _gate = state.sync.gate.lock().await;
            let ids: Vec<u64> = regions.iter().map(|r| r.id).collect();
            assert_eq!(state.index.reset(regions), 0);
            let local = state.index.log_position();
            marks.replaced(ids, Position { at, local });
        }
    };
    snapshot(
        (1..600).map(|i| region(i * 5, 1)).collect(),
        LogAt {
            stream: 1,
            next: 10,
        },
    )
    .await;
    let (copy, loaded) = settle(copy).await;
    let loaded = loaded.unwrap();
    assert_eq!(
        loaded.at,
        LogAt {
            stream: 1,
            next: 10
        }
    );
    assert_eq!(sorted(loaded.regions), index_now(&state));

    // Another leader's snapshot, of other regions: nothing of the first is left.
    snapshot(
        (1..300).map(|i| region(i * 7 + 1, 1)).collect(),
        LogAt { stream: 2, next: 4 },
    )
    .await;
    let (copy, loaded) = settle(copy).await;
    let loaded = loaded.unwrap();
    assert_eq!(loaded.at, LogAt { stream: 2, next: 4 });
    assert_eq!(sorted(loaded.regions), index_now(&state));

    // Records: regions at a newer version, and one whose range now covers its neighbour's.
    {
        let _gate = state.sync.gate.lock().await;
        let mut records: Vec<Region> = (1..40).map(|i| region(i * 7 + 1, 2)).collect();
        let mut wide = region(50 * 7 + 1, 3);
        wide.end_key = format!("k{:08}", 51 * 7 + 2).into_bytes();
        records.push(wide);
        let mut changed = Vec::new();
        for result in state.index.apply_batch(records) {
            let change = result.unwrap();
            changed.push(change.route.id());
            changed.extend(change.removed);
        }
        assert!(
            changed.contains(&(51 * 7 + 1)),
            "the neighbour was displaced"
        );
        let local = state.index.log_position();
        marks.changed(
            changed,
            Position {
                at: LogAt {
                    stream: 2,
                    next: 44,
                },
                local,
            },
        );
    }
    let (_, loaded) = settle(copy).await;
    let loaded = loaded.unwrap();
    assert_eq!(
        loaded.at,
        LogAt {
            stream: 2,
            next: 44
        }
    );
    assert_eq!(sorted(loaded.regions), index_now(&state));
}

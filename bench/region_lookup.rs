//! GetRegion by key: 1,000,000 regions, random keys. The shared lock-free `RangeIndex` against
//! the baseline it replaced, the ordered map behind one mutex; alone, and with a second thread
//! doing the same lookups at the same time (what two cores routing at once see).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use std::collections::BTreeMap;

use meridian::placement::{Epoch, Peer, PeerRole, RangeIndex, Region};

/// The baseline: every region in one ordered map by start key, behind one mutex, as a
/// straightforward placement service would hold them.
struct BaselineMap(BTreeMap<Vec<u8>, Region>);

impl BaselineMap {
    fn locate(&self, key: &[u8]) -> Option<&Region> {
        let (_, r) = self
            .0
            .range::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Included(key)))
            .next_back()?;
        (r.end_key.is_empty() || key < r.end_key.as_slice()).then_some(r)
    }
}

// The server's allocator: where routes and blocks live decides how many page walks a lookup
// pays (tuning.md).
meridian::install_allocator!();

const REGIONS: u64 = 1_000_000;

fn key(i: u64) -> Vec<u8> {
    // Region i starts at "t" + 8-byte big-endian i * 1000, like table-prefixed TiKV keys.
    let mut k = b"t".to_vec();
    k.extend_from_slice(&(i * 1000).to_be_bytes());
    k
}

fn regions() -> Vec<Region> {
    (0..REGIONS)
        .map(|i| {
            let start = if i == 0 { Vec::new() } else { key(i) };
            let end = if i + 1 == REGIONS {
                Vec::new()
            } else {
                key(i + 1)
            };
            let peers: Vec<_> = (0..3)
                .map(|p| Peer {
                    id: i * 3 + p + 1,
                    store_id: p + 1,
                    role: PeerRole::Voter,
                })
                .collect();
            Region {
                id: i + 1,
                start_key: start,
                end_key: end,
                epoch: Epoch {
                    conf_ver: 1,
                    version: 1,
                },
                leader: Some(peers[0].id),
                peers,
            }
        })
        .collect()
}

/// `n` keys spread over all regions, and the id of the region holding each; a fixed xorshift
/// sequence keeps runs comparable.
fn random_keys(n: usize) -> (Vec<Vec<u8>>, Vec<u64>) {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = x % REGIONS;
            (key(i).into_iter().chain([7u8]).collect(), i + 1)
        })
        .unzip()
}

/// Looks up the next 64 of `keys` (a power-of-two count) in one `locate_many`, wrapping
/// around; the sum of the region ids keeps the answers from being optimised away.
fn next_batch(index: &RangeIndex, keys: &[Vec<u8>], at: &mut usize) -> u64 {
    *at = (*at + 64) & (keys.len() - 1);
    let mut out = Vec::with_capacity(64);
    let snap = index.snapshot();
    snap.locate_many(black_box(&keys[*at..*at + 64]), &mut out);
    out.iter().map(|r| r.map_or(0, |r| r.id())).sum()
}

/// Runs `lookup` on a second thread over the same keys until dropped.
struct Contender(Arc<AtomicBool>, Option<std::thread::JoinHandle<()>>);

impl Contender {
    fn start(lookup: impl Fn(&[u8]) -> u64 + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (keys, _) = random_keys(4096);
        let handle = std::thread::spawn(move || {
            let mut i = 0;
            while !flag.load(Ordering::Relaxed) {
                i = (i + 1) & 4095;
                black_box(lookup(&keys[i]));
            }
        });
        Contender(stop, Some(handle))
    }
}

impl Drop for Contender {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        if let Some(h) = self.1.take() {
            let _ = h.join();
        }
    }
}

fn bench(c: &mut Criterion) {
    let (keys, want) = random_keys(4096);
    let index = Arc::new(RangeIndex::new());
    assert_eq!(index.reset(regions()), 0);
    // What is timed must also be right: every key's region, one at a time and batched.
    let snap = index.snapshot();
    for (k, id) in keys.iter().zip(&want) {
        assert_eq!(snap.locate(k).map(|r| r.id()), Some(*id));
    }
    let mut found = Vec::new();
    snap.locate_many(&keys, &mut found);
    let found: Vec<_> = found.iter().map(|r| r.map(|r| r.id())).collect();
    assert_eq!(found, want.iter().map(|&id| Some(id)).collect::<Vec<_>>());
    drop(snap);
    let map = BaselineMap(
        regions()
            .into_iter()
            .map(|r| (r.start_key.clone(), r))
            .collect(),
    );
    for (k, id) in keys.iter().zip(&want) {
        assert_eq!(map.locate(k).map(|r| r.id), Some(*id));
    }
    let map = Arc::new(Mutex::new(map));
    let index_lookup = {
        let index = index.clone();
        // Under the snapshot guard, as the server encodes a reply: no reference count touched.
        move |k: &[u8]| index.snapshot().locate(k).map_or(0, |r| r.id())
    };
    let map_lookup = {
        let map = map.clone();
        move |k: &[u8]| {
            let map = map.lock().expect("not poisoned");
            map.locate(k).map_or(0, |r| r.id)
        }
    };

    // Many keys at once, as a server answers one read's worth of GetRegion requests: the
    // searches run in lockstep so their cache misses overlap. Reported per lookup.
    let mut batched = c.benchmark_group("locate_many/1M regions");
    batched.throughput(criterion::Throughput::Elements(64));
    let mut at = 0;
    batched.bench_function("range index, batches of 64, 1 thread", |b| {
        b.iter(|| next_batch(&index, &keys, &mut at))
    });
    // The same over 2^20 keys, so that what one pass reads (~2^20 routes and their index
    // lines) cannot stay in the caches from the pass before: every lookup goes to memory.
    let (cold, _) = random_keys(1 << 20);
    let mut at = 0;
    batched.bench_function("range index, batches of 64, 1 thread, 2^20 keys", |b| {
        b.iter(|| next_batch(&index, &cold, &mut at))
    });
    batched.finish();

    let mut group = c.benchmark_group("locate/1M regions");
    for threads in [1, 2] {
        let contender = (threads == 2).then(|| Contender::start(index_lookup.clone()));
        let mut i = 0;
        group.bench_function(format!("range index, {threads} thread(s)"), |b| {
            b.iter(|| {
                i = (i + 1) & 4095;
                index_lookup(black_box(&keys[i]))
            })
        });
        drop(contender);
        let contender = (threads == 2).then(|| Contender::start(map_lookup.clone()));
        group.bench_function(format!("mutex map (baseline), {threads} thread(s)"), |b| {
            b.iter(|| {
                i = (i + 1) & 4095;
                map_lookup(black_box(&keys[i]))
            })
        });
        drop(contender);
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

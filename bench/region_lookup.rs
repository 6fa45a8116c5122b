//! GetRegion by key on the region map: 1,000,000 regions, random keys, one core. The ordered
//! index is the baseline for the sharded, lock-free design issue 4 asks for.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use meridian::placement::{Epoch, Peer, PeerRole, Region, RegionMap};

const REGIONS: u64 = 1_000_000;

fn key(i: u64) -> Vec<u8> {
    // Region i starts at "t" + 8-byte big-endian i * 1000, like table-prefixed TiKV keys.
    let mut k = b"t".to_vec();
    k.extend_from_slice(&(i * 1000).to_be_bytes());
    k
}

fn map() -> RegionMap {
    let mut map = RegionMap::new();
    for i in 0..REGIONS {
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
        map.apply(Region {
            id: i + 1,
            start_key: start,
            end_key: end,
            epoch: Epoch {
                conf_ver: 1,
                version: 1,
            },
            leader: Some(peers[0].id),
            peers,
            approximate_size: 96 << 20,
            approximate_keys: 1_000_000,
            written_bytes: 0,
            written_keys: 0,
        })
        .expect("regions are disjoint");
    }
    map
}

fn bench(c: &mut Criterion) {
    let map = map();
    // Keys spread over all regions; a fixed xorshift sequence keeps runs comparable.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let keys: Vec<Vec<u8>> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            key(x % REGIONS).into_iter().chain([7u8]).collect()
        })
        .collect();
    let mut i = 0;
    c.bench_function("region_map/locate/1M regions", |b| {
        b.iter(|| {
            i = (i + 1) & 4095;
            black_box(map.locate(black_box(&keys[i])).map(|r| r.id))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! What one change set costs the range index as it grows: at 1M and 4M regions, single-region
//! `apply` calls that bump one region's epoch (what a heartbeat after a conf change sends),
//! timed one by one; the median and the 99th percentile are printed. A change set's cost must
//! not grow with the number of regions the index holds.
//!
//! `cargo bench --bench region_change`; `CHANGES` sets the changes timed per size (10,000).

use std::time::Instant;

use meridian::placement::{Epoch, Peer, PeerRole, RangeIndex, Region};

meridian::install_allocator!();

fn key(i: u64) -> Vec<u8> {
    let mut k = b"t".to_vec();
    k.extend_from_slice(&(i * 1000).to_be_bytes());
    k
}

fn region(i: u64, n: u64, conf_ver: u64) -> Region {
    let peers: Vec<_> = (0..3)
        .map(|p| Peer {
            id: i * 3 + p + 1,
            store_id: p + 1,
            role: PeerRole::Voter,
        })
        .collect();
    Region {
        id: i + 1,
        start_key: if i == 0 { Vec::new() } else { key(i) },
        end_key: if i + 1 == n { Vec::new() } else { key(i + 1) },
        epoch: Epoch {
            conf_ver,
            version: 1,
        },
        leader: Some(peers[0].id),
        peers,
    }
}

fn main() {
    let changes: usize = std::env::var("CHANGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    for n in [1_000_000u64, 4_000_000] {
        let index = RangeIndex::new();
        assert_eq!(index.reset((0..n).map(|i| region(i, n, 1)).collect()), 0);
        // A fixed xorshift sequence of regions, each bumped once per visit.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut conf = vec![1u64; n as usize];
        let mut took = Vec::with_capacity(changes);
        for _ in 0..changes {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = x % n;
            conf[i as usize] += 1;
            let r = region(i, n, conf[i as usize]);
            let t = Instant::now();
            let change = index.apply(r).expect("a newer epoch applies");
            took.push(t.elapsed());
            assert!(change.epoch_changed);
        }
        assert_eq!(index.len(), n as usize);
        took.sort();
        let total: std::time::Duration = took.iter().sum();
        println!(
            "{n} regions, {changes} single-region epoch bumps: median {:?}, p99 {:?}, mean {:?}",
            took[changes / 2],
            took[changes * 99 / 100],
            total / changes as u32,
        );
    }
}

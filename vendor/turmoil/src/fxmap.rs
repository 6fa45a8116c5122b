//! A fast, unseeded hasher for the simulation's hot maps (added to the vendored crate).
//!
//! `IndexMap` orders its entries by insertion whatever the hasher, so swapping SipHash with a
//! random key for this changes no iteration order and no outcome; it only makes the lookups
//! done for every host on every step (hosts, links, sockets, queued messages) cheaper.

use std::hash::{BuildHasherDefault, Hasher};

use indexmap::IndexMap;

/// The FxHash mixing function (as in rustc): a multiply and a rotate per word.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

pub(crate) type FxBuild = BuildHasherDefault<FxHasher>;

/// An `IndexMap` on [`FxHasher`].
pub(crate) type FxIndexMap<K, V> = IndexMap<K, V, FxBuild>;

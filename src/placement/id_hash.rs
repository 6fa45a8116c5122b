//! A hasher for maps keyed by allocated ids (regions, stores), which the hot path looks up on
//! every heartbeat.

use std::collections::HashMap;

/// Region ids are allocated, not chosen by a client, so a flood of colliding ids cannot be
/// crafted: one multiply spreads them, where SipHash (the std default) costs a measurable
/// share of a heartbeat.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, id: u64) {
        // Fibonacci hashing; the high bits are the well-mixed ones, and hashbrown uses the
        // top 7 bits as its tag, so fold them down into the low bits too.
        let h = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 32);
    }
}

pub type IdMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<IdHasher>>;

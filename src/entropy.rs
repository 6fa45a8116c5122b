//! Where the server's own random numbers come from: ids made once (cluster, member) and the
//! numbers that tell change logs apart. A real node draws from the process's randomness; a
//! simulation seeds this thread's source so that a seed makes the same ids every run. Owns the
//! source only; what a number is used for is its caller's business.

use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};

thread_local! {
    /// A seeded generator's state on this thread, if a simulation set one. Per thread because
    /// a simulation runs its whole cluster on one thread while tests run side by side.
    static SEEDED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// A random `u64`: the next from this thread's seeded source if there is one, else from
/// `RandomState` (seeded from the OS's randomness) mixed with the time.
pub fn random_u64() -> u64 {
    if let Some(state) = SEEDED.get() {
        let (next, value) = splitmix64(state);
        SEEDED.set(Some(next));
        return value;
    }
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// Makes this thread's random numbers a fixed sequence from `seed` (a simulation's), or the
/// OS's again with `None`.
#[cfg(feature = "sim")]
pub fn seed_this_thread(seed: Option<u64>) {
    SEEDED.set(seed);
}

/// SplitMix64: a full-period generator whose outputs are well mixed, enough for ids and for a
/// draw that must be a pure function of its inputs (the scheduler's).
pub(crate) fn splitmix64(state: u64) -> (u64, u64) {
    let next = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = next;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (next, z ^ (z >> 31))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unseeded_numbers_differ() {
        assert_ne!(random_u64(), random_u64());
    }

    #[test]
    fn splitmix_is_a_fixed_sequence() {
        let (s1, a) = splitmix64(7);
        let (_, b) = splitmix64(s1);
        assert_eq!((a, b), (splitmix64(7).1, splitmix64(s1).1));
        assert_ne!(a, b);
    }
}

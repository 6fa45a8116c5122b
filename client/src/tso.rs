//! The 46/18 hybrid timestamp layout: `physical_ms << 18 | logical`, and the most timestamps
//! one request may ask for.
//!
//! Owns only the bit layout; it knows nothing of allocation or clocks (the server's `tso`
//! allocates, the client's dispatcher batches).

use std::fmt;

/// Bits of the logical counter below the physical milliseconds.
pub const LOGICAL_BITS: u32 = 18;
/// Largest `count` one TSO request may ask for (invariant T6).
pub const MAX_COUNT: u32 = 1 << LOGICAL_BITS;
const LOGICAL_MASK: u64 = (1 << LOGICAL_BITS) - 1;

/// A hybrid timestamp. Ordering is the ordering of the packed `u64`, so a logical overflow that
/// carried into the physical part still compares correctly.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    pub const ZERO: Timestamp = Timestamp(0);

    pub const fn new(physical_ms: u64, logical: u64) -> Self {
        Timestamp((physical_ms << LOGICAL_BITS) | (logical & LOGICAL_MASK))
    }

    pub const fn from_u64(raw: u64) -> Self {
        Timestamp(raw)
    }

    pub const fn as_u64(self) -> u64 {
        self.0
    }

    pub const fn physical_ms(self) -> u64 {
        self.0 >> LOGICAL_BITS
    }

    pub const fn logical(self) -> u64 {
        self.0 & LOGICAL_MASK
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({}ms+{})", self.physical_ms(), self.logical())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn layout_round_trips(physical in 0u64..(1 << 46), logical in 0u64..(1 << 18)) {
            let ts = Timestamp::new(physical, logical);
            prop_assert_eq!(ts.physical_ms(), physical);
            prop_assert_eq!(ts.logical(), logical);
            prop_assert_eq!(Timestamp::from_u64(ts.as_u64()), ts);
        }

        #[test]
        fn order_is_physical_then_logical(a in 0u64..(1 << 46), la in 0u64..(1 << 18),
                                          b in 0u64..(1 << 46), lb in 0u64..(1 << 18)) {
            let (x, y) = (Timestamp::new(a, la), Timestamp::new(b, lb));
            prop_assert_eq!(x.cmp(&y), (a, la).cmp(&(b, lb)));
        }
    }
}

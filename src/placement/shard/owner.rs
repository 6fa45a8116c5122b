//! Which shard (and so which core) owns a region: the one rule every caller that routes a
//! region's heartbeat, its operator or its share of the index to a shard must use. Owns that
//! rule only; must not touch the shards themselves.
//!
//! Region ids come in strides: a split takes a region id and then one id per peer, so with
//! three replicas each new region's id is 4 past the one before (TiKV's `AskBatchSplit` and
//! Meridian's own splits alike). `id % shards` would then put every region on one shard of
//! two or four, and one core would do all the shards' work. A multiplicative hash (Knuth's
//! golden-ratio constant) spreads any stride, and its high bits pick the shard without a
//! division.

/// The shard, of `shards`, that owns region `id` (0 when there are none).
pub fn owner(id: u64, shards: usize) -> usize {
    let mixed = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((u128::from(mixed) * shards as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::owner;
    use proptest::prelude::*;

    proptest! {
        /// Ids in any stride a split sequence makes (1 to 8 ids per region) spread over 2 to
        /// 8 shards, each shard holding its fair share within 10%.
        #[test]
        fn ids_in_strides_spread_evenly(start in 1u64..1_000_000, stride in 1u64..=8, shards in 2usize..=8) {
            let n = 40_000u64;
            let mut held = vec![0u64; shards];
            for i in 0..n {
                let s = owner(start + i * stride, shards);
                prop_assert!(s < shards);
                held[s] += 1;
            }
            let fair = n as f64 / shards as f64;
            for (s, h) in held.iter().enumerate() {
                prop_assert!((*h as f64 - fair).abs() <= fair * 0.1, "shard {s} holds {h} of {n} (fair {fair}): {held:?}");
            }
        }
    }

    #[test]
    fn one_shard_owns_everything() {
        assert_eq!(owner(0, 1), 0);
        assert_eq!(owner(u64::MAX, 1), 0);
        assert_eq!(owner(12345, 0), 0);
    }
}

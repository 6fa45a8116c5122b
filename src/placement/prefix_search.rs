//! Searching sorted 16-byte key prefixes: a key's prefix, the branch-free halving step, the
//! tie-break on full keys, and cache-line prefetches. Pure arithmetic over slices the caller
//! owns; it knows nothing of regions, segments or snapshots (that is `range_index`).

/// A key's first 16 bytes as a big-endian number (zero-padded): prefixes order like keys,
/// and keys whose prefixes tie are compared in full.
pub(super) fn prefix(key: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    let n = key.len().min(16);
    b[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(b)
}

/// The prefix of an exclusive end; unbounded sorts after every key.
pub(super) fn end_prefix(end: &[u8]) -> u128 {
    if end.is_empty() {
        u128::MAX
    } else {
        prefix(end)
    }
}

/// Asks for the cache line at `at`; a no-op where there is no prefetch instruction.
#[inline]
pub(super) fn prefetch_line<T>(at: *const T) {
    // SAFETY: a prefetch is a hint: it never faults, whatever the address, and reads
    // nothing into the program.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// One halving step of the search for the number of sorted entries `<= kp`, which lies in
/// `[base, base + size]`. No data-dependent branch: a mispredicted step would throw away
/// the loads in flight.
#[inline(always)]
pub(super) fn narrow(prefixes: &[u128], kp: u128, base: &mut usize, size: usize) {
    let mid = *base + size / 2;
    *base = select_le(prefixes[mid], kp, mid, *base);
}

/// `if p <= kp { mid } else { base }` without a branch. LLVM compiles every Rust spelling of
/// it (`if`, a mask, `select_unpredictable`) to a jump on the u128 compare inside the lockstep
/// loop, which mispredicts half the time; hence the three instructions by hand.
#[inline(always)]
pub(super) fn select_le(p: u128, kp: u128, mid: usize, base: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        let mut out = base;
        // SAFETY: register-only arithmetic: kp - p computed for its borrow, then a
        // conditional move; no memory, no stack.
        unsafe {
            std::arch::asm!(
                "cmp {klo}, {plo}",
                "sbb {khi}, {phi}",
                "cmovae {out}, {mid}",
                klo = in(reg) kp as u64,
                plo = in(reg) p as u64,
                khi = inout(reg) (kp >> 64) as u64 => _,
                phi = in(reg) (p >> 64) as u64,
                mid = in(reg) mid,
                out = inout(reg) out,
                options(pure, nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(target_arch = "x86_64"))]
    if p <= kp {
        mid
    } else {
        base
    }
}

/// The count once the search is down to one entry at `base`. Entries whose prefix equals
/// the key's are contiguous and last among those counted; the rare tie is settled on full
/// keys by `le_full(i)`.
#[inline]
pub(super) fn settle(
    prefixes: &[u128],
    kp: u128,
    base: usize,
    le_full: impl Fn(usize) -> bool,
) -> usize {
    let mut n = base + usize::from(prefixes[base] <= kp);
    while n > 0 && prefixes[n - 1] == kp && !le_full(n - 1) {
        n -= 1;
    }
    n
}

/// The number of sorted entries `<= key`, comparing prefixes and falling back to
/// `le_full(i)` only when a prefix ties.
#[inline]
pub(super) fn count_le(prefixes: &[u128], kp: u128, le_full: impl Fn(usize) -> bool) -> usize {
    if prefixes.is_empty() {
        return 0;
    }
    let (mut base, mut size) = (0, prefixes.len());
    while size > 1 {
        narrow(prefixes, kp, &mut base, size);
        size -= size / 2;
    }
    settle(prefixes, kp, base, le_full)
}

#[cfg(test)]
mod select_tests {
    use proptest::prelude::*;

    proptest! {
        /// The hand-written conditional move picks what the plain comparison picks, including
        /// prefixes that differ only in the low half or only in the high half.
        #[test]
        fn select_le_matches_the_comparison(
            hi in 0u64..4, lo in any::<u64>(), khi in 0u64..4, klo in any::<u64>(),
            mid in any::<usize>(), base in any::<usize>(),
        ) {
            let p = (u128::from(hi) << 64) | u128::from(lo);
            for kp in [(u128::from(khi) << 64) | u128::from(klo), p, p.wrapping_sub(1), p.wrapping_add(1)] {
                let want = if p <= kp { mid } else { base };
                prop_assert_eq!(super::select_le(p, kp, mid, base), want);
            }
        }
    }
}

//! Where this member's copy of the region index stands against the leader's, as its region
//! syncer (`server::region_sync`) last heard: whether routing reads may be answered from it.
//! A follower answers only while it is in sync: it heard from the leader's stream within
//! [`MAX_SILENCE_MS`] and is at most [`MAX_LAG`] changes behind. PD's follower answers while
//! its syncer runs, however far behind; the lag bound is ours.
//!
//! Owns: the in-sync rule and the gate that keeps a syncer's writes and a term's load apart.
//! Must not touch: the index itself.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A follower that heard nothing from the leader's stream for longer does not answer reads.
pub const MAX_SILENCE_MS: u64 = 1_000;
/// A follower further behind the leader's change log does not answer reads.
pub const MAX_LAG: u64 = 10_000;

#[derive(Default)]
pub struct SyncStatus {
    /// A snapshot was applied and the stream goes on from it.
    synced: AtomicBool,
    /// The index holds a copy of a leader's (from a snapshot on), however old: a term this
    /// member starts takes it over instead of loading every region from the store.
    copy: AtomicBool,
    heard_ms: AtomicU64,
    /// The follower's next index, and the leader's as the stream last said.
    applied: AtomicU64,
    leader_next: AtomicU64,
    /// Held by the syncer while it writes the index and by a term's load, so a new leader's
    /// load never interleaves with a syncer's write.
    pub gate: tokio::sync::Mutex<()>,
}

impl SyncStatus {
    /// The stream delivered up to `applied` (the follower's next index) and the leader's log
    /// ends at `leader_next`, heard at `now_ms`.
    pub fn heard(&self, applied: u64, leader_next: u64, now_ms: u64) {
        self.applied.store(applied, Ordering::Relaxed);
        self.leader_next
            .store(leader_next.max(applied), Ordering::Relaxed);
        self.heard_ms.store(now_ms, Ordering::Relaxed);
        self.synced.store(true, Ordering::Release);
    }

    /// The stream is gone (or is starting again from a snapshot).
    pub fn lost(&self) {
        self.synced.store(false, Ordering::Release);
    }

    /// The index now holds a snapshot of a leader's index.
    pub fn copied(&self) {
        self.copy.store(true, Ordering::Release);
    }

    /// The index no longer holds a copy (a term's end cleared it).
    pub fn forget_copy(&self) {
        self.copy.store(false, Ordering::Release);
    }

    /// Whether the index holds a leader's copy, as far as the stream brought it.
    pub fn holds_copy(&self) -> bool {
        self.copy.load(Ordering::Acquire)
    }

    /// How many changes the follower is behind, as last heard.
    pub fn lag(&self) -> u64 {
        self.leader_next
            .load(Ordering::Relaxed)
            .saturating_sub(self.applied.load(Ordering::Relaxed))
    }

    /// Whether routing reads may be answered from this member's copy at `now_ms`.
    pub fn serves_reads(&self, now_ms: u64) -> bool {
        self.synced.load(Ordering::Acquire)
            && now_ms.saturating_sub(self.heard_ms.load(Ordering::Relaxed)) <= MAX_SILENCE_MS
            && self.lag() <= MAX_LAG
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_served_only_while_heard_lately_and_close_behind() {
        let s = SyncStatus::default();
        assert!(!s.serves_reads(0), "nothing heard yet");
        s.heard(100, 100, 5_000);
        assert!(s.serves_reads(5_000));
        assert!(s.serves_reads(5_000 + MAX_SILENCE_MS));
        assert!(!s.serves_reads(5_001 + MAX_SILENCE_MS), "silent too long");
        s.heard(100, 100 + MAX_LAG, 6_000);
        assert!(s.serves_reads(6_000));
        s.heard(100, 101 + MAX_LAG, 6_000);
        assert!(!s.serves_reads(6_000), "too far behind");
        s.heard(200, 200, 7_000);
        s.lost();
        assert!(!s.serves_reads(7_000), "the stream is gone");
    }
}

//! IsSnapshotRecovering: whether the cluster is marked for BR's snapshot recovery. PD keeps the
//! mark as one etcd key that BR sets while it restores a cluster from volume snapshots, and a
//! TiKV that sees it set starts in a recovery mode of its own instead of serving. Meridian has
//! no snapshot recovery (no admin route sets a mark, and nothing restores from one), so no
//! cluster is ever marked: the answer is always `false`, from any member, leader or not,
//! bootstrapped or not, as PD reads its key without asking who leads. Owns only that answer.

/// Whether the cluster is marked for snapshot recovery: never (see the module doc).
pub fn is_marked() -> bool {
    false
}

//! What this node knows of the cluster: its own identity and who leads. Read by the request
//! path (to answer `NotLeader` with the leader) and the admin API; written only by the
//! leadership loop through the `watch` channel.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::proto::{MemberInfo, MembersReply};

#[derive(Clone)]
pub struct Membership {
    pub cluster_id: u64,
    pub me: MemberInfo,
    leader: watch::Receiver<Option<MemberInfo>>,
    /// Set once the cluster removed this member: it never campaigns again.
    removed: Arc<AtomicBool>,
}

impl Membership {
    pub fn new(
        cluster_id: u64,
        me: MemberInfo,
        leader: watch::Receiver<Option<MemberInfo>>,
    ) -> Self {
        Membership {
            cluster_id,
            me,
            leader,
            removed: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// The flag the leadership side sets when it learns of the removal.
    pub fn removed_flag(&self) -> Arc<AtomicBool> {
        self.removed.clone()
    }

    pub fn leader(&self) -> Option<MemberInfo> {
        self.leader.borrow().clone()
    }

    pub fn is_leader(&self) -> bool {
        self.leader
            .borrow()
            .as_ref()
            .is_some_and(|l| l.id == self.me.id)
    }

    /// The members this node knows: itself, and the leader when that is another node.
    pub fn reply(&self) -> MembersReply {
        let leader = self.leader();
        let mut members = vec![self.me.clone()];
        if let Some(l) = leader.as_ref().filter(|l| l.id != self.me.id) {
            members.push(l.clone());
        }
        MembersReply {
            cluster_id: self.cluster_id,
            leader,
            members,
        }
    }
}

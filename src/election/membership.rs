//! What this node knows of the cluster: its own identity and who leads. Read by the request
//! path (to answer `NotLeader` with the leader, [`Membership::not_serving`]) and the admin
//! API; written only by the leadership loop through the `watch` channel.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::proto::{ErrorReply, MemberInfo, MembersReply};

#[derive(Clone)]
pub struct Membership {
    pub cluster_id: u64,
    pub me: MemberInfo,
    leader: watch::Receiver<Option<MemberInfo>>,
    /// Set once the cluster removed this member: it never campaigns again.
    removed: Arc<AtomicBool>,
    /// Every registered member, refreshed from etcd; empty on the single embedded node.
    registered: Arc<std::sync::Mutex<Vec<MemberInfo>>>,
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
            registered: Default::default(),
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

    /// Why this node does not serve a request that needs the leader: a follower says who
    /// leads (if it knows) so the client goes there; a leader still starting or stepping
    /// down asks for a retry.
    pub fn not_serving(&self) -> ErrorReply {
        if self.is_leader() {
            ErrorReply::Unavailable("leader not serving yet".into())
        } else {
            ErrorReply::NotLeader {
                leader: self.leader(),
            }
        }
    }

    /// Replaces the registered members (from the registry in etcd).
    pub fn set_registered(&self, members: Vec<MemberInfo>) {
        if let Ok(mut r) = self.registered.lock() {
            *r = members;
        }
    }

    /// The members this node knows: the registered ones, and always itself and the leader.
    pub fn reply(&self) -> MembersReply {
        let leader = self.leader();
        let mut members = self
            .registered
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        for m in std::iter::once(&self.me).chain(leader.as_ref()) {
            if !members.iter().any(|k| k.id == m.id) {
                members.push(m.clone());
            }
        }
        MembersReply {
            cluster_id: self.cluster_id,
            leader,
            members,
        }
    }
}

//! Key layout, in one place so backends and readers agree.

/// Keys of one cluster, under `/meridian/{cluster_id}/`.
#[derive(Debug, Clone)]
pub struct Keys {
    root: String,
}

impl Keys {
    pub fn new(cluster_id: u64) -> Self {
        Keys {
            root: format!("/meridian/{cluster_id}"),
        }
    }

    /// Where the cluster id of a data dir or etcd prefix is recorded once.
    pub fn cluster_id() -> &'static [u8] {
        b"/meridian/cluster_id"
    }

    /// The member id a node name was given when it first started.
    pub fn member_id(&self, name: &str) -> Vec<u8> {
        format!("{}/members/{name}/id", self.root).into_bytes()
    }

    /// Where a member publishes its addresses (`MemberInfo` as JSON).
    pub fn member_info(&self, name: &str) -> Vec<u8> {
        format!("{}/members/{name}/info", self.root).into_bytes()
    }

    /// Present once a member was removed; a removed member never campaigns again.
    pub fn removed(&self, name: &str) -> Vec<u8> {
        format!("{}/removed/{name}", self.root).into_bytes()
    }

    /// The prefix under which every member's keys live.
    pub fn members_prefix(&self) -> Vec<u8> {
        format!("{}/members/", self.root).into_bytes()
    }

    /// The leader key: the current leader's member info, attached to its lease.
    pub fn leader(&self) -> Vec<u8> {
        format!("{}/leader", self.root).into_bytes()
    }

    /// The persisted TSO window limit (physical milliseconds, decimal).
    pub fn tso_limit(&self) -> Vec<u8> {
        format!("{}/tso/limit", self.root).into_bytes()
    }
}

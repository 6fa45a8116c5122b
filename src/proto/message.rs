//! The messages. Every request gets exactly one `Response`, in request order on its stream.

use rkyv::{Archive, Deserialize, Serialize};

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Bare round trip through the same path as every other request.
    Ping,
    /// `count` consecutive timestamps, `1..=2^18`.
    Tso { count: u32 },
    /// The cluster's members and its leader.
    GetMembers,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Ok(Reply),
    Err(ErrorReply),
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Pong,
    /// The timestamps `first .. first + count`.
    Tso {
        first: u64,
        count: u32,
    },
    Members(MembersReply),
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    pub name: String,
    pub id: u64,
    pub client_url: String,
    pub admin_url: String,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MembersReply {
    pub cluster_id: u64,
    pub leader: Option<MemberInfo>,
    pub members: Vec<MemberInfo>,
}

/// Typed errors; a client can act on each without parsing text.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorReply {
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<MemberInfo> },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("stale epoch: {0}")]
    StaleEpoch(String),
    #[error("cluster not bootstrapped")]
    NotBootstrapped,
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
}

//! Requests the admin API sends to the leadership loop.

use tokio::sync::oneshot;

use crate::proto::MemberInfo;

/// A request to the leader; each carries where to send the outcome.
pub enum Command {
    /// Step down and sit out one lease TTL so another member takes over.
    Resign(oneshot::Sender<Result<(), String>>),
    /// Hand over to the named member and report it once it leads.
    Transfer(String, oneshot::Sender<Result<MemberInfo, String>>),
}

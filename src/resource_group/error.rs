//! Why a resource group call is refused, in PD's words: clients and tools match on them.
//! PD's own errors carry their RFC code in brackets (`[PD:resourcemanager:...]`); the checks
//! PD makes while patching a group are plain messages.

/// The group name length PD accepts (`maxGroupNameLength`), in bytes.
pub const MAX_NAME_LEN: usize = 32;
/// The highest priority PD accepts (`maxPriority`).
pub const MAX_PRIORITY: u32 = 16;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("[PD:resourcemanager:ErrGroupNotExists]the {0} resource group does not exist")]
    NotExists(String),
    #[error("[PD:resourcemanager:ErrDeleteReservedGroup]cannot delete reserved group")]
    DeleteReserved,
    /// `what` is PD's argument: "the group name", "the group priority".
    #[error("[PD:resourcemanager:ErrInvalidGroup]invalid group settings, please check {0}")]
    Invalid(&'static str),
    #[error("[PD:resourcemanager:ErrKeyspaceNotExists]the keyspace does not exist with id {0}")]
    KeyspaceNotExists(u32),
    #[error("only support reconfigure in same mode, maybe you should delete and create a new one")]
    ModeChanged,
    #[error("invalid resource group priority, the value should be in [0,16]")]
    Priority,
    #[error("invalid resource group settings, RU mode should set RU settings")]
    NoRuSettings,
    /// Beyond PD, which has no bound: a group's record or the number of groups.
    #[error("{0}")]
    TooLarge(String),
}

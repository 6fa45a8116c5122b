//! The pending record that keeps a region to one operator at a time until it is done or times
//! out. The operators themselves are data the frames carry (`meridian-client`).

pub use meridian_client::placement::Operator;

/// An operator handed out and not yet seen done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub operator: Operator,
    pub deadline_ms: u64,
}

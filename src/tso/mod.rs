//! The timestamp oracle's pure core: the lock-free windowed allocator and the window decisions
//! (start after a restart or election, when to renew, whether a persisted limit can be
//! trusted), over the hybrid timestamp layout that `meridian-client` defines; and the rule for
//! the external timestamp set against it.
//!
//! Nothing here opens a socket, spawns a task or reads the OS clock: the shell passes `now` in
//! milliseconds and executes the persistence the window decisions ask for.

mod allocator;
mod external;
mod limit;
mod window;

pub use allocator::{AllocError, Allocator, TsRange};
pub use external::{check_external_ts, ExternalTsError};
pub use limit::{LimitError, MAX_LIMIT_AHEAD_MS, MAX_PHYSICAL_MS};
// The layout lives with the client, which hands timestamps out: one definition for both.
pub use meridian_client::tso::{Timestamp, LOGICAL_BITS, MAX_COUNT};
pub use window::{WindowConfig, WindowConfigError, WindowPlan};

#[cfg(test)]
mod tests;

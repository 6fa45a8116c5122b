//! The timestamp oracle's pure core: the hybrid timestamp layout, the lock-free windowed allocator
//! and the window decisions (start after a restart or election, when to renew).
//!
//! Nothing here opens a socket, spawns a task or reads the OS clock: the shell passes `now` in
//! milliseconds and executes the persistence the window decisions ask for.

mod allocator;
mod timestamp;
mod window;

pub use allocator::{AllocError, Allocator, TsRange};
pub use timestamp::{Timestamp, LOGICAL_BITS, MAX_COUNT};
pub use window::{WindowConfig, WindowPlan};

#[cfg(test)]
mod tests;

//! Durable metadata. `MetaStore` is what the rest of the server persists through; `local` is the
//! embedded default (a write-ahead log and snapshot in the data dir). An etcd backend implements
//! the same trait. This module owns bytes on disk and their keys, never what they mean.

mod keys;
mod local;
mod store;

pub use keys::Keys;
pub use local::LocalStore;
pub use store::{MetaError, MetaStore};

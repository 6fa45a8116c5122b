//! Durable metadata. `MetaStore` is what the rest of the server persists through; `local` is the
//! embedded default (a write-ahead log and snapshot in the data dir), `etcd` the shared store of
//! a highly available cluster. This module owns bytes on disk and their keys, never what they mean.

mod etcd;
mod keys;
mod local;
mod store;

pub use etcd::{EtcdStore, LeaderGuard};
pub use keys::Keys;
pub use local::LocalStore;
pub use store::{KeyValue, MetaError, MetaStore, WriteOp};

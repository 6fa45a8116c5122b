//! Durable metadata. `MetaStore` is what the rest of the server persists through; `local` is the
//! embedded default (a write-ahead log and snapshot in the data dir), `etcd` the shared store of
//! a highly available cluster (`etcd_access`: how the node is let in, TLS and user). This module
//! owns bytes on disk and their keys, never what they mean.

mod decimal;
mod etcd;
mod etcd_access;
mod keys;
// `pub(crate)`: `crate::fuzzing` runs the WAL parser on fuzzed bytes.
pub(crate) mod local;
mod record;
mod store;

pub use decimal::load_decimal;
pub use etcd::{EtcdStore, LeaderGuard};
pub use etcd_access::{EtcdAccess, EtcdAccessFlags, PASSWORD_ENV};
pub use keys::Keys;
pub use local::LocalStore;
pub use store::{KeyValue, MetaError, MetaStore, WriteOp};

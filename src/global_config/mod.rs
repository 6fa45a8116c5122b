//! Global config, as PD keeps it for TiDB and its tools (`source_id`,
//! `enable_resource_metering`, TiCDC's settings): items under a config path, written in
//! transactions that each take the next revision, read by name or by prefix, and followed by
//! watchers from a revision on. PD keeps them in etcd and counts etcd's revisions; here the
//! revisions are counted by this module, the same in either backend, and the shell persists
//! items and revision through `MetaStore`. Pure: no I/O, no clock.

mod items;
mod path;

pub use items::{Compacted, GlobalConfig, Txn, TxnError, MAX_TXN_OPS};
pub use path::{clean, join};

/// PD's path when a request names none (kept for TiCDC).
pub const DEFAULT_PATH: &str = "/global/config/";

//! Resource groups, as PD's resource manager keeps them for TiDB's resource control: each
//! group's record (`group`: PD's checks, the reserved `default` group, how a modification
//! patches a record), what its token settings mean (`limit`: PD's burstable modes), its token
//! bucket (`bucket`), PD's rule for lending against its fill (`loan`), PD's split of a
//! bucket among the clients asking it at once (`share`, by each one's measured `demand`),
//! the groups a leader serves (`registry`), PD's refusals (`error`), the controller config
//! TiDB reads (`controller`) and a group's persisted running state (`state`). Pure: no I/O, no
//! clock (time is an argument); the shell persists records through `MetaStore` and serves the
//! `ResourceManager` service.

mod bucket;
mod controller;
mod demand;
mod error;
mod group;
mod limit;
mod loan;
mod registry;
mod share;
mod state;

pub use bucket::{Grant, TokenBucket, MAX_SLOTS, MAX_TRICKLE_MS};
pub use controller::{is_loadable, CONTROLLER_CONFIG_KEY, DEFAULT_CONTROLLER_CONFIG};
pub use error::{GroupError, MAX_NAME_LEN, MAX_PRIORITY};
pub use group::{
    check_keyspace, default_group, new_record, null_keyspace, ru_settings, DEFAULT_GROUP,
    MAX_GROUP_BYTES, NULL_KEYSPACE,
};
pub use limit::{Limit, UNLIMITED_BURST, UNLIMITED_RATE};
pub use registry::{Modification, Registry, MAX_GROUPS, MAX_TOTAL_BYTES};
pub use state::{GroupState, StateError};

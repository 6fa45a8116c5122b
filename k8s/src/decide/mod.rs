//! Reconcile decisions: pure functions from an observed snapshot (owned objects and whether
//! they drifted, pods, revisions, members' health and leader) to the next step. No clock, no
//! API calls; the shell supplies times as durations and carries the steps out. Also who may
//! read the operator's `/metrics`, from the API server's review answers.

pub mod drift;
pub mod failover;
pub mod lease;
pub mod metrics_access;
pub mod reconcile;
pub mod resources;
pub mod scale;
pub mod snapshot;
pub mod upgrade;
pub mod volumes;

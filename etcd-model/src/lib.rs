//! A model of etcd v3 for deterministic simulation: the `KV`, `Lease` and `Watch` services of
//! `etcdserverpb`, with etcd's revision, lease and watch semantics and its error statuses.
//!
//! Two layers. [`machine`] is the state machine: pure and sans-IO, an [`Etcd`] whose methods take
//! a request and the current time in milliseconds and return etcd's response, queuing watch
//! responses for the caller to deliver. [`service`] is the thin tonic shell ([`EtcdModel`])
//! that serves the core over gRPC, drives lease expiry from `tokio::time` (so a paused or
//! simulated clock drives it), and carries the fault knobs a simulation turns.
//!
//! This crate owns only the model; it must not reach into Meridian's server code, only its
//! generated protocol types (`meridian::etcdpb`).

pub mod machine;
pub mod service;

pub use crate::machine::{Config, Etcd, EtcdError, StreamId};
pub use crate::service::{EtcdModel, Fault, Rpc};

/// The generated etcd protocol types the model speaks.
pub use meridian::etcdpb::{etcdserverpb as pb, mvccpb};

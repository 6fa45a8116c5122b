//! The Kubernetes I/O shell around the pure decisions: the platform trait (Kubernetes or the
//! simulation), the members API, one reconcile that carries decisions out, the kube-runtime
//! controller with its finalizer, leader election on a Lease, the typed reconcile errors, and
//! the operator's metrics and probes endpoint with the token reviews guarding `/metrics`.
//! Decides nothing itself.

pub mod access;
pub mod controller;
pub mod endpoint;
pub mod error;
pub mod kube_api;
pub mod lease;
pub mod members;
pub mod metrics;
pub mod platform;
pub mod reconciler;

//! The Kubernetes I/O shell around the pure decisions: the platform trait (Kubernetes or the
//! simulation), the members API, one reconcile that carries decisions out, the kube-runtime
//! controller with its finalizer, and leader election on a Lease. Decides nothing itself.

pub mod controller;
pub mod kube_api;
pub mod lease;
pub mod members;
pub mod platform;
pub mod reconciler;

//! The Meridian operator: the `MeridianCluster` resource and what runs a cluster of Meridian
//! members as a StatefulSet. The decisions (`decide`) are pure functions of an observed
//! snapshot; the shell (`shell`) does the I/O around them and decides nothing: the platform
//! trait over the Kubernetes API (or the simulation), the members' admin API, the reconcile
//! that carries decisions out, the kube-runtime controller, and leader election on a Lease.

pub mod crd;
pub mod decide;
pub mod shell;

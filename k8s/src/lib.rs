//! The Meridian operator: the `MeridianCluster` resource and the decisions that run a cluster
//! of Meridian members as a StatefulSet. The decisions (`decide`) are pure functions of an
//! observed snapshot; the Kubernetes I/O shell around them is the next step (issue 5).

pub mod crd;
pub mod decide;
pub mod shell;

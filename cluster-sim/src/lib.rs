//! A deterministic simulation of a whole Meridian cluster on turmoil: one etcd (the
//! `etcd-model` crate, served over gRPC), three to five members each running the real control
//! side (election, keepalive, TSO control loop, placement persister) on the real
//! `etcd-client`, clients asking members for timestamps and ids through their request path, and
//! a placement client registering stores and splitting regions, all on one thread with
//! simulated time and network, from one seed. A nemesis partitions and holds links to etcd,
//! crashes and bounces members, shifts their clocks, and slows, re-elects and loses requests
//! in etcd; checks run on every step (docs/deterministic-simulation.md says why this means and not others).
//!
//! A crate of its own rather than a module of `sim/`: `sim/` is the pure scheduling simulator
//! and builds nothing of the server's I/O, while this needs turmoil, tonic, the etcd model and
//! the server's `sim` feature, and the vendored turmoil, which seeds each host's tokio runtime
//! (its `select!` branch order and `watch` waiter lists) from the seed without
//! `--cfg tokio_unstable`, so that the ordinary build replays.
//!
//! Owns the harness: hosts, nemesis, checks and trace. It must not change how the server
//! behaves; it reaches it only through `meridian::server::sim` and the `sim` seams.

pub mod check;
pub mod cluster;
pub mod hosts;
pub mod nemesis;
pub mod net;
pub mod placement_client;
pub mod run;
pub mod trace;

pub use meridian::server::mutation::Mutation;
pub use run::{run, Outcome, SimConfig};

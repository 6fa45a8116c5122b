//! Meridian: a Placement Driver. Crate map, one line per module.

/// Admin HTTP API: health, readiness, members, Prometheus metrics.
pub mod admin;
/// The process allocator (jemalloc with huge pages) a binary installs.
pub mod alloc;
/// Authorization: the role each call needs and what a client certificate grants.
pub mod auth;
/// Rust client (the `meridian-client` crate): connection, TSO batching dispatcher, typed errors.
pub use meridian_client::client;
/// The wall clock every subsystem reads, with an offset tests shift at run time.
pub mod clock;
/// Runtime configuration: file format and defaults.
pub mod config;
/// `meridian ctl`'s pd-ctl-level verbs and how they print (JSON or tables).
pub mod ctl;
/// QUIC datagram size: the UDP payload accepted and path MTU discovery's bound (`meridian-client`).
pub use meridian_client::datagram;
/// Leadership on etcd: campaign, lease keepalive, lease proof (T4).
pub mod election;
/// The server's random numbers: the OS's, or a seeded sequence in a simulation.
pub mod entropy;
/// etcd's KV, Lease, Watch and Cluster types and services, generated from proto/etcd.
pub mod etcdpb;
/// Failpoints: named steps tests make fail, hang or kill the process (`failpoints` feature).
pub mod failpoint;
/// Fuzz targets over the decoders of outside bytes (`fuzz/`, `tests/fuzz_corpus.rs`).
#[cfg(feature = "testkit")]
#[doc(hidden)]
pub mod fuzzing;
/// GC safe points: the cluster's and per-service ones with a TTL (pure rules).
pub mod gc;
/// Global config items, their revisions and the changes watchers follow (pure rules).
pub mod global_config;
/// Runs `meridian serve` and `etcd` as child processes (demo, tests).
#[cfg(feature = "testkit")]
pub mod harness;
/// kvproto's PD types and service, generated from proto/kvproto.
pub mod kvproto;
/// Durable metadata behind the `MetaStore` trait; the embedded `local` backend.
pub mod meta;
/// Deliberate bugs a simulation switches on (never on without the `sim` feature).
pub mod mutation;
/// A tonic client of kvproto's PD service, for loadgen's `--protocol grpc` and the tests.
pub mod pd_grpc;
/// Stores and regions: the region map and the heartbeat rules (pure).
pub mod placement;
/// PD's placement rules and region label rules: their checks and edits (pure).
pub mod placement_rules;
/// Wire messages (rkyv) and length-prefixed framing (`meridian-client`: one definition).
pub use meridian_client::proto;
/// Resource groups: records, PD's token buckets and the groups a leader serves (pure rules).
pub mod resource_group;
/// Thread-per-core QUIC server: cores, endpoints, request dispatch, TSO control loop.
pub mod server;
/// TLS material: self-signed pair, server and client rustls configs.
pub mod tls;
/// Timestamp layout, lock-free windowed allocator and window decisions.
pub mod tso;

//! `loadgen cluster`'s command line: the cluster's size, the load's shape and pace, and what
//! the stores do with operators. Owns only the arguments.

use std::time::Duration;

use crate::args::Protocol;
use crate::target::TargetArgs;

#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[arg(long, default_value_t = 100)]
    pub stores: u64,
    #[arg(long, default_value_t = 10_000)]
    pub regions: u64,
    /// How long to send heartbeats after setup.
    #[arg(long, default_value = "10s", value_parser = crate::duration::parse)]
    pub duration: Duration,
    /// Region heartbeats per second over all streams (closed loop without it).
    #[arg(long)]
    pub rate: Option<u64>,
    /// Client connections, one thread each. Eight by default: the kernel spreads connections
    /// over the server's cores by a hash of their addresses, and with two both landed on one
    /// core about half the time (1M regions: ~270k heartbeats/s against ~1.1M/s with 8 x 1,
    /// alternated in one run; tuning.md).
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Streams per connection (one: each connection is one store-like heartbeat stream).
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    /// Heartbeats in flight per stream (sent with one write; QUIC only).
    #[arg(long, default_value_t = 128)]
    pub depth: usize,
    /// How the heartbeats go (setup is over QUIC either way): QUIC frames answered one by one,
    /// or kvproto's `RegionHeartbeat` gRPC stream as a TiKV store sends it, one stream per
    /// client stream, where PD's answer is only an operator or a refusal. Over gRPC a run
    /// ends by closing each stream and waiting for the server to end its side, so every
    /// heartbeat counted was handled; there is no per-heartbeat round trip to report.
    #[arg(long, value_enum, default_value_t = Protocol::Quic)]
    pub protocol: Protocol,
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Draw the heartbeat phase into this SVG file: heartbeats/s and p50/p99/p99.9 batch round
    /// trip per second, the stretches with no completed batch and the leader changes seen, and
    /// the round trip's percentile distribution.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
    /// Leave the connection threads unpinned. By default connection `i`'s thread runs on the
    /// `i`th CPU (modulo) and connects from there, so a server steering new connections by the
    /// CPU they arrive on (`server.steer_connections`, on loopback) spreads them over its cores
    /// evenly; unpinned, they start wherever the kernel puts them, often all on one CPU.
    #[arg(long)]
    pub no_pin: bool,
    /// Carry out every operator as TiKV would (conf changes with learners, leader transfers,
    /// splits), report a changed region again at once, and have each store report the
    /// regions and leaders it holds. QUIC only (its replies carry the operators).
    #[arg(long)]
    pub carry_out_operators: bool,
    /// With --carry-out-operators: how long a new peer takes to catch up (its snapshot sent
    /// and applied). Until then its leader reports it pending, and PD does not promote it.
    #[arg(long, default_value = "200ms", value_parser = crate::duration::parse)]
    pub catch_up: Duration,
    /// Splits per second over all streams, beside the heartbeats: each stream splits the
    /// regions of its share in turn, just past a region's start key, as TiKV carries out a
    /// split (new ids asked of the cluster, the split reported, both halves reported again at
    /// once). QUIC only. A split that fails counts as an error.
    #[arg(long)]
    pub splits_per_sec: Option<f64>,
    /// Between two rounds of store heartbeats.
    #[arg(long, default_value = "1s", value_parser = crate::duration::parse)]
    pub store_heartbeat_interval: Duration,
}

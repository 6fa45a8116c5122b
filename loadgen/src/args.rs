//! The arguments of a TSO run (`loadgen tso`, and what `demo`, `attack`, `compare` and the
//! nemesis pass on): what to drive, how hard, and where the report goes. Owns the options and
//! their defaults only; it must not run anything (`run`) or shape the report (`report`), so
//! both read it without reading each other.

use std::path::PathBuf;
use std::time::Duration;

use meridian::tls::Trust;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// `get_ts()` through the client's batching dispatcher.
    Tso,
    /// One `Tso{count: 1}` in flight per stream: no batching.
    TsoRaw,
    /// One `Ping` in flight per stream: the bare round trip of the same path.
    Ping,
}

/// How loadgen reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Meridian's own protocol: QUIC with rkyv frames.
    Quic,
    /// kvproto's `pdpb.PD` over gRPC, batched as PD's client batches (`--op tso` only).
    Grpc,
}

#[derive(Debug, Clone, clap::Args)]
pub struct TsoArgs {
    /// Members' client addresses, host:port (`demo` sets its own).
    #[arg(long, value_delimiter = ',')]
    pub endpoints: Vec<String>,
    /// How long to run: 10s, 500ms, 1m.
    #[arg(long, default_value = "10s", value_parser = crate::duration::parse)]
    pub duration: Duration,
    /// Concurrent callers (tasks), spread over the connections.
    #[arg(long, default_value_t = 1024)]
    pub concurrency: usize,
    /// Client connections (each a `Client` with its own dispatcher).
    #[arg(long, default_value_t = 2)]
    pub connections: usize,
    /// TSO requests in flight per connection (`--op tso`).
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    #[arg(long, value_enum, default_value_t = Op::Tso)]
    pub op: Op,
    #[arg(long, value_enum, default_value_t = Protocol::Quic)]
    pub protocol: Protocol,
    /// Offer this many operations per second (open loop); latency counts from each operation's
    /// scheduled time, so a stall is not hidden.
    #[arg(long)]
    pub rate: Option<u64>,
    /// Write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The server's certificate or CA (DATA_DIR/tls/ca.pem of a self-signed server).
    #[arg(long, conflicts_with = "insecure")]
    pub ca: Option<PathBuf>,
    /// Skip certificate verification.
    #[arg(long)]
    pub insecure: bool,
    /// Keep at most this many timestamps for the duplicate check (8 bytes each).
    #[arg(long, default_value_t = 500_000_000)]
    pub max_recorded: usize,
    /// Draw the run into this SVG file: throughput and p50/p99/p99.9 latency per second, the
    /// stretches with no completed request and the leader changes seen, and the latency
    /// percentile distribution.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Leave the connection threads unpinned. By default connection `i`'s thread runs on the
    /// `i`th CPU (modulo), and connects from there: a server steering connections by CPU
    /// (`server.steer_connections`, on loopback) then serves it on the core of that CPU.
    #[arg(long)]
    pub no_pin: bool,
}

impl TsoArgs {
    /// The trust `--ca` or `--insecure` asks for.
    pub fn trust(&self) -> anyhow::Result<Trust> {
        crate::target::trust(self.ca.as_ref(), self.insecure)
    }

    /// Closed-loop `get_ts()` load on two connections with the checker, verified against the
    /// CA file `ca`: what the end-to-end tests run beside their scenarios.
    pub fn checked(
        endpoints: Vec<String>,
        ca: std::path::PathBuf,
        duration: Duration,
        concurrency: usize,
    ) -> TsoArgs {
        TsoArgs {
            endpoints,
            duration,
            concurrency,
            connections: 2,
            streams: 1,
            op: Op::Tso,
            protocol: Protocol::Quic,
            rate: None,
            json: None,
            ca: Some(ca),
            insecure: false,
            max_recorded: 50_000_000,
            plot: None,
            no_pin: false,
        }
    }
}

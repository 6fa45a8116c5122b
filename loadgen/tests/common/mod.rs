//! Shared by the end-to-end tests: the `meridian` binary of this build, free ports, load
//! arguments.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;
use std::time::Duration;

use loadgen::run::{Op, TsoArgs};

#[allow(unused_imports)] // as above: not every test binary uses both
pub use meridian::harness::{free_udp_port, test_binary as meridian_bin};

/// Closed-loop `get_ts()` load with the checker, verified against `ca`.
pub fn tso_load(
    endpoints: Vec<String>,
    ca: PathBuf,
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
        rate: None,
        json: None,
        ca: Some(ca),
        insecure: false,
        max_recorded: 50_000_000,
    }
}

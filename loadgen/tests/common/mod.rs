//! Shared by the end-to-end tests: the `meridian` binary of this build, free ports, load
//! arguments.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;
use std::time::Duration;

use loadgen::run::{Op, TsoArgs};

/// The `meridian` binary of this build: `$MERIDIAN_BIN`, else `target/<profile>/meridian`
/// beside `deps/`.
pub fn meridian_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MERIDIAN_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("meridian");
    assert!(
        bin.exists(),
        "{} missing: build the workspace (cargo build --workspace) first",
        bin.display()
    );
    bin
}

pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

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

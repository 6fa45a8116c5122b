//! Real processes for demos and end-to-end tests: `meridian serve` and `etcd` on loopback ports
//! in temp dirs, stopped gracefully or killed, and always reaped when dropped; the callers a
//! test points at them (certificates from a node's CA or an operator's own, a PD gRPC client
//! once placement has loaded), and the records and resource-group messages PD's clients send
//! them.
//!
//! Test support, compiled only with the `testkit` feature (the tests, loadgen, interop and the
//! operator's tests turn it on): the server never calls it, and it must not hold anything the
//! server needs.

mod bootstrap;
mod callers;
mod cluster;
mod etcd;
mod pd;
mod pki;
mod proxy;
mod records;
mod resource_groups;
mod server;

pub use bootstrap::{bootstrap_one_region, first_region, one_voter_region, up_store};
pub use cluster::{Cluster, ClusterNode};
pub use etcd::{assert_needs_etcd, EtcdProcess, EtcdTlsFiles, MERIDIAN_PREFIX, ROOT_PASSWORD};
pub use pd::{alloc_id, bootstrap_over_grpc, connect_when_placement_loads, pd_header};
pub use pki::ca_and_node;
pub use proxy::{FaultProxy, LinkFault};
pub use records::{buckets_report, metapb_peer, metapb_region, metapb_store};
pub use resource_groups::{null_keyspace, ru_group, token_request};
pub use server::{on_a_free_port, ServerProcess};

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::Context;

/// The `meridian` binary of the build a test binary belongs to: `$MERIDIAN_BIN`, else
/// `target/<profile>/meridian` beside the test's `deps/`, built first when it is missing and
/// the test runs under Cargo (`cargo test -p meridian-operator` does not build it). Every test
/// that runs the binary finds it here, this crate's own included: Cargo builds it for them,
/// and the same file is found. Found once per process, so tests running at the same time do
/// not build it twice.
pub fn test_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(find_test_binary)
}

fn find_test_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("MERIDIAN_BIN") {
        return p.into();
    }
    let Some(profile_dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_path_buf()))
    else {
        return PathBuf::from("meridian");
    };
    let bin = profile_dir.join("meridian");
    if !bin.exists() {
        if let Err(e) = build_meridian(&profile_dir) {
            panic!("{} missing and building it failed: {e:#}", bin.display());
        }
    }
    bin
}

/// Builds the `meridian` binary into `profile_dir` (`target/debug` or `target/release`) with
/// the Cargo that started this process (`$CARGO`); without one there is nothing to build with.
/// The build is quiet, and on a cold target it takes minutes: unless Cargo finds the binary
/// fresh within `FRESH_CHECK`, one line on stderr says what is being built, so that the wait
/// is not taken for a hang.
pub fn build_meridian(profile_dir: &Path) -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").context("$CARGO not set: not started by Cargo")?;
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let release = profile_dir.file_name().is_some_and(|n| n == "release");
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "--quiet", "--bin", "meridian", "--manifest-path"])
        .arg(&manifest);
    if release {
        cmd.arg("--release");
    }
    // Cargo gives the program it runs the package's own variables. Build scripts (ring's, for
    // one) rebuild when one of these differs from their last build, so an inner build that
    // kept them would rebuild the dependencies, and the next outer `cargo run` or `cargo test`
    // would rebuild them back.
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if name.starts_with("CARGO_PKG_") || CARGO_RUN_VARS.contains(&name.as_ref()) {
            cmd.env_remove(&key);
        }
    }
    let mut child = cmd.spawn().context("running cargo build")?;
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().context("waiting for cargo build")? {
            break status;
        }
        if started.elapsed() >= FRESH_CHECK {
            eprintln!(
                "building the meridian server (cargo build{} --bin meridian; the first time \
                 takes a few minutes)...",
                if release { " --release" } else { "" }
            );
            break child.wait().context("waiting for cargo build")?;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    anyhow::ensure!(status.success(), "cargo build --bin meridian failed");
    Ok(())
}

/// The variables Cargo sets for a program it runs or tests, beside the `CARGO_PKG_` ones.
const CARGO_RUN_VARS: [&str; 7] = [
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_TARGET_TMPDIR",
];

/// How long Cargo may take to find the `meridian` binary fresh before [`build_meridian`] says
/// that it is building: a no-op `cargo build` takes well under this, even on a busy machine.
const FRESH_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// A port free on loopback right now for both UDP (QUIC) and TCP (the address guard and the
/// gRPC front end): a node binds both on its client port.
///
/// Chosen at random below the kernel's ephemeral range, not by binding port 0: a port is
/// released here and bound by the node later, and in between any outgoing connection of a
/// test running beside it (to etcd, to another node) may take an ephemeral port as its own
/// source, which made a node fail to start with its port "already served".
pub fn free_udp_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let ephemeral_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (FREE_PORTS_FROM, ephemeral_from.max(FREE_PORTS_FROM + 1024));
    let random = std::collections::hash_map::RandomState::new();
    for attempt in 0u64.. {
        let mut h = random.build_hasher();
        h.write_u64(attempt);
        let port = low + (h.finish() % u64::from(high - low)) as u16;
        let Ok(_tcp) = std::net::TcpListener::bind(("127.0.0.1", port)) else {
            continue;
        };
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    unreachable!("an endless loop returns only a port")
}

/// How long the log at `path` is, in bytes (0 when there is none yet).
fn log_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// What was written to the log at `path` after it was `from` bytes long.
fn log_since(path: &Path, from: u64) -> String {
    let log = std::fs::read(path).unwrap_or_default();
    let from = usize::try_from(from).unwrap_or(usize::MAX).min(log.len());
    String::from_utf8_lossy(&log[from..]).into_owned()
}

/// The lowest port [`free_udp_port`] hands out: above the fixed ports the benchmark scripts
/// use (23890-27999).
const FREE_PORTS_FROM: u16 = 28000;

//! Real processes for demos and end-to-end tests: `meridian serve` and `etcd` on loopback ports
//! in temp dirs, stopped gracefully or killed, and always reaped when dropped.

mod etcd;
mod server;

pub use etcd::EtcdProcess;
pub use server::ServerProcess;

use std::path::PathBuf;

/// The `meridian` binary of the build a test binary belongs to: `$MERIDIAN_BIN`, else
/// `target/<profile>/meridian` beside the test's `deps/`.
pub fn test_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("MERIDIAN_BIN") {
        return p.into();
    }
    let bin = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("meridian")))
        .unwrap_or_else(|| PathBuf::from("meridian"));
    assert!(
        bin.exists(),
        "{} missing: build the workspace (cargo build --workspace) first",
        bin.display()
    );
    bin
}

/// A UDP port free on loopback right now.
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("binding a loopback UDP port")
}

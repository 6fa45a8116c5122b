//! What loadgen's end-to-end tests share: a server to point loadgen at. Must not hold any
//! test's checks.

use std::path::Path;

use loadgen::target::TargetArgs;
use meridian::harness::{test_binary, ServerProcess};

/// `meridian serve` on two cores, configured by `config` (TOML), with its data in
/// `dir/data`; and loadgen's target arguments for it (its client address, trusting its CA).
pub fn start_server(dir: &Path, config: &str) -> (ServerProcess, TargetArgs) {
    let data = dir.join("data");
    let config_file = dir.join("meridian.toml");
    std::fs::write(&config_file, config).unwrap();
    let flags: Vec<String> = ["--cores", "2", "--config", config_file.to_str().unwrap()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let server = ServerProcess::start_with(test_binary(), &data, "127.0.0.1:0", &flags).unwrap();
    let target = TargetArgs {
        endpoints: vec![server.client_addr.clone()],
        ca: Some(data.join("tls/ca.pem")),
        insecure: false,
    };
    (server, target)
}

//! `loadgen demo`: starts a single-node `meridian serve` (the binary beside this one) on a temp
//! dir, runs `loadgen tso` against it over verified TLS, prints the report and stops the server
//! with SIGTERM, checking that it exits cleanly.

use std::path::PathBuf;

use anyhow::Context;

use meridian::harness::ServerProcess;

use crate::args::TsoArgs;
use crate::report::Report;
use crate::run;

/// The `meridian` binary: `$MERIDIAN_BIN`, else the one beside this executable. Under
/// `cargo run` it is (re)built first, since `-p loadgen` alone does not build it.
pub fn meridian_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("MERIDIAN_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("executable has no directory")?;
    let binary = dir.join("meridian");
    if std::env::var_os("CARGO").is_some() {
        meridian::harness::build_meridian(dir).context("building the meridian binary")?;
    }
    if !binary.exists() {
        anyhow::bail!(
            "{} not found: build it with `cargo build --release`",
            binary.display()
        );
    }
    Ok(binary)
}

/// How the demo server runs (`loadgen demo` and `loadgen compare` flags).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ServerSetup {
    /// Cores for the demo server (default: all).
    #[arg(long)]
    pub server_cores: Option<usize>,
    /// Config file for the demo server (`meridian serve --config`).
    #[arg(long)]
    pub server_config: Option<PathBuf>,
    /// Run the demo server with `--insecure-no-client-auth`, to measure what client
    /// authentication costs; the client still verifies the server.
    #[arg(long)]
    pub server_no_client_auth: bool,
}

/// A demo server on a temp dir; the dir goes when this is dropped.
pub struct DemoServer {
    pub server: ServerProcess,
    pub ca: PathBuf,
    _dir: tempfile::TempDir,
}

impl DemoServer {
    pub async fn start(setup: &ServerSetup) -> anyhow::Result<DemoServer> {
        let binary = meridian_binary()?;
        let dir = tempfile::tempdir()?;
        let data_dir = dir.path().join("data");
        let mut extra = Vec::new();
        if let Some(c) = setup.server_cores {
            extra.extend(["--cores".to_string(), c.to_string()]);
        }
        if let Some(c) = &setup.server_config {
            extra.extend(["--config".to_string(), c.display().to_string()]);
        }
        if setup.server_no_client_auth {
            extra.push("--insecure-no-client-auth".to_string());
        }
        let server = tokio::task::spawn_blocking({
            let data_dir = data_dir.clone();
            move || ServerProcess::start_with(&binary, &data_dir, "127.0.0.1:0", &extra)
        })
        .await??;
        println!(
            "server: {} (admin https://{}), data dir {}",
            server.client_addr,
            server.admin_addr,
            server.data_dir.display()
        );
        Ok(DemoServer {
            server,
            ca: data_dir.join("tls").join("ca.pem"),
            _dir: dir,
        })
    }

    /// Points `args` at this server (verifying its certificate unless `--insecure`).
    pub fn target(&self, args: &mut TsoArgs) {
        args.endpoints = vec![self.server.client_addr.clone()];
        if !args.insecure {
            args.ca = Some(self.ca.clone());
        }
    }

    /// SIGTERM and a clean exit.
    pub async fn stop(self) -> anyhow::Result<()> {
        let DemoServer { server, _dir, .. } = self;
        tokio::task::spawn_blocking(move || server.stop()).await?
    }
}

pub async fn run(mut args: TsoArgs, setup: &ServerSetup) -> anyhow::Result<Report> {
    let demo = DemoServer::start(setup).await?;
    demo.target(&mut args);
    let report = run::run(&args).await;
    demo.stop().await?;
    report
}

//! `loadgen demo`: starts a single-node `meridian serve` (the binary beside this one) on a temp
//! dir, runs `loadgen tso` against it over verified TLS, prints the report and stops the server
//! with SIGTERM, checking that it exits cleanly.

use std::path::PathBuf;

use anyhow::Context;

use meridian::harness::ServerProcess;

use crate::report::Report;
use crate::run::{self, TsoArgs};

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

/// A demo server on a temp dir; the dir goes when this is dropped.
pub struct DemoServer {
    pub server: ServerProcess,
    pub ca: PathBuf,
    _dir: tempfile::TempDir,
}

impl DemoServer {
    pub async fn start(
        cores: Option<usize>,
        config: Option<PathBuf>,
    ) -> anyhow::Result<DemoServer> {
        let binary = meridian_binary()?;
        let dir = tempfile::tempdir()?;
        let data_dir = dir.path().join("data");
        let mut extra = Vec::new();
        if let Some(c) = cores {
            extra.extend(["--cores".to_string(), c.to_string()]);
        }
        if let Some(c) = config {
            extra.extend(["--config".to_string(), c.display().to_string()]);
        }
        let server = tokio::task::spawn_blocking({
            let data_dir = data_dir.clone();
            move || ServerProcess::start_with(&binary, &data_dir, "127.0.0.1:0", &extra)
        })
        .await??;
        println!(
            "server: {} (admin http://{}), data dir {}",
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

pub async fn run(
    mut args: TsoArgs,
    cores: Option<usize>,
    config: Option<PathBuf>,
) -> anyhow::Result<Report> {
    let demo = DemoServer::start(cores, config).await?;
    demo.target(&mut args);
    let report = run::run(&args).await;
    demo.stop().await?;
    report
}

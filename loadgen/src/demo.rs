//! `loadgen demo`: starts a single-node `meridian serve` (the binary beside this one) on a temp
//! dir, runs `loadgen tso` against it over verified TLS, prints the report and stops the server
//! with SIGTERM, checking that it exits cleanly.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use crate::report::Report;
use crate::run::{self, TsoArgs};

/// A running server process, killed if dropped before `stop`.
pub struct ServerProcess {
    child: Option<Child>,
    pub client_addr: String,
    pub admin_addr: String,
    pub data_dir: PathBuf,
    log: PathBuf,
}

impl ServerProcess {
    pub fn start(
        binary: &Path,
        data_dir: &Path,
        cores: Option<usize>,
    ) -> anyhow::Result<ServerProcess> {
        let log = data_dir.with_extension("log");
        let mut cmd = Command::new(binary);
        cmd.args([
            "serve",
            "--name",
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?);
        if let Some(c) = cores {
            cmd.args(["--cores", &c.to_string()]);
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdout = child.stdout.take().context("server stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .map(str::to_string)
        };
        let (Some(client_addr), Some(admin_addr)) = (field("client="), field("admin=")) else {
            let _ = child.kill();
            let log_text = std::fs::read_to_string(&log).unwrap_or_default();
            anyhow::bail!("server did not report ready; its log:\n{log_text}");
        };
        Ok(ServerProcess {
            child: Some(child),
            client_addr,
            admin_addr,
            data_dir: data_dir.to_path_buf(),
            log,
        })
    }

    /// SIGTERM, then wait for a clean exit.
    pub fn stop(mut self) -> anyhow::Result<()> {
        let mut child = self.child.take().context("already stopped")?;
        // SAFETY: kill(2) on our own child's pid with a plain signal number.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        for _ in 0..200 {
            if let Some(status) = child.try_wait()? {
                if status.success() {
                    return Ok(());
                }
                anyhow::bail!("server exited with {status}; log in {}", self.log.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        anyhow::bail!("server did not stop within 10 s of SIGTERM")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The `meridian` binary: `$MERIDIAN_BIN`, else the one beside this executable. Under
/// `cargo run` it is (re)built first, since `-p loadgen` alone does not build it.
pub fn meridian_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("MERIDIAN_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("executable has no directory")?;
    let binary = dir.join("meridian");
    if let Some(cargo) = std::env::var_os("CARGO") {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let release = dir.file_name().is_some_and(|n| n == "release");
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet", "--bin", "meridian", "--manifest-path"])
            .arg(&manifest);
        if release {
            cmd.arg("--release");
        }
        let status = cmd.status().context("building the meridian binary")?;
        if !status.success() {
            anyhow::bail!("building the meridian binary failed");
        }
    }
    if !binary.exists() {
        anyhow::bail!(
            "{} not found: build it with `cargo build --release`",
            binary.display()
        );
    }
    Ok(binary)
}

pub async fn run(mut args: TsoArgs, cores: Option<usize>) -> anyhow::Result<Report> {
    let binary = meridian_binary()?;
    let tmp = tempfile::tempdir()?;
    let data_dir = tmp.path().join("data");
    let server = tokio::task::spawn_blocking({
        let (binary, data_dir) = (binary.clone(), data_dir.clone());
        move || ServerProcess::start(&binary, &data_dir, cores)
    })
    .await??;
    println!(
        "server: {} (admin http://{}), data dir {}",
        server.client_addr,
        server.admin_addr,
        server.data_dir.display()
    );
    args.endpoints = vec![server.client_addr.clone()];
    if !args.insecure {
        args.ca = Some(data_dir.join("tls").join("ca.pem"));
    }
    let report = run::run(&args).await;
    tokio::task::spawn_blocking(move || server.stop()).await??;
    report
}

//! `meridian serve` as a child process. It parses the ready line for the ports a `:0` listen
//! address picked, and stops the node with SIGTERM (graceful) or SIGKILL (crash).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use super::EtcdProcess;

use crate::server::PORT_TAKEN;

/// How many ports [`on_a_free_port`] tries.
const START_ATTEMPTS: usize = 5;

/// Runs `start` with a loopback address on a port chosen now ([`super::free_udp_port`]), for
/// a node that keeps its address across restarts, and returns what `start` returns.
///
/// A test running beside this one may bind the port between its choice and the node's bind.
/// The node then says its port is taken, and `start` runs again on another port, up to
/// `START_ATTEMPTS` times in all. Any other failure is returned at once.
pub fn on_a_free_port<T>(mut start: impl FnMut(&str) -> anyhow::Result<T>) -> anyhow::Result<T> {
    let mut attempt = 1;
    loop {
        let listen = format!("127.0.0.1:{}", super::free_udp_port());
        match start(&listen) {
            Err(e) if attempt < START_ATTEMPTS && format!("{e:#}").contains(PORT_TAKEN) => {
                eprintln!("{listen} was taken before the node bound it; trying another port");
                attempt += 1;
            }
            result => return result,
        }
    }
}

/// A running server process, killed if dropped before `stop`.
pub struct ServerProcess {
    child: Option<Child>,
    pub client_addr: String,
    pub admin_addr: String,
    /// The PD-compatible gRPC address, unless it is off.
    pub grpc_addr: Option<String>,
    pub data_dir: PathBuf,
    /// The `meridian` binary it runs, which also makes certificates from its CA.
    pub(super) binary: PathBuf,
    log: PathBuf,
}

impl ServerProcess {
    /// Starts `meridian serve` on `listen` (`127.0.0.1:0` picks a port) and waits for its
    /// ready line.
    pub fn start(
        binary: &Path,
        data_dir: &Path,
        listen: &str,
        cores: Option<usize>,
    ) -> anyhow::Result<ServerProcess> {
        let extra = cores
            .map(|c| vec!["--cores".to_string(), c.to_string()])
            .unwrap_or_default();
        Self::start_with(binary, data_dir, listen, &extra)
    }

    /// `start` with extra `serve` arguments (`--config FILE`, `--cores N`, ...).
    pub fn start_with(
        binary: &Path,
        data_dir: &Path,
        listen: &str,
        extra: &[String],
    ) -> anyhow::Result<ServerProcess> {
        Self::start_with_env(binary, data_dir, listen, extra, &[])
    }

    /// A node of one core on `etcd`, with `extra` `serve` flags, of [`super::test_binary`], on
    /// a free loopback port: the node makes its own CA and certificates in `data_dir/tls`.
    pub fn start_on_etcd(
        etcd: &EtcdProcess,
        data_dir: &Path,
        extra: &[String],
    ) -> anyhow::Result<ServerProcess> {
        let mut args = vec![
            "--etcd".to_string(),
            etcd.endpoint(),
            "--cores".into(),
            "1".into(),
        ];
        args.extend_from_slice(extra);
        Self::start_with(super::test_binary(), data_dir, "127.0.0.1:0", &args)
    }

    /// etcd in `dir/etcd` and, on it, a node of one core in `dir/n0` ([`Self::start_on_etcd`]).
    pub fn start_with_etcd(dir: &Path) -> anyhow::Result<(EtcdProcess, ServerProcess)> {
        let etcd = EtcdProcess::start(&dir.join("etcd"))?;
        let node = Self::start_on_etcd(&etcd, &dir.join("n0"), &[])?;
        Ok((etcd, node))
    }

    /// A node of one core on the embedded store (no etcd), of [`super::test_binary`], on a
    /// free loopback port.
    pub fn start_embedded(data_dir: &Path) -> anyhow::Result<ServerProcess> {
        Self::start(super::test_binary(), data_dir, "127.0.0.1:0", Some(1))
    }

    /// `start_with`, with `env` added to the node's environment (a secret such as
    /// `MERIDIAN_ETCD_PASSWORD`, which has no flag).
    pub fn start_with_env(
        binary: &Path,
        data_dir: &Path,
        listen: &str,
        extra: &[String],
        env: &[(&str, &str)],
    ) -> anyhow::Result<ServerProcess> {
        let log = data_dir.with_extension("log");
        let log_before = super::log_len(&log);
        let mut cmd = Command::new(binary);
        cmd.envs(env.iter().copied());
        cmd.args([
            "serve",
            "--listen",
            listen,
            "--admin-listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)?,
        );
        if !extra.iter().any(|a| a == "--name") {
            cmd.args(["--name", "harness"]);
        }
        cmd.args(extra);
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
            let _ = child.wait();
            // Only this start's part: the log is kept across restarts.
            let log_text = super::log_since(&log, log_before);
            anyhow::bail!("server did not report ready; its log:\n{log_text}");
        };
        Ok(ServerProcess {
            child: Some(child),
            client_addr,
            admin_addr,
            grpc_addr: field("grpc=").filter(|g| g != "off"),
            data_dir: data_dir.to_path_buf(),
            binary: binary.to_path_buf(),
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

impl ServerProcess {
    /// The trust of a node that made its own certificates: its CA, and the local client
    /// certificate beside it (roles client, store and admin).
    pub fn trust(&self) -> crate::tls::Trust {
        crate::tls::Trust::Ca(self.data_dir.join("tls").join("ca.pem"))
    }

    /// This node's admin API, with [`Self::trust`].
    pub fn admin(&self) -> anyhow::Result<crate::admin::AdminClient> {
        crate::admin::AdminClient::new(&self.admin_addr, &self.trust())
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends `signal` (`libc::SIGHUP`, ...) to the running process.
    pub fn signal(&self, signal: libc::c_int) -> anyhow::Result<()> {
        let child = self.child.as_ref().context("already stopped")?;
        // SAFETY: kill(2) on our own child's pid with a plain signal number.
        if unsafe { libc::kill(child.id() as libc::pid_t, signal) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(())
    }

    /// Arms failpoint `name` with `actions` through the admin API (a build with the
    /// `failpoints` feature; src/failpoint.rs); empty `actions` disarm it.
    pub fn failpoint(&self, name: &str, actions: &str) -> anyhow::Result<()> {
        self.admin()?.failpoint(name, actions)
    }

    /// Everything the process has logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits up to `timeout` for the process to exit by itself (a failpoint's `kill`); its
    /// status, or `None` if it still runs.
    pub fn wait_exit(
        &mut self,
        timeout: Duration,
    ) -> anyhow::Result<Option<std::process::ExitStatus>> {
        let child = self.child.as_mut().context("already stopped")?;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait()? {
                self.child = None;
                return Ok(Some(status));
            }
            if std::time::Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no shutdown, no flush; what is on disk is all the next start has.
    pub fn kill(mut self) -> anyhow::Result<()> {
        let mut child = self.child.take().context("already stopped")?;
        child.kill()?;
        child.wait()?;
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A start that finds its port taken `taken` times, then starts: the listen addresses
    /// it was given, and the result.
    fn taken(times: usize) -> (Vec<String>, anyhow::Result<String>) {
        let mut tried = Vec::new();
        let result = on_a_free_port(|listen| {
            tried.push(listen.to_string());
            if tried.len() <= times {
                anyhow::bail!("server did not report ready: {listen} {PORT_TAKEN}: ...")
            }
            Ok(listen.to_string())
        });
        (tried, result)
    }

    #[test]
    fn a_port_taken_before_the_bind_is_tried_again_elsewhere() {
        let (tried, result) = taken(2);
        assert_eq!(tried.len(), 3, "{tried:?}");
        assert_eq!(result.unwrap(), tried[2]);
        assert!(
            tried.iter().all(|l| l.starts_with("127.0.0.1:")),
            "{tried:?}"
        );
        let distinct: std::collections::HashSet<_> = tried.iter().collect();
        assert!(distinct.len() > 1, "always the same port: {tried:?}");
    }

    #[test]
    fn a_port_taken_every_time_fails_after_the_last_attempt() {
        let (tried, result) = taken(usize::MAX);
        assert_eq!(tried.len(), START_ATTEMPTS);
        assert!(format!("{:#}", result.unwrap_err()).contains(PORT_TAKEN));
    }

    #[test]
    fn any_other_failure_is_returned_at_once() {
        let mut calls = 0;
        let err = on_a_free_port::<()>(|_| {
            calls += 1;
            anyhow::bail!("server did not report ready: bad config")
        })
        .unwrap_err();
        assert_eq!(calls, 1);
        assert!(err.to_string().contains("bad config"));
    }
}

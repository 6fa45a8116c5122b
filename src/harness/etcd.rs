//! A single-member etcd (Debian's `etcd-server`) on free loopback ports in its own data dir.
//! `stop` and `start` keep the ports and the data, so a test can take etcd away for longer than
//! a lease and bring the same cluster back.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

pub struct EtcdProcess {
    child: Option<Child>,
    data_dir: PathBuf,
    client_port: u16,
    peer_port: u16,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl EtcdProcess {
    /// Starts etcd in `dir` (created if needed) and waits until it answers.
    pub fn start(dir: &Path) -> anyhow::Result<EtcdProcess> {
        let mut etcd = EtcdProcess {
            child: None,
            data_dir: dir.to_path_buf(),
            client_port: free_port()?,
            peer_port: free_port()?,
        };
        etcd.resume()?;
        Ok(etcd)
    }

    /// `http://127.0.0.1:PORT`, the client URL.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// Starts the process again after `stop`, on the same ports and data.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.child.is_none(), "etcd is already running");
        std::fs::create_dir_all(&self.data_dir)?;
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.with_extension("log"))?;
        let child = Command::new("etcd")
            .arg("--name=test")
            .arg(format!(
                "--data-dir={}",
                self.data_dir.join("member-data").display()
            ))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=test={peer}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting etcd (Debian package etcd-server)")?;
        self.child = Some(child);
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(15);
        let health = crate::admin::AdminClient::plain(&self.endpoint());
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    self.child = None;
                    anyhow::bail!(
                        "etcd exited with {status}; see {}",
                        self.data_dir.with_extension("log").display()
                    );
                }
            }
            // etcd answers /health with "true" once it has a leader.
            if let Ok((200, body)) = health.get("/health") {
                if body.contains("\"health\":\"true\"") {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        anyhow::bail!("etcd did not become healthy within 15 s")
    }

    /// Kills the process (the data stays for `resume`).
    pub fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

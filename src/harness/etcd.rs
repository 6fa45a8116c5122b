//! A single-member etcd (Debian's `etcd-server`) on free loopback ports in its own data dir.
//! `stop` and `start` keep the ports and the data, so a test can take etcd away for longer than
//! a lease and bring the same cluster back. `start_tls` serves the client port over TLS and
//! requires client certificates (`--client-cert-auth`), with certificates made by
//! [`crate::tls::cert`]; `enable_auth` turns etcd's own users and roles on.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::tls::cert;

/// The password `enable_auth` gives etcd's `root` user.
pub const ROOT_PASSWORD: &str = "root-password-for-tests";
/// The key prefix every Meridian key lives under (see `meta::Keys`).
pub const MERIDIAN_PREFIX: &[u8] = b"/meridian/";
/// How many sets of ports a first start tries before it gives up.
const START_ATTEMPTS: usize = 5;
/// What etcd logs when it cannot bind a port (Go's `EADDRINUSE` text).
const ADDRESS_IN_USE: &str = "address already in use";

/// Asserts that `refused` is a node's answer, without etcd, to a call only etcd serves
/// (the etcd API, MetaStorage): unavailable, saying how to run on etcd.
pub fn assert_needs_etcd(refused: &tonic::Status) {
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("run Meridian on etcd (--etcd)"),
        "{refused:?}"
    );
}

pub struct EtcdProcess {
    child: Option<Child>,
    data_dir: PathBuf,
    client_port: u16,
    peer_port: u16,
    tls: Option<EtcdTlsFiles>,
}

/// The certificates of an etcd run with TLS, as PEM files in one directory: a CA, etcd's own
/// certificate (SANs `127.0.0.1` and `localhost`), and a client certificate whose common name is
/// `meridian`. With `--client-cert-auth` and auth enabled, etcd takes the user from the client
/// certificate's CN ([`cert::create_client`] writes the name it is given there), so this
/// certificate alone logs in as the user `meridian`.
#[derive(Debug, Clone)]
pub struct EtcdTlsFiles {
    pub dir: PathBuf,
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    ca_pem: cert::Pem,
}

impl EtcdTlsFiles {
    /// The CN of [`Self::client_cert`], and so the etcd user it logs in as.
    pub const CLIENT_NAME: &'static str = "meridian";

    /// Makes a CA, etcd's server pair and the `meridian` client pair in `dir`.
    pub fn create(dir: &Path) -> anyhow::Result<EtcdTlsFiles> {
        std::fs::create_dir_all(dir)?;
        let ca = cert::create_ca("etcd test CA")?;
        crate::tls::write_file(dir, "ca.pem", ca.cert.as_bytes())?;
        let server = cert::create_node(&ca, &["127.0.0.1".into(), "localhost".into()])?;
        cert::write_pair(dir, "server", &server)?;
        let mut files = EtcdTlsFiles {
            dir: dir.to_path_buf(),
            ca: dir.join("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server-key.pem"),
            client_cert: PathBuf::new(),
            client_key: PathBuf::new(),
            ca_pem: ca,
        };
        (files.client_cert, files.client_key) = files.client(Self::CLIENT_NAME)?;
        Ok(files)
    }

    /// Another client pair from the same CA with CN `name`: `<name>.pem`, `<name>-key.pem`.
    pub fn client(&self, name: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
        let pair = cert::create_client(&self.ca_pem, name, cert::Role::Member)?;
        cert::write_pair(&self.dir, name, &pair)?;
        Ok((
            self.dir.join(format!("{name}.pem")),
            self.dir.join(format!("{name}-key.pem")),
        ))
    }

    /// The `meridian serve` flags that reach this etcd with the `meridian` client pair.
    pub fn serve_flags(&self) -> Vec<String> {
        [
            ("--etcd-ca", &self.ca),
            ("--etcd-cert", &self.client_cert),
            ("--etcd-key", &self.client_key),
        ]
        .iter()
        .flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()])
        .collect()
    }
}

impl EtcdProcess {
    /// Starts etcd in `dir` (created if needed) and waits until it answers.
    pub fn start(dir: &Path) -> anyhow::Result<EtcdProcess> {
        Self::start_in(dir, None)
    }

    /// Starts etcd with TLS on the client port and `--client-cert-auth`: only clients with a
    /// certificate from [`Self::tls`]'s CA get in. The certificates are made in `dir/tls`.
    pub fn start_tls(dir: &Path) -> anyhow::Result<EtcdProcess> {
        let files = EtcdTlsFiles::create(&dir.join("tls"))?;
        Self::start_in(dir, Some(files))
    }

    fn start_in(dir: &Path, tls: Option<EtcdTlsFiles>) -> anyhow::Result<EtcdProcess> {
        let mut etcd = EtcdProcess {
            child: None,
            data_dir: dir.to_path_buf(),
            client_port: super::free_udp_port(),
            peer_port: super::free_udp_port(),
            tls,
        };
        // A free port is free only when it is picked: tests running beside this one pick from
        // the same range, and one may bind it before etcd does. etcd then exits at once saying
        // so, and a first start may simply take other ports, as nothing has been told these.
        for _ in 1..START_ATTEMPTS {
            let log_before = etcd.log_len();
            match etcd.resume() {
                Ok(()) => return Ok(etcd),
                Err(e) if etcd.log_since(log_before).contains(ADDRESS_IN_USE) => {
                    eprintln!("etcd found a port taken ({e:#}); starting it on others");
                    etcd.client_port = super::free_udp_port();
                    etcd.peer_port = super::free_udp_port();
                }
                Err(e) => return Err(e),
            }
        }
        etcd.resume()?;
        Ok(etcd)
    }

    fn log_path(&self) -> PathBuf {
        self.data_dir.with_extension("log")
    }

    fn log_len(&self) -> u64 {
        super::log_len(&self.log_path())
    }

    /// What etcd wrote to its log after it was `from` bytes long.
    fn log_since(&self, from: u64) -> String {
        super::log_since(&self.log_path(), from)
    }

    /// The client URL: `http://127.0.0.1:PORT`, or `https://` when started with TLS.
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// The certificates, when started with [`Self::start_tls`].
    pub fn tls(&self) -> Option<&EtcdTlsFiles> {
        self.tls.as_ref()
    }

    /// An etcd client as an administrator would have it: the `meridian` client certificate
    /// when TLS is on, and `user` (name, password) when given.
    pub async fn client(&self, user: Option<(&str, &str)>) -> anyhow::Result<etcd_client::Client> {
        let mut options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(3))
            .with_timeout(Duration::from_secs(3));
        if let Some(tls) = &self.tls {
            let read =
                |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
            options = options.with_tls(
                etcd_client::TlsOptions::new()
                    .ca_certificate(etcd_client::Certificate::from_pem(read(&tls.ca)?))
                    .identity(etcd_client::Identity::from_pem(
                        read(&tls.client_cert)?,
                        read(&tls.client_key)?,
                    )),
            );
        }
        if let Some((name, password)) = user {
            options = options.with_user(name, password);
        }
        etcd_client::Client::connect([self.endpoint()], Some(options))
            .await
            .context("connecting to the test etcd")
    }

    /// Every key under [`MERIDIAN_PREFIX`]: Meridian's own, which the etcd namespace that
    /// clients reach through a node does not hold. Read directly, as an administrator.
    pub async fn meridian_keys(&self) -> anyhow::Result<Vec<Vec<u8>>> {
        let mut etcd = self.client(None).await?;
        let options = etcd_client::GetOptions::new()
            .with_prefix()
            .with_keys_only();
        let found = etcd.get(MERIDIAN_PREFIX, Some(options)).await?;
        Ok(found.kvs().iter().map(|kv| kv.key().to_vec()).collect())
    }

    /// Turns etcd auth on: a `root` user (etcd refuses `auth enable` without one) with
    /// [`ROOT_PASSWORD`], and `user` with `password` and one role that may read and write
    /// every key under [`MERIDIAN_PREFIX`] and nothing else. Afterwards the etcd answers only
    /// authenticated requests: a password, or (with TLS) a client certificate whose CN names
    /// a user.
    pub async fn enable_auth(&self, user: &str, password: &str) -> anyhow::Result<()> {
        let mut etcd = self.client(None).await?;
        let role = format!("{user}-readwrite");
        etcd.user_add("root", ROOT_PASSWORD, None).await?;
        etcd.role_add("root").await?;
        etcd.user_grant_role("root", "root").await?;
        etcd.role_add(role.as_str()).await?;
        etcd.role_grant_permission(
            role.as_str(),
            etcd_client::Permission::read_write(MERIDIAN_PREFIX).with_prefix(),
        )
        .await?;
        etcd.user_add(user, password, None).await?;
        etcd.user_grant_role(user, role.as_str()).await?;
        etcd.auth_enable().await.context("etcd auth enable")?;
        Ok(())
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
            .open(self.log_path())?;
        let mut command = Command::new("etcd");
        if let Some(tls) = &self.tls {
            command
                .arg(format!("--cert-file={}", tls.server_cert.display()))
                .arg(format!("--key-file={}", tls.server_key.display()))
                .arg(format!("--trusted-ca-file={}", tls.ca.display()))
                .arg("--client-cert-auth");
        }
        let child = command
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
        let health = match &self.tls {
            None => crate::admin::AdminClient::plain(&self.endpoint()),
            // /health is behind the same client certificate check as everything else.
            Some(tls) => crate::admin::AdminClient::new(
                &self.endpoint(),
                &crate::tls::Trust::Mutual {
                    ca: tls.ca.clone(),
                    cert: tls.client_cert.clone(),
                    key: tls.client_key.clone(),
                },
            )?,
        };
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    self.child = None;
                    anyhow::bail!(
                        "etcd exited with {status}; see {}",
                        self.log_path().display()
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

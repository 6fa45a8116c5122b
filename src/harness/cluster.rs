//! A cluster of `meridian serve` processes on one real etcd, for end-to-end tests of
//! leadership: the nodes share node 0's certificate, so one CA file verifies them all, and each
//! keeps its listen address across restarts so clients can find it again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::{on_a_free_port, test_binary, EtcdProcess, FaultProxy, ServerProcess};
use crate::admin::AdminClient;
use crate::tls::Trust;

/// One member: its name, data dir and fixed listen address, and its process while it runs.
pub struct ClusterNode {
    pub name: String,
    pub data: PathBuf,
    pub listen: String,
    binary: PathBuf,
    args: Vec<String>,
    /// The address it advertises instead of `listen`, when a proxy stands in for it.
    advertise: Option<String>,
    pub process: Option<ServerProcess>,
}

impl ClusterNode {
    /// Starts (or restarts) this member with its arguments.
    pub fn start(&mut self) -> anyhow::Result<()> {
        let mut args = vec!["--name".to_string(), self.name.clone()];
        args.extend(self.args.iter().cloned());
        if let Some(stand_in) = &self.advertise {
            args.extend(["--advertise-client".to_string(), stand_in.clone()]);
        }
        self.process = Some(ServerProcess::start_with(
            &self.binary,
            &self.data,
            &self.listen,
            &args,
        )?);
        Ok(())
    }

    /// The first start, at `listen`, which it keeps from then on; when `stand_in`, behind a
    /// proxy of its own at [`MEMBER_LINK_HOST`] and the same port, which it returns.
    fn start_at(&mut self, listen: &str, stand_in: bool) -> anyhow::Result<Option<FaultProxy>> {
        self.listen = listen.to_string();
        let proxy = if stand_in {
            let port = listen.rsplit_once(':').map_or("", |(_, p)| p);
            let at = format!("{MEMBER_LINK_HOST}:{port}");
            let proxy = FaultProxy::start_at(&at, listen)?;
            self.advertise = Some(at);
            Some(proxy)
        } else {
            None
        };
        self.start()?;
        Ok(proxy)
    }

    /// The running process; panics when it is stopped, as a test bug.
    pub fn process(&self) -> &ServerProcess {
        self.process
            .as_ref()
            .unwrap_or_else(|| panic!("{} is not running", self.name))
    }

    /// SIGKILL, as a crash: the member stays down until started again.
    pub fn kill(&mut self) -> anyhow::Result<()> {
        self.process
            .take()
            .with_context(|| format!("{} is not running", self.name))?
            .kill()
    }
}

/// etcd and `n` members. Dropping it kills them all.
pub struct Cluster {
    pub etcd: EtcdProcess,
    pub nodes: Vec<ClusterNode>,
    /// The CA every member's certificate chains to, and the client certificate beside it
    /// (roles client, store and admin).
    pub ca: PathBuf,
    /// Member `i`'s path to etcd, when started with [`Cluster::start_proxied`].
    pub proxies: Vec<FaultProxy>,
    /// The other members' path to member `i`'s gRPC (its region syncer, and whatever else a
    /// member sends another), when started with [`Cluster::start_members_proxied`]. Clients
    /// of the tests still reach every member directly.
    pub member_proxies: Vec<FaultProxy>,
}

/// The loopback host members advertise when their links to each other are proxied: each
/// member's proxy listens there on the member's own port (the advertised gRPC address keeps
/// the port and takes the host).
const MEMBER_LINK_HOST: &str = "127.0.0.2";

impl Cluster {
    /// Starts etcd in `dir/etcd` and `n` members with `config` (TOML) as their config file.
    pub fn start(dir: &Path, n: usize, config: &str) -> anyhow::Result<Cluster> {
        Self::start_binary(test_binary(), dir, n, config, false)
    }

    /// [`Cluster::start`], each member reaching etcd through a [`FaultProxy`] of its own, so
    /// a test can cut or slow one member's path alone.
    pub fn start_proxied(dir: &Path, n: usize, config: &str) -> anyhow::Result<Cluster> {
        Self::start_binary(test_binary(), dir, n, config, true)
    }

    /// [`Cluster::start`], each member advertising itself at [`MEMBER_LINK_HOST`], where a
    /// [`FaultProxy`] of its own stands for it (`member_proxies`): a test can cut every link
    /// to one member from the others (the followers' syncer streams, when it leads) while
    /// its etcd link and its clients' links stay up.
    pub fn start_members_proxied(dir: &Path, n: usize, config: &str) -> anyhow::Result<Cluster> {
        Self::start_with(test_binary(), dir, n, config, false, true)
    }

    /// [`Cluster::start`] or, when `proxied`, [`Cluster::start_proxied`], of `binary`.
    pub fn start_binary(
        binary: &Path,
        dir: &Path,
        n: usize,
        config: &str,
        proxied: bool,
    ) -> anyhow::Result<Cluster> {
        Self::start_with(binary, dir, n, config, proxied, false)
    }

    /// The members' links to etcd proxied when `etcd_proxied`, their links to each other when
    /// `members_proxied`.
    fn start_with(
        binary: &Path,
        dir: &Path,
        n: usize,
        config: &str,
        etcd_proxied: bool,
        members_proxied: bool,
    ) -> anyhow::Result<Cluster> {
        let etcd = EtcdProcess::start(&dir.join("etcd"))?;
        let proxies = if etcd_proxied {
            (0..n)
                .map(|_| FaultProxy::start(&etcd.endpoint()))
                .collect::<anyhow::Result<Vec<_>>>()?
        } else {
            Vec::new()
        };
        let config_path = dir.join("meridian.toml");
        std::fs::write(&config_path, config)?;
        let mut nodes: Vec<ClusterNode> = (0..n)
            .map(|i| ClusterNode {
                name: format!("n{i}"),
                data: dir.join(format!("n{i}")),
                listen: String::new(),
                binary: binary.to_path_buf(),
                args: vec![
                    "--etcd".to_string(),
                    proxies
                        .get(i)
                        .map_or_else(|| etcd.endpoint(), FaultProxy::endpoint),
                    "--config".into(),
                    config_path.display().to_string(),
                    "--cores".into(),
                    "1".into(),
                ],
                advertise: None,
                process: None,
            })
            .collect();
        let mut member_proxies = Vec::new();
        // Node 0 makes the CA and a node certificate (which names the advertised host too);
        // the others serve that certificate.
        let tls = nodes[0].data.join("tls");
        for (i, node) in nodes.iter_mut().enumerate() {
            if i > 0 {
                node.args.extend([
                    "--tls-cert".to_string(),
                    tls.join("cert.pem").display().to_string(),
                    "--tls-key".into(),
                    tls.join("key.pem").display().to_string(),
                ]);
            }
            let proxy = on_a_free_port(|listen| node.start_at(listen, members_proxied))?;
            member_proxies.extend(proxy);
        }
        Ok(Cluster {
            etcd,
            nodes,
            ca: tls.join("ca.pem"),
            proxies,
            member_proxies,
        })
    }

    /// [`Cluster::start`], then the member that leads and serves, waiting up to `timeout`.
    pub fn start_led(
        dir: &Path,
        n: usize,
        config: &str,
        timeout: Duration,
    ) -> anyhow::Result<(Cluster, usize)> {
        let cluster = Self::start(dir, n, config)?;
        let leader = cluster
            .leader_within(None, timeout)
            .context("no member leads")?;
        Ok((cluster, leader))
    }

    /// Member `i`'s PD gRPC address; panics when it is stopped or serves no gRPC, as a test
    /// bug.
    pub fn grpc_addr(&self, i: usize) -> String {
        let node = self.nodes[i].process();
        node.grpc_addr
            .clone()
            .unwrap_or_else(|| panic!("{} serves no gRPC", self.nodes[i].name))
    }

    pub fn trust(&self) -> Trust {
        Trust::Ca(self.ca.clone())
    }

    /// Every member's client address.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.listen.clone()).collect()
    }

    /// Member `i`'s admin API, as an administrator.
    pub fn admin(&self, i: usize) -> anyhow::Result<AdminClient> {
        AdminClient::new(&self.nodes[i].process().admin_addr, &self.trust())
    }

    /// Member `i`'s `meridian_requests_total{kind="<kind>"}`: the requests of that kind it
    /// handled itself (a follower's count grows only with what it answered).
    pub fn requests_handled(&self, i: usize, kind: &str) -> anyhow::Result<u64> {
        let text = self.admin(i)?.send("GET", "/metrics", None)?.body;
        let series = format!("meridian_requests_total{{kind=\"{kind}\"}} ");
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(&series))
            .with_context(|| format!("no {series}on member {i}"))?;
        line.trim()
            .parse()
            .with_context(|| format!("{series}{line}: not a count"))
    }

    /// Member `i`'s counter `name` (a series without labels), since it last started.
    pub fn counter(&self, i: usize, name: &str) -> anyhow::Result<u64> {
        let text = self.admin(i)?.send("GET", "/metrics", None)?.body;
        let series = format!("{name} ");
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(&series))
            .with_context(|| format!("no {name} on member {i}"))?;
        line.trim()
            .parse()
            .with_context(|| format!("{series}{line}: not a count"))
    }

    /// The member that says it leads and serves, other than `except`, waiting up to
    /// `timeout`. (A paused member's admin port does not answer: name it in `except`.)
    pub fn leader_within(&self, except: Option<usize>, timeout: Duration) -> Option<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            for (i, node) in self.nodes.iter().enumerate() {
                if Some(i) == except || node.process.is_none() {
                    continue;
                }
                let Ok(admin) = self.admin(i) else { continue };
                if let Ok((200, body)) = admin.get_json("/health") {
                    if body["is_leader"] == true && body["serving"] == true {
                        return Some(i);
                    }
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM to every running member; each must exit cleanly.
    pub fn stop_all(&mut self) -> anyhow::Result<()> {
        for node in self.nodes.iter_mut() {
            if let Some(p) = node.process.take() {
                p.stop()?;
            }
        }
        Ok(())
    }
}

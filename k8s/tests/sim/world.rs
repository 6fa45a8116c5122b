//! The world each simulation scenario runs in: etcd, the simulated Kubernetes (`Sim`) and the
//! operator's reconcile loop over it, with the helpers the scenarios share (waiting for a
//! settled cluster, TSO load with the checker, leader watching, printing timings).

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use loadgen::args::TsoArgs;
use loadgen::report::Report;
use loadgen::run;
use meridian::admin::AdminClient;
use meridian::harness::EtcdProcess;
use meridian::tls::Trust;
use meridian_operator::crd::{MeridianCluster, MeridianClusterSpec};
use meridian_operator::shell::members::AdminMembers;
use meridian_operator::shell::metrics::Metrics;
use meridian_operator::shell::reconciler::reconcile_once;
use tokio::sync::watch;

use super::{Env, Sim};

pub struct World {
    pub sim: Arc<Sim>,
    pub members: AdminMembers,
    pub metrics: Arc<Metrics>,
    pub stop: watch::Sender<bool>,
    pub operator: tokio::task::JoinHandle<()>,
    pub _etcd: EtcdProcess,
    pub _tmp: tempfile::TempDir,
}

pub fn spec(replicas: i32) -> MeridianClusterSpec {
    MeridianClusterSpec {
        replicas,
        image: "meridian:1".into(),
        version: "1".into(),
        etcd_endpoints: vec![],
        // Named as the schema requires; the simulated pods serve with the shared certificate
        // the simulation made (`Env::cert`), as if mounted from it.
        tls_secret: Some("pd-tls".into()),
        ..MeridianClusterSpec::default()
    }
}

/// etcd, the simulated Kubernetes and the operator loop, with the cluster serving.
pub async fn world(spec: MeridianClusterSpec) -> World {
    let tmp = tempfile::tempdir().unwrap();
    let etcd =
        tokio::task::block_in_place(|| EtcdProcess::start(&tmp.path().join("etcd"))).unwrap();
    let config = tmp.path().join("meridian.toml");
    std::fs::write(
        &config,
        "[election]\nlease_ttl_secs = 2\nsafety_margin_ms = 300\n",
    )
    .unwrap();
    // One certificate for every pod (as a cluster CA would issue), trusted by the load.
    let tls = tmp.path().join("shared");
    meridian::tls::ensure_identity(&tls, None, None, &["pd".into()]).unwrap();
    let env = Env {
        bin: meridian::harness::test_binary().to_path_buf(),
        dir: tmp.path().join("volumes"),
        etcd: etcd.endpoint(),
        config,
        cert: tls.join("tls").join("cert.pem"),
        key: tls.join("tls").join("key.pem"),
    };
    let mut mc = MeridianCluster::new("pd", spec);
    mc.spec.etcd_endpoints = vec![etcd.endpoint()];
    let sim = Arc::new(Sim::start(mc, env));
    let members = AdminMembers::new(sim.addresses(), Trust::Ca(sim.ca()));
    let (stop, stopped) = watch::channel(false);
    let metrics = Arc::new(Metrics::default());
    let operator = tokio::spawn(operate(
        sim.clone(),
        members.clone(),
        metrics.clone(),
        stopped,
    ));
    let w = World {
        sim,
        members,
        metrics,
        stop,
        operator,
        _etcd: etcd,
        _tmp: tmp,
    };
    let n = w.sim.cluster().spec.replicas as usize;
    settled(&w, n, Duration::from_secs(90)).await;
    w
}

/// The operator: reconcile, then again after the requeue (at most 250 ms here, to keep the
/// scenarios short; the controller waits as long as the reconcile asks), counted and timed as
/// the controller does. An error is printed once while it repeats.
pub async fn operate(
    sim: Arc<Sim>,
    members: AdminMembers,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let mut last_error = String::new();
    while !*stop.borrow() {
        let mc = sim.cluster();
        let started = Instant::now();
        let result = reconcile_once(&mc, &*sim, &members, &metrics, Timestamp::now()).await;
        metrics.reconciled(started.elapsed(), result.as_ref().err());
        let pause = match result {
            Ok(o) => o.requeue_after.min(Duration::from_millis(250)),
            Err(e) => {
                let error = format!("reconcile ({}): {e:#}", e.kind());
                if error != last_error {
                    eprintln!("{error}");
                    last_error = error;
                }
                Duration::from_millis(250)
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.changed() => {}
        }
    }
}

impl World {
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.operator.await;
        let sim = self.sim;
        tokio::task::block_in_place(move || drop(sim));
    }

    /// The value of one series of the operator's `/metrics`, as Prometheus would scrape it.
    pub fn metric(&self, series: &str) -> f64 {
        let text = self.metrics.render();
        text.lines()
            .find_map(|l| {
                let (s, v) = l.rsplit_once(' ')?;
                (s == series).then(|| v.parse().ok())?
            })
            .unwrap_or_else(|| panic!("{series} missing from\n{text}"))
    }

    pub fn condition(&self, kind: &str) -> bool {
        self.sim
            .status()
            .conditions
            .iter()
            .any(|c| c.type_ == kind && c.status == "True")
    }

    /// Settled: reconciling the unchanged cluster three times takes no action and writes
    /// nothing (status included).
    pub async fn idle_costs_no_write(&self) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let writes = self.sim.writes();
        for _ in 0..3 {
            let outcome = reconcile_once(
                &self.sim.cluster(),
                &*self.sim,
                &self.members,
                &self.metrics,
                Timestamp::now(),
            )
            .await
            .unwrap();
            assert!(outcome.actions.is_empty(), "{:?}", outcome.actions);
        }
        assert_eq!(self.sim.writes(), writes, "{:#?}", self.sim.log());
    }
}

/// Polls `ok` every 100 ms until it holds, or fails naming `what` after `within`.
pub async fn until(w: &World, what: &str, within: Duration, ok: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {within:?}\nstatus {:?}\nlog {:#?}",
            w.sim.status(),
            w.sim.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `n` pods run the update revision, every member is healthy, a leader serves and
/// nothing is in progress.
pub async fn settled(w: &World, n: usize, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let status = w.sim.status();
        let rev = w.sim.update_revision();
        let pods = w.sim.pods();
        let ok = pods.len() == n
            && pods.iter().all(|(_, r, ready)| *r == rev && *ready)
            && status.members.len() == n
            && status.members.iter().all(|m| m.healthy)
            && status.leader.is_some()
            && w.condition("Available")
            && !w.condition("Progressing")
            && !w.condition("Degraded");
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not settled at {n} members within {within:?}: pods {pods:?}, status {status:?}\nlog {:#?}",
            w.sim.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl World {
    /// Closed-loop TSO load with the checker on the first three members' addresses (the
    /// client learns the others), running for `duration`.
    pub fn load(&self, duration: Duration) -> tokio::task::JoinHandle<anyhow::Result<Report>> {
        let args = TsoArgs::checked(self.sim.client_endpoints(3), self.sim.ca(), duration, 16);
        tokio::spawn(async move { run::run(&args).await })
    }
}

/// Who leads, as the members themselves say (`/health`), sampled every 25 ms until stopped:
/// the sequence of distinct leaders.
pub fn watch_leaders(
    sim: Arc<Sim>,
    stop: watch::Receiver<bool>,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut seen: Vec<String> = Vec::new();
        while !*stop.borrow() {
            for admin in sim.admin_addrs() {
                if let Ok((200, h)) = AdminClient::with_timeout(
                    &admin,
                    &Trust::Ca(sim.ca()),
                    Duration::from_millis(200),
                )
                .and_then(|c| c.get_json("/health"))
                {
                    if h["is_leader"] == true && h["serving"] == true {
                        let name = h["name"].as_str().unwrap_or_default().to_string();
                        if seen.last() != Some(&name) {
                            seen.push(name);
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        seen
    })
}

pub fn print_load(name: &str, report: &Report, took: Duration) {
    report.print();
    println!(
        "{name}: took {:.1} s; TSO unavailable {:.1} ms in total, longest stall {:.1} ms, {} violations, {} errors",
        took.as_secs_f64(),
        report.unavailable_ms,
        report.longest_stall_ms,
        report.violations,
        report.errors
    );
}

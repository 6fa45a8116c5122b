//! `meridian-operator run [--metrics-addr ADDR]`: the operator (leader-elected on a Lease;
//! only the holder acts), serving `/metrics`, `/healthz` and `/readyz` over plain HTTP on
//! ADDR (default `0.0.0.0:8080`) on every replica, the followers included.
//! `meridian-operator crd`: prints the CustomResourceDefinition the types generate (the file
//! committed as `k8s/manifests/crd.yaml`).
//! `meridian-operator render`: reads a MeridianCluster (JSON) on stdin and prints the objects
//! the operator would apply for it, as a JSON array, so `k8s/validate.py` can check them
//! against the Kubernetes schemas like the committed manifests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use meridian::tls::Trust;
use meridian_operator::shell::controller::{self, Context};
use meridian_operator::shell::endpoint::{self, Endpoint};
use meridian_operator::shell::kube_api::KubeApi;
use meridian_operator::shell::lease::Elector;
use meridian_operator::shell::members::AdminMembers;

const LEASE: &str = "meridian-operator";
const LEASE_DURATION: Duration = Duration::from_secs(15);
/// Where `/metrics` and the probes are served unless `--metrics-addr` says otherwise (the
/// port operator.yaml names `metrics`).
const METRICS_ADDR: &str = "0.0.0.0:8080";
const USAGE: &str =
    "usage: meridian-operator run [--metrics-addr ADDR] | crd | render < cluster.json";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("crd") => {
            println!("{}", meridian_operator::crd::crd_manifest()?);
            Ok(())
        }
        Some("render") => render(),
        Some("run") => {
            let metrics_addr = metrics_addr(&args[1..])?;
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(run(metrics_addr))
        }
        _ => anyhow::bail!(USAGE),
    }
}

/// `run`'s flags: `--metrics-addr ADDR` (or `--metrics-addr=ADDR`).
fn metrics_addr(flags: &[String]) -> anyhow::Result<SocketAddr> {
    let mut addr = METRICS_ADDR.to_string();
    let mut flags = flags.iter();
    while let Some(flag) = flags.next() {
        match flag.split_once('=') {
            Some(("--metrics-addr", value)) => addr = value.to_string(),
            None if flag == "--metrics-addr" => {
                addr = flags
                    .next()
                    .context("--metrics-addr needs an address")?
                    .clone()
            }
            _ => anyhow::bail!("unknown argument {flag}; {USAGE}"),
        }
    }
    addr.parse()
        .with_context(|| format!("--metrics-addr {addr}: not an address like {METRICS_ADDR}"))
}

/// The operator's `admin` client certificate and the cluster CA, from the Secret mounted at
/// `MERIDIAN_ADMIN_TLS_DIR` (default `/etc/meridian-admin-tls`: `ca.crt`, `tls.crt`, `tls.key`,
/// the names cert-manager and `kubectl create secret tls` use). Paths, not contents: every
/// admin call reads them again, so a renewed Secret is used without a restart.
fn admin_trust() -> Trust {
    let dir = std::path::PathBuf::from(
        std::env::var("MERIDIAN_ADMIN_TLS_DIR")
            .unwrap_or_else(|_| "/etc/meridian-admin-tls".into()),
    );
    Trust::Mutual {
        ca: dir.join("ca.crt"),
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    }
}

/// The owned objects for the cluster on stdin, at its spec's replicas, with the operator's
/// namespace from `POD_NAMESPACE` as `run` takes it.
fn render() -> anyhow::Result<()> {
    let mc: meridian_operator::crd::MeridianCluster =
        serde_json::from_reader(std::io::stdin().lock()).context("reading a MeridianCluster")?;
    let namespace = std::env::var("POD_NAMESPACE").unwrap_or_else(|_| "meridian-system".into());
    let replicas = u32::try_from(mc.spec.replicas).context("spec.replicas")?;
    let o = meridian_operator::shell::reconciler::owned(&mc, replicas, &namespace);
    let objects = serde_json::json!([
        o.client_service,
        o.peer_service,
        o.admin_service,
        o.admin_network_policy,
        o.config_map,
        o.disruption_budget,
        o.stateful_set,
    ]);
    println!("{}", serde_json::to_string_pretty(&objects)?);
    Ok(())
}

async fn run(metrics_addr: SocketAddr) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    // Bound first, on followers too: the kubelet probes every replica, and a port taken is
    // a configuration error worth failing at start.
    let listener = tokio::net::TcpListener::bind(metrics_addr)
        .await
        .with_context(|| format!("binding --metrics-addr {metrics_addr}"))?;
    let telemetry = Endpoint::default();
    let mut served = tokio::spawn(endpoint::serve(listener, telemetry.clone()));
    tracing::info!("serving /metrics, /healthz and /readyz on http://{metrics_addr}");
    let client = kube::Client::try_default().await?;
    let me = std::env::var("POD_NAME").unwrap_or_else(|_| "meridian-operator".into());
    let namespace = std::env::var("POD_NAMESPACE").unwrap_or_else(|_| "meridian-system".into());
    let elector = Elector::new(client.clone(), &namespace, LEASE, &me, LEASE_DURATION)
        .reporting(telemetry.probes.clone());
    tracing::info!("{me}: waiting for lease {namespace}/{LEASE}");
    tokio::select! {
        () = elector.acquire() => {}
        ended = &mut served => return Err(endpoint_ended(ended)),
    }
    tracing::info!("{me}: holding lease {namespace}/{LEASE}; reconciling");
    telemetry.metrics.set_lease_held(true);
    telemetry.probes.leading();
    let ctx = Arc::new(Context {
        platform: KubeApi::new(client.clone(), Some(me), namespace),
        members: AdminMembers::in_cluster(admin_trust()),
        client,
        metrics: telemetry.metrics.clone(),
        probes: telemetry.probes.clone(),
    });
    tokio::select! {
        () = controller::run(ctx) => Ok(()),
        // Exiting is how a replica that lost the Lease stops acting; the Deployment restarts
        // it as a follower.
        lost = elector.hold() => Err(lost),
        ended = &mut served => Err(endpoint_ended(ended)),
    }
}

/// Without its endpoint the replica can be neither probed nor scraped: it exits, and the
/// Deployment restarts it.
fn endpoint_ended(ended: Result<std::io::Result<()>, tokio::task::JoinError>) -> anyhow::Error {
    match ended {
        Ok(Ok(())) => anyhow::anyhow!("the metrics endpoint stopped"),
        Ok(Err(e)) => anyhow::Error::new(e).context("the metrics endpoint failed"),
        Err(e) => anyhow::Error::new(e).context("the metrics endpoint's task ended"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn metrics_addr_defaults_and_takes_either_spelling() {
        assert_eq!(
            metrics_addr(&[]).unwrap(),
            METRICS_ADDR.parse::<SocketAddr>().unwrap()
        );
        let want: SocketAddr = "127.0.0.1:9090".parse().unwrap();
        assert_eq!(
            metrics_addr(&args(&["--metrics-addr", "127.0.0.1:9090"])).unwrap(),
            want
        );
        assert_eq!(
            metrics_addr(&args(&["--metrics-addr=127.0.0.1:9090"])).unwrap(),
            want
        );
        for bad in [
            &["--metrics-addr"][..],
            &["--metrics-addr", "localhost"],
            &["--metrics"],
        ] {
            assert!(metrics_addr(&args(bad)).is_err(), "{bad:?}");
        }
    }
}

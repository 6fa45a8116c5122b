//! `meridian-operator run [--metrics-addr ADDR] [--metrics-cert FILE --metrics-key FILE]
//! [--metrics-insecure]`: the operator (leader-elected on a Lease; only the holder acts),
//! serving `/metrics`, `/healthz` and `/readyz` on ADDR (default `0.0.0.0:8080`) on every
//! replica, the followers included. Over HTTPS with the certificate and key files (a mounted
//! Secret) or, without them, a self-signed certificate made at start; `/metrics` answers only
//! bearer tokens the API server authenticates and lets `get` `/metrics`, the probes anyone.
//! `--metrics-insecure` is the loud opt-out: plain HTTP, `/metrics` open.
//! `meridian-operator crd`: prints the CustomResourceDefinition the types generate (the file
//! committed as `k8s/manifests/crd.yaml`).
//! `meridian-operator render`: reads a MeridianCluster (JSON) on stdin and prints the objects
//! the operator would apply for it, as a JSON array, so `k8s/validate.py` can check them
//! against the Kubernetes schemas like the committed manifests.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use meridian::tls::Trust;
use meridian_operator::shell::access::MetricsAccess;
use meridian_operator::shell::controller::{self, Context};
use meridian_operator::shell::endpoint::{self, Endpoint, ServingCert, ServingTls, Transport};
use meridian_operator::shell::kube_api::KubeApi;
use meridian_operator::shell::lease::Elector;
use meridian_operator::shell::members::AdminMembers;

const LEASE: &str = "meridian-operator";
const LEASE_DURATION: Duration = Duration::from_secs(15);
/// Where `/metrics` and the probes are served unless `--metrics-addr` says otherwise (the
/// port operator.yaml names `metrics`).
const METRICS_ADDR: &str = "0.0.0.0:8080";
const USAGE: &str = "usage: meridian-operator run [--metrics-addr ADDR] \
     [--metrics-cert FILE --metrics-key FILE] [--metrics-insecure] | crd | render < cluster.json";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("crd") => {
            println!("{}", meridian_operator::crd::crd_manifest()?);
            Ok(())
        }
        Some("render") => render(),
        Some("run") => {
            let flags = metrics_flags(&args[1..])?;
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(run(flags))
        }
        _ => anyhow::bail!(USAGE),
    }
}

/// How `run` serves its endpoint.
#[derive(Debug, PartialEq, Eq)]
struct MetricsFlags {
    addr: SocketAddr,
    /// `None` with `--metrics-insecure`: plain HTTP.
    cert: Option<ServingCert>,
}

/// `run`'s flags, each `--flag VALUE` or `--flag=VALUE`: `--metrics-addr ADDR`,
/// `--metrics-cert FILE` and `--metrics-key FILE` (together), and `--metrics-insecure` (alone,
/// no value).
fn metrics_flags(flags: &[String]) -> anyhow::Result<MetricsFlags> {
    let mut addr = METRICS_ADDR.to_string();
    let (mut cert, mut key, mut insecure) = (None, None, false);
    let mut flags = flags.iter();
    while let Some(flag) = flags.next() {
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (flag.as_str(), None),
        };
        if name == "--metrics-insecure" {
            anyhow::ensure!(inline.is_none(), "--metrics-insecure takes no value");
            insecure = true;
            continue;
        }
        let slot = match name {
            "--metrics-addr" => &mut addr,
            "--metrics-cert" => cert.get_or_insert_with(String::new),
            "--metrics-key" => key.get_or_insert_with(String::new),
            _ => anyhow::bail!("unknown argument {flag}; {USAGE}"),
        };
        *slot = match inline {
            Some(value) => value,
            None => flags
                .next()
                .with_context(|| format!("{name} needs a value"))?
                .clone(),
        };
    }
    let addr = addr
        .parse()
        .with_context(|| format!("--metrics-addr {addr}: not an address like {METRICS_ADDR}"))?;
    let cert = match (cert, key, insecure) {
        (Some(cert), Some(key), false) => Some(ServingCert::Files {
            cert: PathBuf::from(cert),
            key: PathBuf::from(key),
        }),
        (None, None, false) => Some(ServingCert::SelfSigned),
        (None, None, true) => None,
        (Some(_), None, _) | (None, Some(_), _) => {
            anyhow::bail!("--metrics-cert and --metrics-key go together")
        }
        (Some(_), Some(_), true) => anyhow::bail!(
            "--metrics-insecure serves plain HTTP without a certificate: drop \
             --metrics-cert/--metrics-key, or drop --metrics-insecure"
        ),
    };
    Ok(MetricsFlags { addr, cert })
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

async fn run(flags: MetricsFlags) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let addr = flags.addr;
    // Bound first, on followers too: the kubelet probes every replica, and a port taken is
    // a configuration error worth failing at start.
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding --metrics-addr {addr}"))?;
    let client = kube::Client::try_default().await?;
    let transport = match &flags.cert {
        Some(cert) => {
            let tls = ServingTls::load(cert)?;
            tracing::info!(
                "serving /metrics (bearer tokens the API server authenticates and lets get \
                 /metrics), /healthz and /readyz on https://{addr} with {}",
                tls.describe()
            );
            Transport::Https {
                tls,
                access: Arc::new(MetricsAccess::new(client.clone())),
            }
        }
        None => {
            let warning = format!(
                "--metrics-insecure: /metrics IS SERVED WITHOUT AUTHENTICATION over plain HTTP \
                 on http://{addr}. Anyone who can reach the port reads the metrics, and nothing \
                 on the wire is encrypted. Never run a reachable operator like this."
            );
            eprintln!("WARNING: {warning}");
            tracing::warn!("{warning}");
            Transport::InsecurePlainHttp
        }
    };
    let telemetry = Endpoint::default();
    let mut served = tokio::spawn(endpoint::serve(listener, telemetry.clone(), transport));
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

    fn addr(a: &str) -> SocketAddr {
        a.parse().unwrap()
    }

    #[test]
    fn the_endpoint_is_https_with_a_self_signed_certificate_unless_told_otherwise() {
        assert_eq!(
            metrics_flags(&[]).unwrap(),
            MetricsFlags {
                addr: addr(METRICS_ADDR),
                cert: Some(ServingCert::SelfSigned),
            }
        );
        let want = addr("127.0.0.1:9090");
        for spelling in [
            &["--metrics-addr", "127.0.0.1:9090"][..],
            &["--metrics-addr=127.0.0.1:9090"],
        ] {
            assert_eq!(metrics_flags(&args(spelling)).unwrap().addr, want);
        }
        let files = Some(ServingCert::Files {
            cert: "/tls/tls.crt".into(),
            key: "/tls/tls.key".into(),
        });
        for spelling in [
            &[
                "--metrics-cert",
                "/tls/tls.crt",
                "--metrics-key",
                "/tls/tls.key",
            ][..],
            &["--metrics-key=/tls/tls.key", "--metrics-cert=/tls/tls.crt"],
        ] {
            assert_eq!(metrics_flags(&args(spelling)).unwrap().cert, files);
        }
        // Plain HTTP only when asked for by name.
        let insecure = metrics_flags(&args(&["--metrics-insecure"])).unwrap();
        assert_eq!(insecure.cert, None);
        for bad in [
            &["--metrics-addr"][..],
            &["--metrics-addr", "localhost"],
            &["--metrics"],
            &["--metrics-cert", "/tls/tls.crt"],
            &["--metrics-key", "/tls/tls.key"],
            &["--metrics-cert"],
            &["--metrics-insecure=true"],
            &[
                "--metrics-insecure",
                "--metrics-cert",
                "c",
                "--metrics-key",
                "k",
            ],
        ] {
            assert!(metrics_flags(&args(bad)).is_err(), "{bad:?}");
        }
    }
}

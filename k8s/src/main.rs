//! `meridian-operator run`: the operator (leader-elected on a Lease; only the holder acts).
//! `meridian-operator crd`: prints the CustomResourceDefinition the types generate (the file
//! committed as `k8s/manifests/crd.yaml`).
//! `meridian-operator render`: reads a MeridianCluster (JSON) on stdin and prints the objects
//! the operator would apply for it, as a JSON array, so `k8s/validate.py` can check them
//! against the Kubernetes schemas like the committed manifests.

use std::sync::Arc;
use std::time::Duration;

use meridian::tls::Trust;
use meridian_operator::shell::controller::{self, Context};
use meridian_operator::shell::kube_api::KubeApi;
use meridian_operator::shell::lease::Elector;
use meridian_operator::shell::members::AdminMembers;

const LEASE: &str = "meridian-operator";
const LEASE_DURATION: Duration = Duration::from_secs(15);

fn main() -> anyhow::Result<()> {
    match std::env::args().nth(1).as_deref() {
        Some("crd") => {
            println!("{}", meridian_operator::crd::crd_manifest()?);
            Ok(())
        }
        Some("render") => render(),
        Some("run") => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(run()),
        _ => anyhow::bail!("usage: meridian-operator run | crd | render < cluster.json"),
    }
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
    use anyhow::Context;
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

async fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let client = kube::Client::try_default().await?;
    let me = std::env::var("POD_NAME").unwrap_or_else(|_| "meridian-operator".into());
    let namespace = std::env::var("POD_NAMESPACE").unwrap_or_else(|_| "meridian-system".into());
    let elector = Elector::new(client.clone(), &namespace, LEASE, &me, LEASE_DURATION);
    tracing::info!("{me}: waiting for lease {namespace}/{LEASE}");
    elector.acquire().await;
    tracing::info!("{me}: holding lease {namespace}/{LEASE}; reconciling");
    let ctx = Arc::new(Context {
        platform: KubeApi::new(client.clone(), Some(me), namespace),
        members: AdminMembers::in_cluster(admin_trust()),
        client,
    });
    tokio::select! {
        () = controller::run(ctx) => Ok(()),
        // Exiting is how a replica that lost the Lease stops acting; the Deployment restarts
        // it as a follower.
        lost = elector.hold() => Err(lost),
    }
}

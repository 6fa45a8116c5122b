//! `meridian-operator run`: the operator (leader-elected on a Lease; only the holder acts).
//! `meridian-operator crd`: prints the CustomResourceDefinition the types generate (the file
//! committed as `k8s/manifests/crd.yaml`).

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
        Some("run") => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(run()),
        _ => anyhow::bail!("usage: meridian-operator run | crd"),
    }
}

/// The operator's `admin` client certificate and the cluster CA, from the Secret mounted at
/// `MERIDIAN_ADMIN_TLS_DIR` (default `/etc/meridian-admin-tls`: `ca.crt`, `tls.crt`, `tls.key`,
/// the names cert-manager and `kubectl create secret tls` use).
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
        platform: KubeApi::new(client.clone(), Some(me)),
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

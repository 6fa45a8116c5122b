//! The node's TLS as the flags ask: its certificate (made and kept under the data directory
//! when none is given), client authentication against the cluster CA unless the loud opt-out
//! is given, one rustls configuration per port, and reloading the files on SIGHUP or when they
//! change. Owns no roles: what a certificate grants is `tls::CertRoles`' and `auth`'s.

use std::sync::Arc;
use std::time::Duration;

use super::ServeOptions;
use crate::admin;
use crate::tls;

/// How often the certificate files are checked for a change.
pub const TLS_WATCH_PERIOD: Duration = Duration::from_secs(10);

pub struct NodeTls {
    pub client_auth: tls::ClientAuth,
    pub live: Arc<tls::LiveTls>,
    pub quic: quinn::ServerConfig,
    pub grpc: Arc<rustls::ServerConfig>,
    pub admin: Arc<rustls::ServerConfig>,
}

impl NodeTls {
    /// The certificate names the node's name, the listen host and the advertised host (what
    /// peers dial).
    pub fn load(opts: &ServeOptions) -> anyhow::Result<NodeTls> {
        let mut names = vec![opts.name.clone(), opts.listen.ip().to_string()];
        names.extend(
            opts.advertise_client
                .iter()
                .filter_map(|a| a.rsplit_once(':').map(|(host, _)| host.to_string())),
        );
        let (cert, key) = tls::ensure_identity(
            &opts.data_dir,
            opts.tls_cert.as_deref(),
            opts.tls_key.as_deref(),
            &names,
        )?;
        let client_auth = client_auth(opts);
        let client_ca = client_auth.is_required().then(|| {
            tls::client_ca_path(
                &opts.data_dir,
                opts.tls_cert.as_deref(),
                opts.tls_ca.as_deref(),
            )
        });
        let live = tls::LiveTls::load(tls::TlsFiles {
            cert,
            key,
            client_ca,
        })?;
        Ok(NodeTls {
            client_auth,
            quic: tls::server_config(&live, &opts.config.server)?,
            grpc: tls::grpc_server_config(&live)?,
            admin: tls::admin_server_config(&live, opts.admin_open_probes)?,
            live,
        })
    }
}

/// Client authentication as the flags ask: required (with `[security]`'s mapping of names to
/// roles and its store binding), or the loud opt-out.
fn client_auth(opts: &ServeOptions) -> tls::ClientAuth {
    if opts.insecure_no_client_auth {
        let warning =
            "--insecure-no-client-auth: CLIENT AUTHENTICATION IS OFF. Anyone who can reach \
                       this node's ports can bootstrap, rewrite routing, move GC safe points and \
                       change leadership. Never run a reachable node like this.";
        eprintln!("WARNING: {warning}");
        tracing::warn!("{warning}");
        if opts.config.security.bind_store_identity {
            tracing::warn!(
                "[security] bind-store-identity has no effect with --insecure-no-client-auth: \
                 there is no certificate to bind"
            );
        }
        return tls::ClientAuth::Off;
    }
    tls::ClientAuth::Required(Arc::new(tls::CertRoles::of_config(&opts.config.security)))
}

/// SIGHUP: the certificate, key and client CA read again for every port.
pub fn reload(live: &tls::LiveTls) {
    match live.reload() {
        Ok(()) => {
            let files = live.files();
            tracing::info!(cert = %files.cert.display(), "SIGHUP: TLS certificates reloaded");
        }
        Err(e) => {
            tracing::error!("SIGHUP: TLS reload failed, the old certificates still serve: {e:#}")
        }
    }
}

/// The files read again if they changed (a renewed Kubernetes Secret, where nobody sends
/// SIGHUP).
pub fn reload_if_changed(live: &tls::LiveTls) {
    match live.reload_if_changed() {
        Ok(true) => tracing::info!("TLS files changed: certificates reloaded"),
        Ok(false) => {}
        Err(e) => tracing::error!(
            "TLS files changed but do not load, the old certificates still serve: {e:#}"
        ),
    }
}

/// How this member presents itself to the others: its own certificate (role `member`) as the
/// client certificate, the cluster CA as the trust.
fn peer_trust(opts: &ServeOptions) -> tls::Trust {
    let local = opts.data_dir.join("tls");
    let (cert, key) = match (&opts.tls_cert, &opts.tls_key) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        _ => (local.join("cert.pem"), local.join("key.pem")),
    };
    let ca = tls::client_ca_path(
        &opts.data_dir,
        opts.tls_cert.as_deref(),
        opts.tls_ca.as_deref(),
    );
    if opts.insecure_no_client_auth && !ca.exists() {
        tls::Trust::Insecure
    } else {
        tls::Trust::Mutual { ca, cert, key }
    }
}

/// How this member probes the others' admin APIs, as a member ([`peer_trust`]).
pub fn peer_admin_client(opts: &ServeOptions) -> anyhow::Result<admin::AdminClient> {
    admin::AdminClient::with_timeout("localhost", &peer_trust(opts), Duration::from_millis(300))
}

/// How this member reaches the leader's client port (a follower's HTTP API sends requests on
/// there), as a member ([`peer_trust`]). Read once at start: a certificate renewed since is
/// presented after the next restart.
pub fn peer_client_tls(opts: &ServeOptions) -> anyhow::Result<rustls::ClientConfig> {
    Ok(tls::client_tls(tls::client_builder()?, &peer_trust(opts))?)
}

//! The operator's own endpoint, for the kubelet and Prometheus: `/metrics` (the registry),
//! `/healthz` (liveness) and `/readyz` (readiness); the readiness state the elector and the
//! controller report into; and how the port is served: HTTPS with `/metrics` only for bearer
//! tokens the API server authenticates and lets `get` `/metrics` (`access`), or, with the
//! explicit `--metrics-insecure`, plain HTTP open to anyone.
//!
//! The probes stay open on HTTPS too: the kubelet sends no credentials, and they tell nothing
//! but "up" and "ready" (and, when not ready, why). The serving certificate is a pair of files
//! (a mounted Secret, read again when it changes) or, when none is given, a self-signed one
//! made at start, as controller-runtime does; scrapers cannot verify that one.
//!
//! Liveness asks only that the process answers: tying it to the API server would have the
//! kubelet restart every replica during an API outage, which fixes nothing. Readiness asks
//! that the replica can do its part: a follower has reached the API server (its last Lease
//! round got an answer), the leader has also listed MeridianClusters once (the watch it runs
//! has what it needs: the CRD installed, the RBAC to read it). A follower must be able to be
//! ready, or a Deployment rollout would wait forever on a replica that never leads.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use meridian::tls::{LiveTls, TlsFiles};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use super::access::MetricsAccess;
use super::metrics::Metrics;
use crate::decide::metrics_access::Decision;

/// A TLS handshake not finished by then is dropped, and so is a connection whose request
/// headers have not all arrived (slowloris): the admin port's limits (SECURITY.md).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections open at once; more wait in the kernel's backlog. A scraper or two and the
/// kubelet need a handful.
const MAX_CONNECTIONS: usize = 64;
/// How often the certificate files are checked for a renewed Secret.
const CERT_CHECK: Duration = Duration::from_secs(10);
/// How long the self-signed certificate is valid: a year, as controller-runtime's; a process
/// that lives longer is restarted by a rollout long before.
const SELF_SIGNED_DAYS: u64 = 365;

/// What readiness depends on, set as it happens.
#[derive(Debug, Default)]
pub struct Probes {
    api_reached: AtomicBool,
    leading: AtomicBool,
    listed: AtomicBool,
}

impl Probes {
    /// The outcome of a Lease round: whether the API server answered (a lost race answers).
    pub fn api_reached(&self, reached: bool) {
        self.api_reached.store(reached, Relaxed);
    }

    /// This replica took the Lease and starts the controller.
    pub fn leading(&self) {
        self.leading.store(true, Relaxed);
    }

    /// The controller's first list of MeridianClusters came back.
    pub fn listed(&self) {
        self.listed.store(true, Relaxed);
    }

    /// `Err` says why not ready.
    pub fn ready(&self) -> Result<(), &'static str> {
        if !self.api_reached.load(Relaxed) {
            return Err("the API server has not answered the last Lease round");
        }
        if self.leading.load(Relaxed) && !self.listed.load(Relaxed) {
            return Err("leading; the first list of MeridianClusters has not come back");
        }
        Ok(())
    }
}

/// What the endpoint serves.
#[derive(Clone, Default)]
pub struct Endpoint {
    pub metrics: Arc<Metrics>,
    pub probes: Arc<Probes>,
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServingCert {
    /// `--metrics-cert` and `--metrics-key`: PEM files, read again when they change.
    Files { cert: PathBuf, key: PathBuf },
    /// Neither flag: a certificate made at start for `localhost`, kept in memory only.
    SelfSigned,
}

/// The HTTPS side of the port: the rustls config and, for files, what re-reads them.
pub struct ServingTls {
    config: Arc<rustls::ServerConfig>,
    live: Option<Arc<LiveTls>>,
    what: String,
}

impl ServingTls {
    /// Reads the files, or makes the self-signed certificate. TLS 1.3, HTTP/1.1.
    pub fn load(cert: &ServingCert) -> anyhow::Result<ServingTls> {
        let builder = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth();
        let (mut config, live, what) = match cert {
            ServingCert::Files { cert, key } => {
                let live = LiveTls::load(TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    client_ca: None,
                })
                .with_context(|| {
                    format!(
                        "the metrics certificate (--metrics-cert {}, --metrics-key {})",
                        cert.display(),
                        key.display()
                    )
                })?;
                let what = format!("the certificate in {}", cert.display());
                (builder.with_cert_resolver(live.clone()), Some(live), what)
            }
            ServingCert::SelfSigned => {
                let (chain, key) = self_signed().context("making a self-signed certificate")?;
                let what = format!(
                    "a self-signed certificate made at start (SHA-256 {}): no scraper can \
                     verify it; give --metrics-cert/--metrics-key for one that can be",
                    fingerprint(&chain)
                );
                (builder.with_single_cert(vec![chain], key)?, None, what)
            }
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ServingTls {
            config: Arc::new(config),
            live,
            what,
        })
    }

    /// Which certificate is served, for the start-up log.
    pub fn describe(&self) -> &str {
        &self.what
    }
}

/// How the port is served.
pub enum Transport {
    /// HTTPS; `/metrics` for the bearer tokens `access` lets in.
    Https {
        tls: ServingTls,
        access: Arc<MetricsAccess>,
    },
    /// `--metrics-insecure`: plain HTTP, `/metrics` to anyone who reaches the port.
    InsecurePlainHttp,
}

/// Who may read `/metrics`. Only `Transport::InsecurePlainHttp` makes it open.
#[derive(Clone)]
enum Guard {
    Reviewed(Arc<MetricsAccess>),
    Open,
}

#[derive(Clone)]
struct Served {
    endpoint: Endpoint,
    guard: Guard,
}

fn router(endpoint: Endpoint, guard: Guard) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(Served { endpoint, guard })
}

/// Serves until the task is dropped (or, plain HTTP, the listener fails). On HTTPS an accept
/// error (a full file table) is waited out, and changed certificate files are swapped in.
pub async fn serve(
    listener: tokio::net::TcpListener,
    endpoint: Endpoint,
    transport: Transport,
) -> std::io::Result<()> {
    match transport {
        Transport::InsecurePlainHttp => axum::serve(listener, router(endpoint, Guard::Open)).await,
        Transport::Https { tls, access } => {
            let app = router(endpoint, Guard::Reviewed(access));
            tokio::select! {
                served = serve_https(listener, app, tls.config) => served,
                never = watch_certificate(tls.live) => match never {},
            }
        }
    }
}

async fn serve_https(
    listener: tokio::net::TcpListener,
    app: Router,
    tls: Arc<rustls::ServerConfig>,
) -> std::io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = connections
            .clone()
            .acquire_owned()
            .await
            .map_err(std::io::Error::other)?;
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::debug!("metrics endpoint accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, "metrics endpoint TLS handshake refused: {e}");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "metrics endpoint TLS handshake timed out");
                    return;
                }
            };
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
                .await;
            if let Err(e) = served {
                tracing::debug!(%peer, "metrics endpoint connection: {e}");
            }
        });
    }
}

/// Swaps in renewed certificate files (a Secret volume is updated in place); a broken pair
/// is logged and the last good one keeps serving. Never returns.
async fn watch_certificate(live: Option<Arc<LiveTls>>) -> std::convert::Infallible {
    let Some(live) = live else {
        return std::future::pending().await;
    };
    let mut every = tokio::time::interval(CERT_CHECK);
    loop {
        every.tick().await;
        match live.reload_if_changed() {
            Ok(true) => tracing::info!("metrics endpoint: serving the renewed certificate"),
            Ok(false) => {}
            Err(e) => tracing::error!(
                "metrics endpoint: the renewed certificate files do not load, keeping the \
                 last good ones: {e:#}"
            ),
        }
    }
}

async fn metrics(State(s): State<Served>, headers: HeaderMap) -> Response {
    if let Guard::Reviewed(access) = &s.guard {
        let authorization = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
        match access.check(authorization).await {
            Ok(Decision::Serve) => {}
            Ok(Decision::Unauthenticated { why }) => {
                tracing::debug!("/metrics: 401: {why}");
                return (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Bearer")],
                    "unauthorized: send a bearer token the Kubernetes API server accepts\n",
                )
                    .into_response();
            }
            Ok(Decision::Forbidden { user, why }) => {
                tracing::debug!("/metrics: 403 for {user}: {why}");
                return (
                    StatusCode::FORBIDDEN,
                    format!("forbidden: user \"{user}\" may not get /metrics\n"),
                )
                    .into_response();
            }
            Err(e) => {
                tracing::warn!("/metrics: cannot review a token: {e}");
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the Kubernetes API server cannot review the token now; retry\n",
                )
                    .into_response();
            }
        }
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.endpoint.metrics.render(),
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(s): State<Served>) -> Response {
    match s.endpoint.probes.ready() {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response(),
    }
}

/// A certificate for `localhost` and the loopback addresses, signed by its own key.
fn self_signed() -> anyhow::Result<(CertificateDer<'static>, PrivateKeyDer<'static>)> {
    let mut params = rcgen::CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])?;
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        "meridian-operator metrics (self-signed)",
    );
    let now = SystemTime::now();
    // An hour back: the scraper's clock may be behind ours.
    params.not_before = (now - Duration::from_secs(3600)).into();
    params.not_after = (now + Duration::from_secs(SELF_SIGNED_DAYS * 24 * 3600)).into();
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok((
        cert.der().clone(),
        PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
    ))
}

fn fingerprint(cert: &CertificateDer<'_>) -> String {
    ring::digest::digest(&ring::digest::SHA256, cert.as_ref())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_is_ready_once_the_api_answers_and_a_leader_once_it_has_listed() {
        let p = Probes::default();
        assert!(p.ready().is_err(), "nothing reached yet");
        p.api_reached(true);
        assert_eq!(p.ready(), Ok(()), "a follower standing by");
        p.leading();
        assert!(
            p.ready().is_err_and(|why| why.contains("first list")),
            "{:?}",
            p.ready()
        );
        p.listed();
        assert_eq!(p.ready(), Ok(()));
        p.api_reached(false);
        assert!(
            p.ready().is_err(),
            "a renewal that did not reach the API server"
        );
    }

    fn open(e: &Endpoint) -> State<Served> {
        State(Served {
            endpoint: e.clone(),
            guard: Guard::Open,
        })
    }

    #[tokio::test]
    async fn readyz_answers_503_with_the_reason_then_200() {
        let e = Endpoint::default();
        let r = readyz(open(&e)).await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        e.probes.api_reached(true);
        assert_eq!(readyz(open(&e)).await.status(), StatusCode::OK);
        let r = metrics(open(&e), HeaderMap::new()).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers().get(header::CONTENT_TYPE).map(|v| v.as_bytes()),
            Some(&b"text/plain; version=0.0.4"[..])
        );
    }

    #[test]
    fn the_self_signed_certificate_names_localhost_and_serves() {
        let tls = ServingTls::load(&ServingCert::SelfSigned).unwrap();
        assert!(tls.live.is_none(), "nothing on disk to watch");
        assert!(tls.describe().contains("self-signed"), "{}", tls.describe());
        assert_eq!(tls.config.alpn_protocols, [b"http/1.1".to_vec()]);
        let (cert, _) = self_signed().unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).unwrap();
        let sans = parsed.subject_alternative_name().unwrap().unwrap();
        let names = format!("{:?}", sans.value.general_names);
        assert!(names.contains("localhost"), "{names}");
        let days = (parsed.validity().not_after.timestamp()
            - parsed.validity().not_before.timestamp())
            / 86_400;
        assert_eq!(days, 365, "a year and the hour of clock skew, rounded down");
        assert_ne!(
            fingerprint(&cert),
            fingerprint(&self_signed().unwrap().0),
            "a new key every start"
        );
    }

    #[test]
    fn certificate_files_that_do_not_load_stop_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let files = ServingCert::Files {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        let e = ServingTls::load(&files).err().unwrap();
        assert!(format!("{e:#}").contains("--metrics-cert"), "{e:#}");
        let ca = meridian::tls::cert::create_ca("metrics").unwrap();
        let pair = meridian::tls::cert::create_node(&ca, &["localhost".into()]).unwrap();
        std::fs::write(dir.path().join("tls.crt"), &pair.cert).unwrap();
        std::fs::write(dir.path().join("tls.key"), &pair.key).unwrap();
        let tls = ServingTls::load(&files).unwrap();
        assert!(tls.live.is_some(), "files are watched for renewal");
        assert!(tls.describe().contains("tls.crt"), "{}", tls.describe());
    }
}

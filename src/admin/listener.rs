//! The admin API's HTTPS listener, on its own thread and runtime so that no admin request
//! (or flood of them) runs on the TSO control loop. It owns the transport limits: a TLS
//! handshake timeout, a cap on open connections, HTTP/1 header-read and request timeouts and a
//! concurrency limit that sheds load with 503 (tower middleware). Each connection's client
//! certificate becomes the [`Grants`] its requests carry; what a route needs is `http`'s
//! business.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::error_handling::HandleErrorLayer;
use axum::http::StatusCode;
use axum::{BoxError, Extension, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;
use tower::ServiceBuilder;

use crate::auth::Grants;
use crate::tls::ClientAuth;

/// Limits of the admin listener; the defaults are documented in SECURITY.md.
#[derive(Debug, Clone, Copy)]
pub struct AdminLimits {
    /// A TLS handshake that has not finished by then is dropped.
    pub handshake_timeout: Duration,
    /// Request headers that have not all arrived by then close the connection (slowloris).
    pub header_read_timeout: Duration,
    /// A request not answered by then gets 408.
    pub request_timeout: Duration,
    /// Requests handled at once; more get 503 at once.
    pub max_concurrent_requests: usize,
    /// Connections open at once; more wait in the kernel's backlog.
    pub max_connections: usize,
}

impl Default for AdminLimits {
    fn default() -> Self {
        AdminLimits {
            handshake_timeout: Duration::from_secs(5),
            header_read_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(15),
            max_concurrent_requests: 32,
            max_connections: 256,
        }
    }
}

pub struct AdminListener {
    pub listener: TcpListener,
    pub tls: Arc<rustls::ServerConfig>,
    pub client_auth: ClientAuth,
    pub limits: AdminLimits,
    pub shutdown: watch::Receiver<bool>,
}

/// Starts serving `router` on its own thread; it returns when `shutdown` turns true.
pub fn spawn(setup: AdminListener, router: Router) -> anyhow::Result<std::thread::JoinHandle<()>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the admin runtime")?;
    Ok(std::thread::Builder::new()
        .name("meridian-admin".into())
        .spawn(move || {
            if let Err(e) = runtime.block_on(serve(setup, router)) {
                tracing::error!("admin API stopped: {e:#}");
            }
        })?)
}

async fn serve(setup: AdminListener, router: Router) -> anyhow::Result<()> {
    let AdminListener {
        listener,
        tls,
        client_auth,
        limits,
        mut shutdown,
    } = setup;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let acceptor = TlsAcceptor::from(tls);
    // Shared by every connection: one semaphore for the concurrency limit.
    let app = router.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(|_: BoxError| async {
                (StatusCode::SERVICE_UNAVAILABLE, "admin API busy; retry")
            }))
            .load_shed()
            .concurrency_limit(limits.max_concurrent_requests)
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                limits.request_timeout,
            )),
    );
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let permit = tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return Ok(()),
            permit = connections.clone().acquire_owned() => permit?,
        };
        let (tcp, peer) = tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!("admin accept: {e}");
                    continue;
                }
            },
        };
        let (acceptor, app, auth, mut stop) = (
            acceptor.clone(),
            app.clone(),
            client_auth.clone(),
            shutdown.clone(),
        );
        tokio::spawn(async move {
            let _permit = permit;
            let tls =
                match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, "admin TLS handshake refused: {e}");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "admin TLS handshake timed out");
                        return;
                    }
                };
            let grants = auth
                .identify(tls.get_ref().1.peer_certificates(), &peer)
                .grants;
            let service = TowerToHyperService::new(app.layer(Extension(grants)));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .serve_connection(TokioIo::new(tls), service);
            tokio::pin!(conn);
            tokio::select! {
                served = conn.as_mut() => {
                    if let Err(e) = served {
                        tracing::debug!(%peer, "admin connection: {e}");
                    }
                }
                _ = stop.wait_for(|s| *s) => conn.as_mut().graceful_shutdown(),
            }
        });
    }
}

/// What a request's connection may do: nothing, if it did not come through this listener.
pub fn grants_of<B>(req: &axum::http::Request<B>) -> Grants {
    req.extensions()
        .get::<Grants>()
        .copied()
        .unwrap_or(Grants::NONE)
}

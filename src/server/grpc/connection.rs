//! One accepted gRPC connection: its TLS stream and who its client certificate says it is (its
//! grants and, under bind-store-identity, its store seat), read once at the handshake. tonic
//! copies them into every request's extensions (`Connected`), so a call is authorized without
//! parsing the certificate again, as each QUIC connection's are read once (`server::core`).
//! Owns no policy: which call needs which role is `auth::Call`'s.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tonic::transport::server::Connected;

use std::sync::Arc;

use crate::admin::CoreMetrics;
use crate::auth::{Call, Caller, Denied, Grants, StoreSeat};
use crate::proto::ErrorReply;
use crate::tls::ClientAuth;

pub struct Authenticated {
    tls: TlsStream<TcpStream>,
    caller: Caller,
}

impl Authenticated {
    pub fn new(
        tls: TlsStream<TcpStream>,
        client_auth: &ClientAuth,
        peer: std::net::SocketAddr,
    ) -> Authenticated {
        let caller = client_auth.identify(tls.get_ref().1.peer_certificates(), &peer);
        Authenticated { tls, caller }
    }
}

/// What every request on the connection carries in its extensions: the roles its certificate
/// grants, and the store seat when bind-store-identity binds it.
#[derive(Debug, Clone)]
pub struct ConnectionGrants(pub Grants, pub Option<Arc<StoreSeat>>);

impl ConnectionGrants {
    /// The caller a request came from: nothing granted if it did not come through the
    /// front end's acceptor.
    pub fn caller_of<T>(request: &tonic::Request<T>) -> Caller {
        request
            .extensions()
            .get::<ConnectionGrants>()
            .map_or_else(Caller::default, |g| Caller {
                grants: g.0,
                store: g.1.clone(),
            })
    }

    /// The grants a request's connection carried (in its extensions): none for a request that
    /// did not come through the front end's acceptor.
    pub fn of(grants: Option<&ConnectionGrants>) -> Grants {
        grants.map_or(Grants::NONE, |g| g.0)
    }

    /// Refuses `call`, counted in `metrics`, unless `grants` include the role the call needs.
    /// The one check that gRPC and PD's HTTP API share; each answers a refusal in its own
    /// protocol.
    pub fn permit(grants: Grants, call: Call, metrics: &CoreMetrics) -> Result<(), Denied> {
        call.permitted(grants).inspect_err(|denied| {
            metrics.error(&ErrorReply::PermissionDenied(denied.to_string()));
        })
    }

    /// [`ConnectionGrants::permit`] for a gRPC request: a refusal is `PERMISSION_DENIED`.
    pub fn authorize<T>(
        request: &tonic::Request<T>,
        call: Call,
        metrics: &CoreMetrics,
    ) -> Result<(), tonic::Status> {
        Self::permit(Self::of(request.extensions().get()), call, metrics)
            .map_err(|denied| tonic::Status::permission_denied(denied.to_string()))
    }
}

impl Connected for Authenticated {
    type ConnectInfo = ConnectionGrants;

    fn connect_info(&self) -> ConnectionGrants {
        ConnectionGrants(self.caller.grants, self.caller.store.clone())
    }
}

impl AsyncRead for Authenticated {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_read(cx, buf)
    }
}

impl AsyncWrite for Authenticated {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tls).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tls).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tls.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_shutdown(cx)
    }
}

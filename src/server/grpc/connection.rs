//! One accepted gRPC connection: its TLS stream and what its client certificate grants, read
//! once at the handshake. tonic copies the grants into every request's extensions
//! (`Connected`), so a call is authorized without parsing the certificate again, as each QUIC
//! connection's grants are read once (`server::core`). Owns no policy: which call needs which
//! role is `auth::Call`'s.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tonic::transport::server::Connected;

use crate::auth::Grants;
use crate::tls::ClientAuth;

pub struct Authenticated {
    tls: TlsStream<TcpStream>,
    grants: Grants,
}

impl Authenticated {
    pub fn new(tls: TlsStream<TcpStream>, client_auth: &ClientAuth) -> Authenticated {
        let grants = client_auth.grants(tls.get_ref().1.peer_certificates());
        Authenticated { tls, grants }
    }
}

/// What every request on the connection carries in its extensions.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionGrants(pub Grants);

impl Connected for Authenticated {
    type ConnectInfo = ConnectionGrants;

    fn connect_info(&self) -> ConnectionGrants {
        ConnectionGrants(self.grants)
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

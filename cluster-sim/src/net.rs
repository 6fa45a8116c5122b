//! gRPC over turmoil's simulated TCP: the listener stream the etcd host serves on, and the
//! tonic `Channel` (then the real `etcd_client::Client`) a member dials etcd with. Owns only
//! the plumbing between turmoil sockets and tonic; it holds no cluster logic.
//!
//! One deliberate difference from a real node: turmoil drops the segments a partition cuts
//! and never retransmits them, so a connection that lived through a partition can hang for
//! good where real TCP would recover. The channel therefore pings every second (HTTP/2
//! keep-alive) and drops a connection whose ping goes unanswered, then dials again; requests
//! carry the node's own 3 s deadline, as `EtcdAccess::connect_options` gives a real node.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::codegen::tokio_stream::Stream;
use tonic::transport::server::Connected;
use tonic::transport::{Channel, Endpoint, Uri};
use turmoil::net::TcpListener;

/// The port etcd listens on in the simulation.
pub const ETCD_PORT: u16 = 2379;
/// The request and connect deadline a real node sets on its etcd client.
const TIMEOUT: Duration = Duration::from_secs(3);

/// A turmoil TCP stream tonic's server can accept.
pub struct SimConn(pub turmoil::net::TcpStream);

impl Connected for SimConn {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl AsyncRead for SimConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for SimConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

type Accept = Pin<Box<dyn Future<Output = (TcpListener, std::io::Result<SimConn>)>>>;

/// The connections accepted on a listener, as tonic's `serve_with_incoming` takes them.
pub struct Incoming {
    pending: Accept,
}

impl Incoming {
    pub fn new(listener: TcpListener) -> Incoming {
        Incoming {
            pending: accept(listener),
        }
    }
}

fn accept(listener: TcpListener) -> Accept {
    Box::pin(async move {
        let result = listener.accept().await.map(|(s, _)| SimConn(s));
        (listener, result)
    })
}

impl Stream for Incoming {
    type Item = std::io::Result<SimConn>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.pending.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready((listener, result)) => {
                self.pending = accept(listener);
                Poll::Ready(Some(result))
            }
        }
    }
}

/// A channel to etcd on host `etcd` that dials over turmoil TCP, lazily and again after a
/// connection dies.
pub fn etcd_channel(etcd: &'static str) -> Channel {
    Endpoint::from_static("http://etcd.sim")
        .timeout(TIMEOUT)
        .connect_timeout(TIMEOUT)
        .http2_keep_alive_interval(Duration::from_secs(1))
        .keep_alive_timeout(Duration::from_secs(1))
        .keep_alive_while_idle(true)
        .connect_with_connector_lazy(tower::service_fn(move |_: Uri| async move {
            turmoil::net::TcpStream::connect((etcd, ETCD_PORT))
                .await
                .map(TokioIo::new)
        }))
}

/// The real etcd client over [`etcd_channel`].
pub async fn etcd_client(etcd: &'static str) -> Result<etcd_client::Client, etcd_client::Error> {
    etcd_client::Client::from_channel(etcd_client::Channel::Tonic(etcd_channel(etcd)), None).await
}

//! A TCP proxy a test puts between one node and etcd, to cut, slow or restore that one path
//! while the other nodes still reach etcd directly (or through proxies of their own).
//!
//! A partition holds bytes rather than dropping them: the proxy stops reading, so the sender's
//! kernel buffers fill as they would behind a dead link, and what was sent is delivered in
//! order once the partition heals, as TCP's retransmissions would deliver it (unless the
//! client gave up on the connection first). New connections wait for the heal before the proxy
//! dials etcd. A delay holds each chunk for that long in each direction, so a call that is one
//! request and one reply takes twice as long.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does to traffic right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFault {
    Pass,
    /// Each chunk is held this long in each direction.
    Delay(Duration),
    /// Nothing is delivered, in either direction, until the fault changes.
    Partition,
}

/// A running proxy; it stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    fault: watch::Sender<LinkFault>,
    /// Bumped to close every connection through the proxy.
    resets: watch::Sender<u64>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `upstream` (`http://host:port` or
    /// `host:port`).
    pub fn start(upstream: &str) -> anyhow::Result<FaultProxy> {
        Self::start_at("127.0.0.1:0", upstream)
    }

    /// Listens on `listen` and forwards to `upstream`: a stand-in for a node's address on
    /// another host of the loopback network (`127.0.0.2:<its port>`), for the links of the
    /// members that dial it there.
    pub fn start_at(listen: &str, upstream: &str) -> anyhow::Result<FaultProxy> {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .to_string();
        let listener = std::net::TcpListener::bind(listen)
            .with_context(|| format!("binding the proxy at {listen}"))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (fault, fault_rx) = watch::channel(LinkFault::Pass);
        let (resets, resets_rx) = watch::channel(0u64);
        let (stop, mut stop_rx) = watch::channel(false);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("fault-proxy".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(listener) else {
                        return;
                    };
                    loop {
                        tokio::select! {
                            _ = stop_rx.wait_for(|s| *s) => return,
                            accepted = listener.accept() => {
                                let Ok((client, _)) = accepted else { continue };
                                tokio::spawn(connection(
                                    client,
                                    upstream.clone(),
                                    fault_rx.clone(),
                                    resets_rx.clone(),
                                ));
                            }
                        }
                    }
                })
            })
            .context("starting the proxy thread")?;
        Ok(FaultProxy {
            addr,
            fault,
            resets,
            stop,
            thread: Some(thread),
        })
    }

    /// The address to give the node in place of etcd's.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set(&self, fault: LinkFault) {
        self.fault.send_replace(fault);
    }

    pub fn partition(&self) {
        self.set(LinkFault::Partition);
    }

    pub fn heal(&self) {
        self.set(LinkFault::Pass);
    }

    /// Closes every connection through the proxy now (as a crashed middlebox would).
    pub fn reset_connections(&self) {
        self.resets.send_modify(|r| *r += 1);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        self.reset_connections();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn connection(
    client: TcpStream,
    upstream: String,
    mut fault: watch::Receiver<LinkFault>,
    mut resets: watch::Receiver<u64>,
) {
    let generation = *resets.borrow_and_update();
    if fault
        .wait_for(|f| *f != LinkFault::Partition)
        .await
        .is_err()
    {
        return;
    }
    let Ok(server) = TcpStream::connect(&upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, fault.clone());
    let down = pump(server_read, client_write, fault);
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = resets.wait_for(|r| *r != generation) => {}
    }
}

/// Copies one direction, holding each chunk while the link is partitioned or delayed.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut fault: watch::Receiver<LinkFault>,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        // While partitioned, nothing is read: the sender's buffers fill, as behind a dead link.
        if fault
            .wait_for(|f| *f != LinkFault::Partition)
            .await
            .is_err()
        {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        let current = *fault.borrow_and_update();
        if let LinkFault::Delay(d) = current {
            tokio::time::sleep(d).await;
        }
        // A chunk read just before a partition is held until it heals.
        if fault
            .wait_for(|f| *f != LinkFault::Partition)
            .await
            .is_err()
        {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Instant;

    /// An upstream that echoes what it reads.
    fn echo_server() -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = conn.read(&mut buf) {
                        if n == 0 || conn.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn round_trip(conn: &mut std::net::TcpStream) -> std::io::Result<Duration> {
        let start = Instant::now();
        conn.write_all(b"ping")?;
        let mut got = [0u8; 4];
        conn.read_exact(&mut got)?;
        assert_eq!(&got, b"ping");
        Ok(start.elapsed())
    }

    #[test]
    fn passes_delays_holds_through_a_partition_and_resets() {
        let proxy = FaultProxy::start(&echo_server().to_string()).unwrap();
        let mut conn = std::net::TcpStream::connect(proxy.addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert!(round_trip(&mut conn).unwrap() < Duration::from_millis(100));

        proxy.set(LinkFault::Delay(Duration::from_millis(100)));
        let slow = round_trip(&mut conn).unwrap();
        assert!(slow >= Duration::from_millis(200), "{slow:?}");

        // Partitioned: nothing comes back; healed: what was sent arrives, in order.
        proxy.partition();
        conn.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        conn.write_all(b"held").unwrap();
        let mut got = [0u8; 4];
        assert!(
            conn.read_exact(&mut got).is_err(),
            "delivered through a partition"
        );
        proxy.heal();
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        conn.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"held");

        // A reset closes the connection: the next read sees its end.
        proxy.reset_connections();
        let mut rest = Vec::new();
        let closed = conn.read_to_end(&mut rest);
        assert!(closed.is_ok_and(|n| n == 0), "still open after a reset");
    }
}

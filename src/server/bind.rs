//! What a node binds before it reads anything: the data directory's lock, the client address
//! (an exclusive TCP guard, then one UDP socket per core on the same port), and the gRPC and
//! admin listeners. A second process on the same directory or address fails here and changes
//! nothing. Owns only the binding; serving on what is bound is the front ends' job.

use std::net::{SocketAddr, TcpListener, UdpSocket};

use anyhow::Context;

use super::exclusive::{AddressGuard, DataDirLock};
use super::{socket, GrpcListen, ServeOptions};

/// What must stay held until the process ends.
pub struct Held {
    _data_dir: DataDirLock,
    /// Keeps the client address whatever happens to gRPC.
    _address: AddressGuard,
}

/// The addresses actually bound (`:0` resolved).
#[derive(Debug, Clone, Copy)]
pub struct Addrs {
    pub client: SocketAddr,
    pub grpc: Option<SocketAddr>,
    pub admin: SocketAddr,
}

pub struct Bound {
    pub held: Held,
    /// One per core, all on the client port.
    pub sockets: Vec<UdpSocket>,
    pub grpc: Option<TcpListener>,
    pub admin: TcpListener,
    pub addrs: Addrs,
}

/// Binds everything the node serves on, in an order that leaves nothing changed when
/// another process holds any of it.
pub fn bind(opts: &ServeOptions, cores: usize) -> anyhow::Result<Bound> {
    std::fs::create_dir_all(&opts.data_dir)
        .with_context(|| format!("creating {}", opts.data_dir.display()))?;
    // Both before anything is read or bound: a second process must change nothing.
    let data_dir = DataDirLock::acquire(&opts.data_dir)?;
    let (address, sockets) = bind_client_address(opts.listen, cores)?;
    let client = sockets[0].local_addr()?;
    let grpc = grpc_listener(&opts.grpc_listen, &address)?;
    let admin = TcpListener::bind(opts.admin_listen)
        .with_context(|| format!("binding admin {}", opts.admin_listen))?;
    let addrs = Addrs {
        client,
        grpc: grpc.as_ref().map(|l| l.local_addr()).transpose()?,
        admin: admin.local_addr()?,
    };
    Ok(Bound {
        held: Held {
            _data_dir: data_dir,
            _address: address,
        },
        sockets,
        grpc,
        admin,
        addrs,
    })
}

/// The gRPC listener: the client address guard's own socket by default, another address, or
/// none. When gRPC is not at the client address, connections there are closed at once rather
/// than left hanging.
fn grpc_listener(listen: &GrpcListen, guard: &AddressGuard) -> anyhow::Result<Option<TcpListener>> {
    let guard_listener = TcpListener::from(guard.socket.try_clone()?);
    if let GrpcListen::SameAsClient = listen {
        return Ok(Some(guard_listener));
    }
    guard_listener.set_nonblocking(true)?;
    let refuse = tokio::net::TcpListener::from_std(guard_listener)?;
    tokio::spawn(async move {
        while let Ok((conn, _)) = refuse.accept().await {
            drop(conn);
        }
    });
    match listen {
        GrpcListen::At(addr) => Ok(Some(
            TcpListener::bind(addr).with_context(|| format!("binding gRPC {addr}"))?,
        )),
        GrpcListen::SameAsClient | GrpcListen::Off => Ok(None),
    }
}

/// Binds the client address: first the exclusive TCP guard (a second process fails here),
/// then the per-core UDP sockets on the same port. With port 0 the guard picks the port; if
/// that port's UDP side is taken, another is tried.
fn bind_client_address(
    listen: SocketAddr,
    cores: usize,
) -> anyhow::Result<(AddressGuard, Vec<UdpSocket>)> {
    let attempts = if listen.port() == 0 { 16 } else { 1 };
    let mut last = None;
    for _ in 0..attempts {
        let guard = AddressGuard::bind(listen)?;
        let addr = guard.local_addr()?;
        match socket::bind_reuseport(addr, cores) {
            Ok(sockets) => return Ok((guard, sockets)),
            Err(e) => last = Some(anyhow::Error::new(e).context(format!("binding UDP {addr}"))),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("binding {listen}")))
}

//! UDP sockets for the per-core endpoints: every core binds the same address with SO_REUSEPORT,
//! and the kernel hands each datagram to one of them (by `steering.rs`'s program, or else by a
//! hash of the 4-tuple).

use std::net::{SocketAddr, UdpSocket};

use socket2::{Domain, Protocol, Socket, Type};

/// Binds `cores` sockets to one address. With port 0, the first socket picks the port and the
/// others join it.
pub fn bind_reuseport(addr: SocketAddr, cores: usize) -> std::io::Result<Vec<UdpSocket>> {
    let mut sockets = Vec::with_capacity(cores);
    let mut bound = addr;
    for _ in 0..cores {
        let socket = Socket::new(Domain::for_address(bound), Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_reuse_port(true)?;
        if bound.is_ipv6() {
            socket.set_only_v6(false)?;
        }
        // Bursts of replies from many streams; a small buffer drops them and costs retransmits.
        let _ = socket.set_recv_buffer_size(4 << 20);
        let _ = socket.set_send_buffer_size(4 << 20);
        socket.bind(&bound.into())?;
        let socket: UdpSocket = socket.into();
        bound = socket.local_addr()?;
        sockets.push(socket);
    }
    Ok(sockets)
}

/// The CPUs this process may run on, in order: core `i` is pinned to the `i`th (modulo).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; the libc call only writes the set we own.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &allowed))
            .collect()
    }
}

/// Pins the calling thread to one CPU (modulo the CPUs this process may run on).
pub fn pin_to_cpu(index: usize) {
    let cpus = allowed_cpus();
    if cpus.is_empty() {
        return;
    }
    // SAFETY: cpu_set_t is plain data; the libc call only reads the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus[index % cpus.len()], &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            tracing::warn!(
                core = index,
                "could not pin core thread: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// How many CPUs this process may run on.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

//! One process per data dir and per client address. Owns the data dir's lock file and the TCP
//! socket that holds the client port; must not touch what is inside the data dir.
//!
//! Why: two processes serving one address split its SO_REUSEPORT group between them (the kernel
//! hashes connections to both, and each hands out timestamps from its own window), and two
//! processes on one data dir load the same window and append to the same log. Either way the
//! TSO's one promise breaks. Linux lets any process of the same user join a reuseport group, so
//! the group cannot refuse a second process itself: a plain TCP socket bound to the same
//! address without SO_REUSEPORT or SO_REUSEADDR can, and a second bind of it fails.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::Context;
use socket2::{Domain, Protocol, Socket, Type};

/// The name of the lock file in the data dir (etcd and Prometheus keep one too).
pub const LOCK_FILE: &str = "LOCK";

/// An exclusive `flock` on `<data-dir>/LOCK`, held until the process exits (the kernel drops
/// it with the descriptor, so a SIGKILLed holder never leaves a stale lock behind).
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Takes the lock, or fails at once naming the dir and the holder's pid.
    pub fn acquire(data_dir: &Path) -> anyhow::Result<DataDirLock> {
        let path = data_dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: flock on a descriptor this function owns; no memory is shared with the call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let who = if holder.is_empty() {
                    "another process".to_string()
                } else {
                    format!("process {holder}")
                };
                anyhow::bail!(
                    "data dir {} is in use by {who} (lock {}); one process per data dir",
                    data_dir.display(),
                    path.display()
                );
            }
            return Err(err).with_context(|| format!("locking {}", path.display()));
        }
        // The pid is for the error above only; the lock itself is the flock.
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        writeln!(file, "{}", std::process::id())?;
        file.sync_all()?;
        Ok(DataDirLock { _file: file })
    }
}

/// A TCP socket listening on the client address: while it lives, no other process can bind
/// that TCP address, so no other meridian can start on it. The PD-compatible gRPC front end
/// serves on this same socket when it serves on `--listen`; with gRPC off or elsewhere,
/// connections to it are accepted and closed.
#[derive(Debug)]
pub struct AddressGuard {
    pub socket: Socket,
}

/// What a node says when another process holds its client port; the test harness starts a
/// node again on another port when it reads this.
pub(crate) const PORT_TAKEN: &str = "is already served (TCP port in use)";

impl AddressGuard {
    /// Binds `addr` over TCP. A port of 0 is bound as is; the caller then binds UDP on the
    /// port it got.
    pub fn bind(addr: SocketAddr) -> anyhow::Result<AddressGuard> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        if addr.is_ipv6() {
            socket.set_only_v6(false)?;
        }
        // SO_REUSEADDR lets a restarted node bind while its killed predecessor's connections sit
        // in TIME_WAIT; it never lets two sockets bind one address while one of them listens,
        // which is why the guard listens at once.
        socket.set_reuse_address(true)?;
        socket.bind(&addr.into()).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                anyhow::anyhow!(
                    "{addr} {PORT_TAKEN}: another meridian, or another program, holds it; one \
                     process per address"
                )
            } else {
                anyhow::Error::new(e).context(format!("binding TCP {addr}"))
            }
        })?;
        socket.listen(1024)?;
        Ok(AddressGuard { socket })
    }

    pub fn local_addr(&self) -> anyhow::Result<SocketAddr> {
        self.socket
            .local_addr()?
            .as_socket()
            .context("the guard socket has no inet address")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_dir_fails_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        let err = DataDirLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(err.contains("in use by process"), "{err}");
        assert!(err.contains(&std::process::id().to_string()), "{err}");
        drop(first);
        DataDirLock::acquire(dir.path()).expect("free again once the holder is gone");
    }

    #[test]
    fn a_second_guard_on_one_address_fails() {
        let first = AddressGuard::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = first.local_addr().unwrap();
        let err = AddressGuard::bind(addr).unwrap_err().to_string();
        assert!(err.contains(PORT_TAKEN), "{err}");
        assert!(err.contains(&addr.to_string()), "{err}");
        drop(first);
        AddressGuard::bind(addr).expect("free again once the holder is gone");
    }
}

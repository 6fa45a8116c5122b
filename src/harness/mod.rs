//! Real processes for demos and end-to-end tests: `meridian serve` and `etcd` on loopback ports
//! in temp dirs, stopped gracefully or killed, and always reaped when dropped.

mod etcd;
mod server;

pub use etcd::EtcdProcess;
pub use server::ServerProcess;

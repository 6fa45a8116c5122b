//! etcd v3 at the client address: `etcdserverpb.KV`, `Lease`, `Watch` and
//! `Cluster.MemberList` on the same gRPC server and port as `pdpb.PD`, for TiDB's sessions,
//! schema syncer, DDL owner election and safe-point keys (PD serves them because it embeds
//! etcd). Every call is **forwarded** to the etcd this node runs on (`--etcd`), inside the
//! namespace `/meridian-kv/` (`namespace`), so a client sees a real etcd and never Meridian's
//! own keys. Without an etcd (the embedded store) every call is `Unavailable`: Meridian does
//! not grow an etcd of its own.
//!
//! Owns the adaptation (authorize, rewrite keys, forward, strip keys): `kv`, `lease`, `watch`
//! and `cluster` each serve one etcd service, `relay` carries their streams, `upstream` is the
//! channel to etcd. It must not touch Meridian's keys or state, and it answers on followers as
//! on the leader (etcd is the same for every member).

mod cluster;
mod kv;
mod lease;
pub(crate) mod namespace;
mod relay;
// `pub(super)` for `meta_storage`, which forwards to the same etcd.
pub(super) mod upstream;
mod watch;

use std::pin::Pin;
use std::sync::Arc;

use tonic::{Request, Status};

use super::connection::ConnectionGrants;
use crate::admin::CoreMetrics;
use crate::auth::Call;
use crate::etcdpb::etcdserverpb::{
    cluster_server::ClusterServer, kv_server::KvServer, lease_server::LeaseServer,
    watch_server::WatchServer,
};
use crate::server::Shared;

use namespace::{EmptyKey, Namespace};
use upstream::{Hints, Upstream};

pub use upstream::EtcdUpstream;

/// Largest request taken from a client (etcd's own default limit is 1.5 MiB).
const MAX_REQUEST: usize = 16 << 20;

/// Why every call is refused on a node without etcd.
pub const NO_ETCD: &str = "the etcd API at this address forwards to the etcd Meridian runs \
    on, and this node runs on its embedded store: run Meridian on etcd (--etcd) to use it";

type Stream<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

/// The four services, one value: cheap to clone (tonic wants one per service).
#[derive(Clone)]
pub struct EtcdProxy {
    upstream: Option<Arc<Upstream>>,
    namespace: Arc<Namespace>,
    shared: Arc<Shared>,
    metrics_slot: usize,
}

/// What an admitted call has to work with.
struct Admitted<'a, T> {
    upstream: &'a Arc<Upstream>,
    hints: Hints,
    message: T,
}

impl EtcdProxy {
    /// The proxy to `etcd`, or, with none, the services that say there is none. Must run in
    /// the gRPC front end's runtime (the channels to etcd start their tasks on it).
    pub fn new(
        etcd: Option<&EtcdUpstream>,
        shared: Arc<Shared>,
        metrics_slot: usize,
    ) -> anyhow::Result<EtcdProxy> {
        let upstream = match etcd {
            Some(etcd) => Some(Arc::new(Upstream::new(etcd)?)),
            None => None,
        };
        Ok(EtcdProxy {
            upstream,
            namespace: Arc::new(Namespace::default()),
            shared,
            metrics_slot,
        })
    }

    pub fn kv(&self) -> KvServer<EtcdProxy> {
        KvServer::new(self.clone())
            .max_decoding_message_size(MAX_REQUEST)
            .max_encoding_message_size(upstream::MAX_RESPONSE)
    }

    pub fn watch(&self) -> WatchServer<EtcdProxy> {
        WatchServer::new(self.clone())
            .max_decoding_message_size(MAX_REQUEST)
            .max_encoding_message_size(upstream::MAX_RESPONSE)
    }

    pub fn lease(&self) -> LeaseServer<EtcdProxy> {
        LeaseServer::new(self.clone())
            .max_decoding_message_size(MAX_REQUEST)
            .max_encoding_message_size(upstream::MAX_RESPONSE)
    }

    pub fn cluster(&self) -> ClusterServer<EtcdProxy> {
        ClusterServer::new(self.clone())
            .max_decoding_message_size(MAX_REQUEST)
            .max_encoding_message_size(upstream::MAX_RESPONSE)
    }

    fn metrics(&self) -> &CoreMetrics {
        self.shared.metrics.core(self.metrics_slot)
    }

    /// The channel to etcd, shared with `meta_storage`; `None` on the embedded store.
    pub(super) fn upstream(&self) -> Option<Arc<Upstream>> {
        self.upstream.clone()
    }

    /// Refuses the call, counted, unless the connection's certificate carries the role it
    /// needs; then refuses it as unavailable when there is no etcd to forward to.
    fn admit<T>(&self, request: Request<T>, call: Call) -> Result<Admitted<'_, T>, Status> {
        ConnectionGrants::authorize(&request, call, self.metrics())?;
        let upstream = self
            .upstream
            .as_ref()
            .ok_or_else(|| Status::unavailable(NO_ETCD))?;
        Ok(Admitted {
            upstream,
            hints: Hints::of(&request),
            message: request.into_inner(),
        })
    }
}

fn empty_key(_: EmptyKey) -> Status {
    Status::invalid_argument(EmptyKey::MESSAGE)
}

#[cfg(test)]
mod tests {
    use crate::auth::{need_of, Call, Need};
    use crate::tls::cert::Role;

    #[test]
    fn etcd_writes_and_leases_need_client_and_reads_any_role() {
        for call in [
            Call::EtcdPut,
            Call::EtcdDeleteRange,
            Call::EtcdTxn,
            Call::EtcdLeaseGrant,
            Call::EtcdLeaseRevoke,
            Call::EtcdLeaseKeepAlive,
        ] {
            assert_eq!(need_of(call), Need::Role(Role::Client), "{call:?}");
        }
        for call in [
            Call::EtcdRange,
            Call::EtcdWatch,
            Call::EtcdLeaseTimeToLive,
            Call::EtcdLeaseLeases,
            Call::EtcdMemberList,
        ] {
            assert_eq!(need_of(call), Need::AnyRole, "{call:?}");
        }
    }
}

//! `etcdserverpb.Lease`: grant, revoke, keep-alive, time-to-live and the lease list,
//! forwarded. Lease ids are etcd's and pass through unchanged, as in etcd's namespace; a lease
//! granted through one member is kept alive through any other.
//!
//! Leases are not namespaced in etcd, so one guard is added: a lease that holds a key outside
//! the namespace is Meridian's (the leader key hangs on the leader's lease), and a client may
//! neither revoke it (which would delete the leader key) nor keep it alive (which would keep a
//! dead leader's key, and so hold off failover). Its time-to-live shows only the keys inside.

use std::collections::HashSet;
use std::sync::Arc;

use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

use super::namespace::Namespace;
use super::relay::{Inward, Relay};
use super::upstream::{Hints, Upstream};
use super::{EtcdProxy, Stream};
use crate::auth::Call;
use crate::etcdpb::etcdserverpb::lease_client::LeaseClient;
use crate::etcdpb::etcdserverpb::lease_server::Lease;
use crate::etcdpb::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseLeasesRequest, LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
};

/// Lease ids a keep-alive stream remembers as checked; past it, the set starts over (and
/// each id is checked once more).
const CHECKED_LEASES: usize = 4096;

fn client(channel: Channel) -> LeaseClient<Channel> {
    LeaseClient::new(channel)
}

/// Refuses lease `id` when it holds keys outside `namespace`.
async fn check_not_meridians(
    upstream: &Upstream,
    namespace: &Namespace,
    hints: Hints,
    id: i64,
) -> Result<(), Status> {
    let question = LeaseTimeToLiveRequest { id, keys: true };
    let answer = upstream
        .unary(question, hints, |channel, r| async move {
            client(channel).lease_time_to_live(r).await
        })
        .await?;
    if namespace.holds_all(&answer.keys) {
        Ok(())
    } else {
        Err(Status::permission_denied(format!(
            "lease {id:x} holds keys outside the etcd namespace {}: it is Meridian's, not a \
             client's",
            String::from_utf8_lossy(namespace.prefix())
        )))
    }
}

/// A keep-alive stream's check of each lease id it carries, once per id.
struct ClientLeases {
    upstream: Arc<Upstream>,
    namespace: Arc<Namespace>,
    hints: Hints,
    checked: HashSet<i64>,
}

impl Inward<LeaseKeepAliveRequest> for ClientLeases {
    async fn admit(
        &mut self,
        message: LeaseKeepAliveRequest,
    ) -> Result<LeaseKeepAliveRequest, Status> {
        if !self.checked.contains(&message.id) {
            check_not_meridians(&self.upstream, &self.namespace, self.hints, message.id).await?;
            if self.checked.len() >= CHECKED_LEASES {
                self.checked.clear();
            }
            self.checked.insert(message.id);
        }
        Ok(message)
    }
}

#[tonic::async_trait]
impl Lease for EtcdProxy {
    async fn lease_grant(
        &self,
        request: Request<LeaseGrantRequest>,
    ) -> Result<Response<LeaseGrantResponse>, Status> {
        let call = self.admit(request, Call::EtcdLeaseGrant)?;
        let reply = call
            .upstream
            .unary(call.message, call.hints, |channel, r| async move {
                client(channel).lease_grant(r).await
            })
            .await?;
        Ok(Response::new(reply))
    }

    async fn lease_revoke(
        &self,
        request: Request<LeaseRevokeRequest>,
    ) -> Result<Response<LeaseRevokeResponse>, Status> {
        let call = self.admit(request, Call::EtcdLeaseRevoke)?;
        check_not_meridians(call.upstream, &self.namespace, call.hints, call.message.id).await?;
        let reply = call
            .upstream
            .unary(call.message, call.hints, |channel, r| async move {
                client(channel).lease_revoke(r).await
            })
            .await?;
        Ok(Response::new(reply))
    }

    type LeaseKeepAliveStream = Stream<LeaseKeepAliveResponse>;

    async fn lease_keep_alive(
        &self,
        request: Request<Streaming<LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        let call = self.admit(request, Call::EtcdLeaseKeepAlive)?;
        let upstream = call.upstream.clone();
        let inward = ClientLeases {
            upstream: upstream.clone(),
            namespace: self.namespace.clone(),
            hints: call.hints,
            checked: HashSet::new(),
        };
        let relay = Relay {
            upstream,
            hints: call.hints,
            shutdown: self.shared.shutdown.clone(),
            what: "LeaseKeepAlive",
        };
        Ok(Response::new(relay.run(
            call.message,
            inward,
            |channel, r| async move { client(channel).lease_keep_alive(r).await },
            Some,
        )))
    }

    async fn lease_time_to_live(
        &self,
        request: Request<LeaseTimeToLiveRequest>,
    ) -> Result<Response<LeaseTimeToLiveResponse>, Status> {
        let call = self.admit(request, Call::EtcdLeaseTimeToLive)?;
        let mut reply = call
            .upstream
            .unary(call.message, call.hints, |channel, r| async move {
                client(channel).lease_time_to_live(r).await
            })
            .await?;
        self.namespace.lease_keys(&mut reply);
        Ok(Response::new(reply))
    }

    async fn lease_leases(
        &self,
        request: Request<LeaseLeasesRequest>,
    ) -> Result<Response<LeaseLeasesResponse>, Status> {
        let call = self.admit(request, Call::EtcdLeaseLeases)?;
        let reply = call
            .upstream
            .unary(call.message, call.hints, |channel, r| async move {
                client(channel).lease_leases(r).await
            })
            .await?;
        Ok(Response::new(reply))
    }
}

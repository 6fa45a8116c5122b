//! `etcdserverpb.Lease` over the core. Grant, revoke, time-to-live and the list are unary;
//! keep-alive is a stream on which each message is answered on its own (TTL 0 for a lease
//! that is gone), with the keep-alive faults applied per message, and held while etcd has no
//! leader.

use std::pin::Pin;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::{EtcdModel, Fault, Rpc};
use crate::pb::lease_server::Lease;
use crate::pb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseLeasesRequest, LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
};

type KeepAliveStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<LeaseKeepAliveResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Lease for EtcdModel {
    async fn lease_grant(
        &self,
        request: Request<LeaseGrantRequest>,
    ) -> Result<Response<LeaseGrantResponse>, Status> {
        let r = request.into_inner();
        self.unary(Rpc::LeaseGrant, move |etcd, now| etcd.lease_grant(&r, now))
            .await
    }

    async fn lease_revoke(
        &self,
        request: Request<LeaseRevokeRequest>,
    ) -> Result<Response<LeaseRevokeResponse>, Status> {
        let r = request.into_inner();
        self.unary(Rpc::LeaseRevoke, move |etcd, now| {
            etcd.lease_revoke(&r, now)
        })
        .await
    }

    type LeaseKeepAliveStream = KeepAliveStream;

    async fn lease_keep_alive(
        &self,
        request: Request<Streaming<LeaseKeepAliveRequest>>,
    ) -> Result<Response<KeepAliveStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let model = self.clone();
        tokio::spawn(async move {
            loop {
                // A renewal read before the client went away is applied, as etcd applies
                // one it has received whether or not its answer can be sent (and the order
                // is fixed, not drawn from tokio's generator).
                let message = tokio::select! {
                    biased;
                    message = inbound.message() => message,
                    _ = tx.closed() => return,
                };
                // The client closed its side (or broke the stream): etcd ends the stream too.
                let Ok(Some(r)) = message else {
                    return;
                };
                let (delay, fault) = model.next_fault(Rpc::LeaseKeepAlive);
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                if let Some(Fault::FailBeforeApply { code, message }) = fault {
                    let _ = tx.send(Err(Status::new(code, message))).await;
                    return;
                }
                // Renewals go to the leader: without one, etcd holds them until it is elected.
                model.leader().await;
                let response = model.with_etcd(|etcd, now| etcd.lease_keep_alive(&r, now));
                let sent = match fault {
                    Some(Fault::DropReply) => continue,
                    Some(Fault::FailAfterApply { code, message }) => {
                        let _ = tx.send(Err(Status::new(code, message))).await;
                        return;
                    }
                    _ => tx.send(Ok(response)).await,
                };
                if sent.is_err() {
                    return;
                }
            }
        });
        let stream: KeepAliveStream = Box::pin(ReceiverStream::new(rx));
        Ok(Response::new(stream))
    }

    async fn lease_time_to_live(
        &self,
        request: Request<LeaseTimeToLiveRequest>,
    ) -> Result<Response<LeaseTimeToLiveResponse>, Status> {
        let r = request.into_inner();
        self.unary(Rpc::LeaseTimeToLive, move |etcd, now| {
            Ok(etcd.lease_time_to_live(&r, now))
        })
        .await
    }

    async fn lease_leases(
        &self,
        _request: Request<LeaseLeasesRequest>,
    ) -> Result<Response<LeaseLeasesResponse>, Status> {
        self.unary(
            Rpc::LeaseLeases,
            move |etcd, now| Ok(etcd.lease_leases(now)),
        )
        .await
    }
}

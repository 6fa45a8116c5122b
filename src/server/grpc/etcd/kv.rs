//! `etcdserverpb.KV`: Range, Put, DeleteRange and Txn forwarded inside the namespace; Compact
//! refused.
//!
//! Compact is not forwarded. etcd's revisions belong to the whole etcd, not to a key prefix:
//! a compaction asked for through the namespace would discard the history of every key,
//! Meridian's own and any other tenant's, which no client of the namespace may decide. The
//! etcd's operators compact it (`--auto-compaction-mode`/`--auto-compaction-retention`), as
//! they would for any shared etcd; TiDB does not call it.

use tonic::{Request, Response, Status};

use super::{empty_key, EtcdProxy};
use crate::auth::Call;
use crate::etcdpb::etcdserverpb::kv_client::KvClient;
use crate::etcdpb::etcdserverpb::kv_server::Kv;
use crate::etcdpb::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};

/// What a client asking for a compaction is told.
pub const NO_COMPACT: &str = "Compact is not served through Meridian: etcd's revisions span \
    every key, so a compaction from this namespace would discard the history of keys outside \
    it; compaction is the etcd operators' (--auto-compaction-mode, --auto-compaction-retention)";

fn client(channel: tonic::transport::Channel) -> KvClient<tonic::transport::Channel> {
    KvClient::new(channel).max_decoding_message_size(super::upstream::MAX_RESPONSE)
}

#[tonic::async_trait]
impl Kv for EtcdProxy {
    async fn range(
        &self,
        request: Request<RangeRequest>,
    ) -> Result<Response<RangeResponse>, Status> {
        let mut call = self.admit(request, Call::EtcdRange)?;
        self.namespace
            .range_request(&mut call.message)
            .map_err(empty_key)?;
        let mut reply = call
            .upstream
            .unary(call.message, call.hints, |channel, r| async move {
                client(channel).range(r).await
            })
            .await?;
        self.namespace.range_response(&mut reply);
        Ok(Response::new(reply))
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let mut call = self.admit(request, Call::EtcdPut)?;
        self.namespace
            .put_request(&mut call.message)
            .map_err(empty_key)?;
        let mut reply = call
            .upstream
            .unary(call.message, call.hints, |channel, r| async move {
                client(channel).put(r).await
            })
            .await?;
        self.namespace.put_response(&mut reply);
        Ok(Response::new(reply))
    }

    async fn delete_range(
        &self,
        request: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        let mut call = self.admit(request, Call::EtcdDeleteRange)?;
        self.namespace
            .delete_request(&mut call.message)
            .map_err(empty_key)?;
        let mut reply = call
            .upstream
            .unary(call.message, call.hints, |channel, r| async move {
                client(channel).delete_range(r).await
            })
            .await?;
        self.namespace.delete_response(&mut reply);
        Ok(Response::new(reply))
    }

    async fn txn(&self, request: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        let mut call = self.admit(request, Call::EtcdTxn)?;
        self.namespace
            .txn_request(&mut call.message)
            .map_err(empty_key)?;
        let mut reply = call
            .upstream
            .unary(call.message, call.hints, |channel, r| async move {
                client(channel).txn(r).await
            })
            .await?;
        self.namespace.txn_response(&mut reply);
        Ok(Response::new(reply))
    }

    async fn compact(
        &self,
        _request: Request<CompactionRequest>,
    ) -> Result<Response<CompactionResponse>, Status> {
        Err(Status::unimplemented(NO_COMPACT))
    }
}

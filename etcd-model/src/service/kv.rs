//! `etcdserverpb.KV` over the core: each call is one unary request to [`Etcd`].

use tonic::{Request, Response, Status};

use super::{EtcdModel, Rpc};
use crate::pb::kv_server::Kv;
use crate::pb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};

#[tonic::async_trait]
impl Kv for EtcdModel {
    async fn range(
        &self,
        request: Request<RangeRequest>,
    ) -> Result<Response<RangeResponse>, Status> {
        let r = request.into_inner();
        self.unary(Rpc::Range, move |etcd, now| etcd.range(&r, now))
            .await
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let r = request.into_inner();
        self.unary(Rpc::Put, move |etcd, now| etcd.put(&r, now))
            .await
    }

    async fn delete_range(
        &self,
        request: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        let r = request.into_inner();
        self.unary(Rpc::DeleteRange, move |etcd, now| {
            etcd.delete_range(&r, now)
        })
        .await
    }

    async fn txn(&self, request: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        let r = request.into_inner();
        self.unary(Rpc::Txn, move |etcd, now| etcd.txn(&r, now))
            .await
    }

    async fn compact(
        &self,
        request: Request<CompactionRequest>,
    ) -> Result<Response<CompactionResponse>, Status> {
        let r = request.into_inner();
        self.unary(Rpc::Compact, move |etcd, now| etcd.compact(&r, now))
            .await
    }
}

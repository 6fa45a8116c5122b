//! kvproto's `meta_storagepb.MetaStorage` on the client address: `Get`, `Put`, `Delete` and
//! `Watch` (`watch`), which TiKV's resource control and TiDB's resource-group controller call
//! to read and follow `resource_group/...`. PD serves them from the etcd it embeds; here each
//! call is forwarded to the etcd the node runs on, inside the same namespace as the etcd API
//! (`etcd::namespace`, through the etcd proxy's channel), so it sees what the etcd API sees
//! and never Meridian's own keys. On the embedded store every call is `Unavailable`, as the
//! etcd API is.
//!
//! Owns the translation to and from etcd's messages, with PD's shapes: a failure of etcd's is
//! an answer whose header carries PD's `UNKNOWN` error and etcd's message, not a gRPC error;
//! keys and values come back without revisions (PD copies only those two); a watch sends only
//! answers with events, and ends with `DATA_COMPACTED` when its start revision is gone. Any
//! member answers (etcd is the same for every member); `source` and the cluster id in a
//! request's header are not checked, as PD does not check them.

mod watch;

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::connection::ConnectionGrants;
use super::etcd::namespace::{EmptyKey, Namespace};
use super::etcd::upstream::{Hints, Upstream, MAX_RESPONSE};
use super::etcd::{EtcdProxy, NO_ETCD};
use crate::admin::CoreMetrics;
use crate::auth::Call;
use crate::etcdpb::etcdserverpb::{self as etcd, kv_client::KvClient};
use crate::etcdpb::mvccpb;
use crate::kvproto::meta_storagepb::meta_storage_server::{MetaStorage, MetaStorageServer};
use crate::kvproto::meta_storagepb::{
    DeleteRequest, DeleteResponse, Error, ErrorType, GetRequest, GetResponse, KeyValue, PutRequest,
    PutResponse, ResponseHeader, WatchRequest, WatchResponse,
};
use crate::server::Shared;

/// Largest request taken from a client (etcd's own default limit is 1.5 MiB).
const MAX_REQUEST: usize = 16 << 20;

type Stream<T> = std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

#[derive(Clone)]
pub struct MetaStorageService {
    upstream: Option<Arc<Upstream>>,
    namespace: Arc<Namespace>,
    shared: Arc<Shared>,
    metrics_slot: usize,
}

/// What an admitted call has to work with.
struct Admitted<T> {
    upstream: Arc<Upstream>,
    hints: Hints,
    message: T,
}

/// PD's answer to a call etcd failed: the error in the header, with etcd's words.
fn failed_header(cluster_id: u64, revision: i64, message: String) -> Option<ResponseHeader> {
    Some(ResponseHeader {
        cluster_id,
        revision,
        error: Some(Error {
            r#type: ErrorType::Unknown as i32,
            message,
        }),
    })
}

/// A key and value as PD passes them on.
fn key_value(kv: mvccpb::KeyValue) -> KeyValue {
    KeyValue {
        key: kv.key,
        value: kv.value,
        ..Default::default()
    }
}

fn kv_client(channel: tonic::transport::Channel) -> KvClient<tonic::transport::Channel> {
    KvClient::new(channel).max_decoding_message_size(MAX_RESPONSE)
}

impl MetaStorageService {
    /// Forwards through `etcd`'s channel, into its namespace.
    pub fn new(etcd: &EtcdProxy, shared: Arc<Shared>, metrics_slot: usize) -> Self {
        MetaStorageService {
            upstream: etcd.upstream(),
            namespace: Arc::new(Namespace::default()),
            shared,
            metrics_slot,
        }
    }

    pub fn server(self) -> MetaStorageServer<MetaStorageService> {
        MetaStorageServer::new(self)
            .max_decoding_message_size(MAX_REQUEST)
            .max_encoding_message_size(MAX_RESPONSE)
    }

    fn metrics(&self) -> &CoreMetrics {
        self.shared.metrics.core(self.metrics_slot)
    }

    fn cluster_id(&self) -> u64 {
        self.shared.placement.cluster_id
    }

    fn header(&self, revision: i64) -> Option<ResponseHeader> {
        Some(ResponseHeader {
            cluster_id: self.cluster_id(),
            revision,
            error: None,
        })
    }

    /// Refuses the call, counted, unless the connection's certificate carries the role it
    /// needs; then refuses it as unavailable when there is no etcd to forward to.
    fn admit<T>(&self, request: Request<T>, call: Call) -> Result<Admitted<T>, Status> {
        ConnectionGrants::authorize(&request, call, self.metrics())?;
        let upstream = self
            .upstream
            .clone()
            .ok_or_else(|| Status::unavailable(NO_ETCD))?;
        Ok(Admitted {
            upstream,
            hints: Hints::of(&request),
            message: request.into_inner(),
        })
    }
}

#[tonic::async_trait]
impl MetaStorage for MetaStorageService {
    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let call = self.admit(request, Call::MetaStorageGet)?;
        let req = call.message;
        let mut range = etcd::RangeRequest {
            key: req.key,
            range_end: req.range_end,
            limit: req.limit,
            revision: req.revision,
            ..Default::default()
        };
        if let Err(EmptyKey) = self.namespace.range_request(&mut range) {
            return Ok(Response::new(GetResponse {
                header: failed_header(self.cluster_id(), 0, EmptyKey::MESSAGE.into()),
                ..Default::default()
            }));
        }
        let answer = call
            .upstream
            .unary(range, call.hints, |channel, r| async move {
                kv_client(channel).range(r).await
            })
            .await;
        let mut reply = match answer {
            Ok(reply) => reply,
            Err(status) => {
                return Ok(Response::new(GetResponse {
                    header: failed_header(self.cluster_id(), 0, status.message().to_string()),
                    ..Default::default()
                }))
            }
        };
        self.namespace.range_response(&mut reply);
        Ok(Response::new(GetResponse {
            header: self.header(reply.header.map_or(0, |h| h.revision)),
            kvs: reply.kvs.into_iter().map(key_value).collect(),
            more: reply.more,
            count: reply.count,
        }))
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let call = self.admit(request, Call::MetaStoragePut)?;
        let req = call.message;
        let mut put = etcd::PutRequest {
            key: req.key,
            value: req.value,
            lease: req.lease,
            prev_kv: req.prev_kv,
            ..Default::default()
        };
        if let Err(EmptyKey) = self.namespace.put_request(&mut put) {
            return Ok(Response::new(PutResponse {
                header: failed_header(self.cluster_id(), 0, EmptyKey::MESSAGE.into()),
                prev_kv: None,
            }));
        }
        let answer = call
            .upstream
            .unary(put, call.hints, |channel, r| async move {
                kv_client(channel).put(r).await
            })
            .await;
        let mut reply = match answer {
            Ok(reply) => reply,
            Err(status) => {
                return Ok(Response::new(PutResponse {
                    header: failed_header(self.cluster_id(), 0, status.message().to_string()),
                    prev_kv: None,
                }))
            }
        };
        self.namespace.put_response(&mut reply);
        Ok(Response::new(PutResponse {
            header: self.header(reply.header.map_or(0, |h| h.revision)),
            prev_kv: reply.prev_kv.map(key_value),
        }))
    }

    async fn delete(
        &self,
        request: Request<DeleteRequest>,
    ) -> Result<Response<DeleteResponse>, Status> {
        let call = self.admit(request, Call::MetaStorageDelete)?;
        let req = call.message;
        // PD deletes the one key, whatever `range_end` says.
        let mut delete = etcd::DeleteRangeRequest {
            key: req.key,
            range_end: Vec::new(),
            prev_kv: req.prev_kv,
        };
        if let Err(EmptyKey) = self.namespace.delete_request(&mut delete) {
            return Ok(Response::new(DeleteResponse {
                header: failed_header(self.cluster_id(), 0, EmptyKey::MESSAGE.into()),
                ..Default::default()
            }));
        }
        let answer = call
            .upstream
            .unary(delete, call.hints, |channel, r| async move {
                kv_client(channel).delete_range(r).await
            })
            .await;
        let mut reply = match answer {
            Ok(reply) => reply,
            Err(status) => {
                return Ok(Response::new(DeleteResponse {
                    header: failed_header(self.cluster_id(), 0, status.message().to_string()),
                    ..Default::default()
                }))
            }
        };
        self.namespace.delete_response(&mut reply);
        Ok(Response::new(DeleteResponse {
            header: self.header(reply.header.map_or(0, |h| h.revision)),
            deleted: reply.deleted,
            prev_kvs: reply.prev_kvs.into_iter().map(key_value).collect(),
        }))
    }

    async fn watch(
        &self,
        request: Request<WatchRequest>,
    ) -> Result<Response<Stream<WatchResponse>>, Status> {
        let call = self.admit(request, Call::MetaStorageWatch)?;
        watch::open(self, call).await.map(Response::new)
    }
}

#[cfg(test)]
mod tests {
    use crate::auth::{need_of, Call, Need};
    use crate::tls::cert::Role;

    #[test]
    fn reads_and_watches_take_any_role_and_writes_need_client() {
        for call in [Call::MetaStorageGet, Call::MetaStorageWatch] {
            assert_eq!(need_of(call), Need::AnyRole, "{call:?}");
        }
        for call in [Call::MetaStoragePut, Call::MetaStorageDelete] {
            assert_eq!(need_of(call), Need::Role(Role::Client), "{call:?}");
        }
    }
}

//! `etcdserverpb.Watch`: the client's watch stream relayed to one at etcd. Each create
//! request's range is put inside the namespace; each event's key and previous key come back
//! without it. Cancel and progress requests name watch ids, which pass through.

use std::sync::Arc;

use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

use super::namespace::Namespace;
use super::relay::{Inward, Relay};
use super::{EtcdProxy, Stream};
use crate::auth::Call;
use crate::etcdpb::etcdserverpb::watch_client::WatchClient;
use crate::etcdpb::etcdserverpb::watch_request::RequestUnion;
use crate::etcdpb::etcdserverpb::watch_server::Watch;
use crate::etcdpb::etcdserverpb::{WatchRequest, WatchResponse};

/// Puts each new watch inside the namespace.
struct Watches(Arc<Namespace>);

impl Inward<WatchRequest> for Watches {
    async fn admit(&mut self, mut message: WatchRequest) -> Result<WatchRequest, Status> {
        if let Some(RequestUnion::CreateRequest(create)) = &mut message.request_union {
            self.0.watch_create(create);
        }
        Ok(message)
    }
}

#[tonic::async_trait]
impl Watch for EtcdProxy {
    type WatchStream = Stream<WatchResponse>;

    async fn watch(
        &self,
        request: Request<Streaming<WatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let call = self.admit(request, Call::EtcdWatch)?;
        let upstream = call.upstream.clone();
        let namespace = self.namespace.clone();
        let outward = {
            let upstream = upstream.clone();
            move |mut reply: WatchResponse| {
                // etcd checks the token per watch and cancels the watch when it no longer
                // knows it: log in afresh for the client's next attempt.
                if reply.canceled
                    && upstream.refused_token(&Status::unknown(reply.cancel_reason.clone()))
                {
                    upstream.forget_token();
                }
                namespace.watch_response(&mut reply);
                Some(reply)
            }
        };
        let relay = Relay {
            upstream,
            hints: call.hints,
            shutdown: self.shared.shutdown.clone(),
            what: "Watch",
        };
        Ok(Response::new(relay.run(
            call.message,
            Watches(self.namespace.clone()),
            |channel: Channel, r| async move {
                WatchClient::new(channel)
                    .max_decoding_message_size(super::upstream::MAX_RESPONSE)
                    .watch(r)
                    .await
            },
            outward,
        )))
    }
}

//! `etcdserverpb.Watch` over the core: each call opens a watch stream in [`Etcd`]; a task
//! feeds the client's messages to it, and the responses the core queues reach the client
//! through the stream's channel. The stream stays open after the client closes its side
//! (as etcd's does) and ends when the client goes away.

use std::pin::Pin;

use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::{lock, EtcdModel, Fault, Rpc};
use crate::pb::watch_server::Watch;
use crate::pb::{WatchRequest, WatchResponse};

type WatchStream = Pin<Box<dyn tokio_stream::Stream<Item = Result<WatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Watch for EtcdModel {
    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<Streaming<WatchRequest>>,
    ) -> Result<Response<WatchStream>, Status> {
        let (delay, fault) = self.next_fault(Rpc::Watch);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        match fault {
            Some(Fault::FailBeforeApply { code, message })
            | Some(Fault::FailAfterApply { code, message }) => {
                return Err(Status::new(code, message))
            }
            // A stream that is open but never answers.
            Some(Fault::DropReply) => {
                let never: WatchStream =
                    Box::pin(tokio_stream::pending::<Result<WatchResponse, Status>>());
                return Ok(Response::new(never));
            }
            None => {}
        }
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::unbounded_channel();
        let stream = {
            let mut state = lock(&self.shared.state);
            let stream = state.etcd.open_watch_stream();
            state.streams.insert(stream, tx.clone());
            stream
        };
        let model = self.clone();
        tokio::spawn(async move {
            let mut reading = true;
            loop {
                // A request read before the client went away is handled, as for keep-alives.
                tokio::select! {
                    biased;
                    message = inbound.message(), if reading => match message {
                        Ok(Some(r)) => model.with_etcd(|etcd, now| etcd.watch_request(stream, &r, now)),
                        Ok(None) => reading = false,
                        Err(_) => break,
                    },
                    _ = tx.closed() => break,
                }
            }
            let mut state = lock(&model.shared.state);
            state.streams.remove(&stream);
            state.etcd.close_watch_stream(stream);
        });
        let responses: WatchStream = Box::pin(UnboundedReceiverStream::new(rx));
        Ok(Response::new(responses))
    }
}

//! A client's bidi stream (Watch, LeaseKeepAlive) relayed to one stream at etcd, with the
//! same bounds as the rest of the gRPC front end: `STREAM_BACKLOG` messages queued each way.
//! A client that reads slowly stops the reads from etcd (and so etcd's sends, by HTTP/2 flow
//! control) rather than growing a queue here; an etcd that takes requests slowly stops the
//! reads from the client. The relay ends when etcd ends its side, when the client goes away,
//! or when the node stops (the client is told `Unavailable`, and reconnects elsewhere).
//!
//! Owns only the plumbing: what is rewritten or refused on the way is the caller's
//! ([`Inward`], and the `outward` function).

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

use super::upstream::{Hints, Upstream};
use super::Stream;

/// Messages a stream may have queued in each direction before its reader waits.
const STREAM_BACKLOG: usize = 64;

/// What happens to each message from the client before it goes to etcd: rewritten, or the
/// stream refused with a status (the client gets it and the stream ends).
pub trait Inward<Q>: Send + 'static {
    fn admit(&mut self, message: Q) -> impl Future<Output = Result<Q, Status>> + Send;
}

/// The status a client sees on a stream cut by the node stopping: retry elsewhere.
fn stopping() -> Status {
    Status::unavailable("this Meridian node is stopping; reconnect to another member")
}

/// One stream's surroundings: the etcd to open it at, what the client's call asked of etcd,
/// the node's shutdown, and the stream's name for logs.
pub struct Relay {
    pub upstream: Arc<Upstream>,
    pub hints: Hints,
    pub shutdown: watch::Receiver<bool>,
    pub what: &'static str,
}

impl Relay {
    /// Relays `inbound` to the stream `open` starts at etcd, and etcd's replies, each passed
    /// through `outward` (`None` drops one), back to the client.
    pub fn run<Q, A, I, Open, Fut, Out>(
        self,
        inbound: Streaming<Q>,
        inward: I,
        open: Open,
        outward: Out,
    ) -> Stream<A>
    where
        Q: Send + 'static,
        A: Send + 'static,
        I: Inward<Q>,
        Open: FnOnce(Channel, Request<ReceiverStream<Q>>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Response<Streaming<A>>, Status>> + Send + 'static,
        Out: FnMut(A) -> Option<A> + Send + 'static,
    {
        let (to_client, replies) = mpsc::channel(STREAM_BACKLOG);
        let (to_etcd, requests) = mpsc::channel(STREAM_BACKLOG);
        // The client-side pump tells the etcd-side one about a refusal; the etcd-side one, by
        // ending, tells the client-side one to stop.
        let (refused, refusal) = oneshot::channel();
        let (done, finished) = oneshot::channel::<()>();
        tokio::spawn(client_to_etcd(
            inbound, inward, to_etcd, refused, finished, self.what,
        ));
        tokio::spawn(etcd_to_client(
            self.upstream,
            self.hints,
            ReceiverStream::new(requests),
            open,
            outward,
            Pumps {
                to_client,
                refusal,
                refusal_open: true,
                _done: done,
                shutdown: self.shutdown,
                what: self.what,
            },
        ));
        Box::pin(ReceiverStream::new(replies))
    }
}

async fn client_to_etcd<Q, I: Inward<Q>>(
    mut inbound: Streaming<Q>,
    mut inward: I,
    to_etcd: mpsc::Sender<Q>,
    refused: oneshot::Sender<Status>,
    mut finished: oneshot::Receiver<()>,
    what: &'static str,
) {
    loop {
        let next = tokio::select! {
            next = inbound.message() => next,
            _ = &mut finished => return,
        };
        let message = match next {
            Ok(Some(message)) => message,
            // The client closed its side: so does the stream at etcd.
            Ok(None) => return,
            Err(status) => {
                tracing::debug!("{what} stream from the client ended: {status}");
                return;
            }
        };
        let message = tokio::select! {
            admitted = inward.admit(message) => admitted,
            _ = &mut finished => return,
        };
        match message {
            Ok(message) => {
                tokio::select! {
                    sent = to_etcd.send(message) => if sent.is_err() { return },
                    _ = &mut finished => return,
                }
            }
            Err(status) => {
                let _ = refused.send(status);
                return;
            }
        }
    }
}

/// The etcd side's ends: the client's queue, a refusal from the client side (until that side
/// ends without one), the signal its own end gives the client side (dropped with it), and the
/// node's shutdown.
struct Pumps<A> {
    to_client: mpsc::Sender<Result<A, Status>>,
    refusal: oneshot::Receiver<Status>,
    refusal_open: bool,
    _done: oneshot::Sender<()>,
    shutdown: watch::Receiver<bool>,
    what: &'static str,
}

/// What woke the etcd side besides its own work.
enum Interrupt {
    /// The client side refused a message: end with its status.
    Refused(Status),
    /// The client side ended without a refusal: nothing to wait for there any more.
    ClientSideDone,
    /// The client is gone.
    ClientGone,
    Stopping,
}

impl<A> Pumps<A> {
    async fn interrupted(&mut self) -> Interrupt {
        tokio::select! {
            refused = &mut self.refusal, if self.refusal_open => match refused {
                Ok(status) => Interrupt::Refused(status),
                Err(_) => Interrupt::ClientSideDone,
            },
            _ = self.to_client.closed() => Interrupt::ClientGone,
            _ = self.shutdown.wait_for(|s| *s) => Interrupt::Stopping,
        }
    }

    /// Whether the relay goes on after `interrupt`; the client's stream is ended with the
    /// status the interruption carries when it does not.
    fn goes_on(&mut self, interrupt: Interrupt) -> bool {
        let status = match interrupt {
            Interrupt::ClientSideDone => {
                self.refusal_open = false;
                return true;
            }
            Interrupt::ClientGone => return false,
            Interrupt::Refused(status) => status,
            Interrupt::Stopping => stopping(),
        };
        self.end(status);
        false
    }

    /// Ends the client's stream after etcd ended its side, with the client side's refusal if
    /// there was one: refusing a message ends the stream at etcd too, and the client must
    /// learn why rather than see a plain end.
    fn end_after_refusal(mut self, status: Option<Status>) {
        if let Some(status) = self.refusal.try_recv().ok().or(status) {
            self.end(status);
        }
    }

    /// Ends the client's stream with `status`; a client too slow to take it gets the end of
    /// the stream alone.
    fn end(&self, status: Status) {
        let _ = self.to_client.try_send(Err(status));
    }
}

async fn etcd_to_client<Q, A, Open, Fut, Out>(
    upstream: Arc<Upstream>,
    hints: Hints,
    requests: ReceiverStream<Q>,
    open: Open,
    mut outward: Out,
    mut pumps: Pumps<A>,
) where
    Open: FnOnce(Channel, Request<ReceiverStream<Q>>) -> Fut,
    Fut: Future<Output = Result<Response<Streaming<A>>, Status>>,
    Out: FnMut(A) -> Option<A>,
{
    let what = pumps.what;
    let opening = async {
        let request = upstream.stream_request(requests, hints).await?;
        open(upstream.channel(), request).await
    };
    tokio::pin!(opening);
    let opened = loop {
        tokio::select! {
            opened = &mut opening => break opened,
            interrupt = pumps.interrupted() => if !pumps.goes_on(interrupt) { return },
        }
    };
    let mut replies = match opened {
        Ok(replies) => replies.into_inner(),
        Err(status) => {
            // A stream cannot be replayed: log in again for the next one, and have the
            // client retry rather than give up on an authentication error of ours.
            let status = if upstream.refused_token(&status) {
                upstream.forget_token();
                Status::unavailable(format!("etcd refused Meridian's token; retry: {status}"))
            } else {
                status
            };
            return pumps.end_after_refusal(Some(status));
        }
    };
    loop {
        let next = tokio::select! {
            next = replies.message() => next,
            // The client gone: returning drops `replies`, which cancels the stream at etcd.
            interrupt = pumps.interrupted() => {
                if pumps.goes_on(interrupt) { continue }
                return;
            }
        };
        match next {
            Ok(Some(reply)) => {
                let Some(reply) = outward(reply) else {
                    continue;
                };
                // Waits while the client's queue is full: etcd's stream is not read meanwhile.
                tokio::select! {
                    sent = pumps.to_client.send(Ok(reply)) => if sent.is_err() { return },
                    _ = pumps.shutdown.wait_for(|s| *s) => return,
                }
            }
            Ok(None) => return pumps.end_after_refusal(None),
            Err(status) => {
                tracing::debug!("{what} stream from etcd ended: {status}");
                return pumps.end_after_refusal(Some(status));
            }
        }
    }
}

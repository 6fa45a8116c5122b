//! The TSO dispatcher. Callers join the waiter queue (`queue.rs`); each of N stream workers
//! takes every caller queued so far, asks for that many timestamps in one request, and hands
//! them out in queue order. With one worker this is Percolator's rule: while a request is in
//! flight, all new calls wait and go together in the next one. This file is the I/O shell:
//! streams, retries and waking idle workers; the batching itself is in `queue.rs`.

mod batch_hook;
mod queue;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::Notify;

pub use self::batch_hook::BatchHook;
use self::queue::{Queue, Taken, Ticket};
use super::connector::Connector;
use super::error::ClientError;
use super::rpc::RpcStream;
use crate::proto::{Reply, Request};
use crate::tso::Timestamp;

/// What the callers and the workers share.
#[derive(Default)]
struct Shared {
    queue: Queue,
    /// Wakes a worker waiting for callers (and all of them at close).
    work: Notify,
}

/// Closes the queue when the last handle on the dispatcher goes, so its workers end.
struct Handle(Arc<Shared>);

impl Drop for Handle {
    fn drop(&mut self) {
        self.0.queue.close();
        self.0.work.notify_waiters();
    }
}

#[derive(Clone)]
pub struct Dispatcher {
    handle: Arc<Handle>,
}

impl Dispatcher {
    pub fn start(connector: Arc<Connector>, streams: usize, hook: Option<BatchHook>) -> Dispatcher {
        let shared = Arc::new(Shared::default());
        for _ in 0..streams {
            tokio::spawn(worker(connector.clone(), shared.clone(), hook.clone()));
        }
        Dispatcher {
            handle: Arc::new(Handle(shared)),
        }
    }

    pub fn get_ts(&self) -> GetTs<'_> {
        GetTs {
            shared: &self.handle.0,
            ticket: None,
        }
    }
}

/// One `get_ts` call: joins the queue on its first poll, then waits for its batch.
pub struct GetTs<'a> {
    shared: &'a Shared,
    ticket: Option<Ticket>,
}

impl Future for GetTs<'_> {
    type Output = Result<Timestamp, ClientError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(ticket) = &this.ticket {
            return ticket.poll(cx);
        }
        let joined = this.shared.queue.join(cx.waker())?;
        if joined.wake_worker {
            this.shared.work.notify_one();
        }
        this.ticket = Some(joined.ticket);
        Poll::Pending
    }
}

async fn worker(connector: Arc<Connector>, shared: Arc<Shared>, hook: Option<BatchHook>) {
    let mut stream: Option<RpcStream> = None;
    loop {
        let Some(batch) = next_batch(&shared).await else {
            return;
        };
        let count = batch.count();
        let result = match stream.as_mut() {
            Some(s) => s.call_with_retry(&Request::Tso { count }).await,
            None => match RpcStream::open(connector.clone()).await {
                Ok(s) => {
                    stream
                        .insert(s)
                        .call_with_retry(&Request::Tso { count })
                        .await
                }
                Err(e) => Err(e),
            },
        };
        batch.complete(match result {
            Ok(Reply::Tso { first, count: got }) if got == count => {
                if let Some(hook) = &hook {
                    hook.call(Timestamp::from_u64(first), count);
                }
                Ok(first)
            }
            Ok(other) => Err(ClientError::Protocol(format!(
                "asked for {count} timestamps, got {other:?}"
            ))),
            Err(e) => Err(e),
        });
    }
}

/// The next batch with callers; `None` once the dispatcher is gone and nobody waits.
async fn next_batch(shared: &Shared) -> Option<Taken> {
    loop {
        // Registered before looking, so a caller's notify between the look and the wait is not
        // lost.
        let notified = shared.work.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(batch) = shared.queue.take() {
            return Some(batch);
        }
        if shared.queue.is_closed() {
            return None;
        }
        notified.await;
    }
}

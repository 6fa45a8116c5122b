//! The TSO dispatcher. Callers queue a waiter; each of N stream workers takes every waiter
//! queued so far, asks for that many timestamps in one request, and hands them out in queue
//! order. With one worker this is Percolator's rule: while a request is in flight, all new calls
//! wait and go together in the next one.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Mutex};

use super::connector::Connector;
use super::error::ClientError;
use super::rpc::RpcStream;
use crate::proto::{Reply, Request};
use crate::tso::{Timestamp, MAX_COUNT};

type Waiter = oneshot::Sender<Result<Timestamp, ClientError>>;

#[derive(Clone)]
pub struct Dispatcher {
    queue: mpsc::UnboundedSender<Waiter>,
}

impl Dispatcher {
    pub fn start(connector: Arc<Connector>, streams: usize) -> Dispatcher {
        let (queue, rx) = mpsc::unbounded_channel();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..streams {
            tokio::spawn(worker(connector.clone(), rx.clone()));
        }
        Dispatcher { queue }
    }

    pub async fn get_ts(&self) -> Result<Timestamp, ClientError> {
        let (tx, rx) = oneshot::channel();
        self.queue.send(tx).map_err(|_| ClientError::Closed)?;
        rx.await.map_err(|_| ClientError::Closed)?
    }
}

async fn worker(connector: Arc<Connector>, queue: Arc<Mutex<mpsc::UnboundedReceiver<Waiter>>>) {
    let mut stream: Option<RpcStream> = None;
    let mut batch: Vec<Waiter> = Vec::new();
    loop {
        {
            let mut rx = queue.lock().await;
            match rx.recv().await {
                Some(w) => batch.push(w),
                None => return,
            }
            while batch.len() < MAX_COUNT as usize {
                match rx.try_recv() {
                    Ok(w) => batch.push(w),
                    Err(_) => break,
                }
            }
        }
        // Callers that gave up need no timestamp.
        batch.retain(|w| !w.is_closed());
        if batch.is_empty() {
            continue;
        }
        let count = batch.len() as u32;
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
        match result {
            Ok(Reply::Tso { first, count: got }) if got == count => {
                for (i, waiter) in batch.drain(..).enumerate() {
                    let _ = waiter.send(Ok(Timestamp::from_u64(first + i as u64)));
                }
            }
            Ok(other) => {
                let e =
                    ClientError::Protocol(format!("asked for {count} timestamps, got {other:?}"));
                batch.drain(..).for_each(|w| drop(w.send(Err(e.clone()))));
            }
            Err(e) => batch.drain(..).for_each(|w| drop(w.send(Err(e.clone())))),
        }
    }
}

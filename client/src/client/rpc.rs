//! A request stream: one request in flight, its response read back in order. Reopens itself on
//! a new stream (and the connector on a new connection) after a transport failure. Every
//! failure is a `ClientError`: `call` says what broke, `call_with_retry` retries what may
//! succeed when sent again.

use std::sync::Arc;
use std::time::Duration;

use rkyv::util::AlignedVec;

use super::connector::Connector;
use super::error::ClientError;
use crate::proto::{self, ErrorReply, FrameDecoder, FrameError, Reply, Request, Response};

/// A reply that cannot be read: the stream is not worth reading further.
fn unreadable(e: FrameError) -> ClientError {
    ClientError::Protocol(e.to_string())
}

struct Open {
    generation: u64,
    connection: quinn::Connection,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
}

pub struct RpcStream {
    connector: Arc<Connector>,
    open: Option<Open>,
    decoder: FrameDecoder,
    scratch: AlignedVec,
    out: Vec<u8>,
}

impl RpcStream {
    pub async fn open(connector: Arc<Connector>) -> Result<Self, ClientError> {
        let mut stream = RpcStream {
            connector,
            open: None,
            decoder: FrameDecoder::new(),
            scratch: AlignedVec::new(),
            out: Vec::with_capacity(64),
        };
        stream.ensure_open().await?;
        Ok(stream)
    }

    async fn ensure_open(&mut self) -> Result<(), ClientError> {
        if self.open.is_some() {
            return Ok(());
        }
        let (generation, connection) = self.connector.connection().await?;
        match connection.open_bi().await {
            Ok((send, recv)) => {
                self.decoder = FrameDecoder::new();
                self.open = Some(Open {
                    generation,
                    connection,
                    send,
                    recv,
                });
                Ok(())
            }
            Err(e) => {
                self.connector.invalidate(generation).await;
                Err(ClientError::Transport(format!("opening a stream: {e}")))
            }
        }
    }

    /// Sends one request and reads its response (the server's error reply included). A failure
    /// to get one leaves the stream to be reopened by the next call; nothing is retried here.
    pub async fn call(&mut self, req: &Request) -> Result<Response, ClientError> {
        self.out.clear();
        proto::encode(req, &mut self.scratch, &mut self.out).map_err(ClientError::Encode)?;
        self.ensure_open().await?;
        let result = self.exchange().await;
        self.settle(result).await
    }

    /// After an exchange: a failed stream is dropped, its connection too if it is closed,
    /// and a silent member is suspected (the connector asks the others next).
    async fn settle<T>(&mut self, result: Result<T, ClientError>) -> Result<T, ClientError> {
        match result {
            Ok(v) => Ok(v),
            Err(failure) => {
                if let Some(open) = self.open.take() {
                    if matches!(failure, ClientError::Silent(_)) {
                        self.connector.suspect(open.generation).await;
                    } else if open.connection.close_reason().is_some() {
                        self.connector.invalidate(open.generation).await;
                    }
                }
                Err(failure)
            }
        }
    }

    /// Sends `reqs` back to back with one write and reads their responses, in order: the
    /// pipelined path for callers with many independent requests (heartbeats).
    pub async fn call_many(&mut self, reqs: &[Request]) -> Result<Vec<Response>, ClientError> {
        let mut frames = Vec::new();
        for req in reqs {
            proto::encode(req, &mut self.scratch, &mut frames).map_err(ClientError::Encode)?;
        }
        self.call_frames(&frames, reqs.len()).await
    }

    /// `call_many` for requests already framed with [`proto::encode`] (`count` of them), for
    /// callers that send the same requests again and again.
    pub async fn call_frames(
        &mut self,
        frames: &[u8],
        count: usize,
    ) -> Result<Vec<Response>, ClientError> {
        self.ensure_open().await?;
        self.out.clear();
        self.out.extend_from_slice(frames);
        let result = self.exchange_many(count).await;
        self.settle(result).await
    }

    async fn exchange_many(&mut self, n: usize) -> Result<Vec<Response>, ClientError> {
        self.send_out().await?;
        let mut responses = Vec::with_capacity(n);
        while responses.len() < n {
            responses.push(self.next_response().await?);
        }
        Ok(responses)
    }

    async fn exchange(&mut self) -> Result<Response, ClientError> {
        self.send_out().await?;
        self.next_response().await
    }

    /// Writes what is framed in `out` on the open stream.
    async fn send_out(&mut self) -> Result<(), ClientError> {
        let open = self
            .open
            .as_mut()
            .ok_or_else(|| ClientError::Transport("stream not open".into()))?;
        open.send
            .write_all(&self.out)
            .await
            .map_err(|e| ClientError::Transport(format!("send: {e}")))
    }

    /// The next response on the open stream, reading until one is whole; silence past the
    /// connector's timeout is an error.
    async fn next_response(&mut self) -> Result<Response, ClientError> {
        let silence = self.connector.silence_timeout;
        let open = self
            .open
            .as_mut()
            .ok_or_else(|| ClientError::Transport("stream not open".into()))?;
        loop {
            if let Some(response) = self.decoder.next_response().map_err(unreadable)? {
                return Ok(response);
            }
            match tokio::time::timeout(silence, open.recv.read_chunk(64 * 1024, true)).await {
                Ok(Ok(Some(chunk))) => self.decoder.extend(&chunk.bytes),
                Ok(Ok(None)) => {
                    return Err(ClientError::Transport(
                        "stream finished by the server".into(),
                    ))
                }
                Ok(Err(e)) => return Err(ClientError::Transport(format!("receive: {e}"))),
                Err(_) => return Err(ClientError::Silent(silence)),
            }
        }
    }

    /// `call`, retrying transport failures and retryable errors with backoff within the
    /// connector's retry budget; a non-retryable server error is returned at once.
    pub async fn call_with_retry(&mut self, req: &Request) -> Result<Reply, ClientError> {
        let deadline = tokio::time::Instant::now() + self.connector.retry_budget;
        let mut backoff = Duration::from_millis(5);
        let mut redirected = false;
        loop {
            let cause = match self.call(req).await {
                Ok(Response::Ok(reply)) => return Ok(reply),
                Ok(Response::Err(e)) if !e.is_retryable() => return Err(ClientError::Server(e)),
                Ok(Response::Err(ErrorReply::NotLeader { leader })) => {
                    // Follow the leader on a new stream; a member that knows none is skipped.
                    if let Some(open) = self.open.take() {
                        match &leader {
                            Some(l) => self.connector.redirect(&l.client_url).await,
                            None => self.connector.skip(open.generation).await,
                        }
                    }
                    if leader.is_some() && !redirected {
                        redirected = true;
                        continue;
                    }
                    format!("not the leader (leader: {:?})", leader.map(|l| l.name))
                }
                Ok(Response::Err(e)) => e.to_string(),
                // Sending it again would not make it fit.
                Err(e @ ClientError::Encode(_)) => return Err(e),
                Err(e) => e.to_string(),
            };
            if tokio::time::Instant::now() + backoff > deadline {
                return Err(ClientError::Unavailable(cause));
            }
            tracing::debug!("retrying after: {cause}");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(200));
        }
    }
}

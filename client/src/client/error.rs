//! Client errors: the server's typed error, or why no answer could be had. Every public call of
//! the client returns one, so a caller can match on it and count it; it owns no retry policy
//! beyond saying which server errors are worth sending again.

use std::time::Duration;

use crate::proto::{ErrorReply, FrameError};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The server answered with a typed error that retrying would not fix.
    #[error("server error: {0}")]
    Server(ErrorReply),
    /// No usable answer within the retry budget; the last cause is given.
    #[error("unavailable after retries: {0}")]
    Unavailable(String),
    /// One exchange on a stream broke in transport (the stream or its connection failed):
    /// nothing was retried, and the stream reopens on its next call.
    #[error("transport: {0}")]
    Transport(String),
    /// Nothing came back for this long while a reply was due: the member is taken for paused
    /// or cut off, and the next attempt asks another.
    #[error("no reply for {0:?}: the member is silent")]
    Silent(Duration),
    /// The request cannot be framed (larger than `proto::MAX_FRAME_LEN`); it was not sent.
    #[error("request not sent: {0}")]
    Encode(FrameError),
    /// The server sent something this client cannot read.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// Bad options (endpoint, TLS files).
    #[error("configuration error: {0}")]
    Config(String),
    /// The client was dropped while the call waited.
    #[error("client closed")]
    Closed,
}

impl ErrorReply {
    /// Whether the same request may succeed if sent again (to the same or another member).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ErrorReply::NotLeader { .. } | ErrorReply::Unavailable(_)
        )
    }
}

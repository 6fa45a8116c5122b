//! Client errors: the server's typed error, or why no answer could be had.

use crate::proto::ErrorReply;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The server answered with a typed error that retrying would not fix.
    #[error("server error: {0}")]
    Server(ErrorReply),
    /// No usable answer within the retry budget; the last cause is given.
    #[error("unavailable after retries: {0}")]
    Unavailable(String),
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

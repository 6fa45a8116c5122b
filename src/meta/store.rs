//! The `MetaStore` trait and its error.

use std::future::Future;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    #[error("meta store I/O: {0}")]
    Io(String),
    #[error("meta store corrupt: {0}")]
    Corrupt(String),
    /// A guarded write found the leader key changed: this node no longer leads.
    #[error("not the leader: the leader key changed")]
    NotLeader,
    /// A value read back parses but cannot be right (a TSO limit past what a timestamp holds,
    /// an id end at the top of the id space, a member address that is no address): using it
    /// would overflow or silently jump, so the reader refuses it.
    #[error("meta store value out of range: {key} holds {value}: {reason}")]
    OutOfRange {
        key: String,
        value: String,
        reason: String,
    },
}

impl MetaError {
    /// [`MetaError::OutOfRange`] for `value` read at `key`.
    pub fn out_of_range(
        key: &[u8],
        value: impl std::fmt::Display,
        reason: impl std::fmt::Display,
    ) -> MetaError {
        MetaError::OutOfRange {
            key: String::from_utf8_lossy(key).into_owned(),
            value: value.to_string(),
            reason: reason.to_string(),
        }
    }
}

impl From<std::io::Error> for MetaError {
    fn from(e: std::io::Error) -> Self {
        MetaError::Io(e.to_string())
    }
}

/// A small durable key-value store. A successful `put` is on stable storage when it returns.
pub trait MetaStore: Send + Sync + 'static {
    fn get(&self, key: &[u8]) -> impl Future<Output = Result<Option<Vec<u8>>, MetaError>> + Send;
    fn put(&self, key: &[u8], value: &[u8]) -> impl Future<Output = Result<(), MetaError>> + Send;
    fn delete(&self, key: &[u8]) -> impl Future<Output = Result<(), MetaError>> + Send;
    /// Puts `value` unless `key` exists; returns the value `key` holds afterwards. Atomic, so
    /// nodes starting together agree on what the first one created.
    fn create(
        &self,
        key: &[u8],
        value: &[u8],
    ) -> impl Future<Output = Result<Vec<u8>, MetaError>> + Send;
    /// Puts (`Some`) and deletes (`None`), in order. Durable when it returns; a failure may
    /// leave a prefix applied (each write is idempotent, so the caller retries the batch).
    fn batch(&self, ops: Vec<WriteOp>) -> impl Future<Output = Result<(), MetaError>> + Send;
    /// Every key and value under `prefix`, in key order; a remote store reads `page` keys
    /// per request (size it so a page stays a few MiB).
    fn scan(
        &self,
        prefix: &[u8],
        page: usize,
    ) -> impl Future<Output = Result<Vec<KeyValue>, MetaError>> + Send;
}

/// One write of a batch: a put, or a delete when the value is `None`.
pub type WriteOp = (Vec<u8>, Option<Vec<u8>>);
pub type KeyValue = (Vec<u8>, Vec<u8>);

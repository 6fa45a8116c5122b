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

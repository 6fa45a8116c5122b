//! The errors the model answers with, each with etcd's gRPC code and message, word for word
//! (etcd's `api/v3rpc/rpctypes/error.go`), because clients match on those strings. Owns only
//! the mapping; which request raises which error lives with the request.

use std::fmt;

/// A refusal, as etcd's server reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtcdError {
    /// A request without a key.
    EmptyKey,
    /// `ignore_value`/`ignore_lease` on a key that does not exist (or an empty txn op).
    KeyNotFound,
    /// `ignore_value` together with a value.
    ValueProvided,
    /// `ignore_lease` together with a lease.
    LeaseProvided,
    /// More operations in one txn than the server allows.
    TooManyOps,
    /// A sort order or target etcd does not know.
    InvalidSortOption,
    /// A txn that writes one key twice (or puts a key it also deletes).
    DuplicateKey,
    /// A revision older than the last compaction.
    Compacted,
    /// A revision newer than the store's.
    FutureRev,
    /// A lease that does not exist (never granted, revoked or expired).
    LeaseNotFound,
    /// A grant with an id already in use.
    LeaseExist,
    /// A grant with a TTL above etcd's maximum.
    LeaseTtlTooLarge,
}

impl EtcdError {
    /// etcd's gRPC status code for this error.
    pub fn code(self) -> tonic::Code {
        use tonic::Code;
        match self {
            EtcdError::EmptyKey
            | EtcdError::KeyNotFound
            | EtcdError::ValueProvided
            | EtcdError::LeaseProvided
            | EtcdError::TooManyOps
            | EtcdError::InvalidSortOption
            | EtcdError::DuplicateKey => Code::InvalidArgument,
            EtcdError::Compacted | EtcdError::FutureRev | EtcdError::LeaseTtlTooLarge => {
                Code::OutOfRange
            }
            EtcdError::LeaseNotFound => Code::NotFound,
            EtcdError::LeaseExist => Code::FailedPrecondition,
        }
    }

    /// etcd's message for this error.
    pub fn message(self) -> &'static str {
        match self {
            EtcdError::EmptyKey => "etcdserver: key is not provided",
            EtcdError::KeyNotFound => "etcdserver: key not found",
            EtcdError::ValueProvided => "etcdserver: value is provided",
            EtcdError::LeaseProvided => "etcdserver: lease is provided",
            EtcdError::TooManyOps => "etcdserver: too many operations in txn request",
            EtcdError::InvalidSortOption => "etcdserver: invalid sort option",
            EtcdError::DuplicateKey => "etcdserver: duplicate key given in txn request",
            EtcdError::Compacted => "etcdserver: mvcc: required revision has been compacted",
            EtcdError::FutureRev => "etcdserver: mvcc: required revision is a future revision",
            EtcdError::LeaseNotFound => "etcdserver: requested lease not found",
            EtcdError::LeaseExist => "etcdserver: lease already exists",
            EtcdError::LeaseTtlTooLarge => "etcdserver: too large lease TTL",
        }
    }

    /// The gRPC status a client sees.
    pub fn status(self) -> tonic::Status {
        tonic::Status::new(self.code(), self.message())
    }
}

impl fmt::Display for EtcdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for EtcdError {}

impl From<EtcdError> for tonic::Status {
    fn from(e: EtcdError) -> tonic::Status {
        e.status()
    }
}

//! The etcd backend: the same `MetaStore` on an etcd cluster. A store handle may carry a
//! leader guard; every write through a guarded handle is one transaction that compares the
//! leader key with this node's value first, so a node that lost leadership cannot overwrite
//! what its successor wrote (invariant T4, ARCHITECTURE.md).

use etcd_client::{Compare, CompareOp, DeleteOptions, Txn, TxnOp};

use super::etcd_access::EtcdAccess;
use super::keys::Keys;
use super::store::{KeyValue, MetaError, MetaStore, WriteOp};
use crate::failpoint::{self, points};

/// etcd's default `--max-txn-ops`; the guard's compare does not count.
const TXN_OPS: usize = 128;
/// Keys and values per transaction. etcd refuses a request over its `--max-request-bytes`
/// (1.5 MiB by default) with "request is too large", and a batch of region buckets (up to
/// ~40 KiB each) reaches that well before 128 ops: a flush that big would fail, go back
/// marked, and grow on every retry. 1 MiB leaves room for the request's own framing.
const TXN_BYTES: usize = 1 << 20;
/// Keys per page when listing a prefix of small values.
const LIST_PAGE: i64 = 10_000;
/// Largest response read from etcd (tonic's default is 4 MiB).
const MAX_RESPONSE: usize = 64 << 20;

/// The first key after every key starting with `prefix`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// `ops` in order, cut into transactions of at most `max_ops` writes and, unless one write
/// alone is larger, at most `max_bytes` of keys and values.
fn txn_chunks(ops: Vec<WriteOp>, max_ops: usize, max_bytes: usize) -> Vec<Vec<WriteOp>> {
    let mut chunks = Vec::new();
    let mut current: Vec<WriteOp> = Vec::new();
    let mut bytes = 0;
    for op in ops {
        let size = op.0.len() + op.1.as_ref().map_or(0, Vec::len);
        if !current.is_empty() && (current.len() == max_ops || bytes + size > max_bytes) {
            chunks.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += size;
        current.push(op);
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// The leader key and the value it must hold for a guarded write to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderGuard {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

#[derive(Clone)]
pub struct EtcdStore {
    client: etcd_client::Client,
    guard: Option<LeaderGuard>,
}

fn io(e: etcd_client::Error) -> MetaError {
    MetaError::Io(format!("etcd: {e}"))
}

/// An error with its causes: a transport error's own text is just "transport error", and the
/// reason (a refused certificate, a connection reset) is in its sources.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let shown = cause.to_string();
        if !text.contains(&shown) {
            text.push_str(": ");
            text.push_str(&shown);
        }
        source = cause.source();
    }
    text
}

impl EtcdStore {
    /// Connects to a plain etcd (no TLS, no user).
    pub async fn connect(endpoints: &[String]) -> Result<EtcdStore, MetaError> {
        Self::connect_with(endpoints, &EtcdAccess::default()).await
    }

    /// Connects with `access` (TLS, client certificate, user) and reads one key, so a refused
    /// handshake or a denied user is an error here, naming what was tried, rather than at
    /// some later request: the client's channel itself connects lazily.
    pub async fn connect_with(
        endpoints: &[String],
        access: &EtcdAccess,
    ) -> Result<EtcdStore, MetaError> {
        let failed = |e: etcd_client::Error| {
            let mut text = format!(
                "etcd at {} ({}): {}",
                endpoints.join(","),
                access.describe(),
                chain(&e)
            );
            if let Some(hint) = access.hint() {
                text.push_str("; ");
                text.push_str(hint);
            }
            MetaError::Io(text)
        };
        // With a user, this authenticates: a wrong password fails here.
        let client = etcd_client::Client::connect(endpoints, Some(access.connect_options()))
            .await
            .map_err(failed)?;
        client
            .kv_client()
            .get(Keys::cluster_id(), None)
            .await
            .map_err(failed)?;
        Ok(EtcdStore {
            client,
            guard: None,
        })
    }

    /// A store on a client made elsewhere (a simulation builds one over its own connection);
    /// unlike `connect_with`, nothing is read to check it.
    pub fn from_client(client: etcd_client::Client) -> EtcdStore {
        EtcdStore {
            client,
            guard: None,
        }
    }

    /// A handle on the same connection whose writes apply only while `guard` holds.
    pub fn guarded(&self, guard: LeaderGuard) -> EtcdStore {
        EtcdStore {
            client: self.client.clone(),
            guard: Some(guard),
        }
    }

    /// Every key and value under `prefix`, in key order, read in pages so a large prefix
    /// (a million regions) never needs one huge response.
    pub async fn list(&self, prefix: &[u8]) -> Result<Vec<KeyValue>, MetaError> {
        self.list_paged(prefix, LIST_PAGE).await
    }

    async fn list_paged(&self, prefix: &[u8], page: i64) -> Result<Vec<KeyValue>, MetaError> {
        let range_end = prefix_end(prefix);
        let mut out = Vec::new();
        let mut from = prefix.to_vec();
        loop {
            let options = etcd_client::GetOptions::new()
                .with_range(range_end.clone())
                .with_limit(page.max(1));
            let response = self
                .client
                .kv_client()
                .max_decoding_message_size(MAX_RESPONSE)
                .get(from.clone(), Some(options))
                .await
                .map_err(io)?;
            let kvs = response.kvs();
            out.extend(
                kvs.iter()
                    .map(|kv| (kv.key().to_vec(), kv.value().to_vec())),
            );
            match kvs.last() {
                Some(last) if response.more() => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => return Ok(out),
            }
        }
    }

    /// The underlying client, for leases, watches and elections.
    pub fn client(&self) -> etcd_client::Client {
        self.client.clone()
    }

    async fn write(&self, op: TxnOp) -> Result<(), MetaError> {
        self.write_ops(vec![op]).await
    }

    /// One transaction of `ops`, guarded when this handle is.
    async fn write_ops(&self, ops: Vec<TxnOp>) -> Result<(), MetaError> {
        failpoint::step(points::ETCD_TXN).await?;
        let mut kv = self.client.kv_client();
        match &self.guard {
            None => {
                kv.txn(Txn::new().and_then(ops)).await.map_err(io)?;
                Ok(())
            }
            Some(guard) => {
                let txn = Txn::new()
                    .when([Compare::value(
                        guard.key.clone(),
                        CompareOp::Equal,
                        guard.value.clone(),
                    )])
                    .and_then(ops);
                if kv.txn(txn).await.map_err(io)?.succeeded() {
                    Ok(())
                } else {
                    Err(MetaError::NotLeader)
                }
            }
        }
    }
}

impl MetaStore for EtcdStore {
    async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, MetaError> {
        let response = self.client.kv_client().get(key, None).await.map_err(io)?;
        Ok(response.kvs().first().map(|kv| kv.value().to_vec()))
    }

    async fn put(&self, key: &[u8], value: &[u8]) -> Result<(), MetaError> {
        failpoint::step(points::ETCD_PUT).await?;
        self.write(TxnOp::put(key, value, None)).await
    }

    async fn delete(&self, key: &[u8]) -> Result<(), MetaError> {
        self.write(TxnOp::delete(key, None::<DeleteOptions>)).await
    }

    async fn batch(&self, ops: Vec<WriteOp>) -> Result<(), MetaError> {
        for chunk in txn_chunks(ops, TXN_OPS, TXN_BYTES) {
            let chunk = chunk
                .into_iter()
                .map(|(key, value)| match value {
                    Some(value) => TxnOp::put(key, value, None),
                    None => TxnOp::delete(key, None::<DeleteOptions>),
                })
                .collect();
            self.write_ops(chunk).await?;
        }
        Ok(())
    }

    async fn scan(&self, prefix: &[u8], page: usize) -> Result<Vec<KeyValue>, MetaError> {
        self.list_paged(prefix, page as i64).await
    }

    async fn create(&self, key: &[u8], value: &[u8]) -> Result<Vec<u8>, MetaError> {
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value, None)])
            .or_else([TxnOp::get(key, None)]);
        failpoint::step(points::ETCD_TXN).await?;
        let response = self.client.kv_client().txn(txn).await.map_err(io)?;
        if response.succeeded() {
            return Ok(value.to_vec());
        }
        response
            .op_responses()
            .into_iter()
            .find_map(|op| match op {
                etcd_client::TxnOpResponse::Get(get) => {
                    get.kvs().first().map(|kv| kv.value().to_vec())
                }
                _ => None,
            })
            .ok_or_else(|| {
                MetaError::Io(format!(
                    "{} vanished while being created",
                    String::from_utf8_lossy(key)
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn bytes(chunk: &[WriteOp]) -> usize {
        chunk
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum()
    }

    proptest! {
        /// Every write is kept, in order, and each transaction is within both limits unless it
        /// is one write that alone exceeds the byte limit.
        #[test]
        fn chunks_keep_every_write_in_order_within_the_limits(
            sizes in prop::collection::vec((1usize..64, prop::option::of(0usize..3000)), 0..300),
            max_ops in 1usize..20,
            max_bytes in 1usize..5000,
        ) {
            let ops: Vec<WriteOp> = sizes
                .iter()
                .enumerate()
                .map(|(i, (k, v))| {
                    let mut key = vec![b'k'; *k];
                    key.extend_from_slice(&(i as u32).to_be_bytes());
                    (key, v.map(|n| vec![7u8; n]))
                })
                .collect();
            let chunks = txn_chunks(ops.clone(), max_ops, max_bytes);
            prop_assert_eq!(chunks.concat(), ops);
            for chunk in &chunks {
                prop_assert!(!chunk.is_empty());
                prop_assert!(chunk.len() <= max_ops);
                prop_assert!(chunk.len() == 1 || bytes(chunk) <= max_bytes, "{} bytes", bytes(chunk));
            }
        }
    }

    #[test]
    fn a_flush_of_many_buckets_is_cut_by_bytes_before_etcd_refuses_it() {
        // 128 buckets of 40 KiB: one transaction of 5 MiB, over etcd's 1.5 MiB.
        let ops: Vec<WriteOp> = (0..128u32)
            .map(|i| (i.to_be_bytes().to_vec(), Some(vec![0u8; 40 << 10])))
            .collect();
        let chunks = txn_chunks(ops, TXN_OPS, TXN_BYTES);
        assert_eq!(chunks.len(), 6);
        assert!(chunks.iter().all(|c| bytes(c) <= TXN_BYTES));
    }
}

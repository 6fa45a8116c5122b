//! `KV.Txn`: the compares (all against the store as it was before the txn, nested txns
//! included), etcd's up-front checks (op counts, empty keys, a key written twice, missing
//! leases, revisions out of range), then the chosen branch applied as one revision. Follows
//! etcd's `etcdserver/txn/txn.go` and `v3rpc/key.go`.

use std::collections::BTreeSet;

use super::key_range::KeyRange;
use super::kv::{check_put_request, check_range_request};
use super::{Batch, Etcd, EtcdError};
use crate::mvccpb::KeyValue;
use crate::pb::compare::{CompareResult, CompareTarget, TargetUnion};
use crate::pb::request_op::Request;
use crate::pb::response_op::Response;
use crate::pb::{Compare, RangeResponse, RequestOp, ResponseOp, TxnRequest, TxnResponse};

/// Which branch each txn takes: this one's, then its nested txns' in the order they appear
/// in the branch taken.
struct Path {
    succeeded: bool,
    nested: Vec<Path>,
}

impl Etcd {
    /// `KV.Txn`.
    pub fn txn(&mut self, t: &TxnRequest, now_ms: u64) -> Result<TxnResponse, EtcdError> {
        self.advance(now_ms);
        check_txn_request(t, self.config.max_txn_ops)?;
        check_intervals(&t.success)?;
        check_intervals(&t.failure)?;
        let path = self.compare_path(t);
        self.check_txn(t, &path)?;
        let mut batch = self.begin();
        let mut response = self.execute(&mut batch, t, &path);
        let revision = self.commit(batch);
        response.header = Some(self.header(revision));
        Ok(response)
    }

    fn compare_path(&self, t: &TxnRequest) -> Path {
        let succeeded = t.compare.iter().all(|c| self.compare(c));
        let ops = if succeeded { &t.success } else { &t.failure };
        let nested = ops
            .iter()
            .filter_map(|op| match &op.request {
                Some(Request::RequestTxn(inner)) => Some(self.compare_path(inner)),
                _ => None,
            })
            .collect();
        Path { succeeded, nested }
    }

    /// One compare against the current store: it holds for a range when it holds for every
    /// key in it; a missing key compares as all zeroes, except on its value, which fails.
    fn compare(&self, c: &Compare) -> bool {
        let range = KeyRange::new(&c.key, &c.range_end);
        let kvs: Vec<&KeyValue> = self.store.range(&range, self.revision).collect();
        if kvs.is_empty() {
            if c.target == CompareTarget::Value as i32 {
                return false;
            }
            return compare_kv(c, &KeyValue::default());
        }
        kvs.into_iter().all(|kv| compare_kv(c, kv))
    }

    /// What the branch taken needs of the store before anything is applied.
    fn check_txn(&self, t: &TxnRequest, path: &Path) -> Result<(), EtcdError> {
        let ops = if path.succeeded {
            &t.success
        } else {
            &t.failure
        };
        let mut nested = path.nested.iter();
        for op in ops {
            match &op.request {
                Some(Request::RequestRange(r)) => {
                    if r.revision != 0 {
                        if r.revision > self.revision {
                            return Err(EtcdError::FutureRev);
                        }
                        if r.revision < self.compacted {
                            return Err(EtcdError::Compacted);
                        }
                    }
                }
                Some(Request::RequestPut(p)) => self.check_put(p)?,
                Some(Request::RequestTxn(inner)) => {
                    if let Some(inner_path) = nested.next() {
                        self.check_txn(inner, inner_path)?;
                    }
                }
                Some(Request::RequestDeleteRange(_)) | None => {}
            }
        }
        Ok(())
    }

    fn execute(&mut self, batch: &mut Batch, t: &TxnRequest, path: &Path) -> TxnResponse {
        let ops = if path.succeeded {
            &t.success
        } else {
            &t.failure
        };
        let mut nested = path.nested.iter();
        let mut responses = Vec::with_capacity(ops.len());
        for op in ops {
            let response = match &op.request {
                Some(Request::RequestRange(r)) => Some(Response::ResponseRange(
                    // Checked above: a txn's range cannot fail by now.
                    self.range_at(r, batch.read_revision())
                        .unwrap_or_else(|_| RangeResponse::default()),
                )),
                Some(Request::RequestPut(p)) => {
                    Some(Response::ResponsePut(self.apply_put(batch, p)))
                }
                Some(Request::RequestDeleteRange(d)) => {
                    Some(Response::ResponseDeleteRange(self.apply_delete(batch, d)))
                }
                Some(Request::RequestTxn(inner)) => {
                    let untaken = Path {
                        succeeded: false,
                        nested: Vec::new(),
                    };
                    let inner_path = nested.next().unwrap_or(&untaken);
                    let mut inner_response = self.execute(batch, inner, inner_path);
                    // etcd gives a nested txn's response an empty header.
                    inner_response.header = Some(Default::default());
                    Some(Response::ResponseTxn(inner_response))
                }
                None => None,
            };
            responses.push(ResponseOp { response });
        }
        TxnResponse {
            header: Etcd::bare_header(batch.read_revision()),
            succeeded: path.succeeded,
            responses,
        }
    }
}

fn compare_kv(c: &Compare, kv: &KeyValue) -> bool {
    let number = |n: Option<i64>, actual: i64| actual.cmp(&n.unwrap_or(0));
    let ordering = match CompareTarget::try_from(c.target) {
        Ok(CompareTarget::Value) => {
            let wanted: &[u8] = match &c.target_union {
                Some(TargetUnion::Value(v)) => v,
                _ => &[],
            };
            kv.value.as_slice().cmp(wanted)
        }
        Ok(CompareTarget::Create) => number(
            match c.target_union {
                Some(TargetUnion::CreateRevision(n)) => Some(n),
                _ => None,
            },
            kv.create_revision,
        ),
        Ok(CompareTarget::Mod) => number(
            match c.target_union {
                Some(TargetUnion::ModRevision(n)) => Some(n),
                _ => None,
            },
            kv.mod_revision,
        ),
        Ok(CompareTarget::Version) => number(
            match c.target_union {
                Some(TargetUnion::Version(n)) => Some(n),
                _ => None,
            },
            kv.version,
        ),
        Ok(CompareTarget::Lease) => number(
            match c.target_union {
                Some(TargetUnion::Lease(n)) => Some(n),
                _ => None,
            },
            kv.lease,
        ),
        Err(_) => std::cmp::Ordering::Equal,
    };
    match CompareResult::try_from(c.result) {
        Ok(CompareResult::Equal) => ordering.is_eq(),
        Ok(CompareResult::NotEqual) => ordering.is_ne(),
        Ok(CompareResult::Greater) => ordering.is_gt(),
        Ok(CompareResult::Less) => ordering.is_lt(),
        Err(_) => true,
    }
}

/// etcd's `checkTxnRequest`: op counts, empty keys, and each op's own checks.
fn check_txn_request(t: &TxnRequest, max_ops: usize) -> Result<(), EtcdError> {
    let ops = t.compare.len().max(t.success.len()).max(t.failure.len());
    if ops > max_ops {
        return Err(EtcdError::TooManyOps);
    }
    if t.compare.iter().any(|c| c.key.is_empty()) {
        return Err(EtcdError::EmptyKey);
    }
    for op in t.success.iter().chain(&t.failure) {
        check_request_op(op, max_ops - ops)?;
    }
    Ok(())
}

fn check_request_op(op: &RequestOp, max_ops: usize) -> Result<(), EtcdError> {
    match &op.request {
        Some(Request::RequestRange(r)) => check_range_request(r),
        Some(Request::RequestPut(p)) => check_put_request(p),
        Some(Request::RequestDeleteRange(d)) if d.key.is_empty() => Err(EtcdError::EmptyKey),
        Some(Request::RequestDeleteRange(_)) => Ok(()),
        Some(Request::RequestTxn(inner)) => check_txn_request(inner, max_ops),
        None => Err(EtcdError::KeyNotFound),
    }
}

/// etcd's `checkIntervals`: within one branch (nested txns included), no key is put twice
/// and no key put is also deleted. A nested txn's two branches may put the same key, since
/// only one runs.
fn check_intervals(ops: &[RequestOp]) -> Result<(BTreeSet<Vec<u8>>, Vec<KeyRange>), EtcdError> {
    let mut dels: Vec<KeyRange> = ops
        .iter()
        .filter_map(|op| match &op.request {
            Some(Request::RequestDeleteRange(d)) => Some(KeyRange::new(&d.key, &d.range_end)),
            _ => None,
        })
        .collect();
    let mut puts = BTreeSet::new();
    for op in ops {
        let Some(Request::RequestTxn(inner)) = &op.request else {
            continue;
        };
        let (puts_then, dels_then) = check_intervals(&inner.success)?;
        let (puts_else, dels_else) = check_intervals(&inner.failure)?;
        for key in &puts_then {
            if puts.contains(key) || deleted(&dels, key) {
                return Err(EtcdError::DuplicateKey);
            }
            puts.insert(key.clone());
        }
        for key in &puts_else {
            if (puts.contains(key) && !puts_then.contains(key)) || deleted(&dels, key) {
                return Err(EtcdError::DuplicateKey);
            }
            puts.insert(key.clone());
        }
        dels.extend(dels_then);
        dels.extend(dels_else);
    }
    for op in ops {
        let Some(Request::RequestPut(p)) = &op.request else {
            continue;
        };
        if puts.contains(&p.key) || deleted(&dels, &p.key) {
            return Err(EtcdError::DuplicateKey);
        }
        puts.insert(p.key.clone());
    }
    Ok((puts, dels))
}

fn deleted(dels: &[KeyRange], key: &[u8]) -> bool {
    dels.iter().any(|r| r.contains(key))
}

//! The `KV` requests on their own: Range, Put, DeleteRange and Compact, with etcd's checks
//! (`v3rpc/key.go`) and its apply rules (`etcdserver/txn`). Txn, which combines them, is in
//! `txn.rs`; the versions themselves are the store's.

use super::key_range::KeyRange;
use super::{Batch, Etcd, EtcdError};
use crate::mvccpb::event::EventType;
use crate::mvccpb::{Event, KeyValue};
use crate::pb::range_request::{SortOrder, SortTarget};
use crate::pb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse,
};

/// What etcd checks of a range before reading anything.
pub(super) fn check_range_request(r: &RangeRequest) -> Result<(), EtcdError> {
    if r.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    if SortOrder::try_from(r.sort_order).is_err() || SortTarget::try_from(r.sort_target).is_err() {
        return Err(EtcdError::InvalidSortOption);
    }
    Ok(())
}

/// What etcd checks of a put before applying it.
pub(super) fn check_put_request(p: &PutRequest) -> Result<(), EtcdError> {
    if p.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    if p.ignore_value && !p.value.is_empty() {
        return Err(EtcdError::ValueProvided);
    }
    if p.ignore_lease && p.lease != 0 {
        return Err(EtcdError::LeaseProvided);
    }
    Ok(())
}

impl Etcd {
    /// `KV.Range`.
    pub fn range(&mut self, r: &RangeRequest, now_ms: u64) -> Result<RangeResponse, EtcdError> {
        self.advance(now_ms);
        check_range_request(r)?;
        let mut response = self.range_at(r, self.revision)?;
        response.header = Some(self.header(self.revision));
        Ok(response)
    }

    /// A range read when the store's revision is `current` (inside a txn, the txn's).
    pub(super) fn range_at(
        &self,
        r: &RangeRequest,
        current: i64,
    ) -> Result<RangeResponse, EtcdError> {
        if r.revision > current {
            return Err(EtcdError::FutureRev);
        }
        let at = if r.revision <= 0 { current } else { r.revision };
        if at < self.compacted {
            return Err(EtcdError::Compacted);
        }
        let range = KeyRange::new(&r.key, &r.range_end);
        let mut kvs: Vec<KeyValue> = self.store.range(&range, at).cloned().collect();
        let count = kvs.len() as i64;
        if r.count_only {
            return Ok(RangeResponse {
                header: Etcd::bare_header(current),
                kvs: Vec::new(),
                more: false,
                count,
            });
        }
        // Filters, sorting and the limit come in etcd's order; `count` ignores all three.
        kvs.retain(|kv| {
            (r.max_mod_revision == 0 || kv.mod_revision <= r.max_mod_revision)
                && (r.min_mod_revision == 0 || kv.mod_revision >= r.min_mod_revision)
                && (r.max_create_revision == 0 || kv.create_revision <= r.max_create_revision)
                && (r.min_create_revision == 0 || kv.create_revision >= r.min_create_revision)
        });
        sort(&mut kvs, r);
        let mut more = false;
        if r.limit > 0 && kvs.len() as i64 > r.limit {
            kvs.truncate(r.limit as usize);
            more = true;
        }
        if r.keys_only {
            for kv in &mut kvs {
                kv.value.clear();
            }
        }
        Ok(RangeResponse {
            header: Etcd::bare_header(current),
            kvs,
            more,
            count,
        })
    }

    /// `KV.Put`.
    pub fn put(&mut self, p: &PutRequest, now_ms: u64) -> Result<PutResponse, EtcdError> {
        self.advance(now_ms);
        check_put_request(p)?;
        self.check_put(p)?;
        let mut batch = self.begin();
        let mut response = self.apply_put(&mut batch, p);
        let revision = self.commit(batch);
        response.header = Some(self.header(revision));
        Ok(response)
    }

    /// What a put needs of the store: its lease, and for `ignore_*` the key itself.
    pub(super) fn check_put(&self, p: &PutRequest) -> Result<(), EtcdError> {
        if p.lease != 0 && self.lessor.get(p.lease).is_none() {
            return Err(EtcdError::LeaseNotFound);
        }
        if (p.ignore_value || p.ignore_lease) && self.store.get(&p.key, self.revision).is_none() {
            return Err(EtcdError::KeyNotFound);
        }
        Ok(())
    }

    /// Writes a checked put into `batch`.
    pub(super) fn apply_put(&mut self, batch: &mut Batch, p: &PutRequest) -> PutResponse {
        let revision = batch.revision();
        let prev = self.store.get(&p.key, revision).cloned();
        let (create_revision, version, old_lease) = match &prev {
            Some(kv) => (kv.create_revision, kv.version + 1, kv.lease),
            None => (revision, 1, 0),
        };
        let value = match (&prev, p.ignore_value) {
            (Some(kv), true) => kv.value.clone(),
            _ => p.value.clone(),
        };
        let lease = match (&prev, p.ignore_lease) {
            (Some(kv), true) => kv.lease,
            _ => p.lease,
        };
        let kv = KeyValue {
            key: p.key.clone(),
            create_revision,
            mod_revision: revision,
            version,
            value,
            lease,
        };
        self.store.put(kv.clone());
        if old_lease != lease {
            if old_lease != 0 {
                self.lessor.detach(old_lease, &p.key);
            }
            if lease != 0 {
                self.lessor.attach(lease, &p.key);
            }
        }
        batch.events.push(Event {
            r#type: EventType::Put as i32,
            kv: Some(kv),
            prev_kv: prev.clone(),
        });
        PutResponse {
            header: Etcd::bare_header(revision),
            prev_kv: if p.prev_kv { prev } else { None },
        }
    }

    /// `KV.DeleteRange`.
    pub fn delete_range(
        &mut self,
        d: &DeleteRangeRequest,
        now_ms: u64,
    ) -> Result<DeleteRangeResponse, EtcdError> {
        self.advance(now_ms);
        if d.key.is_empty() {
            return Err(EtcdError::EmptyKey);
        }
        let mut batch = self.begin();
        let mut response = self.apply_delete(&mut batch, d);
        let revision = self.commit(batch);
        response.header = Some(self.header(revision));
        Ok(response)
    }

    /// Writes a delete into `batch`: one event per live key in the range, in key order.
    pub(super) fn apply_delete(
        &mut self,
        batch: &mut Batch,
        d: &DeleteRangeRequest,
    ) -> DeleteRangeResponse {
        let revision = batch.revision();
        let range = KeyRange::new(&d.key, &d.range_end);
        let doomed: Vec<KeyValue> = self.store.range(&range, revision).cloned().collect();
        for kv in &doomed {
            self.delete_key(batch, kv.clone());
        }
        DeleteRangeResponse {
            header: Etcd::bare_header(batch.read_revision()),
            deleted: doomed.len() as i64,
            prev_kvs: if d.prev_kv { doomed } else { Vec::new() },
        }
    }

    /// Deletes the live `prev` in `batch`. The event's key-value is etcd's tombstone: the key
    /// and the deleting revision, nothing else.
    pub(super) fn delete_key(&mut self, batch: &mut Batch, prev: KeyValue) {
        let revision = batch.revision();
        self.store.delete(&prev.key, revision);
        if prev.lease != 0 {
            self.lessor.detach(prev.lease, &prev.key);
        }
        batch.events.push(Event {
            r#type: EventType::Delete as i32,
            kv: Some(KeyValue {
                key: prev.key.clone(),
                mod_revision: revision,
                ..Default::default()
            }),
            prev_kv: Some(prev),
        });
    }

    /// `KV.Compact`: forgets the history before `revision`; reads and watches from below it
    /// are refused from then on.
    pub fn compact(
        &mut self,
        c: &CompactionRequest,
        now_ms: u64,
    ) -> Result<CompactionResponse, EtcdError> {
        self.advance(now_ms);
        if c.revision <= self.compacted {
            return Err(EtcdError::Compacted);
        }
        if c.revision > self.revision {
            return Err(EtcdError::FutureRev);
        }
        self.compacted = c.revision;
        self.store.compact(c.revision);
        self.watch.compact(c.revision);
        Ok(CompactionResponse {
            header: Some(self.header(self.revision)),
        })
    }
}

/// etcd's ordering: by key as read unless asked otherwise; a target other than the key with
/// no order means ascending. Ties keep key order.
fn sort(kvs: &mut [KeyValue], r: &RangeRequest) {
    let target = r.sort_target();
    let mut order = r.sort_order();
    if target != SortTarget::Key && order == SortOrder::None {
        order = SortOrder::Ascend;
    }
    if order == SortOrder::None || (target == SortTarget::Key && order == SortOrder::Ascend) {
        return;
    }
    let cmp = |a: &KeyValue, b: &KeyValue| match target {
        SortTarget::Key => a.key.cmp(&b.key),
        SortTarget::Version => a.version.cmp(&b.version),
        SortTarget::Create => a.create_revision.cmp(&b.create_revision),
        SortTarget::Mod => a.mod_revision.cmp(&b.mod_revision),
        SortTarget::Value => a.value.cmp(&b.value),
    };
    match order {
        SortOrder::Descend => kvs.sort_by(|a, b| cmp(b, a)),
        _ => kvs.sort_by(cmp),
    }
}

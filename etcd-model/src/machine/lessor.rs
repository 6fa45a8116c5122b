//! Leases: their ids, granted TTLs, expiry times in milliseconds and the keys attached to
//! each. Owns only the bookkeeping; deleting a revoked lease's keys is a write, done by
//! [`super::Etcd`], which also decides when time has moved.

use std::collections::{BTreeMap, BTreeSet};

/// One granted lease.
#[derive(Debug, Clone)]
pub struct Lease {
    pub id: i64,
    /// The TTL granted (after the minimum is applied), in seconds.
    pub ttl: i64,
    /// When it expires, in the model's milliseconds.
    pub expiry_ms: u64,
    pub keys: BTreeSet<Vec<u8>>,
}

/// Every live lease.
#[derive(Debug, Clone)]
pub struct Lessor {
    leases: BTreeMap<i64, Lease>,
    next_id: i64,
}

impl Lessor {
    pub fn new(first_id: i64) -> Lessor {
        Lessor {
            leases: BTreeMap::new(),
            next_id: first_id.max(1),
        }
    }

    /// An id for a grant that asked for none: positive and not in use, as etcd's.
    pub fn next_free_id(&mut self) -> i64 {
        while self.leases.contains_key(&self.next_id) {
            self.next_id = Self::step(self.next_id);
        }
        let id = self.next_id;
        self.next_id = Self::step(id);
        id
    }

    fn step(id: i64) -> i64 {
        if id == i64::MAX {
            1
        } else {
            id + 1
        }
    }

    pub fn get(&self, id: i64) -> Option<&Lease> {
        self.leases.get(&id)
    }

    pub fn get_mut(&mut self, id: i64) -> Option<&mut Lease> {
        self.leases.get_mut(&id)
    }

    pub fn insert(&mut self, lease: Lease) {
        self.leases.insert(lease.id, lease);
    }

    pub fn remove(&mut self, id: i64) -> Option<Lease> {
        self.leases.remove(&id)
    }

    pub fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.leases.keys().copied()
    }

    pub fn attach(&mut self, id: i64, key: &[u8]) {
        if let Some(lease) = self.leases.get_mut(&id) {
            lease.keys.insert(key.to_vec());
        }
    }

    pub fn detach(&mut self, id: i64, key: &[u8]) {
        if let Some(lease) = self.leases.get_mut(&id) {
            lease.keys.remove(key);
        }
    }

    /// The lease that expires first (the lower id first among equals), if any.
    pub fn first_expiry(&self) -> Option<(u64, i64)> {
        self.leases.values().map(|l| (l.expiry_ms, l.id)).min()
    }
}

//! Which certificate owns which store under bind-store-identity, in memory: the records the
//! meta store holds (`placement/store_bindings/<id>`: the owner's identity, hex), both ways
//! round, and their bytes. Records are only ever added, so what a connection's seat has learnt
//! from them stays true. Loading and writing them is `store_identity`'s; the rules are `auth`'s.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::auth::{CertIdentity, StoreSeat};

/// The owner recorded for a store whose record does not decode: no certificate hashes to it,
/// so only a certificate that names the store acts for it. A damaged record fails closed.
const UNREADABLE: CertIdentity = CertIdentity([0xff; 32]);

#[derive(Default)]
struct Records {
    by_store: HashMap<u64, CertIdentity>,
    by_identity: HashMap<CertIdentity, u64>,
}

#[derive(Default)]
pub struct StoreBindings {
    records: Mutex<Records>,
    /// One claim at a time: each is judged against the records the one before it left.
    pub(super) claims: tokio::sync::Mutex<()>,
}

impl StoreBindings {
    fn records(&self) -> MutexGuard<'_, Records> {
        // Each edit is one insert into each map, valid even if interrupted.
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The store a certificate was bound to by its first registration.
    pub fn store_of(&self, identity: CertIdentity) -> Option<u64> {
        self.records().by_identity.get(&identity).copied()
    }

    /// The certificate recorded as owning `store`.
    pub fn owner_of(&self, store: u64) -> Option<CertIdentity> {
        self.records().by_store.get(&store).copied()
    }

    pub(super) fn insert(&self, store: u64, identity: CertIdentity) {
        let mut records = self.records();
        records.by_store.insert(store, identity);
        // A certificate that names its store may own several records over renewals of
        // others'; the first store stays the one it is found bound to.
        records.by_identity.entry(identity).or_insert(store);
    }

    /// Replaces the records (a term's load), or empties them (`[]`: the term ended).
    pub fn reset(&self, mut loaded: Vec<(u64, CertIdentity)>) {
        let mut records = Records::default();
        // The lowest store first, so `by_identity` is the same whatever the scan order.
        loaded.sort();
        for (store, identity) in loaded {
            records.by_store.insert(store, identity);
            records.by_identity.entry(identity).or_insert(store);
        }
        *self.records() = records;
    }

    /// The store a seat speaks for: what it knows, else what the records say (learnt then).
    pub fn resolve(&self, seat: &StoreSeat) -> Option<u64> {
        seat.bound().or_else(|| {
            let id = self.store_of(seat.identity())?;
            seat.learn(id);
            Some(id)
        })
    }
}

/// A record's bytes: the identity in hex.
pub fn encode_binding(identity: CertIdentity) -> Vec<u8> {
    identity.to_hex().into_bytes()
}

/// A loaded record: the store from its key, the owner from its value. A key that names no
/// store is skipped (no store can be named by it); a value that is no identity fails closed.
pub fn decode_binding(prefix: &[u8], key: &[u8], value: &[u8]) -> Option<(u64, CertIdentity)> {
    let id: u64 = std::str::from_utf8(key.strip_prefix(prefix)?)
        .ok()?
        .parse()
        .ok()?;
    let owner = std::str::from_utf8(value)
        .ok()
        .and_then(CertIdentity::from_hex)
        .unwrap_or_else(|| {
            tracing::warn!(
                store = id,
                "a store binding record does not decode: only a certificate naming the store \
                 (meridian://store/{id}) may act for it"
            );
            UNREADABLE
        });
    Some((id, owner))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_decode_as_written_and_damage_fails_closed() {
        let prefix = b"/p/".to_vec();
        let id = CertIdentity([3; 32]);
        let key = b"/p/00000000000000000042".to_vec();
        assert_eq!(
            decode_binding(&prefix, &key, &encode_binding(id)),
            Some((42, id))
        );
        assert_eq!(
            decode_binding(&prefix, &key, b"junk"),
            Some((42, UNREADABLE))
        );
        assert_eq!(decode_binding(&prefix, b"/p/x", &encode_binding(id)), None);
    }

    #[test]
    fn a_seat_learns_its_store_from_the_records() {
        let b = StoreBindings::default();
        let id = CertIdentity([5; 32]);
        b.reset(vec![(9, id), (4, id)]);
        let seat = StoreSeat::new(id, "s", None);
        assert_eq!(b.resolve(&seat), Some(4), "the lowest store of an identity");
        assert_eq!(seat.bound(), Some(4));
        assert_eq!(b.owner_of(9), Some(id));
        b.reset(Vec::new());
        assert_eq!(b.owner_of(9), None);
    }
}

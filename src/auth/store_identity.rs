//! Store identity (`[security] bind-store-identity`): which store a `store` certificate speaks
//! for, and the rules that decide whether a call naming a store may go on. A certificate is
//! bound to one store: the one it names (`meridian://store/<id>`), or the first one it
//! registers, recorded durably. Bindings are never undone, so a connection that has learnt its
//! store keeps it in an atomic and compares it per item without a lock.
//!
//! Pure: the records of who owns which store are passed in. Persisting a claim and looking the
//! records up are the placement shell's (`server::placement::store_identity`); computing the
//! identity from a verified certificate is `tls`'s. Must not touch TLS or I/O.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Who a certificate is, for binding: the SHA-256 of its subject and its DNS and IP names, so
/// a renewed certificate with the same names is the same identity whatever its key or serial.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CertIdentity(pub [u8; 32]);

impl CertIdentity {
    pub fn to_hex(self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The identity `to_hex` wrote; `None` for anything else.
    pub fn from_hex(text: &str) -> Option<CertIdentity> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            let s = std::str::from_utf8(pair).ok()?;
            out[i] = u8::from_str_radix(s, 16).ok()?;
        }
        Some(CertIdentity(out))
    }
}

impl fmt::Debug for CertIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CertIdentity({}…)", &self.to_hex()[..12])
    }
}

/// What one connection with a `store` certificate holds while bind-store-identity is on: the
/// certificate's identity and the store it speaks for once known.
#[derive(Debug)]
pub struct StoreSeat {
    identity: CertIdentity,
    /// For messages: the certificate's common name or first DNS name.
    name: Box<str>,
    /// The store the certificate names (`meridian://store/<id>`), if it names one.
    named: Option<u64>,
    /// The store it speaks for, 0 while not known yet.
    bound: AtomicU64,
}

impl StoreSeat {
    pub fn new(identity: CertIdentity, name: &str, named: Option<u64>) -> StoreSeat {
        StoreSeat {
            identity,
            name: name.into(),
            named: named.filter(|id| *id != 0),
            bound: AtomicU64::new(named.unwrap_or(0)),
        }
    }

    pub fn identity(&self) -> CertIdentity {
        self.identity
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn named(&self) -> Option<u64> {
        self.named
    }

    /// The store this connection speaks for, if known: one atomic load.
    #[inline]
    pub fn bound(&self) -> Option<u64> {
        match self.bound.load(Ordering::Relaxed) {
            0 => None,
            id => Some(id),
        }
    }

    /// Remembers the binding found in the records or made by a claim. The first one stays:
    /// bindings are never undone.
    pub fn learn(&self, id: u64) {
        let _ = self
            .bound
            .compare_exchange(0, id, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// Why a call naming a store was refused; every message names the certificate and the store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreDenied {
    #[error(
        "certificate `{cert}` speaks for store {bound}, not store {target} \
         (bind-store-identity)"
    )]
    OtherStore {
        cert: String,
        bound: u64,
        target: u64,
    },
    #[error(
        "store {target} is bound to another certificate than `{cert}` \
         (bind-store-identity)"
    )]
    Owned { cert: String, target: u64 },
    #[error(
        "certificate `{cert}` is bound to no store yet; it registers its \
         store (PutStore) before it acts for store {target} (bind-store-identity)"
    )]
    Unbound { cert: String, target: u64 },
    #[error(
        "a region heartbeat from certificate `{cert}` must name its leader \
         peer (bind-store-identity)"
    )]
    NoLeader { cert: String },
    /// A report about a region only its leader makes (its buckets), from a certificate whose
    /// store does not lead it as far as this leader knows.
    #[error(
        "certificate `{cert}` speaks for store {bound}, which does not lead region \
         {region} (bind-store-identity)"
    )]
    NotLeader {
        cert: String,
        bound: u64,
        region: u64,
    },
    /// A request about a region (a split) from a certificate whose store holds no peer of it
    /// as far as this leader knows.
    #[error(
        "certificate `{cert}` speaks for store {bound}, which holds no peer of region \
         {region} (bind-store-identity)"
    )]
    NoPeer {
        cert: String,
        bound: u64,
        region: u64,
    },
}

/// The hot path's rule, for calls that cannot bind (region heartbeats, reports): the call must
/// name the store the connection speaks for.
#[inline]
pub fn check(seat: &StoreSeat, bound: Option<u64>, target: u64) -> Result<(), StoreDenied> {
    match bound {
        Some(b) if b == target => Ok(()),
        Some(b) => Err(StoreDenied::OtherStore {
            cert: seat.name().to_string(),
            bound: b,
            target,
        }),
        None => Err(StoreDenied::Unbound {
            cert: seat.name().to_string(),
            target,
        }),
    }
}

/// What a call that may bind (Bootstrap, PutStore, StoreHeartbeat) is to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on: the call names the connection's store, whose ownership is recorded.
    Allow,
    /// Record that the certificate owns `target`, durably, then go on.
    Claim,
    Deny(StoreDenied),
}

/// The rule for a call that may bind. `bound` is the store the seat speaks for (named, or
/// found in the records); `owner` is the identity recorded for `target`, if any.
///
/// - A bound certificate acts only for its store; the first time its store is seen with no
///   recorded owner (a certificate that names it, a store registered before binding was on),
///   the ownership is recorded.
/// - An unbound certificate claims a store nobody owns and is refused one somebody else owns.
/// - A certificate that names its store is the CA's word: it acts for that store whoever the
///   records say owns it.
pub fn judge(
    seat: &StoreSeat,
    bound: Option<u64>,
    owner: Option<CertIdentity>,
    target: u64,
) -> Verdict {
    if let Some(b) = bound.filter(|b| *b != target) {
        return Verdict::Deny(StoreDenied::OtherStore {
            cert: seat.name().to_string(),
            bound: b,
            target,
        });
    }
    match owner {
        None => Verdict::Claim,
        Some(o) if o == seat.identity() => Verdict::Allow,
        Some(_) if seat.named() == Some(target) => Verdict::Allow,
        Some(_) => Verdict::Deny(StoreDenied::Owned {
            cert: seat.name().to_string(),
            target,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn identity(n: u8) -> CertIdentity {
        CertIdentity([n; 32])
    }

    #[test]
    fn identities_round_trip_through_hex_and_junk_is_none() {
        let id = CertIdentity(std::array::from_fn(|i| i as u8 * 7));
        assert_eq!(CertIdentity::from_hex(&id.to_hex()), Some(id));
        assert_eq!(CertIdentity::from_hex("zz"), None);
        assert_eq!(CertIdentity::from_hex(&"g".repeat(64)), None);
    }

    #[test]
    fn a_seat_learns_once_and_a_named_one_starts_bound() {
        let seat = StoreSeat::new(identity(1), "tikv-1", None);
        assert_eq!(seat.bound(), None);
        seat.learn(4);
        seat.learn(5);
        assert_eq!(seat.bound(), Some(4));
        let named = StoreSeat::new(identity(2), "tikv-2", Some(9));
        assert_eq!(named.bound(), Some(9));
    }

    #[test]
    fn the_cases_by_name() {
        let me = identity(1);
        let other = identity(2);
        let seat = StoreSeat::new(me, "a", None);
        assert_eq!(judge(&seat, None, None, 3), Verdict::Claim);
        assert_eq!(judge(&seat, None, Some(me), 3), Verdict::Allow);
        assert!(matches!(
            judge(&seat, None, Some(other), 3),
            Verdict::Deny(StoreDenied::Owned { target: 3, .. })
        ));
        assert_eq!(judge(&seat, Some(3), Some(me), 3), Verdict::Allow);
        assert!(matches!(
            judge(&seat, Some(3), Some(me), 4),
            Verdict::Deny(StoreDenied::OtherStore {
                bound: 3,
                target: 4,
                ..
            })
        ));
        let named = StoreSeat::new(me, "n", Some(7));
        assert_eq!(judge(&named, Some(7), None, 7), Verdict::Claim);
        assert_eq!(judge(&named, Some(7), Some(other), 7), Verdict::Allow);
        assert!(check(&seat, None, 3).is_err());
        assert!(check(&seat, Some(3), 3).is_ok());
    }

    proptest! {
        /// Whatever the records say, a certificate bound to one store never acts for another,
        /// claims only a store nobody owns, and is let into a store somebody else owns only
        /// when it names that store itself.
        #[test]
        fn nobody_acts_for_a_store_that_is_not_theirs(
            named in proptest::option::of(1u64..6),
            learned in proptest::option::of(1u64..6),
            owner in proptest::option::of(0u8..3),
            target in 1u64..6,
        ) {
            let me = identity(1);
            let seat = StoreSeat::new(me, "s", named);
            let bound = named.or(learned);
            let owner = owner.map(identity);
            let verdict = judge(&seat, bound, owner, target);
            if let Some(b) = bound {
                if b != target {
                    let other = matches!(verdict, Verdict::Deny(StoreDenied::OtherStore { .. }));
                    prop_assert!(other, "{:?}", verdict);
                }
            }
            match verdict {
                Verdict::Claim => prop_assert!(owner.is_none()),
                Verdict::Allow => prop_assert!(
                    owner == Some(me) || (named == Some(target) && owner.is_some())
                ),
                Verdict::Deny(_) => {}
            }
            let checked = check(&seat, bound, target);
            prop_assert_eq!(checked.is_ok(), bound == Some(target));
        }
    }
}

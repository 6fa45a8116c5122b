//! The safe point rules (PD's `UpdateGCSafePoint` and `UpdateServiceGCSafePoint`, v1 API):
//! - the GC safe point only moves forward; a smaller proposal leaves it and is answered with
//!   the current one;
//! - a service safe point is set only at or above the current minimum of all live service safe
//!   points (setting one below it would claim data GC may already have collected);
//! - a TTL of zero or less removes the service's safe point; expired ones are dropped when the
//!   minimum is computed;
//! - with no live service safe point, the minimum is `gc_worker`'s, created at the GC safe point
//!   with no expiry, as PD does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The service id of TiDB's GC worker; PD creates its entry when none exists.
pub const GC_WORKER: &str = "gc_worker";

/// Longest service id kept; more is a malformed request, not a service.
pub const MAX_SERVICE_ID: usize = 256;

/// A service id outside `1..=MAX_SERVICE_ID` bytes (its length).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("service id of {0} bytes: it must be 1..={MAX_SERVICE_ID}")]
pub struct BadServiceId(pub usize);

/// Why a stored service safe point was not read back.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not a service safe point: {0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    ServiceId(#[from] BadServiceId),
}

fn check_service_id(id: &str) -> Result<(), BadServiceId> {
    if id.is_empty() || id.len() > MAX_SERVICE_ID {
        return Err(BadServiceId(id.len()));
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceSafePoint {
    pub service_id: String,
    /// Unix seconds; `i64::MAX` never expires.
    pub expired_at: i64,
    pub safe_point: u64,
}

/// What `update_gc` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcUpdate {
    /// Moved forward to this value: persist it, then answer it.
    Advanced(u64),
    /// The proposal was not above the current one, which is answered unchanged.
    Kept(u64),
}

/// A change to persist before the answer is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceChange {
    Put(ServiceSafePoint),
    Remove(String),
}

/// What `update_service` decided: the changes to persist and the minimum to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceUpdate {
    pub changes: Vec<ServiceChange>,
    pub min: ServiceSafePoint,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SafePoints {
    gc: u64,
    services: BTreeMap<String, ServiceSafePoint>,
}

impl SafePoints {
    /// The state as loaded from storage.
    pub fn new(gc: u64, services: impl IntoIterator<Item = ServiceSafePoint>) -> SafePoints {
        SafePoints {
            gc,
            services: services
                .into_iter()
                .map(|s| (s.service_id.clone(), s))
                .collect(),
        }
    }

    pub fn gc(&self) -> u64 {
        self.gc
    }

    pub fn services(&self) -> impl Iterator<Item = &ServiceSafePoint> {
        self.services.values()
    }

    /// Decides a proposed GC safe point. Apply the decision with `apply_gc` once persisted.
    pub fn update_gc(&self, proposed: u64) -> GcUpdate {
        if proposed > self.gc {
            GcUpdate::Advanced(proposed)
        } else {
            GcUpdate::Kept(self.gc)
        }
    }

    pub fn apply_gc(&mut self, update: GcUpdate) {
        if let GcUpdate::Advanced(value) = update {
            self.gc = self.gc.max(value);
        }
    }

    /// Decides a service's safe point at `now` (unix seconds). Apply the result with
    /// `apply_service` once its changes are persisted.
    pub fn update_service(
        &self,
        service_id: &str,
        ttl_secs: i64,
        safe_point: u64,
        now: i64,
    ) -> Result<ServiceUpdate, BadServiceId> {
        check_service_id(service_id)?;
        let mut next = self.clone();
        let mut changes = Vec::new();
        if ttl_secs <= 0 && next.services.remove(service_id).is_some() {
            changes.push(ServiceChange::Remove(service_id.to_string()));
        }
        let mut min = next.min_live(now, &mut changes);
        if ttl_secs > 0 && safe_point >= min.safe_point {
            let expired_at = now.checked_add(ttl_secs).unwrap_or(i64::MAX);
            let entry = ServiceSafePoint {
                service_id: service_id.to_string(),
                expired_at,
                safe_point,
            };
            next.services.insert(service_id.to_string(), entry.clone());
            changes.push(ServiceChange::Put(entry));
            if min.service_id == service_id {
                min = next.min_live(now, &mut changes);
            }
        }
        Ok(ServiceUpdate { changes, min })
    }

    pub fn apply_service(&mut self, update: &ServiceUpdate) {
        for change in &update.changes {
            match change {
                ServiceChange::Put(s) => {
                    self.services.insert(s.service_id.clone(), s.clone());
                }
                ServiceChange::Remove(id) => {
                    self.services.remove(id);
                }
            }
        }
    }

    /// The live minimum; drops expired entries (recording their removal) and creates
    /// `gc_worker`'s entry when nothing is left.
    fn min_live(&mut self, now: i64, changes: &mut Vec<ServiceChange>) -> ServiceSafePoint {
        let expired: Vec<String> = self
            .services
            .values()
            .filter(|s| s.expired_at <= now)
            .map(|s| s.service_id.clone())
            .collect();
        for id in expired {
            self.services.remove(&id);
            changes.push(ServiceChange::Remove(id));
        }
        if let Some(min) = self.services.values().min_by_key(|s| s.safe_point) {
            return min.clone();
        }
        let worker = ServiceSafePoint {
            service_id: GC_WORKER.to_string(),
            expired_at: i64::MAX,
            safe_point: self.gc,
        };
        self.services.insert(GC_WORKER.to_string(), worker.clone());
        changes.push(ServiceChange::Put(worker.clone()));
        worker
    }
}

/// The stored form of a service safe point (JSON, as PD stores it).
pub fn encode_service(s: &ServiceSafePoint) -> Vec<u8> {
    serde_json::to_vec(s).unwrap_or_default()
}

/// Reads a stored service safe point back; anything malformed is an error, not a guess.
pub fn decode_service(bytes: &[u8]) -> Result<ServiceSafePoint, DecodeError> {
    let s: ServiceSafePoint = serde_json::from_slice(bytes)?;
    check_service_id(&s.service_id)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn apply_gc(sp: &mut SafePoints, proposed: u64) -> u64 {
        let d = sp.update_gc(proposed);
        sp.apply_gc(d);
        match d {
            GcUpdate::Advanced(v) | GcUpdate::Kept(v) => v,
        }
    }

    #[test]
    fn the_gc_safe_point_never_moves_back() {
        let mut sp = SafePoints::default();
        assert_eq!(apply_gc(&mut sp, 100), 100);
        assert_eq!(apply_gc(&mut sp, 50), 100);
        assert_eq!(sp.update_gc(100), GcUpdate::Kept(100));
        assert_eq!(apply_gc(&mut sp, 101), 101);
    }

    #[test]
    fn a_service_below_the_minimum_is_refused_and_told_the_minimum() {
        let mut sp = SafePoints::new(10, []);
        let u = sp.update_service("br", 60, 50, 1000).unwrap();
        // No service yet: gc_worker's entry at the GC safe point (10) is the minimum, 50 is above.
        assert_eq!(u.min.service_id, GC_WORKER);
        sp.apply_service(&u);
        let u = sp.update_service("cdc", 60, 5, 1000).unwrap();
        assert_eq!(u.min.safe_point, 10);
        assert!(!u
            .changes
            .iter()
            .any(|c| matches!(c, ServiceChange::Put(s) if s.service_id == "cdc")));
    }

    #[test]
    fn the_minimum_moves_on_when_its_owner_advances() {
        let mut sp = SafePoints::new(0, []);
        let u = sp.update_service("br", 60, 30, 1000).unwrap();
        sp.apply_service(&u);
        let u = sp.update_service(GC_WORKER, 60, 40, 1000).unwrap();
        sp.apply_service(&u);
        let u = sp.update_service("br", 60, 50, 1000).unwrap();
        sp.apply_service(&u);
        assert_eq!(u.min.service_id, GC_WORKER);
        assert_eq!(u.min.safe_point, 40);
    }

    #[test]
    fn expired_services_are_dropped_and_ttl_zero_removes() {
        let mut sp = SafePoints::new(0, []);
        let u = sp.update_service("br", 10, 30, 1000).unwrap();
        sp.apply_service(&u);
        let u = sp.update_service("cdc", 100, 60, 1000).unwrap();
        sp.apply_service(&u);
        // At 1010 br has expired.
        let u = sp.update_service("cdc", 100, 70, 1010).unwrap();
        assert!(u.changes.contains(&ServiceChange::Remove("br".into())));
        sp.apply_service(&u);
        assert!(!sp.services().any(|s| s.service_id == "br"));
        let u = sp.update_service("cdc", 0, 0, 1011).unwrap();
        assert!(u.changes.contains(&ServiceChange::Remove("cdc".into())));
        sp.apply_service(&u);
        assert!(!sp.services().any(|s| s.service_id == "cdc"));
    }

    #[test]
    fn stored_entries_round_trip_and_garbage_is_an_error() {
        let s = ServiceSafePoint {
            service_id: "br".into(),
            expired_at: i64::MAX,
            safe_point: 7,
        };
        assert_eq!(decode_service(&encode_service(&s)).unwrap(), s);
        assert!(matches!(
            decode_service(b"{\"service_id\":\"\",\"expired_at\":1,\"safe_point\":1}"),
            Err(DecodeError::ServiceId(BadServiceId(0)))
        ));
        assert!(matches!(decode_service(b"\xff"), Err(DecodeError::Json(_))));
    }

    proptest! {
        /// Whatever the sequence of proposals, the GC safe point is the running maximum, and
        /// no live service safe point is ever set below the minimum answered just before.
        #[test]
        fn safe_points_never_step_back(
            ops in proptest::collection::vec((0u8..3, 0u64..1000, -5i64..50, 0u8..4), 1..200)
        ) {
            let mut sp = SafePoints::default();
            let mut max = 0u64;
            let mut now = 1_000i64;
            for (kind, value, ttl, service) in ops {
                now += 1;
                let id = format!("s{service}");
                if kind == 0 {
                    max = max.max(value);
                    prop_assert_eq!(apply_gc(&mut sp, value), max);
                } else {
                    let before = sp.clone().update_service("probe", 0, 0, now).unwrap().min;
                    let u = sp.update_service(&id, ttl, value, now).unwrap();
                    for c in &u.changes {
                        if let ServiceChange::Put(s) = c {
                            if s.service_id == id {
                                prop_assert!(s.safe_point >= before.safe_point);
                            }
                        }
                    }
                    sp.apply_service(&u);
                    // Every decision drops what expired.
                    prop_assert!(sp.services().all(|s| s.expired_at > now));
                }
                prop_assert_eq!(sp.gc(), max);
            }
        }
    }
}

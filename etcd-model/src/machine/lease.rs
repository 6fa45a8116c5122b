//! The `Lease` requests: grant, revoke, keep-alive, time-to-live and the list, as etcd's
//! lessor and `v3rpc/lease.go` answer them. A revocation (asked for, or an expiry found by
//! [`Etcd::advance`]) deletes the lease's keys in one revision, in key order.

use super::lessor::Lease;
use super::{Etcd, EtcdError, MAX_LEASE_TTL};
use crate::pb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse, LeaseStatus,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
};

impl Etcd {
    /// `Lease.LeaseGrant`: a TTL below the minimum is raised to it; an id of 0 lets the model
    /// choose one.
    pub fn lease_grant(
        &mut self,
        r: &LeaseGrantRequest,
        now_ms: u64,
    ) -> Result<LeaseGrantResponse, EtcdError> {
        self.advance(now_ms);
        let id = if r.id == 0 {
            self.lessor.next_free_id()
        } else {
            r.id
        };
        if r.ttl > MAX_LEASE_TTL {
            return Err(EtcdError::LeaseTtlTooLarge);
        }
        if self.lessor.get(id).is_some() {
            return Err(EtcdError::LeaseExist);
        }
        let ttl = r.ttl.max(self.config.min_lease_ttl);
        self.lessor.insert(Lease {
            id,
            ttl,
            expiry_ms: self.expiry(ttl),
            keys: Default::default(),
        });
        Ok(LeaseGrantResponse {
            header: Some(self.header(self.revision)),
            id,
            ttl,
            error: String::new(),
        })
    }

    pub(super) fn expiry(&self, ttl_secs: i64) -> u64 {
        self.now_ms
            .saturating_add((ttl_secs.max(0) as u64).saturating_mul(1000))
    }

    /// `Lease.LeaseRevoke`.
    pub fn lease_revoke(
        &mut self,
        r: &LeaseRevokeRequest,
        now_ms: u64,
    ) -> Result<LeaseRevokeResponse, EtcdError> {
        self.advance(now_ms);
        if self.lessor.get(r.id).is_none() {
            return Err(EtcdError::LeaseNotFound);
        }
        let revision = self.revoke(r.id);
        Ok(LeaseRevokeResponse {
            header: Some(self.header(revision)),
        })
    }

    /// Deletes lease `id`'s keys (one revision, if it has any) and the lease. Returns the
    /// store's revision after.
    pub(super) fn revoke(&mut self, id: i64) -> i64 {
        let keys: Vec<Vec<u8>> = self
            .lessor
            .get(id)
            .map(|l| l.keys.iter().cloned().collect())
            .unwrap_or_default();
        let mut batch = self.begin();
        for key in keys {
            if let Some(kv) = self.store.get(&key, self.revision).cloned() {
                self.delete_key(&mut batch, kv);
            }
        }
        self.lessor.remove(id);
        self.commit(batch)
    }

    /// One message of `Lease.LeaseKeepAlive`: renews the lease for its granted TTL, or
    /// answers TTL 0 when the lease is gone (never granted, revoked, expired), as etcd does
    /// instead of an error.
    pub fn lease_keep_alive(
        &mut self,
        r: &LeaseKeepAliveRequest,
        now_ms: u64,
    ) -> LeaseKeepAliveResponse {
        self.advance(now_ms);
        let header = Some(self.header(self.revision));
        let ttl = match self.lessor.get(r.id).map(|l| l.ttl) {
            Some(ttl) => {
                let expiry = self.expiry(ttl);
                if let Some(lease) = self.lessor.get_mut(r.id) {
                    lease.expiry_ms = expiry;
                }
                ttl
            }
            None => 0,
        };
        LeaseKeepAliveResponse {
            header,
            id: r.id,
            ttl,
        }
    }

    /// `Lease.LeaseTimeToLive`: the whole seconds left (truncated, as etcd's), or TTL -1 for
    /// a lease that is gone.
    pub fn lease_time_to_live(
        &mut self,
        r: &LeaseTimeToLiveRequest,
        now_ms: u64,
    ) -> LeaseTimeToLiveResponse {
        self.advance(now_ms);
        let header = Some(self.header(self.revision));
        match self.lessor.get(r.id) {
            None => LeaseTimeToLiveResponse {
                header,
                id: r.id,
                ttl: -1,
                granted_ttl: 0,
                keys: Vec::new(),
            },
            Some(lease) => LeaseTimeToLiveResponse {
                header,
                id: r.id,
                ttl: (lease.expiry_ms.saturating_sub(self.now_ms) / 1000) as i64,
                granted_ttl: lease.ttl,
                keys: if r.keys {
                    lease.keys.iter().cloned().collect()
                } else {
                    Vec::new()
                },
            },
        }
    }

    /// `Lease.LeaseLeases`: every live lease, by id.
    pub fn lease_leases(&mut self, now_ms: u64) -> LeaseLeasesResponse {
        self.advance(now_ms);
        LeaseLeasesResponse {
            header: Some(self.header(self.revision)),
            leases: self.lessor.ids().map(|id| LeaseStatus { id }).collect(),
        }
    }
}

//! The etcd state machine, pure and sans-IO: one [`Etcd`] holds the multi-version store, the
//! leases and the watchers, and each method takes a request and the current time (in
//! milliseconds, never going back) and returns etcd's answer. Watch responses are queued and
//! taken with [`Etcd::take_watch_responses`]. Nothing here reads a clock, sleeps or does I/O:
//! the gRPC shell and a simulation drive the same core.
//!
//! Revisions follow etcd: the store starts at revision 1; every write (a put, a delete that
//! deletes something, a txn with any such op, a lease revocation that deletes keys) takes the
//! next revision as a whole; reads and failed or empty writes take none.

mod error;
mod key_range;
mod kv;
mod lease;
mod lessor;
mod store;
mod txn;
mod watch;

#[cfg(test)]
mod tests;

pub use error::EtcdError;
pub use key_range::KeyRange;
pub use watch::StreamId;

use crate::mvccpb::Event;
use crate::pb::ResponseHeader;

/// etcd's `MaxLeaseTTL`: a longer grant is refused.
pub const MAX_LEASE_TTL: i64 = 9_000_000_000;

/// What identifies the model and the limits it applies, as an etcd server's flags would.
#[derive(Debug, Clone)]
pub struct Config {
    pub cluster_id: u64,
    pub member_id: u64,
    pub raft_term: u64,
    /// Shorter grants get this TTL, in seconds (etcd: 1.5 election timeouts, rounded up; 2 s
    /// with the default 1 s election timeout).
    pub min_lease_ttl: i64,
    /// etcd's `--max-txn-ops`.
    pub max_txn_ops: usize,
    /// The first id given to a grant that asks for none.
    pub first_lease_id: i64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            cluster_id: 0x6d65_7269_6469_616e,
            member_id: 1,
            raft_term: 2,
            min_lease_ttl: 2,
            max_txn_ops: 128,
            first_lease_id: 0x694d_0000_0000_0001,
        }
    }
}

/// The model's whole state.
#[derive(Debug)]
pub struct Etcd {
    config: Config,
    /// The revision of the last write.
    revision: i64,
    /// The revision of the last compaction; -1 before any, as etcd's `compactMainRev`.
    compacted: i64,
    /// The latest time seen, in milliseconds.
    now_ms: u64,
    store: store::Store,
    lessor: lessor::Lessor,
    watch: watch::Watchers,
    /// Between a leader stepping down and the next being elected: no lease expires (a demoted
    /// lessor sets every expiry to forever, and only a leader revokes).
    leaderless: bool,
}

/// The writes of one revision being made: its events, in the order applied.
pub(crate) struct Batch {
    begin: i64,
    events: Vec<Event>,
}

impl Batch {
    /// The revision these writes take.
    fn revision(&self) -> i64 {
        self.begin + 1
    }

    /// The revision a read inside the batch reports: the new one once something was written.
    fn read_revision(&self) -> i64 {
        if self.events.is_empty() {
            self.begin
        } else {
            self.begin + 1
        }
    }
}

impl Default for Etcd {
    fn default() -> Etcd {
        Etcd::new(Config::default())
    }
}

impl Etcd {
    pub fn new(config: Config) -> Etcd {
        Etcd {
            lessor: lessor::Lessor::new(config.first_lease_id),
            config,
            revision: 1,
            compacted: -1,
            now_ms: 0,
            store: store::Store::default(),
            watch: watch::Watchers::default(),
            leaderless: false,
        }
    }

    /// The revision of the last write.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// The key's value now, as a reader outside etcd would check it: no time passes and
    /// nothing expires.
    pub fn value(&self, key: &[u8]) -> Option<&[u8]> {
        self.store
            .get(key, self.revision)
            .map(|kv| kv.value.as_slice())
    }

    /// The revision of the last compaction (-1 before any).
    pub fn compacted_revision(&self) -> i64 {
        self.compacted
    }

    /// The latest time the model has seen, in milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Moves time to `now_ms` (an earlier time is ignored) and revokes every lease that has
    /// expired by then, earliest first, each as its own write; while there is no leader,
    /// nothing expires.
    pub fn advance(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
        if self.leaderless {
            return;
        }
        while let Some((expiry, id)) = self.lessor.first_expiry() {
            if expiry > self.now_ms {
                break;
            }
            self.revoke(id);
        }
    }

    /// When the next lease expires, in milliseconds, if any lease is live and a leader would
    /// revoke it.
    pub fn next_expiry(&self) -> Option<u64> {
        if self.leaderless {
            return None;
        }
        self.lessor.first_expiry().map(|(at, _)| at)
    }

    /// etcd's leader steps down at `now_ms`, after revoking what had expired by then. Until
    /// [`Etcd::elect_leader`] no lease expires: etcd's demoted lessor sets every expiry to
    /// forever, and only a leader revokes. Refusing or holding requests meanwhile is the
    /// caller's (the shell's) part, as etcd's front end does it.
    pub fn lose_leader(&mut self, now_ms: u64) {
        self.advance(now_ms);
        self.leaderless = true;
    }

    /// A new leader is elected at `now_ms`: the raft term moves on, and as etcd's
    /// `lessor.Promote(extend)` does, every lease is refreshed to expire `extend_ms` plus its
    /// whole TTL from now (no remaining TTL is checkpointed: etcd's default). A leader change
    /// therefore only ever lengthens a lease; then expiry resumes.
    pub fn elect_leader(&mut self, now_ms: u64, extend_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
        self.leaderless = false;
        self.config.raft_term += 1;
        let ids: Vec<i64> = self.lessor.ids().collect();
        for id in ids {
            let ttl = self.lessor.get(id).map_or(0, |l| l.ttl);
            let expiry = self.expiry(ttl).saturating_add(extend_ms);
            if let Some(lease) = self.lessor.get_mut(id) {
                lease.expiry_ms = expiry;
            }
        }
    }

    /// Whether etcd is between leaders.
    pub fn is_leaderless(&self) -> bool {
        self.leaderless
    }

    /// The header of a top-level response: who answers, and at which revision.
    fn header(&self, revision: i64) -> ResponseHeader {
        ResponseHeader {
            cluster_id: self.config.cluster_id,
            member_id: self.config.member_id,
            revision,
            raft_term: self.config.raft_term,
        }
    }

    /// The header etcd gives responses nested in a txn: the revision only.
    fn bare_header(revision: i64) -> Option<ResponseHeader> {
        Some(ResponseHeader {
            revision,
            ..Default::default()
        })
    }

    fn begin(&self) -> Batch {
        Batch {
            begin: self.revision,
            events: Vec::new(),
        }
    }

    /// Ends a batch: if it wrote anything, its revision becomes the store's and watchers
    /// hear of its events. Returns the store's revision after.
    fn commit(&mut self, batch: Batch) -> i64 {
        if batch.events.is_empty() {
            return self.revision;
        }
        let revision = batch.revision();
        self.revision = revision;
        self.watch.publish(revision, batch.events, &self.config);
        revision
    }
}

//! The etcd side of an election. A node grants a lease, then puts the leader key with that
//! lease only if the key does not exist (its create_revision is 0). The winner keeps the lease
//! alive every TTL/3 and records each acknowledgement in its `LeaseProof`; a loser publishes
//! who leads and watches the key until it is deleted, then campaigns again.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use etcd_client::{
    Compare, CompareOp, EventType, PutOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use tokio::sync::watch;

use super::lease::LeaseProof;
use crate::failpoint::{self, points};
use crate::meta::{LeaderGuard, MetaError};
use crate::mutation::{self, Mutation};
use crate::proto::MemberInfo;

/// Milliseconds of a monotonic clock (since the first call in this process). Lease proofs are
/// timed with it, never with the wall clock, which may jump. It reads tokio's clock, which is
/// the system's monotonic clock in a real runtime and simulated time in a paused one (a
/// simulation calls this once before it builds its runtimes, so none starts before the epoch).
pub fn mono_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = tokio::time::Instant::from_std(*EPOCH.get_or_init(Instant::now));
    tokio::time::Instant::now()
        .saturating_duration_since(epoch)
        .as_millis() as u64
}

fn io(e: etcd_client::Error) -> MetaError {
    MetaError::Io(format!("etcd: {e}"))
}

pub struct Election {
    client: etcd_client::Client,
    key: Vec<u8>,
    me: MemberInfo,
    ttl_secs: i64,
    margin_ms: u64,
    removed: Arc<std::sync::atomic::AtomicBool>,
    /// The lease of this member's last term (0: none yet), for a simulation's deliberate bug.
    last_lease: std::sync::atomic::AtomicI64,
}

/// One term of leadership: valid while its lease is provably held and the key is ours.
pub struct Term {
    pub guard: LeaderGuard,
    pub lease_id: i64,
    proof: Arc<Mutex<LeaseProof>>,
    keepalive: tokio::task::JoinHandle<()>,
}

impl Term {
    /// Whether this node can prove, at monotonic `now_ms`, that it still leads.
    pub fn holds(&self, now_ms: u64) -> bool {
        self.proof.lock().map(|p| p.holds(now_ms)).unwrap_or(false)
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        self.keepalive.abort();
    }
}

pub fn encode_member(m: &MemberInfo) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "name": m.name, "id": m.id, "client_url": m.client_url, "admin_url": m.admin_url,
        "grpc_url": m.grpc_url,
    }))
    .unwrap_or_default()
}

pub fn decode_member(bytes: &[u8]) -> Option<MemberInfo> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    Some(MemberInfo {
        name: v["name"].as_str()?.to_string(),
        id: v["id"].as_u64()?,
        client_url: v["client_url"].as_str()?.to_string(),
        admin_url: v["admin_url"].as_str()?.to_string(),
        // Absent in records of members that predate the gRPC front end.
        grpc_url: v["grpc_url"].as_str().unwrap_or_default().to_string(),
    })
}

impl Election {
    pub fn new(
        client: etcd_client::Client,
        key: Vec<u8>,
        me: MemberInfo,
        ttl_secs: i64,
        margin_ms: u64,
    ) -> Self {
        Election {
            client,
            key,
            me,
            ttl_secs: ttl_secs.max(1),
            margin_ms,
            removed: Default::default(),
            last_lease: Default::default(),
        }
    }

    /// A member whose flag is set never campaigns (it was removed from the cluster).
    pub fn with_removed_flag(mut self, removed: Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.removed = removed;
        self
    }

    /// Campaigns until this node leads (`Ok(Some(term))`) or `shutdown` (`Ok(None)`). While
    /// another node leads, `leader` carries it. An etcd failure is returned for the caller to
    /// retry after a pause.
    pub async fn campaign(
        &self,
        leader: &watch::Sender<Option<MemberInfo>>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<Option<Term>, MetaError> {
        loop {
            if *shutdown.borrow() {
                return Ok(None);
            }
            if self.removed.load(std::sync::atomic::Ordering::Acquire) {
                if let Ok(Some((m, _))) = self.current_leader().await {
                    leader.send_replace(m);
                }
                // Shutdown first: a stop as the pause ends needs no more reads.
                tokio::select! {
                    biased;
                    _ = shutdown.wait_for(|s| *s) => return Ok(None),
                    _ = tokio::time::sleep(Duration::from_millis(500)) => continue,
                }
            }
            // A leader handing over to another member named it here: stand back until that
            // member leads (or the marker's short lease runs out).
            if let Some(target) = self.transfer_target().await? {
                if target != self.me.name {
                    match self.current_leader().await? {
                        Some((m, revision)) => {
                            leader.send_replace(m);
                            self.wait_for_vacancy(revision, leader, shutdown).await?;
                        }
                        None => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                    continue;
                }
            }
            let mut lease = self.client.lease_client();
            let sent = mono_ms();
            let grant = lease.grant(self.ttl_secs, None).await.map_err(io)?;
            let value = encode_member(&self.me);
            let txn = Txn::new()
                .when([Compare::create_revision(
                    self.key.clone(),
                    CompareOp::Equal,
                    0,
                )])
                .and_then([TxnOp::put(
                    self.key.clone(),
                    value.clone(),
                    Some(PutOptions::new().with_lease(grant.id())),
                )])
                .or_else([TxnOp::get(self.key.clone(), None)]);
            let response = self.client.kv_client().txn(txn).await.map_err(io)?;
            if response.succeeded() {
                let mut proof = LeaseProof::new(self.margin_ms);
                proof.acknowledged(sent, grant.ttl() as u64 * 1000);
                let proof = Arc::new(Mutex::new(proof));
                leader.send_replace(Some(self.me.clone()));
                // A hand-over to this node is complete.
                let _ = self
                    .client
                    .kv_client()
                    .delete(self.transfer_key(), None)
                    .await;
                let earlier = self
                    .last_lease
                    .swap(grant.id(), std::sync::atomic::Ordering::Relaxed);
                let old_lease = mutation::on(Mutation::KeepaliveOldLease) && earlier != 0;
                let keepalive = tokio::spawn(keep_alive(
                    self.client.clone(),
                    if old_lease { earlier } else { grant.id() },
                    self.ttl_secs,
                    proof.clone(),
                    old_lease,
                ));
                return Ok(Some(Term {
                    guard: LeaderGuard {
                        key: self.key.clone(),
                        value,
                    },
                    lease_id: grant.id(),
                    proof,
                    keepalive,
                }));
            }
            // Lost: give the unused lease back and follow whoever holds the key.
            let _ = lease.revoke(grant.id()).await;
            let revision = response.header().map(|h| h.revision()).unwrap_or(0);
            let current = response.op_responses().into_iter().find_map(|op| match op {
                TxnOpResponse::Get(get) => {
                    get.kvs().first().map(|kv| self.leader_record(kv.value()))
                }
                _ => None,
            });
            match current {
                None => continue, // deleted in between: campaign again at once
                Some(m) => leader.send_replace(m),
            };
            self.wait_for_vacancy(revision, leader, shutdown).await?;
        }
    }

    /// Watches the leader key from `revision` until it is deleted (or shutdown).
    async fn wait_for_vacancy(
        &self,
        revision: i64,
        leader: &watch::Sender<Option<MemberInfo>>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), MetaError> {
        let options = WatchOptions::new().with_start_revision(revision + 1);
        let mut stream = self
            .client
            .clone()
            .watch(self.key.clone(), Some(options))
            .await
            .map_err(io)?;
        loop {
            // Shutdown first: a node that is stopping follows no leader, and either branch
            // ends in `campaign` seeing the stop; only the order is fixed (tokio's random one
            // is drawn from an unseeded generator).
            tokio::select! {
                biased;
                _ = shutdown.wait_for(|s| *s) => return Ok(()),
                message = stream.message() => match message.map_err(io)? {
                    None => return Ok(()),
                    Some(response) => {
                        for event in response.events() {
                            match event.event_type() {
                                EventType::Delete => {
                                    leader.send_replace(None);
                                    return Ok(());
                                }
                                EventType::Put => {
                                    if let Some(kv) = event.kv() {
                                        leader.send_replace(self.leader_record(kv.value()));
                                    }
                                }
                            }
                        }
                    }
                },
            }
        }
    }

    fn transfer_key(&self) -> Vec<u8> {
        let mut key = self.key.clone();
        key.extend_from_slice(b"/transfer");
        key
    }

    async fn transfer_target(&self) -> Result<Option<String>, MetaError> {
        let response = self
            .client
            .kv_client()
            .get(self.transfer_key(), None)
            .await
            .map_err(io)?;
        Ok(response
            .kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
    }

    async fn current_leader(&self) -> Result<Option<(Option<MemberInfo>, i64)>, MetaError> {
        let response = self
            .client
            .kv_client()
            .get(self.key.clone(), None)
            .await
            .map_err(io)?;
        let revision = response.header().map(|h| h.revision()).unwrap_or(0);
        Ok(response
            .kvs()
            .first()
            .map(|kv| (self.leader_record(kv.value()), revision)))
    }

    /// The leader key's member record, if its addresses can be used: clients are sent to it.
    /// A bad one counts as an unknown leader (the key still blocks campaigning).
    fn leader_record(&self, bytes: &[u8]) -> Option<MemberInfo> {
        match super::read_member(&self.key, bytes) {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::warn!("ignoring the leader record: {e}");
                None
            }
        }
    }

    /// Who holds the leader key right now (one read).
    pub async fn leader_now(&self) -> Result<Option<MemberInfo>, MetaError> {
        Ok(self.current_leader().await?.and_then(|(m, _)| m))
    }

    /// Hands leadership to `target` (a member name): in one transaction guarded by our key,
    /// names the target in a marker that expires with a short lease and deletes the leader
    /// key. Other members stand back while the marker names someone else; the target, which
    /// watches the key, campaigns at once. The caller must have stopped serving first.
    pub async fn transfer(&self, term: Term, target: &str) -> Result<(), MetaError> {
        let marker_lease = self
            .client
            .lease_client()
            .grant(self.ttl_secs, None)
            .await
            .map_err(io)?;
        let txn = Txn::new()
            .when([Compare::value(
                term.guard.key.clone(),
                CompareOp::Equal,
                term.guard.value.clone(),
            )])
            .and_then([
                TxnOp::put(
                    self.transfer_key(),
                    target,
                    Some(PutOptions::new().with_lease(marker_lease.id())),
                ),
                TxnOp::delete(term.guard.key.clone(), None),
            ]);
        let done = self
            .client
            .kv_client()
            .txn(txn)
            .await
            .map_err(io)?
            .succeeded();
        let _ = self.client.lease_client().revoke(term.lease_id).await;
        if done {
            Ok(())
        } else {
            Err(MetaError::NotLeader)
        }
    }

    /// Gives leadership up: deletes the key (only if still ours) and revokes the lease.
    pub async fn resign(&self, term: Term) {
        let txn = Txn::new()
            .when([Compare::value(
                term.guard.key.clone(),
                CompareOp::Equal,
                term.guard.value.clone(),
            )])
            .and_then([TxnOp::delete(term.guard.key.clone(), None)]);
        let _ = self.client.kv_client().txn(txn).await;
        let _ = self.client.lease_client().revoke(term.lease_id).await;
    }
}

/// Renews the lease every TTL/3 and records, for each acknowledgement, the time its keepalive
/// was sent. Failures are retried; if they last, the proof simply runs out. `trust_gone` is
/// only ever set by a simulation's deliberate bug: it takes "the lease is gone" as a renewal.
async fn keep_alive(
    client: etcd_client::Client,
    id: i64,
    ttl_secs: i64,
    proof: Arc<Mutex<LeaseProof>>,
    trust_gone: bool,
) {
    let interval = Duration::from_millis((ttl_secs as u64 * 1000 / 3).max(100));
    loop {
        let (mut keeper, mut stream) = match client.lease_client().keep_alive(id).await {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!("lease keepalive stream: {e}");
                tokio::time::sleep(interval / 4).await;
                continue;
            }
        };
        loop {
            if let Err(e) = failpoint::step(points::LEASE_KEEPALIVE).await {
                tracing::warn!(lease = id, "lease keepalive: {e}");
                tokio::time::sleep(interval).await;
                continue;
            }
            let sent = mono_ms();
            if keeper.keep_alive().await.is_err() {
                break;
            }
            match tokio::time::timeout(interval, stream.message()).await {
                Ok(Ok(Some(ack))) if ack.ttl() > 0 => {
                    if let Ok(mut p) = proof.lock() {
                        p.acknowledged(sent, ack.ttl() as u64 * 1000);
                    }
                }
                Ok(Ok(Some(_))) if trust_gone => {
                    if let Ok(mut p) = proof.lock() {
                        p.acknowledged(sent, ttl_secs as u64 * 1000);
                    }
                }
                Ok(Ok(Some(_))) => {
                    // TTL 0: etcd says the lease is gone; nothing can bring it back.
                    tracing::warn!(lease = id, "lease expired");
                    return;
                }
                _ => break,
            }
            let elapsed = Duration::from_millis(mono_ms().saturating_sub(sent));
            tokio::time::sleep(interval.saturating_sub(elapsed)).await;
        }
        tokio::time::sleep(interval / 4).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_round_trips_and_garbage_is_none() {
        let m = MemberInfo {
            name: "a".into(),
            id: 7,
            client_url: "127.0.0.1:1".into(),
            admin_url: "http://x".into(),
            grpc_url: "https://127.0.0.1:1".into(),
        };
        assert_eq!(decode_member(&encode_member(&m)), Some(m));
        assert_eq!(decode_member(b"not json"), None);
    }
}

//! A region as routing holds it: shared by the index and the shard that owns the region, and
//! packed, since every region of the cluster lives here once and a million of them must fit in
//! ~300 B each, everything counted. The keys and peers share one allocation beside a 64-byte
//! header: 80 + 80 bytes in jemalloc's size classes (with the `Arc`'s counts) for a region with
//! 9-byte keys and 3 peers, where a `Region` behind an `Arc` takes 160 + 16 + 16 + 80.
//!
//! Owns: the packed form, the reads of it and the end-key prefix lookups check. Knows nothing
//! of the index's layout or the heartbeat rules.

use std::cmp::Ordering as Cmp;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::limits::{PEER_SIZE, REGION_OVERHEAD};
use super::prefix_search::end_prefix;
use super::region::{Epoch, Peer, PeerRole, Region, MAX_PEERS};

/// Bytes of one packed peer: id and store id (little-endian), then the role.
const PACKED_PEER: usize = 17;

/// `Route::leader` when the region names no leader.
const NO_LEADER: u8 = u8::MAX;

#[derive(Debug)]
pub struct Route {
    id: u64,
    epoch: Epoch,
    /// The end key's prefix (high, low), read by lookups before the end key itself, so the end
    /// check rarely follows the pointer to the keys. Two u64s, not a u128: the route then needs
    /// only 8-byte alignment.
    end: [u64; 2],
    /// The start key, the end key, then the peers packed ([`PACKED_PEER`] bytes each); the end
    /// key's length is what the others leave.
    bytes: Box<[u8]>,
    start_len: u32,
    peer_count: u8,
    /// The leader's index among the peers, [`NO_LEADER`] for none.
    leader: u8,
    retired: AtomicBool,
}

impl Route {
    /// Packs a validated region (`Region::validate`): at most [`MAX_PEERS`] peers, and a
    /// leader that is one of them. (Anything else would not read back as it was.)
    pub fn new(region: Region) -> Arc<Route> {
        debug_assert!(
            region.peers.len() <= MAX_PEERS
                && region
                    .leader
                    .is_none_or(|l| region.peers.iter().any(|p| p.id == l)),
            "a region that does not validate: {region:?}"
        );
        let leader = region
            .leader
            .and_then(|l| region.peers.iter().position(|p| p.id == l))
            .map_or(NO_LEADER, |i| i as u8);
        let mut bytes = Vec::with_capacity(
            region.start_key.len() + region.end_key.len() + PACKED_PEER * region.peers.len(),
        );
        bytes.extend_from_slice(&region.start_key);
        bytes.extend_from_slice(&region.end_key);
        for p in &region.peers {
            bytes.extend_from_slice(&p.id.to_le_bytes());
            bytes.extend_from_slice(&p.store_id.to_le_bytes());
            bytes.push(match p.role {
                PeerRole::Voter => 0,
                PeerRole::Learner => 1,
                PeerRole::IncomingVoter => 2,
                PeerRole::DemotingVoter => 3,
            });
        }
        let end = end_prefix(&region.end_key);
        Arc::new(Route {
            id: region.id,
            epoch: region.epoch,
            end: [(end >> 64) as u64, end as u64],
            bytes: bytes.into_boxed_slice(),
            // Keys are bounded by the frame and key limits, far below 4 GiB.
            start_len: region.start_key.len() as u32,
            peer_count: region.peers.len() as u8,
            leader,
            retired: AtomicBool::new(false),
        })
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    pub fn leader(&self) -> Option<u64> {
        self.peers().nth(usize::from(self.leader)).map(|p| p.id)
    }

    /// The store the leader peer is on.
    pub fn leader_store(&self) -> Option<u64> {
        self.peers()
            .nth(usize::from(self.leader))
            .map(|p| p.store_id)
    }

    pub fn start_key(&self) -> &[u8] {
        &self.bytes[..self.start_len as usize]
    }

    /// Exclusive; empty means unbounded.
    pub fn end_key(&self) -> &[u8] {
        &self.bytes[self.start_len as usize..self.peers_at()]
    }

    /// Where the packed peers begin.
    fn peers_at(&self) -> usize {
        self.bytes.len() - PACKED_PEER * usize::from(self.peer_count)
    }

    pub fn peers(&self) -> impl ExactSizeIterator<Item = Peer> + '_ {
        self.bytes[self.peers_at()..]
            .chunks_exact(PACKED_PEER)
            .map(|p| Peer {
                id: u64::from_le_bytes(p[0..8].try_into().unwrap_or_default()),
                store_id: u64::from_le_bytes(p[8..16].try_into().unwrap_or_default()),
                role: match p[16] {
                    0 => PeerRole::Voter,
                    2 => PeerRole::IncomingVoter,
                    3 => PeerRole::DemotingVoter,
                    _ => PeerRole::Learner,
                },
            })
    }

    /// The region, unpacked: what replies carry.
    pub fn region(&self) -> Region {
        Region {
            id: self.id,
            start_key: self.start_key().to_vec(),
            end_key: self.end_key().to_vec(),
            epoch: self.epoch,
            peers: self.peers().collect(),
            leader: self.leader(),
        }
    }

    /// The region, unpacked into `out`, whose allocations are reused: the patrol unpacks
    /// every region in turn and keeps only the few it acts on.
    pub fn region_into(&self, out: &mut Region) {
        out.id = self.id;
        out.start_key.clear();
        out.start_key.extend_from_slice(self.start_key());
        out.end_key.clear();
        out.end_key.extend_from_slice(self.end_key());
        out.epoch = self.epoch;
        out.peers.clear();
        out.peers.extend(self.peers());
        out.leader = self.leader();
    }

    /// Whether `region` is exactly this route's region, without unpacking it.
    pub fn is(&self, region: &Region) -> bool {
        self.id == region.id
            && self.epoch == region.epoch
            && self.leader() == region.leader
            && self.start_key() == region.start_key.as_slice()
            && self.end_key() == region.end_key.as_slice()
            && self.peers().len() == region.peers.len()
            && self.peers().zip(&region.peers).all(|(a, b)| a == *b)
    }

    /// Whether `key` falls in `[start, end)`.
    pub fn contains(&self, key: &[u8]) -> bool {
        let end = self.end_key();
        key >= self.start_key() && (end.is_empty() || key < end)
    }

    /// Whether this route's range and `region`'s share a key.
    pub fn overlaps(&self, region: &Region) -> bool {
        let after = |end: &[u8], key: &[u8]| end.is_empty() || end > key;
        after(self.end_key(), &region.start_key) && after(&region.end_key, self.start_key())
    }

    /// An upper bound on the bytes the region takes in an archived reply
    /// (`Region::wire_size`, without unpacking).
    pub fn wire_size(&self) -> usize {
        REGION_OVERHEAD + self.peers_at() + PEER_SIZE * usize::from(self.peer_count)
    }

    /// Whether the region holds `key`, whose prefix is `kp`.
    pub(super) fn covers(&self, key: &[u8], kp: u128) -> bool {
        let end = (u128::from(self.end[0]) << 64) | u128::from(self.end[1]);
        match kp.cmp(&end) {
            Cmp::Less => true,
            Cmp::Greater => false,
            Cmp::Equal => self.contains(key),
        }
    }

    /// False once a later change replaced or displaced this route in the index.
    pub fn is_current(&self) -> bool {
        !self.retired.load(Ordering::Acquire)
    }

    pub(super) fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }
}

// With the `Arc`'s two counts, 80 bytes: jemalloc's 80-byte class.
const _: () = assert!(std::mem::size_of::<Route>() == 64);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::RegionWireSize;
    use proptest::prelude::*;

    fn region() -> impl Strategy<Value = Region> {
        (
            1u64..u64::MAX,
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::collection::vec(any::<u8>(), 0..40),
            (any::<u64>(), any::<u64>()),
            proptest::collection::vec((1u64..u64::MAX, 1u64..u64::MAX, any::<bool>()), 0..6),
            any::<Option<usize>>(),
        )
            .prop_map(
                |(id, start_key, end_key, (conf_ver, version), peers, leader)| {
                    let peers: Vec<Peer> = peers
                        .into_iter()
                        .map(|(id, store_id, learner)| Peer {
                            id,
                            store_id,
                            role: if learner {
                                PeerRole::Learner
                            } else {
                                PeerRole::Voter
                            },
                        })
                        .collect();
                    let leader =
                        leader.and_then(|i| peers.get(i % peers.len().max(1)).map(|p| p.id));
                    Region {
                        id,
                        start_key,
                        end_key,
                        epoch: Epoch { conf_ver, version },
                        peers,
                        leader,
                    }
                },
            )
    }

    proptest! {
        /// Packing loses nothing, and every read agrees with the unpacked region's.
        #[test]
        fn packs_and_unpacks_every_field(r in region(), other in region(), key in proptest::collection::vec(any::<u8>(), 0..40)) {
            let route = Route::new(r.clone());
            prop_assert_eq!(route.region(), r.clone());
            prop_assert!(route.is(&r));
            prop_assert_eq!(route.is(&other), other == r);
            prop_assert_eq!(route.contains(&key), r.contains(&key));
            prop_assert_eq!(route.overlaps(&other), r.overlaps(&other));
            prop_assert_eq!(route.wire_size(), r.wire_size());
            prop_assert_eq!(route.peers().len(), r.peers.len());
        }
    }

    #[test]
    fn a_changed_field_is_not_the_same_region() {
        let r = Region {
            id: 7,
            start_key: b"a".to_vec(),
            end_key: b"b".to_vec(),
            epoch: Epoch {
                conf_ver: 1,
                version: 1,
            },
            peers: vec![Peer {
                id: 8,
                store_id: 9,
                role: PeerRole::Voter,
            }],
            leader: Some(8),
        };
        let route = Route::new(r.clone());
        let mut learner = r.clone();
        learner.peers[0].role = PeerRole::Learner;
        let mut no_leader = r.clone();
        no_leader.leader = None;
        let mut moved = r.clone();
        moved.end_key = b"c".to_vec();
        for changed in [learner, no_leader, moved] {
            assert!(!route.is(&changed), "{changed:?}");
        }
    }
}

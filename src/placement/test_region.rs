//! For tests: one builder of a plain region (voters on given stores, led by the first, epoch
//! 1/1) from its id, with the peer-id and key schemes the tests assert on named, so that a test
//! says which scheme its ids and keys follow. Must not touch: anything beyond building the
//! [`Region`] value.

use super::region::{Epoch, Peer, PeerRole, Region};

/// How a test region's peer ids follow from its id and each peer's store.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PeerIds {
    /// `id*10 + store`: for stores 1 to 9.
    Tens,
    /// `id*100 + store`: for stores 1 to 99.
    Hundreds,
}

/// A test region's key range.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Keys<'a> {
    /// `[b'a' + id, b'a' + id + 1)`: one letter each, so that regions `id` and `id + 1` touch.
    Letter,
    /// `[id, id + 1)` as 8 big-endian bytes: regions `id` and `id + 1` touch, for any id.
    BigEndian,
    /// The given start and end keys (empty means unbounded).
    Range(&'a [u8], &'a [u8]),
}

/// Region `id` over `keys` with voters on `stores` (peer ids by `peer_ids`), led by the first,
/// at conf_ver 1 and version 1.
pub(crate) fn build(id: u64, stores: &[u64], peer_ids: PeerIds, keys: Keys<'_>) -> Region {
    let step = match peer_ids {
        PeerIds::Tens => 10,
        PeerIds::Hundreds => 100,
    };
    let peers: Vec<Peer> = stores
        .iter()
        .map(|&s| Peer {
            id: id * step + s,
            store_id: s,
            role: PeerRole::Voter,
        })
        .collect();
    let (start_key, end_key) = match keys {
        Keys::Letter => (vec![b'a' + id as u8], vec![b'a' + id as u8 + 1]),
        Keys::BigEndian => (id.to_be_bytes().to_vec(), (id + 1).to_be_bytes().to_vec()),
        Keys::Range(start, end) => (start.to_vec(), end.to_vec()),
    };
    Region {
        id,
        start_key,
        end_key,
        epoch: Epoch {
            conf_ver: 1,
            version: 1,
        },
        leader: peers.first().map(|p| p.id),
        peers,
    }
}

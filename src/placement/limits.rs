//! Size limits on what clients send into placement: key length, a store's address and labels,
//! the number of stores, and how much one reply carries (paging). Pure: the shell calls these
//! where a request enters placement.
//!
//! They are checked at the request boundary and never in `Region::validate` or on load: a
//! limit lowered in the config must not make an already stored map unloadable; it only stops
//! new oversized input.

use serde::{Deserialize, Serialize};

use super::{Buckets, Region, Store, StoreStatus};

/// What one paged reply (ScanRegions, GetAllStores) may carry, in [`RegionWireSize::wire_size`] and
/// [`store_wire_size`] units. Half a frame: the estimates are upper bounds, and the rest of
/// the frame is slack for the reply's own envelope.
pub const PAGE_BUDGET: usize = crate::proto::MAX_FRAME_LEN / 2;

/// The largest `max_key_len` a config may set: a region with two such keys and the most
/// peers still fits one page, so every region can be answered.
pub const KEY_LEN_CEILING: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Longest key a request may carry: a looked-up key, a scan bound, a region's start or
    /// end key. TiKV's own keys are far shorter; 8 KiB leaves room for long encoded keys.
    pub max_key_len: usize,
    /// Most labels one store may register.
    pub max_labels: usize,
    /// Longest label key or value, in bytes.
    pub max_label_len: usize,
    /// Longest store address (`host:port`), in bytes; the peer and status addresses too.
    pub max_address_len: usize,
    /// Longest version, git hash or deploy path a store may register, in bytes.
    pub max_store_detail_len: usize,
    /// Most stores that are not tombstones; registering one more is refused. Tombstones do
    /// not count, so a cluster that replaced its stores many times is not locked out.
    pub max_stores: usize,
    /// Most bucket keys one region's report may carry (its start and end keys included). TiKV
    /// cuts a region into buckets of `coprocessor.region-bucket-size`: a few per region of the
    /// default size, about a hundred for partitioned raft-kv's large regions.
    pub max_region_buckets: usize,
    /// Most bytes (keys and values) the global config may hold. TiDB keeps a few short
    /// settings there; the bound keeps a full load within one reply.
    pub max_global_config_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_key_len: 8 * 1024,
            max_labels: 64,
            max_label_len: 256,
            max_address_len: 256,
            max_store_detail_len: 1024,
            max_stores: 10_000,
            max_region_buckets: 1024,
            max_global_config_bytes: 256 * 1024,
        }
    }
}

/// A request over a limit; it changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("{what} of {len} bytes is longer than limits.max_key_len = {max}")]
    Key {
        what: &'static str,
        len: usize,
        max: usize,
    },
    #[error("store {id}: {what} is {len}, over limits.{knob} = {max}")]
    Store {
        id: u64,
        what: &'static str,
        len: usize,
        knob: &'static str,
        max: usize,
    },
    #[error("{live} stores are registered, limits.max_stores = {max}; store {id} is refused")]
    TooManyStores { id: u64, live: usize, max: usize },
    #[error("region {region}: {what} is {len}, over {limit} = {max}")]
    Buckets {
        region: u64,
        what: &'static str,
        len: usize,
        limit: &'static str,
        max: usize,
    },
}

impl Limits {
    /// Refuses settings under which a single region or store could not fit one reply.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_key_len == 0 || self.max_key_len > KEY_LEN_CEILING {
            return Err(format!(
                "limits.max_key_len must be within 1..={KEY_LEN_CEILING}"
            ));
        }
        if self.max_region_buckets.saturating_mul(BUCKET_KEY_OVERHEAD) > BUCKETS_BUDGET {
            return Err(format!(
                "limits.max_region_buckets must be at most {}",
                BUCKETS_BUDGET / BUCKET_KEY_OVERHEAD
            ));
        }
        if self.max_global_config_bytes > PAGE_BUDGET / 2 {
            return Err(format!(
                "limits.max_global_config_bytes must be at most {}",
                PAGE_BUDGET / 2
            ));
        }
        if self.max_address_len == 0 || self.max_stores == 0 {
            return Err("limits.max_address_len and limits.max_stores must be at least 1".into());
        }
        let largest_store = STORE_OVERHEAD
            + 3 * self.max_address_len
            + 3 * self.max_store_detail_len
            + self.max_labels * label_size(self.max_label_len);
        if largest_store > PAGE_BUDGET {
            return Err(format!(
                "a store with limits.max_labels labels of limits.max_label_len bytes and the \
                 longest address takes {largest_store} bytes, more than one reply's \
                 {PAGE_BUDGET}"
            ));
        }
        Ok(())
    }

    pub fn check_key(&self, what: &'static str, key: &[u8]) -> Result<(), LimitError> {
        if key.len() > self.max_key_len {
            return Err(LimitError::Key {
                what,
                len: key.len(),
                max: self.max_key_len,
            });
        }
        Ok(())
    }

    pub fn check_region(&self, region: &Region) -> Result<(), LimitError> {
        self.check_key("start key", &region.start_key)?;
        self.check_key("end key", &region.end_key)
    }

    /// The store's own shape: address and labels.
    pub fn check_store(&self, store: &Store) -> Result<(), LimitError> {
        let over = |what, len, knob, max| LimitError::Store {
            id: store.id,
            what,
            len,
            knob,
            max,
        };
        let d = &store.details;
        for (what, len) in [
            ("the address length", store.address.len()),
            ("the peer address length", d.peer_address.len()),
            ("the status address length", d.status_address.len()),
        ] {
            if len > self.max_address_len {
                return Err(over(what, len, "max_address_len", self.max_address_len));
            }
        }
        for (what, len) in [
            ("the version length", d.version.len()),
            ("the git hash length", d.git_hash.len()),
            ("the deploy path length", d.deploy_path.len()),
        ] {
            if len > self.max_store_detail_len {
                return Err(over(
                    what,
                    len,
                    "max_store_detail_len",
                    self.max_store_detail_len,
                ));
            }
        }
        if store.labels.len() > self.max_labels {
            return Err(over(
                "the label count",
                store.labels.len(),
                "max_labels",
                self.max_labels,
            ));
        }
        if let Some(longest) = store
            .labels
            .iter()
            .map(|l| l.key.len().max(l.value.len()))
            .max()
            .filter(|&len| len > self.max_label_len)
        {
            return Err(over(
                "a label's length",
                longest,
                "max_label_len",
                self.max_label_len,
            ));
        }
        Ok(())
    }

    /// A region's buckets: how many keys, each within `max_key_len`, and all of them within
    /// what one reply carries.
    pub fn check_buckets(&self, b: &Buckets) -> Result<(), LimitError> {
        let over = |what, len, limit, max| LimitError::Buckets {
            region: b.region_id,
            what,
            len,
            limit,
            max,
        };
        if b.keys.len() > self.max_region_buckets {
            let max = self.max_region_buckets;
            return Err(over(
                "the bucket key count",
                b.keys.len(),
                "limits.max_region_buckets",
                max,
            ));
        }
        for k in &b.keys {
            self.check_key("a bucket key", k)?;
        }
        let bytes = buckets_wire_size(b);
        if bytes > BUCKETS_BUDGET {
            return Err(over(
                "the size of the keys",
                bytes,
                "one reply's budget",
                BUCKETS_BUDGET,
            ));
        }
        Ok(())
    }

    /// Whether store `id` may register with `live` stores (tombstones not counted) already
    /// registered; one already registered may always update itself.
    pub fn admit_store(&self, id: u64, known: bool, live: usize) -> Result<(), LimitError> {
        if !known && live >= self.max_stores {
            return Err(LimitError::TooManyStores {
                id,
                live,
                max: self.max_stores,
            });
        }
        Ok(())
    }
}

/// Archive bytes of a region's fixed fields, rounded up (id, two vector headers, epoch,
/// leader, alignment): what a region costs in a reply besides its keys and peers.
pub(super) const REGION_OVERHEAD: usize = 128;
/// An archived peer is 24 bytes (two u64 and a role, aligned); 32 leaves slack.
pub(super) const PEER_SIZE: usize = 32;
const STORE_OVERHEAD: usize = 192;

fn label_size(max_label_len: usize) -> usize {
    2 * max_label_len + 32
}

/// What a region takes in a reply, as a method of the region (which the client crate defines).
pub trait RegionWireSize {
    /// An upper bound on the bytes this region takes in an archived reply.
    fn wire_size(&self) -> usize;
}

impl RegionWireSize for Region {
    fn wire_size(&self) -> usize {
        REGION_OVERHEAD + self.start_key.len() + self.end_key.len() + PEER_SIZE * self.peers.len()
    }
}

/// An upper bound on the bytes a store's status takes in an archived reply.
pub fn store_wire_size(s: &StoreStatus) -> usize {
    let d = &s.store.details;
    STORE_OVERHEAD
        + s.store.address.len()
        + d.version.len()
        + d.git_hash.len()
        + d.peer_address.len()
        + d.status_address.len()
        + d.deploy_path.len()
        + s.store
            .labels
            .iter()
            .map(|l| l.key.len() + l.value.len() + 32)
            .sum::<usize>()
}

/// What one region's buckets may take in a reply: half a page, so a region's other fields
/// always fit beside them.
pub const BUCKETS_BUDGET: usize = PAGE_BUDGET / 2;
/// An archived key costs its bytes and a vector header (8 bytes), aligned: 16 is an upper bound
/// besides the bytes.
const BUCKET_KEY_OVERHEAD: usize = 16;

/// An upper bound on the bytes a region's buckets take in an archived reply.
pub fn buckets_wire_size(b: &Buckets) -> usize {
    64 + b
        .keys
        .iter()
        .map(|k| k.len() + BUCKET_KEY_OVERHEAD)
        .sum::<usize>()
}

/// How many of `sizes` (in order) one page carries: as many as fit [`PAGE_BUDGET`], and
/// always at least one, so paging makes progress.
pub fn page_len(sizes: impl IntoIterator<Item = usize>) -> usize {
    let mut used = 0;
    let mut n = 0;
    for size in sizes {
        used += size;
        if n > 0 && used > PAGE_BUDGET {
            break;
        }
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use rkyv::util::AlignedVec;

    use super::*;
    use crate::placement::{
        Epoch, Label, Peer, PeerRole, StoreDetails, StoreState, StoreStats, MAX_PEERS,
    };
    use crate::proto::{encode, Reply, Response};

    fn region(id: u64, key_len: usize) -> Region {
        Region {
            id,
            start_key: vec![b'a'; key_len],
            end_key: vec![b'b'; key_len],
            epoch: Epoch::default(),
            peers: (1..=MAX_PEERS as u64)
                .map(|i| Peer {
                    id: id * 100 + i,
                    store_id: i,
                    role: PeerRole::Voter,
                })
                .collect(),
            leader: Some(id * 100 + 1),
        }
    }

    fn store(id: u64, labels: usize, label_len: usize, address_len: usize) -> Store {
        Store {
            id,
            address: "h".repeat(address_len),
            labels: (0..labels)
                .map(|i| Label {
                    key: format!("{i:0>label_len$}"),
                    value: "v".repeat(label_len),
                })
                .collect(),
            state: StoreState::Up,
            details: StoreDetails {
                version: "8".repeat(address_len),
                git_hash: "g".repeat(address_len),
                peer_address: "p".repeat(address_len),
                status_address: "s".repeat(address_len),
                start_timestamp: 1,
                deploy_path: "d".repeat(address_len),
            }
            .into(),
        }
    }

    #[test]
    fn each_limit_is_crossed_by_one_byte_or_one_item() {
        let l = Limits::default();
        assert!(l.check_key("key", &vec![0; l.max_key_len]).is_ok());
        let err = l.check_key("key", &vec![0; l.max_key_len + 1]).unwrap_err();
        assert!(err.to_string().contains("limits.max_key_len"), "{err}");
        assert!(l.check_region(&region(1, l.max_key_len)).is_ok());
        assert!(l.check_region(&region(1, l.max_key_len + 1)).is_err());

        let fits = store(1, l.max_labels, l.max_label_len, l.max_address_len);
        assert!(l.check_store(&fits).is_ok());
        for (bad, knob) in [
            (store(1, l.max_labels + 1, 1, 10), "max_labels"),
            (store(1, 1, l.max_label_len + 1, 10), "max_label_len"),
            (store(1, 1, 1, l.max_address_len + 1), "max_address_len"),
        ] {
            let err = l.check_store(&bad).unwrap_err();
            assert!(err.to_string().contains(knob), "{err}");
        }

        assert!(l.admit_store(7, false, l.max_stores - 1).is_ok());
        assert!(l.admit_store(7, false, l.max_stores).is_err());
        assert!(
            l.admit_store(7, true, l.max_stores).is_ok(),
            "a known store updates"
        );
    }

    #[test]
    fn bucket_reports_are_bounded_by_count_key_length_and_size() {
        let l = Limits::default();
        let report = |n: usize, len: usize| Buckets {
            region_id: 1,
            version: 1,
            keys: (0..n).map(|_| vec![b'k'; len]).collect(),
        };
        assert!(l.check_buckets(&report(l.max_region_buckets, 16)).is_ok());
        let err = l
            .check_buckets(&report(l.max_region_buckets + 1, 16))
            .unwrap_err();
        assert!(err.to_string().contains("max_region_buckets"), "{err}");
        assert!(l.check_buckets(&report(2, l.max_key_len + 1)).is_err());
        // Within the count and the key length, and still too large for a reply.
        let err = l
            .check_buckets(&report(l.max_region_buckets, l.max_key_len))
            .unwrap_err();
        assert!(err.to_string().contains("budget"), "{err}");
        let largest = report(
            l.max_region_buckets,
            BUCKETS_BUDGET / l.max_region_buckets - 32,
        );
        assert!(l.check_buckets(&largest).is_ok());
        let (mut scratch, mut out) = (AlignedVec::new(), Vec::new());
        let reply = Response::Ok(Reply::Buckets(Some(largest.clone())));
        encode(&reply, &mut scratch, &mut out).expect("the largest buckets encode");
        assert!(out.len() <= buckets_wire_size(&largest), "{}", out.len());
    }

    #[test]
    fn settings_a_reply_could_not_carry_are_refused() {
        assert!(Limits::default().validate().is_ok());
        for bad in [
            Limits {
                max_key_len: KEY_LEN_CEILING + 1,
                ..Limits::default()
            },
            Limits {
                max_labels: 10_000,
                max_label_len: 1024,
                ..Limits::default()
            },
            Limits {
                max_stores: 0,
                ..Limits::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    /// The size estimates are upper bounds: a page of the largest regions or stores the
    /// limits allow encodes within one frame.
    #[test]
    fn a_full_page_of_the_largest_items_fits_a_frame() {
        let (mut scratch, mut out) = (AlignedVec::new(), Vec::new());
        let regions: Vec<Region> = (1..=2000).map(|id| region(id, KEY_LEN_CEILING)).collect();
        let n = page_len(regions.iter().map(Region::wire_size));
        assert!(n >= 1 && n < regions.len());
        let page = Response::Ok(Reply::Regions(regions[..n].to_vec()));
        encode(&page, &mut scratch, &mut out).expect("a page of regions encodes");
        let estimate: usize = regions[..n].iter().map(Region::wire_size).sum();
        assert!(out.len() <= estimate, "{} > estimate {estimate}", out.len());

        let l = Limits::default();
        let stores: Vec<StoreStatus> = (1..=200)
            .map(|id| StoreStatus {
                store: store(id, l.max_labels, l.max_label_len, l.max_address_len),
                stats: StoreStats::default(),
                last_heartbeat_ms: 0,
            })
            .collect();
        let n = page_len(stores.iter().map(store_wire_size));
        assert!(n >= 1 && n < stores.len());
        out.clear();
        let page = Response::Ok(Reply::Stores {
            stores: stores[..n].to_vec(),
            more: true,
        });
        encode(&page, &mut scratch, &mut out).expect("a page of stores encodes");
        let estimate: usize = stores[..n].iter().map(store_wire_size).sum();
        assert!(out.len() <= estimate, "{} > estimate {estimate}", out.len());
    }

    #[test]
    fn a_page_always_carries_one_item() {
        assert_eq!(page_len([PAGE_BUDGET * 3, 1]), 1);
        assert_eq!(page_len([PAGE_BUDGET / 2, PAGE_BUDGET / 2, 1]), 2);
        assert_eq!(page_len(std::iter::empty()), 0);
    }
}

//! A store's persisted record, in every format a node may find on disk or in etcd: the current
//! one is a marker and then the rkyv archive of `Store`; the first one, written before stores
//! carried their version and other details, is the bare archive of a frozen copy of the store
//! as it was then, read back with empty details. Owns these bytes; what a store means is
//! `placement::store`'s.
//!
//! The marker tells the two apart for certain. A bare first-format archive begins with a string's
//! bytes (UTF-8 never holds 0xff), a string's out-of-line header (its first byte is 0x80..=0xbf),
//! an inline string (0xff only when empty, and then eight of them), or the store's id, little
//! endian, whose eighth byte is below 0x80 since ids stay below 2^63 (P3, `MAX_ID_END`). The
//! marker is 0xff, then not 0xff, and its eighth byte is 0x80 and above: none of those.

use rkyv::util::AlignedVec;
use rkyv::{Archive, Deserialize, Serialize};

use crate::meta::MetaError;
use crate::placement::{Label, Store, StoreState};

/// Starts a record in the current format; its last byte counts formats from 0x82 (the first
/// format had no marker).
const MARKER: [u8; 8] = [0xff, b'M', b'S', b'T', b'O', b'R', b'E', 0x82];

pub fn encode_store(store: &Store) -> Result<Vec<u8>, MetaError> {
    let archive = rkyv::to_bytes::<rkyv::rancor::Error>(store)
        .map_err(|e| MetaError::Io(format!("encoding store {}: {e}", store.id)))?;
    let mut out = Vec::with_capacity(MARKER.len() + archive.len());
    out.extend_from_slice(&MARKER);
    out.extend_from_slice(&archive);
    Ok(out)
}

/// A store record in any format; checked before use, so damaged bytes are an error.
pub fn decode_store(bytes: &[u8]) -> Result<Store, MetaError> {
    let corrupt = |e: rkyv::rancor::Error| MetaError::Corrupt(format!("store record: {e}"));
    match bytes.strip_prefix(&MARKER) {
        Some(archive) => {
            rkyv::from_bytes::<Store, rkyv::rancor::Error>(&aligned(archive)).map_err(corrupt)
        }
        None => rkyv::from_bytes::<StoreV1, rkyv::rancor::Error>(&aligned(bytes))
            .map(Store::from)
            .map_err(corrupt),
    }
}

fn aligned(bytes: &[u8]) -> AlignedVec {
    let mut v = AlignedVec::with_capacity(bytes.len());
    v.extend_from_slice(bytes);
    v
}

/// The store as the first format archived it. Frozen: its layout is what those records hold,
/// whatever `Store` becomes.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
struct StoreV1 {
    id: u64,
    address: String,
    labels: Vec<LabelV1>,
    state: StoreStateV1,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
struct LabelV1 {
    key: String,
    value: String,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
enum StoreStateV1 {
    Up,
    Offline,
    Down,
    Tombstone,
}

impl From<StoreV1> for Store {
    fn from(s: StoreV1) -> Store {
        Store {
            id: s.id,
            address: s.address,
            labels: s
                .labels
                .into_iter()
                .map(|l| Label {
                    key: l.key,
                    value: l.value,
                })
                .collect(),
            state: match s.state {
                StoreStateV1::Up => StoreState::Up,
                StoreStateV1::Offline => StoreState::Offline,
                StoreStateV1::Down => StoreState::Down,
                StoreStateV1::Tombstone => StoreState::Tombstone,
            },
            details: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::StoreDetails;
    use proptest::prelude::*;

    fn v1(id: u64, address: &str, labels: &[(&str, &str)], state: StoreStateV1) -> StoreV1 {
        StoreV1 {
            id,
            address: address.into(),
            labels: labels
                .iter()
                .map(|(k, v)| LabelV1 {
                    key: k.to_string(),
                    value: v.to_string(),
                })
                .collect(),
            state,
        }
    }

    fn first_format(s: &StoreV1) -> Vec<u8> {
        rkyv::to_bytes::<rkyv::rancor::Error>(s).unwrap().to_vec()
    }

    /// A record written before stores carried details loads, with empty details; written
    /// again, it is in the current format and reads back the same.
    #[test]
    fn a_record_in_the_first_format_still_loads() {
        let old = v1(
            7,
            "tikv-7.example.internal:20160",
            &[("zone", "z1"), ("", "")],
            StoreStateV1::Offline,
        );
        let store = decode_store(&first_format(&old)).unwrap();
        assert_eq!(store.id, 7);
        assert_eq!(store.address, "tikv-7.example.internal:20160");
        assert_eq!(store.labels.len(), 2);
        assert_eq!(store.labels[0].value, "z1");
        assert_eq!(store.state, StoreState::Offline);
        assert_eq!(*store.details, StoreDetails::default());
        let again = encode_store(&store).unwrap();
        assert!(again.starts_with(&MARKER));
        assert_eq!(decode_store(&again).unwrap(), store);
    }

    /// A record as the previous release wrote it (copied from the log of a data dir it made:
    /// store 1, `tikv-1.example:20160`, label zone=z1, Up), not regenerated by today's code.
    const WRITTEN_BEFORE: &str =
        "74696b762d312e6578616d706c653a32303136307a6f6e65ffffffff7a31ffffffffffff\
        00000000010000000000000094000000d0ffffffdcffffff010000000000000000000000";

    fn unhex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn a_record_the_previous_release_wrote_loads() {
        let bytes = unhex(WRITTEN_BEFORE);
        let frozen = v1(
            1,
            "tikv-1.example:20160",
            &[("zone", "z1")],
            StoreStateV1::Up,
        );
        assert_eq!(
            bytes,
            first_format(&frozen),
            "the frozen copy is the old layout"
        );
        let store = decode_store(&bytes).unwrap();
        assert_eq!(
            (store.id, store.address.as_str()),
            (1, "tikv-1.example:20160")
        );
        assert_eq!(store.labels[0].key, "zone");
        assert_eq!(store.state, StoreState::Up);
        assert!(
            decode_store(&bytes[..bytes.len() - 1]).is_err(),
            "cut short"
        );
    }

    #[test]
    fn details_survive_the_current_format() {
        let mut store = Store::from(v1(9, "b:2", &[], StoreStateV1::Up));
        store.details = StoreDetails {
            version: "8.5.7".into(),
            git_hash: "3f446cfa9eb1".into(),
            peer_address: "b:3".into(),
            status_address: "b:20180".into(),
            start_timestamp: 1_700_000_000,
            deploy_path: "/opt/tikv/bin".into(),
        }
        .into();
        assert_eq!(decode_store(&encode_store(&store).unwrap()).unwrap(), store);
    }

    proptest! {
        /// No first-format record starts with the marker: ids below 2^63, any address and
        /// labels.
        #[test]
        fn no_first_format_record_starts_with_the_marker(
            id in 0u64..(1 << 63),
            address in ".{0,20}",
            labels in prop::collection::vec((".{0,10}", ".{0,10}"), 0..3),
            state in 0usize..4,
        ) {
            let labels: Vec<(&str, &str)> =
                labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let state = [StoreStateV1::Up, StoreStateV1::Offline, StoreStateV1::Down,
                StoreStateV1::Tombstone][state];
            let old = v1(id, &address, &labels, state);
            let bytes = first_format(&old);
            prop_assert!(!bytes.starts_with(&MARKER));
            let store = decode_store(&bytes).unwrap();
            prop_assert_eq!(store.id, id);
            prop_assert_eq!(store.address, address);
        }
    }
}

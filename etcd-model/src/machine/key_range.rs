//! The set of keys a request names with etcd's `key`/`range_end` pair: one key when
//! `range_end` is empty, every key from `key` on when it is `"\0"`, else `[key, range_end)`.
//! Owns only that reading of the two fields; the store decides what lives in the range.

use std::ops::Bound;

/// A range's lower and upper bound, as `BTreeMap::range` takes them.
pub type Bounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// Keys named by a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRange {
    /// Exactly one key.
    Single(Vec<u8>),
    /// `[start, end)`, or every key from `start` on when `end` is `None`.
    Span {
        start: Vec<u8>,
        end: Option<Vec<u8>>,
    },
}

impl KeyRange {
    /// etcd's reading of `key` and `range_end` (its `mkGteRange`: `"\0"` means no upper bound).
    pub fn new(key: &[u8], range_end: &[u8]) -> KeyRange {
        match range_end {
            [] => KeyRange::Single(key.to_vec()),
            [0] => KeyRange::Span {
                start: key.to_vec(),
                end: None,
            },
            end => KeyRange::Span {
                start: key.to_vec(),
                end: Some(end.to_vec()),
            },
        }
    }

    /// Whether `key` is in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        match self {
            KeyRange::Single(k) => k.as_slice() == key,
            KeyRange::Span { start, end } => {
                key >= start.as_slice() && end.as_ref().is_none_or(|e| key < e.as_slice())
            }
        }
    }

    /// The bounds for a `BTreeMap::range`, or `None` when the range holds no key at all (an
    /// end at or before the start), which `BTreeMap::range` would refuse.
    pub fn bounds(&self) -> Option<Bounds<'_>> {
        match self {
            KeyRange::Single(k) => {
                Some((Bound::Included(k.as_slice()), Bound::Included(k.as_slice())))
            }
            KeyRange::Span { start, end: None } => {
                Some((Bound::Included(start.as_slice()), Bound::Unbounded))
            }
            KeyRange::Span {
                start,
                end: Some(end),
            } => (start < end).then_some((
                Bound::Included(start.as_slice()),
                Bound::Excluded(end.as_slice()),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_prefix_and_from_key() {
        assert!(KeyRange::new(b"a", b"").contains(b"a"));
        assert!(!KeyRange::new(b"a", b"").contains(b"ab"));
        let prefix = KeyRange::new(b"a/", b"a0");
        assert!(prefix.contains(b"a/x"));
        assert!(!prefix.contains(b"a0"));
        let from = KeyRange::new(b"b", b"\0");
        assert!(from.contains(b"zzz"));
        assert!(!from.contains(b"a"));
        assert!(KeyRange::new(b"b", b"a").bounds().is_none());
    }
}

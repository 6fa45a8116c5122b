//! The multi-version key space: every key's history of values and deletions by revision, so a
//! read at an older revision sees the store as it was. Owns versions and compaction only;
//! revisions are handed in by the writer, leases and watchers live elsewhere.

use std::collections::BTreeMap;

use super::key_range::KeyRange;
use crate::mvccpb::KeyValue;

/// One entry of a key's history: its value from `revision` on, or its deletion (`None`).
#[derive(Debug, Clone)]
struct Entry {
    revision: i64,
    kv: Option<KeyValue>,
}

/// All keys with their histories, oldest entry first.
#[derive(Debug, Default, Clone)]
pub struct Store {
    keys: BTreeMap<Vec<u8>, Vec<Entry>>,
}

impl Store {
    /// The key's value as of `revision`, if it existed then.
    pub fn get(&self, key: &[u8], revision: i64) -> Option<&KeyValue> {
        Self::at(self.keys.get(key)?, revision)
    }

    fn at(history: &[Entry], revision: i64) -> Option<&KeyValue> {
        let newer = history.partition_point(|e| e.revision <= revision);
        history[..newer].last()?.kv.as_ref()
    }

    /// The live key-values in `range` as of `revision`, in key order.
    pub fn range<'a>(
        &'a self,
        range: &KeyRange,
        revision: i64,
    ) -> impl Iterator<Item = &'a KeyValue> + 'a {
        let entries: Box<dyn Iterator<Item = (&'a Vec<u8>, &'a Vec<Entry>)> + 'a> =
            match range.bounds() {
                None => Box::new(std::iter::empty()),
                Some(bounds) => Box::new(self.keys.range::<[u8], _>(bounds)),
            };
        entries.filter_map(move |(_, history)| Self::at(history, revision))
    }

    /// Records `kv` as the key's value from its `mod_revision` on.
    pub fn put(&mut self, kv: KeyValue) {
        let history = self.keys.entry(kv.key.clone()).or_default();
        Self::push(
            history,
            Entry {
                revision: kv.mod_revision,
                kv: Some(kv),
            },
        );
    }

    /// Records the key's deletion at `revision`.
    pub fn delete(&mut self, key: &[u8], revision: i64) {
        if let Some(history) = self.keys.get_mut(key) {
            Self::push(history, Entry { revision, kv: None });
        }
    }

    /// A second write of one key in one revision replaces the first (etcd refuses such txns
    /// up front; this keeps the history sorted whatever happens).
    fn push(history: &mut Vec<Entry>, entry: Entry) {
        match history.last_mut() {
            Some(last) if last.revision == entry.revision => *last = entry,
            _ => history.push(entry),
        }
    }

    /// Forgets what only reads below `revision` could see: of each key, the entries before its
    /// state at `revision`, and that state too when it is a deletion (as etcd drops the
    /// tombstones a compaction passes).
    pub fn compact(&mut self, revision: i64) {
        self.keys.retain(|_, history| {
            let newer = history.partition_point(|e| e.revision <= revision);
            if newer > 0 {
                let keep_from = if history[newer - 1].kv.is_some() {
                    newer - 1
                } else {
                    newer
                };
                history.drain(..keep_from);
            }
            !history.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: &str, revision: i64) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: value.into(),
            create_revision: revision,
            mod_revision: revision,
            version: 1,
            lease: 0,
        }
    }

    #[test]
    fn reads_see_the_revision_asked_for() {
        let mut store = Store::default();
        store.put(kv("a", "1", 2));
        store.put(kv("a", "2", 3));
        store.delete(b"a", 4);
        assert!(store.get(b"a", 1).is_none());
        assert_eq!(store.get(b"a", 2).map(|k| &k.value[..]), Some(&b"1"[..]));
        assert_eq!(store.get(b"a", 3).map(|k| &k.value[..]), Some(&b"2"[..]));
        assert!(store.get(b"a", 4).is_none());
        store.compact(3);
        assert_eq!(store.get(b"a", 3).map(|k| &k.value[..]), Some(&b"2"[..]));
        store.compact(4);
        assert!(store.keys.is_empty(), "a tombstone at the compaction goes");
    }
}

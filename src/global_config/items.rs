//! The items, their revisions and the recent changes: what StoreGlobalConfig writes (one
//! transaction, one revision, as etcd counts them), LoadGlobalConfig reads (by name or by
//! prefix) and WatchGlobalConfig follows (changes from a revision on, until they are no longer
//! held: then the watcher is told the revision was compacted, as etcd tells it, and loads
//! again). Changes are held from the revision this leader loaded at, within a count and a
//! byte budget. The shell persists a transaction's writes before it commits it here.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use meridian_client::proto::{ConfigChange, ConfigEvent, ConfigEventKind, ConfigItem};

use super::path;

/// etcd's default `--max-txn-ops`: PD sends a store's changes as one etcd transaction.
pub const MAX_TXN_OPS: usize = 128;
/// Most changes held for watchers.
const LOG_EVENTS: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    // etcd's words, which PD passes on.
    #[error("etcdserver: too many operations in txn request")]
    TooManyOps,
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
    #[error("global config would hold {bytes} bytes, over limits.max_global_config_bytes = {max}")]
    TooLarge { bytes: usize, max: usize },
}

/// A watch from a revision whose changes are no longer held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    pub required: i64,
    /// The oldest revision still held (etcd's compact revision).
    pub compact_revision: i64,
}

/// A transaction decided and not yet applied: persist `writes`, `revision` and `events`,
/// then [`GlobalConfig::commit`] it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    pub revision: i64,
    /// Full keys: a value to put, or `None` to delete.
    pub writes: Vec<(String, Option<Vec<u8>>)>,
    events: Vec<ConfigEvent>,
    bytes: usize,
}

impl Txn {
    /// What watchers are told of this transaction ([`GlobalConfig::hold_last`] takes them back
    /// after a load).
    pub fn events(&self) -> &[ConfigEvent] {
        &self.events
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlobalConfig {
    items: BTreeMap<String, Vec<u8>>,
    /// Bytes of all keys and values.
    bytes: usize,
    /// The revision of the last transaction; 0 before the first.
    revision: i64,
    /// Changes since `compacted`, oldest first.
    log: VecDeque<ConfigEvent>,
    log_bytes: usize,
    log_budget: usize,
    /// Changes at or below this revision are no longer held.
    compacted: i64,
}

fn size(key: &str, value: &[u8]) -> usize {
    key.len() + value.len()
}

impl GlobalConfig {
    /// The items and revision a term loads; the changes before it are not held. `log_budget`
    /// bounds the bytes of the changes held for watchers.
    pub fn new(
        items: impl IntoIterator<Item = (String, Vec<u8>)>,
        revision: i64,
        log_budget: usize,
    ) -> GlobalConfig {
        let items: BTreeMap<String, Vec<u8>> = items.into_iter().collect();
        GlobalConfig {
            bytes: items.iter().map(|(k, v)| size(k, v)).sum(),
            items,
            revision,
            log: VecDeque::new(),
            log_bytes: 0,
            log_budget,
            compacted: revision,
        }
    }

    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// Holds again the changes of the transaction a term loaded at, persisted with it: a watch
    /// from the loaded revision (TiDB watches from the revision LoadGlobalConfig answered, as
    /// etcd lets it) then starts at that transaction, as it would on etcd, instead of being
    /// told the revision was compacted. Changes of any other revision are ignored: what is not
    /// the last transaction stays compacted.
    pub fn hold_last(mut self, events: Vec<ConfigEvent>) -> GlobalConfig {
        if self.revision < 1
            || events.is_empty()
            || events.iter().any(|e| e.revision != self.revision)
        {
            return self;
        }
        for e in events {
            self.log_bytes += size(&e.key, &e.value);
            self.log.push_back(e);
        }
        self.compacted = self.revision - 1;
        self
    }

    /// Decides StoreGlobalConfig's `changes` under `config_path` (PD's default applied by the
    /// caller): each name joined to the path as PD joins it, a put storing its value, a delete
    /// removing the key. `None` when nothing would change (no changes, or deletes of keys that
    /// are not there), which takes no revision, as in etcd.
    pub fn plan(
        &self,
        config_path: &str,
        changes: &[ConfigChange],
        max_bytes: usize,
    ) -> Result<Option<Txn>, TxnError> {
        if changes.len() > MAX_TXN_OPS {
            return Err(TxnError::TooManyOps);
        }
        let keys: Vec<String> = changes
            .iter()
            .map(|c| path::join(&[config_path, &c.name]))
            .collect();
        if keys.iter().collect::<BTreeSet<_>>().len() != keys.len() {
            return Err(TxnError::DuplicateKey);
        }
        let revision = self.revision + 1;
        let mut bytes = self.bytes;
        let mut writes = Vec::new();
        let mut events = Vec::new();
        for (key, change) in keys.into_iter().zip(changes) {
            let old = self.items.get(&key);
            if let Some(old) = old {
                bytes -= size(&key, old);
            }
            match change.kind {
                ConfigEventKind::Put => {
                    bytes += size(&key, &change.value);
                    writes.push((key.clone(), Some(change.value.clone())));
                    events.push(ConfigEvent {
                        key,
                        kind: ConfigEventKind::Put,
                        value: change.value.clone(),
                        revision,
                    });
                }
                ConfigEventKind::Delete => {
                    if let Some(old) = old {
                        writes.push((key.clone(), None));
                        events.push(ConfigEvent {
                            key,
                            kind: ConfigEventKind::Delete,
                            value: old.clone(),
                            revision,
                        });
                    }
                }
            }
        }
        if bytes > max_bytes && bytes > self.bytes {
            return Err(TxnError::TooLarge {
                bytes,
                max: max_bytes,
            });
        }
        if writes.is_empty() {
            return Ok(None);
        }
        Ok(Some(Txn {
            revision,
            writes,
            events,
            bytes,
        }))
    }

    /// Applies a transaction [`plan`](Self::plan) decided (and the caller made durable).
    pub fn commit(&mut self, txn: Txn) {
        for (key, value) in txn.writes {
            match value {
                Some(v) => self.items.insert(key, v),
                None => self.items.remove(&key),
            };
        }
        self.bytes = txn.bytes;
        self.revision = self.revision.max(txn.revision);
        for e in txn.events {
            self.log_bytes += size(&e.key, &e.value);
            self.log.push_back(e);
        }
        while self.log.len() > LOG_EVENTS
            || (self.log_bytes > self.log_budget && self.log.len() > 1)
        {
            let Some(gone) = self.log.pop_front() else {
                break;
            };
            self.log_bytes -= size(&gone.key, &gone.value);
            self.compacted = self.compacted.max(gone.revision);
        }
    }

    /// LoadGlobalConfig: with `names`, each one's item under `config_path` (by the name as
    /// given; `None` when there is none) and revision 0, as PD answers; without, every item
    /// whose full key starts with `config_path` (by full key) and the current revision.
    pub fn load(&self, config_path: &str, names: &[String]) -> (Vec<ConfigItem>, i64) {
        if !names.is_empty() {
            let items = names
                .iter()
                .map(|name| ConfigItem {
                    name: name.clone(),
                    value: self.items.get(&path::join(&[config_path, name])).cloned(),
                })
                .collect();
            return (items, 0);
        }
        let items = self
            .items
            .range(config_path.to_string()..)
            .take_while(|(k, _)| k.starts_with(config_path))
            .map(|(k, v)| ConfigItem {
                name: k.clone(),
                value: Some(v.clone()),
            })
            .collect();
        (items, self.revision)
    }

    /// The changes at revision `from` or later whose keys start with `prefix`, oldest first,
    /// as many as `budget` bytes hold (always one, if there is one).
    pub fn changes(
        &self,
        prefix: &str,
        from: i64,
        budget: usize,
    ) -> Result<Vec<ConfigEvent>, Compacted> {
        if from <= self.compacted {
            return Err(Compacted {
                required: from,
                compact_revision: self.compacted + 1,
            });
        }
        let mut used = 0;
        let mut out = Vec::new();
        for e in self
            .log
            .iter()
            .filter(|e| e.revision >= from && e.key.starts_with(prefix))
        {
            used += size(&e.key, &e.value);
            if !out.is_empty() && used > budget {
                break;
            }
            out.push(e.clone());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PATH: &str = "/global/config/";

    fn put(name: &str, value: &str) -> ConfigChange {
        ConfigChange {
            name: name.into(),
            kind: ConfigEventKind::Put,
            value: value.as_bytes().to_vec(),
        }
    }

    fn delete(name: &str) -> ConfigChange {
        ConfigChange {
            name: name.into(),
            kind: ConfigEventKind::Delete,
            value: Vec::new(),
        }
    }

    fn store(g: &mut GlobalConfig, changes: &[ConfigChange]) -> Option<i64> {
        let txn = g.plan(PATH, changes, 1 << 20).unwrap()?;
        let revision = txn.revision;
        g.commit(txn);
        Some(revision)
    }

    #[test]
    fn a_transaction_is_one_revision_and_watchers_see_it_from_there() {
        let mut g = GlobalConfig::new([], 0, 1 << 20);
        assert_eq!(store(&mut g, &[]), None, "nothing to do takes no revision");
        assert_eq!(store(&mut g, &[delete("absent")]), None);
        let r1 = store(
            &mut g,
            &[
                put("source_id", "1"),
                put("enable_resource_metering", "true"),
            ],
        );
        assert_eq!(r1, Some(1));
        let r2 = store(&mut g, &[delete("source_id")]).unwrap();
        let (items, revision) = g.load(PATH, &[]);
        assert_eq!(revision, r2);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].name, "/global/config/enable_resource_metering");
        let (by_name, revision) = g.load(
            PATH,
            &["source_id".into(), "enable_resource_metering".into()],
        );
        assert_eq!(revision, 0);
        assert_eq!(by_name[0].value, None);
        assert_eq!(by_name[1].value.as_deref(), Some(&b"true"[..]));

        let all = g.changes(PATH, 1, 1 << 20).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[2].kind, ConfigEventKind::Delete);
        assert_eq!(all[2].value, b"1", "a delete carries the last value");
        assert_eq!(g.changes(PATH, r2 + 1, 1 << 20).unwrap(), vec![]);
        assert_eq!(g.changes("/other/", 1, 1 << 20).unwrap(), vec![]);
    }

    #[test]
    fn bad_transactions_change_nothing() {
        let mut g = GlobalConfig::new([], 0, 1 << 20);
        store(&mut g, &[put("a", "1")]);
        let before = g.clone();
        let many: Vec<ConfigChange> = (0..=MAX_TXN_OPS)
            .map(|i| put(&i.to_string(), "v"))
            .collect();
        assert_eq!(g.plan(PATH, &many, 1 << 20), Err(TxnError::TooManyOps));
        assert_eq!(
            g.plan(PATH, &[put("x", "1"), put("./x", "2")], 1 << 20),
            Err(TxnError::DuplicateKey),
            "the same key once joined"
        );
        assert!(matches!(
            g.plan(PATH, &[put("big", &"v".repeat(100))], 64),
            Err(TxnError::TooLarge { .. })
        ));
        assert_eq!(g, before);
    }

    #[test]
    fn a_term_holds_changes_from_its_load_and_a_watch_before_them_is_compacted() {
        let loaded = GlobalConfig::new([("/global/config/a".to_string(), b"1".to_vec())], 7, 64);
        assert_eq!(
            loaded.changes(PATH, 7, 1024),
            Err(Compacted {
                required: 7,
                compact_revision: 8
            })
        );
        let mut g = loaded;
        for i in 0..10 {
            store(&mut g, &[put("k", &format!("value-{i:04}"))]);
        }
        // Revisions 8..=17; 64 bytes hold two changes of 26 (key and value): the others go.
        let err = g.changes(PATH, 8, 1024).unwrap_err();
        assert_eq!(err.compact_revision, 16);
        assert_eq!(g.changes(PATH, 16, 1024).unwrap().len(), 2);
        assert_eq!(g.changes(PATH, 16, 1).unwrap().len(), 1, "one at least");
    }

    #[test]
    fn the_last_transaction_is_held_again_after_a_load() {
        let mut g = GlobalConfig::new([], 0, 1 << 20);
        store(&mut g, &[put("a", "1")]);
        let txn = g
            .plan(
                PATH,
                &[ConfigChange {
                    name: "b".into(),
                    kind: ConfigEventKind::Put,
                    value: b"2".to_vec(),
                }],
                1 << 20,
            )
            .unwrap()
            .unwrap();
        let last = txn.events().to_vec();
        g.commit(txn);
        let (items, revision) = g.load(PATH, &[]);
        let items: Vec<_> = items
            .into_iter()
            .map(|i| (i.name, i.value.unwrap()))
            .collect();
        let loaded = GlobalConfig::new(items.clone(), revision, 1 << 20).hold_last(last.clone());
        assert_eq!(loaded.changes(PATH, revision, 1024), Ok(last.clone()));
        assert_eq!(
            loaded.changes(PATH, revision - 1, 1024),
            Err(Compacted {
                required: revision - 1,
                compact_revision: revision
            })
        );
        // Changes of another revision are not the last transaction's: nothing is held.
        let stale = GlobalConfig::new(items, revision + 1, 1 << 20).hold_last(last);
        assert!(stale.changes(PATH, revision + 1, 1024).is_err());
    }

    proptest! {
        /// Replaying the changes a watcher is given from the load on rebuilds what a load
        /// returns, whatever the transactions.
        #[test]
        fn watched_changes_rebuild_the_items(
            txns in prop::collection::vec(
                prop::collection::vec((0u8..4, any::<bool>(), 0u8..3), 0..4), 1..20)
        ) {
            let mut g = GlobalConfig::new([], 0, 1 << 20);
            for txn in txns {
                let mut seen = BTreeSet::new();
                let changes: Vec<ConfigChange> = txn
                    .into_iter()
                    .filter(|(k, _, _)| seen.insert(*k))
                    .map(|(k, is_put, v)| if is_put { put(&k.to_string(), &v.to_string()) } else { delete(&k.to_string()) })
                    .collect();
                store(&mut g, &changes);
            }
            let mut rebuilt = BTreeMap::new();
            for e in g.changes(PATH, 1, usize::MAX).unwrap() {
                match e.kind {
                    ConfigEventKind::Put => rebuilt.insert(e.key, e.value),
                    ConfigEventKind::Delete => rebuilt.remove(&e.key),
                };
            }
            let (items, _) = g.load(PATH, &[]);
            let loaded: BTreeMap<String, Vec<u8>> =
                items.into_iter().map(|i| (i.name, i.value.unwrap_or_default())).collect();
            prop_assert_eq!(rebuilt, loaded);
        }
    }
}

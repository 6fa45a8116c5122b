//! Properties of the pure core under random histories of puts, deletes and txns, checked
//! against a plain reference (a full copy of the key space per revision): revisions go up by
//! exactly one per write, a range at revision R sees exactly the writes up to R, and a watch
//! from the first revision replays the same history.

use std::collections::BTreeMap;

use etcd_model::pb::compare::{CompareResult, CompareTarget, TargetUnion};
use etcd_model::pb::request_op::Request;
use etcd_model::pb::watch_request::RequestUnion;
use etcd_model::pb::*;
use etcd_model::Etcd;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Put(u8, u8),
    Delete(u8),
    DeleteAll,
    /// If key `.0` holds value `.1`, apply `.2` (key -> value, `None` deletes), else `.3`.
    Txn(u8, u8, BTreeMap<u8, Option<u8>>, BTreeMap<u8, Option<u8>>),
}

fn key(k: u8) -> Vec<u8> {
    format!("k{k}").into_bytes()
}

fn value(v: u8) -> Vec<u8> {
    vec![b'a' + v]
}

fn op() -> impl Strategy<Value = Op> {
    let writes = || proptest::collection::btree_map(0u8..6, proptest::option::of(0u8..3), 0..4);
    prop_oneof![
        4 => (0u8..6, 0u8..3).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (0u8..6).prop_map(Op::Delete),
        1 => Just(Op::DeleteAll),
        3 => (0u8..6, 0u8..3, writes(), writes()).prop_map(|(k, v, t, e)| Op::Txn(k, v, t, e)),
    ]
}

/// What the reference keeps of a key: value, create, mod, version.
type Kv = (Vec<u8>, i64, i64, i64);

/// The key space at every revision: `states[r]` is the store at revision `r`.
struct Reference {
    states: Vec<BTreeMap<Vec<u8>, Kv>>,
}

impl Reference {
    fn new() -> Reference {
        Reference {
            states: vec![BTreeMap::new(), BTreeMap::new()],
        }
    }

    fn revision(&self) -> i64 {
        self.states.len() as i64 - 1
    }

    /// Applies one revision's writes; a revision is taken only if something changed.
    fn write(&mut self, writes: &[(Vec<u8>, Option<Vec<u8>>)]) {
        let revision = self.revision() + 1;
        let mut next = self.states[self.states.len() - 1].clone();
        let mut changed = false;
        for (k, v) in writes {
            match v {
                Some(v) => {
                    let (create, version) = match next.get(k) {
                        Some((_, c, _, ver)) => (*c, ver + 1),
                        None => (revision, 1),
                    };
                    next.insert(k.clone(), (v.clone(), create, revision, version));
                    changed = true;
                }
                None => changed |= next.remove(k).is_some(),
            }
        }
        if changed {
            self.states.push(next);
        }
    }
}

fn request(k: u8, v: Option<u8>) -> RequestOp {
    RequestOp {
        request: Some(match v {
            Some(v) => Request::RequestPut(PutRequest {
                key: key(k),
                value: value(v),
                ..Default::default()
            }),
            None => Request::RequestDeleteRange(DeleteRangeRequest {
                key: key(k),
                ..Default::default()
            }),
        }),
    }
}

fn all_keys(revision: i64) -> RangeRequest {
    RangeRequest {
        key: b"k".to_vec(),
        range_end: b"l".to_vec(),
        revision,
        ..Default::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_core_matches_a_revision_by_revision_reference(ops in proptest::collection::vec(op(), 1..40)) {
        let mut etcd = Etcd::default();
        let mut reference = Reference::new();
        let watch = etcd.open_watch_stream();
        let create = WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                key: b"k".to_vec(),
                range_end: b"l".to_vec(),
                start_revision: 1,
                ..Default::default()
            })),
        };
        etcd.watch_request(watch, &create, 0);
        for op in &ops {
            let before = etcd.revision();
            let writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = match op {
                Op::Put(k, v) => {
                    let p = PutRequest { key: key(*k), value: value(*v), ..Default::default() };
                    etcd.put(&p, 0).unwrap();
                    vec![(key(*k), Some(value(*v)))]
                }
                Op::Delete(k) => {
                    let d = DeleteRangeRequest { key: key(*k), ..Default::default() };
                    etcd.delete_range(&d, 0).unwrap();
                    vec![(key(*k), None)]
                }
                Op::DeleteAll => {
                    let d = DeleteRangeRequest { key: b"k".to_vec(), range_end: b"l".to_vec(), ..Default::default() };
                    let live: Vec<_> = reference.states.last().unwrap().keys().cloned().collect();
                    etcd.delete_range(&d, 0).unwrap();
                    live.into_iter().map(|k| (k, None)).collect()
                }
                Op::Txn(k, v, then, otherwise) => {
                    let holds = reference.states.last().unwrap().get(&key(*k)).is_some_and(|kv| kv.0 == value(*v));
                    let t = TxnRequest {
                        compare: vec![Compare {
                            result: CompareResult::Equal as i32,
                            target: CompareTarget::Value as i32,
                            key: key(*k),
                            target_union: Some(TargetUnion::Value(value(*v))),
                            range_end: vec![],
                        }],
                        success: then.iter().map(|(k, v)| request(*k, *v)).collect(),
                        failure: otherwise.iter().map(|(k, v)| request(*k, *v)).collect(),
                    };
                    let response = etcd.txn(&t, 0).unwrap();
                    prop_assert_eq!(response.succeeded, holds);
                    let branch = if holds { then } else { otherwise };
                    branch.iter().map(|(k, v)| (key(*k), v.map(value))).collect()
                }
            };
            reference.write(&writes);
            prop_assert_eq!(etcd.revision(), reference.revision());
            prop_assert!(etcd.revision() == before || etcd.revision() == before + 1);
        }
        // Every revision reads exactly the reference's state at it.
        for revision in 1..=reference.revision() {
            let got: BTreeMap<Vec<u8>, Kv> = etcd
                .range(&all_keys(revision), 0)
                .unwrap()
                .kvs
                .into_iter()
                .map(|kv| (kv.key, (kv.value, kv.create_revision, kv.mod_revision, kv.version)))
                .collect();
            prop_assert_eq!(&got, &reference.states[revision as usize], "at revision {}", revision);
        }
        // The watch from revision 1 saw every write, once, in revision order, and replaying
        // it rebuilds the final state.
        let mut replayed: BTreeMap<Vec<u8>, Kv> = BTreeMap::new();
        let mut last = 0;
        for (stream, response) in etcd.take_watch_responses() {
            prop_assert_eq!(stream, watch);
            for event in response.events {
                let kv = event.kv.unwrap();
                prop_assert!(kv.mod_revision >= last);
                last = kv.mod_revision;
                if event.r#type == 0 {
                    replayed.insert(kv.key.clone(), (kv.value, kv.create_revision, kv.mod_revision, kv.version));
                } else {
                    replayed.remove(&kv.key);
                }
            }
        }
        prop_assert_eq!(last, if reference.revision() > 1 { reference.revision() } else { 0 });
        prop_assert_eq!(&replayed, reference.states.last().unwrap());
    }
}

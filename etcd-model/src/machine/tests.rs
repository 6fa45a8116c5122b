//! Unit tests of the core on its own: revisions, compares, paging, leases in milliseconds,
//! watches and compaction, each against what etcd does.

use super::*;
use crate::mvccpb::event::EventType;
use crate::pb::compare::{CompareResult, CompareTarget, TargetUnion};
use crate::pb::request_op::Request;
use crate::pb::response_op::Response;
use crate::pb::watch_request::RequestUnion;
use crate::pb::*;

fn put(key: &str, value: &str) -> PutRequest {
    PutRequest {
        key: key.into(),
        value: value.into(),
        ..Default::default()
    }
}

fn get(key: &str) -> RangeRequest {
    RangeRequest {
        key: key.into(),
        ..Default::default()
    }
}

fn prefix(key: &str) -> RangeRequest {
    let mut end = key.as_bytes().to_vec();
    *end.last_mut().unwrap() += 1;
    RangeRequest {
        key: key.into(),
        range_end: end,
        ..Default::default()
    }
}

fn compare_create(key: &str, revision: i64) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Create as i32,
        key: key.into(),
        target_union: Some(TargetUnion::CreateRevision(revision)),
        range_end: vec![],
    }
}

fn compare_value(key: &str, value: &str) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Value as i32,
        key: key.into(),
        target_union: Some(TargetUnion::Value(value.into())),
        range_end: vec![],
    }
}

fn op_put(p: PutRequest) -> RequestOp {
    RequestOp {
        request: Some(Request::RequestPut(p)),
    }
}

fn op_get(r: RangeRequest) -> RequestOp {
    RequestOp {
        request: Some(Request::RequestRange(r)),
    }
}

fn campaign(key: &str, value: &str, lease: i64) -> TxnRequest {
    TxnRequest {
        compare: vec![compare_create(key, 0)],
        success: vec![op_put(PutRequest {
            lease,
            ..put(key, value)
        })],
        failure: vec![op_get(get(key))],
    }
}

fn revision_of(header: &Option<ResponseHeader>) -> i64 {
    header.as_ref().map(|h| h.revision).unwrap_or(-100)
}

#[test]
fn writes_take_one_revision_each_and_reads_none() {
    let mut etcd = Etcd::default();
    assert_eq!(etcd.revision(), 1);
    let r = etcd.put(&put("a", "1"), 0).unwrap();
    assert_eq!(revision_of(&r.header), 2);
    let r = etcd.put(&put("a", "2"), 0).unwrap();
    assert_eq!(revision_of(&r.header), 3);
    let kv = etcd.range(&get("a"), 0).unwrap().kvs[0].clone();
    assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 3, 2));
    // Deleting nothing writes nothing.
    let d = DeleteRangeRequest {
        key: "zz".into(),
        ..Default::default()
    };
    let r = etcd.delete_range(&d, 0).unwrap();
    assert_eq!((r.deleted, revision_of(&r.header)), (0, 3));
    // A txn of two puts is one revision; the read inside sees the first put.
    let t = TxnRequest {
        compare: vec![],
        success: vec![
            op_put(put("b", "1")),
            op_get(get("b")),
            op_put(put("c", "1")),
        ],
        failure: vec![],
    };
    let r = etcd.txn(&t, 0).unwrap();
    assert_eq!(revision_of(&r.header), 4);
    match &r.responses[1].response {
        Some(Response::ResponseRange(range)) => {
            assert_eq!(range.kvs[0].mod_revision, 4);
            assert_eq!(range.header.as_ref().unwrap().revision, 4);
        }
        other => panic!("{other:?}"),
    }
    // Delete then re-create: a new create revision, version 1.
    let d = DeleteRangeRequest {
        key: "a".into(),
        ..Default::default()
    };
    etcd.delete_range(&d, 0).unwrap();
    etcd.put(&put("a", "3"), 0).unwrap();
    let kv = etcd.range(&get("a"), 0).unwrap().kvs[0].clone();
    assert_eq!((kv.create_revision, kv.version), (6, 1));
}

#[test]
fn campaign_wins_once_and_the_loser_reads_the_winner() {
    let mut etcd = Etcd::default();
    let l1 = etcd
        .lease_grant(&LeaseGrantRequest { ttl: 10, id: 0 }, 0)
        .unwrap()
        .id;
    let won = etcd.txn(&campaign("leader", "m1", l1), 0).unwrap();
    assert!(won.succeeded);
    let lost = etcd.txn(&campaign("leader", "m2", 0), 0).unwrap();
    assert!(!lost.succeeded);
    assert_eq!(
        revision_of(&lost.header),
        2,
        "a lost campaign writes nothing"
    );
    match &lost.responses[0].response {
        Some(Response::ResponseRange(r)) => {
            assert_eq!(r.kvs[0].value, b"m1");
            assert_eq!(r.kvs[0].lease, l1);
        }
        other => panic!("{other:?}"),
    }
    // The guard: a write compared against the leader's value.
    let guarded = |value: &str| TxnRequest {
        compare: vec![compare_value("leader", value)],
        success: vec![op_put(put("data", value))],
        failure: vec![],
    };
    assert!(etcd.txn(&guarded("m1"), 0).unwrap().succeeded);
    assert!(!etcd.txn(&guarded("m2"), 0).unwrap().succeeded);
    // A value compare on a missing key fails whatever the value.
    let missing = TxnRequest {
        compare: vec![compare_value("nobody", "")],
        ..Default::default()
    };
    assert!(!etcd.txn(&missing, 0).unwrap().succeeded);
}

#[test]
fn paged_range_with_limit_more_and_count() {
    let mut etcd = Etcd::default();
    for i in 0..7 {
        etcd.put(&put(&format!("p/{i}"), "v"), 0).unwrap();
    }
    let mut from = b"p/".to_vec();
    let mut pages = Vec::new();
    loop {
        let r = RangeRequest {
            key: from.clone(),
            range_end: b"p0".to_vec(),
            limit: 3,
            ..Default::default()
        };
        let page = etcd.range(&r, 0).unwrap();
        pages.push((page.kvs.len(), page.more, page.count));
        match page.kvs.last() {
            Some(last) if page.more => {
                from = last.key.clone();
                from.push(0);
            }
            _ => break,
        }
    }
    assert_eq!(pages, vec![(3, true, 7), (3, true, 4), (1, false, 1)]);
    let count = RangeRequest {
        count_only: true,
        ..prefix("p/")
    };
    let r = etcd.range(&count, 0).unwrap();
    assert_eq!((r.kvs.len(), r.count), (0, 7));
    let at = RangeRequest {
        revision: 4,
        ..prefix("p/")
    };
    assert_eq!(etcd.range(&at, 0).unwrap().kvs.len(), 3);
    let future = RangeRequest {
        revision: 99,
        ..prefix("p/")
    };
    assert_eq!(etcd.range(&future, 0), Err(EtcdError::FutureRev));
    etcd.compact(
        &CompactionRequest {
            revision: 5,
            physical: false,
        },
        0,
    )
    .unwrap();
    assert_eq!(etcd.range(&at, 0), Err(EtcdError::Compacted));
}

#[test]
fn leases_expire_to_the_millisecond_and_delete_their_keys() {
    let mut etcd = Etcd::default();
    let grant = etcd
        .lease_grant(&LeaseGrantRequest { ttl: 1, id: 0 }, 1_000)
        .unwrap();
    assert_eq!(grant.ttl, 2, "raised to the minimum TTL");
    assert_eq!(
        etcd.put(
            &PutRequest {
                lease: 12345,
                ..put("x", "1")
            },
            1_000
        ),
        Err(EtcdError::LeaseNotFound)
    );
    etcd.put(
        &PutRequest {
            lease: grant.id,
            ..put("k/1", "1")
        },
        1_000,
    )
    .unwrap();
    etcd.put(
        &PutRequest {
            lease: grant.id,
            ..put("k/2", "1")
        },
        1_000,
    )
    .unwrap();
    let stream = etcd.open_watch_stream();
    let create = WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
            key: "k/".into(),
            range_end: "k0".into(),
            ..Default::default()
        })),
    };
    etcd.watch_request(stream, &create, 1_000);
    let keep = LeaseKeepAliveRequest { id: grant.id };
    assert_eq!(etcd.lease_keep_alive(&keep, 2_500).ttl, 2);
    let ttl = LeaseTimeToLiveRequest {
        id: grant.id,
        keys: true,
    };
    let left = etcd.lease_time_to_live(&ttl, 3_000);
    assert_eq!((left.ttl, left.keys.len()), (1, 2));
    etcd.advance(4_499);
    assert_eq!(etcd.range(&get("k/1"), 4_499).unwrap().kvs.len(), 1);
    etcd.advance(4_500);
    assert!(etcd.range(&get("k/1"), 4_500).unwrap().kvs.is_empty());
    assert_eq!(etcd.revision(), 4, "both keys went in one revision");
    assert_eq!(etcd.lease_keep_alive(&keep, 4_500).ttl, 0);
    assert_eq!(etcd.lease_time_to_live(&ttl, 4_500).ttl, -1);
    let responses = etcd.take_watch_responses();
    assert!(responses[0].1.created);
    let deletes: Vec<_> = responses[1]
        .1
        .events
        .iter()
        .map(|e| {
            (
                e.r#type,
                e.kv.as_ref().unwrap().key.clone(),
                e.kv.as_ref().unwrap().mod_revision,
            )
        })
        .collect();
    assert_eq!(
        deletes,
        vec![
            (EventType::Delete as i32, b"k/1".to_vec(), 4),
            (EventType::Delete as i32, b"k/2".to_vec(), 4)
        ]
    );
    assert_eq!(
        etcd.lease_revoke(&LeaseRevokeRequest { id: grant.id }, 4_500),
        Err(EtcdError::LeaseNotFound)
    );
}

#[test]
fn watch_from_the_past_replays_and_a_compacted_start_is_refused() {
    let mut etcd = Etcd::default();
    etcd.put(&put("w/a", "1"), 0).unwrap(); // 2
    etcd.put(&put("other", "1"), 0).unwrap(); // 3
    etcd.put(&put("w/b", "1"), 0).unwrap(); // 4
    let stream = etcd.open_watch_stream();
    let create = |start| WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
            key: "w/".into(),
            range_end: "w0".into(),
            start_revision: start,
            ..Default::default()
        })),
    };
    etcd.watch_request(stream, &create(2), 0);
    etcd.put(&put("w/a", "2"), 0).unwrap(); // 5
    let responses = etcd.take_watch_responses();
    let revisions: Vec<Vec<i64>> = responses
        .iter()
        .map(|(_, r)| {
            r.events
                .iter()
                .map(|e| e.kv.as_ref().unwrap().mod_revision)
                .collect()
        })
        .collect();
    assert_eq!(revisions, vec![vec![], vec![2, 4], vec![5]]);
    etcd.compact(
        &CompactionRequest {
            revision: 4,
            physical: false,
        },
        0,
    )
    .unwrap();
    etcd.watch_request(stream, &create(3), 0);
    let responses = etcd.take_watch_responses();
    assert!(responses[0].1.created);
    assert!(responses[1].1.canceled);
    assert_eq!(responses[1].1.compact_revision, 4);
    // From the compaction itself: allowed, and it sees the put at that revision.
    etcd.watch_request(stream, &create(4), 0);
    let responses = etcd.take_watch_responses();
    assert_eq!(responses.len(), 2);
    assert_eq!(responses[1].1.events.len(), 2);
}

#[test]
fn a_txn_that_writes_a_key_twice_is_refused() {
    let mut etcd = Etcd::default();
    let t = TxnRequest {
        compare: vec![],
        success: vec![op_put(put("a", "1")), op_put(put("a", "2"))],
        failure: vec![],
    };
    assert_eq!(etcd.txn(&t, 0), Err(EtcdError::DuplicateKey));
    let t = TxnRequest {
        compare: vec![],
        success: vec![
            RequestOp {
                request: Some(Request::RequestDeleteRange(DeleteRangeRequest {
                    key: "a".into(),
                    range_end: "b".into(),
                    ..Default::default()
                })),
            },
            op_put(put("a1", "2")),
        ],
        failure: vec![],
    };
    assert_eq!(etcd.txn(&t, 0), Err(EtcdError::DuplicateKey));
    assert_eq!(etcd.revision(), 1);
}

#[test]
fn no_lease_expires_between_leaders_and_a_new_leader_lengthens_every_lease() {
    let mut etcd = Etcd::default();
    let short = etcd
        .lease_grant(&LeaseGrantRequest { ttl: 2, id: 0 }, 0)
        .unwrap();
    let long = etcd
        .lease_grant(&LeaseGrantRequest { ttl: 10, id: 0 }, 0)
        .unwrap();
    etcd.put(
        &PutRequest {
            lease: short.id,
            ..put("leader", "m1")
        },
        0,
    )
    .unwrap();
    let term = etcd
        .range(&get("leader"), 0)
        .unwrap()
        .header
        .unwrap()
        .raft_term;
    etcd.lose_leader(1_000);
    assert!(etcd.is_leaderless());
    assert_eq!(
        etcd.next_expiry(),
        None,
        "nothing to revoke without a leader"
    );
    // Well past the short lease's expiry at 2 s: still there, and its key too.
    etcd.advance(2_500);
    assert_eq!(etcd.range(&get("leader"), 2_500).unwrap().kvs.len(), 1);
    // Elected at 3 s with an election timeout of 1 s: each lease runs its whole TTL from 4 s.
    etcd.elect_leader(3_000, 1_000);
    assert!(!etcd.is_leaderless());
    let header = etcd.range(&get("leader"), 3_000).unwrap().header.unwrap();
    assert_eq!(header.raft_term, term + 1, "a new term");
    assert_eq!(etcd.next_expiry(), Some(6_000));
    etcd.advance(5_999);
    assert_eq!(etcd.range(&get("leader"), 5_999).unwrap().kvs.len(), 1);
    etcd.advance(6_000);
    assert!(etcd.range(&get("leader"), 6_000).unwrap().kvs.is_empty());
    let keep = LeaseKeepAliveRequest { id: long.id };
    assert_eq!(
        etcd.lease_keep_alive(&keep, 6_000).ttl,
        10,
        "the long one lives on"
    );
    assert_eq!(etcd.next_expiry(), Some(16_000));
}

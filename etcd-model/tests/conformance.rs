//! Conformance: the same scripts, through the real `etcd-client` (the crate and version
//! Meridian uses), against a real etcd and against the model served by tonic on a loopback
//! port; the transcripts must agree. Each script plays one of the ways Meridian uses etcd.

mod support;

use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, WatchOptions,
};
use support::{conform, Transcript};

const LEADER: &str = "/meridian/leader";

/// Meridian's campaign: put the leader key with our lease only if it does not exist.
fn campaign_txn(value: &str, lease: i64) -> Txn {
    Txn::new()
        .when([Compare::create_revision(LEADER, CompareOp::Equal, 0)])
        .and_then([TxnOp::put(
            LEADER,
            value,
            Some(PutOptions::new().with_lease(lease)),
        )])
        .or_else([TxnOp::get(LEADER, None)])
}

/// A write guarded by the leader key's value, as `EtcdStore`'s guarded handle makes it.
fn guarded(leader: &str, ops: Vec<TxnOp>) -> Txn {
    Txn::new()
        .when([Compare::value(LEADER, CompareOp::Equal, leader)])
        .and_then(ops)
}

async fn campaign(mut c: Client) -> Vec<String> {
    let mut t = Transcript::start(&mut c).await;
    let l1 = c.lease_grant(10, None).await.expect("grant");
    let name = t.lease(l1.id());
    t.line(format!("grant {name} ttl {}", l1.ttl()));
    let r = c.txn(campaign_txn("m1", l1.id())).await;
    t.outcome("m1 campaigns", r, |t, r| t.txn(&r));
    let l2 = c.lease_grant(10, None).await.expect("grant");
    let r = c.txn(campaign_txn("m2", l2.id())).await;
    t.outcome("m2 campaigns", r, |t, r| t.txn(&r));
    let r = c.lease_revoke(l2.id()).await;
    t.outcome("m2 gives its lease back", r, |t, r| {
        t.rev(r.header().map(|h| h.revision()).unwrap_or_default())
    });
    // MetaStore::create: put-if-absent, else the value that is there.
    for value in ["first", "second"] {
        let txn = Txn::new()
            .when([Compare::create_revision(
                "/meridian/id",
                CompareOp::Equal,
                0,
            )])
            .and_then([TxnOp::put("/meridian/id", value, None)])
            .or_else([TxnOp::get("/meridian/id", None)]);
        let r = c.txn(txn).await;
        t.outcome(&format!("create {value}"), r, |t, r| t.txn(&r));
    }
    // A transfer: guarded by m1's value, name the target and delete the leader key.
    let marker = c.lease_grant(10, None).await.expect("grant");
    let txn = guarded(
        "m1",
        vec![
            TxnOp::put(
                "/meridian/leader/transfer",
                "m2",
                Some(PutOptions::new().with_lease(marker.id())),
            ),
            TxnOp::delete(LEADER, None),
        ],
    );
    let r = c.txn(txn).await;
    t.outcome("m1 transfers to m2", r, |t, r| t.txn(&r));
    let r = c.get(LEADER, None).await;
    t.outcome("leader after transfer", r, |t, r| t.kvs(r.kvs()));
    let l3 = c.lease_grant(10, None).await.expect("grant");
    let r = c.txn(campaign_txn("m2", l3.id())).await;
    t.outcome("m2 campaigns again", r, |t, r| t.txn(&r));
    let r = c.get(LEADER, None).await;
    t.outcome("leader now", r, |t, r| t.kvs(r.kvs()));
    // A campaign on a free key with a lease that does not exist.
    let txn = Txn::new()
        .when([Compare::create_revision(
            "/other/leader",
            CompareOp::Equal,
            0,
        )])
        .and_then([TxnOp::put(
            "/other/leader",
            "x",
            Some(PutOptions::new().with_lease(0x7fff_1234)),
        )]);
    let r = c.txn(txn).await;
    t.outcome("campaign with no such lease", r, |t, r| t.txn(&r));
    // The loser's watch from the revision after its read sees the resignation.
    let read_at = c_revision(&mut c).await;
    let mut watch = c
        .watch(
            LEADER,
            Some(WatchOptions::new().with_start_revision(read_at + 1)),
        )
        .await
        .expect("watch");
    t.watch_control("leader watch", &mut watch).await;
    let resign = guarded("m2", vec![TxnOp::delete(LEADER, None)]);
    let r = c.txn(resign).await;
    t.outcome("m2 resigns", r, |t, r| t.txn(&r));
    t.watch_events("leader watch", &mut watch, 1).await;
    t.lines
}

async fn c_revision(c: &mut Client) -> i64 {
    c.get(LEADER, None)
        .await
        .ok()
        .and_then(|r| r.header().map(|h| h.revision()))
        .unwrap_or_default()
}

async fn guarded_writes(mut c: Client) -> Vec<String> {
    let mut t = Transcript::start(&mut c).await;
    c.put(LEADER, "m1", None).await.expect("put");
    c.put("/d/a", "0", None).await.expect("put");
    let ok = guarded(
        "m1",
        vec![TxnOp::put("/d/a", "1", None), TxnOp::put("/d/b", "1", None)],
    );
    let r = c.txn(ok).await;
    t.outcome("guarded by the right value", r, |t, r| t.txn(&r));
    let stale = guarded("m2", vec![TxnOp::put("/d/a", "2", None)]);
    let r = c.txn(stale).await;
    t.outcome("guarded by a stale value", r, |t, r| t.txn(&r));
    let r = c.get("/d/a", None).await;
    t.outcome("a after", r, |t, r| t.kvs(r.kvs()));
    let a_mod = c.get("/d/a", None).await.expect("get").kvs()[0].mod_revision();
    let compares = [
        (
            "version > 1",
            Compare::version("/d/a", CompareOp::Greater, 1),
        ),
        ("version < 1", Compare::version("/d/a", CompareOp::Less, 1)),
        (
            "mod == a's",
            Compare::mod_revision("/d/a", CompareOp::Equal, a_mod),
        ),
        (
            "mod != a's",
            Compare::mod_revision("/d/a", CompareOp::NotEqual, a_mod),
        ),
        (
            "create < mod",
            Compare::create_revision("/d/a", CompareOp::Less, a_mod),
        ),
        ("lease == 0", Compare::lease("/d/a", CompareOp::Equal, 0)),
        ("value > 0", Compare::value("/d/a", CompareOp::Greater, "0")),
        (
            "value != 1",
            Compare::value("/d/a", CompareOp::NotEqual, "1"),
        ),
        (
            "missing value == ''",
            Compare::value("/d/none", CompareOp::Equal, ""),
        ),
        (
            "missing version == 0",
            Compare::version("/d/none", CompareOp::Equal, 0),
        ),
        (
            "missing create == 0",
            Compare::create_revision("/d/none", CompareOp::Equal, 0),
        ),
        (
            "prefix version > 0",
            Compare::version("/d/", CompareOp::Greater, 0).with_prefix(),
        ),
        (
            "prefix value == 1",
            Compare::value("/d/", CompareOp::Equal, "1").with_prefix(),
        ),
        (
            "range mod > a's",
            Compare::mod_revision("/d/a", CompareOp::Greater, a_mod).with_range("/d/c"),
        ),
    ];
    for (what, compare) in compares {
        let txn = Txn::new()
            .when([compare])
            .and_then([TxnOp::get("/d/a", None)])
            .or_else([TxnOp::get("/d/b", None)]);
        let r = c.txn(txn).await;
        t.outcome(what, r, |t, r| t.txn(&r));
    }
    // Nested txns take their own branches, judged before the outer one writes.
    let inner = Txn::new()
        .when([Compare::version("/d/c", CompareOp::Equal, 0)])
        .and_then([TxnOp::put("/d/c", "new", None), TxnOp::get("/d/c", None)])
        .or_else([TxnOp::put("/d/c", "again", None)]);
    let outer = guarded("m1", vec![TxnOp::put("/d/x", "1", None), TxnOp::txn(inner)]);
    let r = c.txn(outer).await;
    t.outcome("nested", r, |t, r| t.txn(&r));
    // Refusals.
    let twice = Txn::new().and_then([TxnOp::put("/d/a", "1", None), TxnOp::put("/d/a", "2", None)]);
    let r = c.txn(twice).await;
    t.outcome("a key put twice", r, |t, r| t.txn(&r));
    let put_deleted = Txn::new().and_then([
        TxnOp::delete("/d/", Some(DeleteOptions::new().with_prefix())),
        TxnOp::put("/d/q", "2", None),
    ]);
    let r = c.txn(put_deleted).await;
    t.outcome("a key put and deleted", r, |t, r| t.txn(&r));
    let r = c
        .put("/d/none", "", Some(PutOptions::new().with_ignore_value()))
        .await;
    t.outcome("ignore_value on a missing key", r, |_, _| "ok".into());
    let r = c
        .put(
            "/d/a",
            "",
            Some(PutOptions::new().with_ignore_value().with_prev_key()),
        )
        .await;
    t.outcome("ignore_value", r, |t, r| {
        format!(
            "prev {}",
            r.prev_key().map(|kv| t.kv(kv)).unwrap_or_default()
        )
    });
    let r = c.get("/d/a", None).await;
    t.outcome("a after ignore_value", r, |t, r| t.kvs(r.kvs()));
    let r = c
        .put("/d/a", "9", Some(PutOptions::new().with_prev_key()))
        .await;
    t.outcome("put with prev", r, |t, r| {
        format!(
            "rev {} prev {}",
            t.rev(r.header().map(|h| h.revision()).unwrap_or_default()),
            r.prev_key().map(|kv| t.kv(kv)).unwrap_or_default()
        )
    });
    let r = c.put("", "x", None).await;
    t.outcome("empty key", r, |_, _| "ok".into());
    t.lines
}

async fn paged_ranges(mut c: Client) -> Vec<String> {
    let mut t = Transcript::start(&mut c).await;
    for i in 0..10 {
        c.put(format!("/list/{i:02}"), format!("v{i}"), None)
            .await
            .expect("put");
    }
    c.put("/lisu", "outside", None).await.expect("put");
    // EtcdStore::list's paging: from the key after the last one, while `more`.
    let mut from = b"/list/".to_vec();
    loop {
        let options = GetOptions::new().with_range("/list0").with_limit(3);
        let page = c.get(from.clone(), Some(options)).await.expect("page");
        let kvs = t.kvs(page.kvs());
        t.line(format!(
            "page {kvs} count {} more {}",
            page.count(),
            page.more()
        ));
        match page.kvs().last() {
            Some(last) if page.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => break,
        }
    }
    let gets = [
        (
            "keys only",
            GetOptions::new()
                .with_prefix()
                .with_keys_only()
                .with_limit(2),
        ),
        (
            "count only",
            GetOptions::new().with_prefix().with_count_only(),
        ),
        (
            "at an old revision",
            GetOptions::new().with_prefix().with_revision(t.base() + 3),
        ),
        (
            "descending",
            GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Key, SortOrder::Descend)
                .with_limit(2),
        ),
        (
            "by mod, descending",
            GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Mod, SortOrder::Descend)
                .with_limit(3),
        ),
        (
            "by value",
            GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Value, SortOrder::None)
                .with_limit(2),
        ),
        (
            "min mod",
            GetOptions::new()
                .with_prefix()
                .with_min_mod_revision(t.base() + 8),
        ),
        ("from key", GetOptions::new().with_from_key().with_limit(20)),
        (
            "future revision",
            GetOptions::new()
                .with_prefix()
                .with_revision(t.base() + 1000),
        ),
        ("an empty range", GetOptions::new().with_range("/list/")),
    ];
    for (what, options) in gets {
        let key = if what == "from key" {
            "/list/07"
        } else {
            "/list/"
        };
        let r = c.get(key, Some(options)).await;
        t.outcome(what, r, |t, r| {
            format!("{} count {} more {}", t.kvs(r.kvs()), r.count(), r.more())
        });
    }
    let options = DeleteOptions::new().with_range("/list/10").with_prev_key();
    let r = c.delete("/list/05", Some(options)).await;
    t.outcome("delete a range", r, |t, r| {
        format!(
            "{} deleted, rev {}, {}",
            r.deleted(),
            t.rev(r.header().map(|h| h.revision()).unwrap_or_default()),
            t.kvs(r.prev_kvs())
        )
    });
    let r = c.delete("/list/05", None).await;
    t.outcome("delete it again", r, |t, r| {
        format!(
            "{} deleted, rev {}",
            r.deleted(),
            t.rev(r.header().map(|h| h.revision()).unwrap_or_default())
        )
    });
    let r = c
        .get(
            "/list/",
            Some(GetOptions::new().with_prefix().with_keys_only()),
        )
        .await;
    t.outcome("after", r, |t, r| {
        format!("{} count {}", t.kvs(r.kvs()), r.count())
    });
    let before = GetOptions::new()
        .with_prefix()
        .with_keys_only()
        .with_revision(t.base() + 11);
    let r = c.get("/list/", Some(before)).await;
    t.outcome("before the delete", r, |_, r| {
        format!("count {}", r.count())
    });
    t.lines
}

async fn lease_expiry(mut c: Client) -> Vec<String> {
    let mut t = Transcript::start(&mut c).await;
    let short = c.lease_grant(1, None).await;
    t.outcome("grant 1 s", short, |t, r| {
        format!("{} ttl {}", t.lease(r.id()), r.ttl())
    });
    let lease = c.lease_grant(2, None).await.expect("grant").id();
    let name = t.lease(lease);
    t.line(format!("lease {name}"));
    for key in ["/lease/b", "/lease/a"] {
        let r = c
            .put(key, "held", Some(PutOptions::new().with_lease(lease)))
            .await;
        t.outcome(key, r, |t, r| {
            t.rev(r.header().map(|h| h.revision()).unwrap_or_default())
        });
    }
    let mut watch = c
        .watch("/lease/", Some(WatchOptions::new().with_prefix()))
        .await
        .expect("watch");
    t.watch_control("watch", &mut watch).await;
    let (mut keeper, mut acks) = c.lease_keep_alive(lease).await.expect("keep-alive");
    keeper.keep_alive().await.expect("send a keep-alive");
    let r = acks.message().await;
    t.outcome("keep-alive", r, |t, r| {
        let r = r.expect("an answer");
        format!("{} ttl {}", t.lease(r.id()), r.ttl())
    });
    let r = c
        .lease_time_to_live(
            lease,
            Some(etcd_client::LeaseTimeToLiveOptions::new().with_keys()),
        )
        .await;
    t.outcome("time to live", r, |_, r| {
        let keys: Vec<String> = r
            .keys()
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        let mut keys = keys;
        keys.sort();
        format!(
            "granted {} left within a second of it {} keys {keys:?}",
            r.granted_ttl(),
            r.ttl() >= r.granted_ttl() - 1 && r.ttl() <= r.granted_ttl()
        )
    });
    // No more keep-alives: the lease runs out and takes both keys with it.
    t.watch_events("expiry", &mut watch, 2).await;
    keeper.keep_alive().await.expect("send a keep-alive");
    let r = acks.message().await;
    t.outcome("keep-alive after expiry", r, |t, r| {
        let r = r.expect("an answer");
        format!("{} ttl {}", t.lease(r.id()), r.ttl())
    });
    let r = c.lease_time_to_live(lease, None).await;
    t.outcome("time to live after expiry", r, |_, r| {
        format!("ttl {}", r.ttl())
    });
    let r = c.lease_keep_alive(lease).await;
    t.outcome("a new keep-alive stream", r, |_, _| "ok".into());
    let r = c
        .put("/lease/c", "x", Some(PutOptions::new().with_lease(lease)))
        .await;
    t.outcome("put with the expired lease", r, |_, _| "ok".into());
    let r = c
        .get("/lease/", Some(GetOptions::new().with_prefix()))
        .await;
    t.outcome("keys left", r, |t, r| t.kvs(r.kvs()));
    let r = c.lease_revoke(lease).await;
    t.outcome("revoke the expired lease", r, |_, _| "ok".into());
    t.lines
}

async fn watch_history(mut c: Client) -> Vec<String> {
    let mut t = Transcript::start(&mut c).await;
    let base = t.base();
    c.put("/w/a", "1", None).await.expect("put"); // +1
    c.put("/w/b", "1", None).await.expect("put"); // +2
    c.put("/x", "1", None).await.expect("put"); // +3
    c.delete("/w/a", None).await.expect("delete"); // +4
    c.put("/w/b", "2", None).await.expect("put"); // +5
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(base + 1)
        .with_prev_key();
    let mut watch = c.watch("/w/", Some(options)).await.expect("watch");
    let first = t.watch_control("from the start", &mut watch).await;
    t.watch_events("from the start", &mut watch, 4).await;
    // A second watcher on the same stream: one key, from a later revision, no deletes.
    let options = WatchOptions::new()
        .with_start_revision(base + 5)
        .with_filters([etcd_client::WatchFilterType::NoDelete]);
    watch
        .watch("/w/b", Some(options))
        .await
        .expect("second watch");
    t.watch_control("second", &mut watch).await;
    t.watch_events("second", &mut watch, 1).await;
    watch.cancel(first).await.expect("cancel");
    t.watch_control("cancel the first", &mut watch).await;
    c.put("/w/a", "3", None).await.expect("put"); // +6, nobody watches it now
    c.put("/w/b", "3", None).await.expect("put"); // +7
    t.watch_events("second, live", &mut watch, 1).await;
    // Physical: etcd compacts in the background otherwise, and the watch from the
    // compaction below would race it.
    let r = c
        .compact(
            base + 4,
            Some(etcd_client::CompactionOptions::new().with_physical()),
        )
        .await;
    t.outcome("compact", r, |t, r| {
        t.rev(r.header().map(|h| h.revision()).unwrap_or_default())
    });
    let r = c
        .get(
            "/w/",
            Some(GetOptions::new().with_prefix().with_revision(base + 2)),
        )
        .await;
    t.outcome("read below the compaction", r, |t, r| t.kvs(r.kvs()));
    let r = c
        .get(
            "/w/",
            Some(GetOptions::new().with_prefix().with_revision(base + 4)),
        )
        .await;
    t.outcome("read at the compaction", r, |t, r| t.kvs(r.kvs()));
    let mut old = c
        .watch(
            "/w/",
            Some(
                WatchOptions::new()
                    .with_prefix()
                    .with_start_revision(base + 2),
            ),
        )
        .await
        .expect("watch");
    t.watch_control("from below the compaction", &mut old).await;
    t.watch_control("from below the compaction", &mut old).await;
    let mut at = c
        .watch(
            "/w/",
            Some(
                WatchOptions::new()
                    .with_prefix()
                    .with_start_revision(base + 4),
            ),
        )
        .await
        .expect("watch");
    t.watch_control("from the compaction", &mut at).await;
    t.watch_events("from the compaction", &mut at, 3).await;
    let r = c.compact(base + 4, None).await;
    t.outcome("compact again", r, |_, _| "ok".into());
    let r = c.compact(base + 100, None).await;
    t.outcome("compact the future", r, |_, _| "ok".into());
    t.lines
}

async fn revoke(mut c: Client) -> Vec<String> {
    let mut t = Transcript::start(&mut c).await;
    let lease = c.lease_grant(60, None).await.expect("grant").id();
    t.lease(lease);
    for key in ["/r/c", "/r/a", "/r/b"] {
        c.put(key, "1", Some(PutOptions::new().with_lease(lease)))
            .await
            .expect("put");
    }
    c.put("/r/d", "1", None).await.expect("put");
    let mut watch = c
        .watch("/r/", Some(WatchOptions::new().with_prefix()))
        .await
        .expect("watch");
    t.watch_control("watch", &mut watch).await;
    let r = c.lease_revoke(lease).await;
    t.outcome("revoke", r, |t, r| {
        t.rev(r.header().map(|h| h.revision()).unwrap_or_default())
    });
    t.watch_events("revoked", &mut watch, 3).await;
    let r = c.get("/r/", Some(GetOptions::new().with_prefix())).await;
    t.outcome("left", r, |t, r| t.kvs(r.kvs()));
    let r = c.lease_time_to_live(lease, None).await;
    t.outcome("time to live", r, |_, r| format!("ttl {}", r.ttl()));
    let r = c.lease_revoke(lease).await;
    t.outcome("revoke again", r, |_, _| "ok".into());
    let r = c.lease_keep_alive(lease).await;
    t.outcome("keep-alive", r, |_, _| "ok".into());
    let r = c.leases().await;
    t.outcome("leases", r, |_, r| format!("{}", r.leases().len()));
    // A chosen id, taken twice; a key moved off its lease.
    let chosen = 0x0777_0000;
    let r = c
        .lease_grant(
            30,
            Some(etcd_client::LeaseGrantOptions::new().with_id(chosen)),
        )
        .await;
    t.outcome("grant a chosen id", r, |_, r| {
        format!("{:x} ttl {}", r.id(), r.ttl())
    });
    let r = c
        .lease_grant(
            30,
            Some(etcd_client::LeaseGrantOptions::new().with_id(chosen)),
        )
        .await;
    t.outcome("grant it again", r, |_, _| "ok".into());
    c.put("/r/d", "2", Some(PutOptions::new().with_lease(chosen)))
        .await
        .expect("put");
    c.put("/r/e", "2", Some(PutOptions::new().with_lease(chosen)))
        .await
        .expect("put");
    c.put("/r/d", "3", None).await.expect("put");
    let r = c
        .lease_time_to_live(
            chosen,
            Some(etcd_client::LeaseTimeToLiveOptions::new().with_keys()),
        )
        .await;
    t.outcome("keys of the chosen lease", r, |_, r| {
        let keys: Vec<String> = r
            .keys()
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        format!("{keys:?}")
    });
    let r = c.lease_revoke(chosen).await;
    t.outcome("revoke the chosen", r, |t, r| {
        t.rev(r.header().map(|h| h.revision()).unwrap_or_default())
    });
    t.watch_events("moved key stays", &mut watch, 4).await;
    t.lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_and_transfer_conform() {
    conform(campaign).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_writes_and_compares_conform() {
    conform(guarded_writes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_ranges_conform() {
    conform(paged_ranges).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_keepalive_and_expiry_conform() {
    conform(lease_expiry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_history_cancel_and_compaction_conform() {
    conform(watch_history).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_conforms() {
    conform(revoke).await;
}

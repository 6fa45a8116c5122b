//! The region syncer under faults, on a cluster of three on etcd. A follower paused (SIGSTOP)
//! past the silence bound stops answering, and when it runs again it goes on from the
//! leader's change log, with no new snapshot, and answers what the leader made meanwhile. A
//! follower killed (SIGKILL) and started again loads the copy it kept on disk and goes on from
//! the leader's log, answering nothing from the loaded copy until the stream confirms it; one
//! whose copy on disk is gone takes a snapshot. A stream
//! cut before its snapshot is whole applies none of it: the follower answers nothing from
//! its copy and syncs again, and answers once a whole snapshot has arrived. A leader that
//! dies before writing a split it streamed leaves it to the follower that takes over, which
//! writes it: a member that loads the store later still has it. A network partition that
//! cuts every member's link to the leader (its etcd link and the clients' links up) leaves the
//! leader serving and the followers refusing within the silence bound, never answering with a
//! region the leader never had; once it heals they go on from the leader's log.

use meridian::failpoint::points;
use meridian::harness::Cluster;

use std::collections::HashSet;

use super::follower_reads::{
    allowing, bootstrap_led, bootstrapped, get, get_request, report, seen, without_colours, Seen,
    ON_ETCD,
};
use super::on_etcd::{client, leader};
use super::*;

/// The keys the test reads: one in each region the splits make, and one past them.
fn keys() -> Vec<Vec<u8>> {
    (0..31u32)
        .map(|n| format!("k{n:04}").into_bytes())
        .collect()
}

/// What `pd` answers for every key.
async fn answers(pd: &mut PdClient<Channel>, h: &Option<pdpb::RequestHeader>) -> Vec<Seen> {
    let mut out = Vec::new();
    for k in keys() {
        out.push(get(pd, h, &k).await);
    }
    out
}

/// What `pd` answers for every key, or `None` while it refuses (a leader between its lease
/// and its first routing answer says it is not serving yet).
async fn answers_once_serving(
    pd: &mut PdClient<Channel>,
    h: &Option<pdpb::RequestHeader>,
) -> Option<Vec<Seen>> {
    let mut out = Vec::new();
    for k in keys() {
        let r = pd.get_region(allowing(get_request(h, &k))).await.ok()?;
        out.push(seen(&r.into_inner()));
    }
    Some(out)
}

/// Waits until member `i` answers every key as `want` says, from its copy.
async fn converge(c: &Cluster, i: usize, h: &Option<pdpb::RequestHeader>, want: &[Seen]) {
    let mut f = client(c, i).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = answers(&mut f, h).await;
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "member {i} did not converge: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many snapshots member `i`'s syncer applied, over every run of it (its log is appended).
fn snapshots(c: &Cluster, i: usize) -> usize {
    without_colours(&c.nodes[i].process().log_text())
        .lines()
        .filter(|l| l.contains("region sync: snapshot applied"))
        .count()
}

fn arm(c: &Cluster, i: usize, name: &str, actions: &str) {
    tokio::task::block_in_place(|| c.admin(i).unwrap().failpoint(name, actions)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_follower_resumes_a_restarted_one_resyncs_and_a_cut_snapshot_is_never_applied() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, first, mut pd, h, mut splitter) = bootstrapped(tmp.path()).await;
    splitter.split(&mut pd, 0..10).await;
    let (paused, restarted) = ((first + 1) % 3, (first + 2) % 3);
    let want = answers(&mut pd, &h).await;
    converge(&c, paused, &h, &want).await;
    converge(&c, restarted, &h, &want).await;

    // Paused past the silence bound while the leader splits on: it refuses meanwhile (checked
    // in follower_reads), then goes on from the log.
    let before = snapshots(&c, paused);
    c.nodes[paused].process().signal(libc::SIGSTOP).unwrap();
    splitter.split(&mut pd, 10..20).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.nodes[paused].process().signal(libc::SIGCONT).unwrap();
    let want = answers(&mut pd, &h).await;
    assert_ne!(want[15], Seen::NotFound);
    converge(&c, paused, &h, &want).await;
    assert_eq!(
        snapshots(&c, paused),
        before,
        "the paused follower went on from the log"
    );

    // Every snapshot stream is cut before it is whole; a follower started again with no copy
    // (its copy on disk removed) keeps asking and applies none of them.
    arm(&c, first, points::SYNC_SNAPSHOT_END, "return(eio)");
    let before = snapshots(&c, restarted);
    c.nodes[restarted].kill().unwrap();
    drop_copy(&c, restarted);
    c.nodes[restarted].start().unwrap();
    let cuts = |c: &Cluster| {
        without_colours(&c.nodes[restarted].process().log_text())
            .lines()
            .filter(|l| {
                l.contains("region sync with the leader stopped") && l.contains("snapshot cut")
            })
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while cuts(&c) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the restarted follower did not retry its cut snapshot three times"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        snapshots(&c, restarted),
        before,
        "a cut snapshot was applied"
    );
    let mut f = client(&c, restarted).await;
    assert!(
        answers(&mut f, &h)
            .await
            .iter()
            .all(|s| *s == Seen::NotFound),
        "a follower with no whole snapshot answered from its copy"
    );

    // Whole again: it takes one snapshot and answers as the leader does, splits made since
    // included.
    splitter.split(&mut pd, 20..30).await;
    arm(&c, first, points::SYNC_SNAPSHOT_END, "");
    let want = answers(&mut pd, &h).await;
    converge(&c, restarted, &h, &want).await;
    assert_eq!(snapshots(&c, restarted), before + 1);
}

/// Removes member `i`'s copy of the region index on disk (the member is stopped).
fn drop_copy(c: &Cluster, i: usize) {
    let dir = c.nodes[i].data.join("region-copy");
    std::fs::remove_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
}

/// How many times member `i` loaded its copy on disk, over every run of it.
fn copies_loaded(c: &Cluster, i: usize) -> usize {
    without_colours(&c.nodes[i].process().log_text())
        .lines()
        .filter(|l| l.contains("region sync: the copy on disk loaded"))
        .count()
}

/// A follower killed (SIGKILL) while the leader keeps its term, and started again while every
/// link to the leader is cut, loads the copy it kept on disk and still refuses routing reads:
/// the stream has not confirmed it. Once the link heals it goes on from the leader's log, with
/// no snapshot, and answers what the leader made while it was down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_follower_loads_its_copy_refuses_until_the_stream_confirms_it_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Cluster::start_members_proxied(tmp.path(), 3, ON_ETCD).unwrap();
    let (mut c, first, mut pd, h, mut splitter) = bootstrap_led(c).await;
    let restarted = (first + 1) % 3;
    splitter.split(&mut pd, 0..10).await;
    let want = answers(&mut pd, &h).await;
    converge(&c, restarted, &h, &want).await;
    // The persister writes within its flush period; one more keeps clear of a write in flight.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = snapshots(&c, restarted);

    c.nodes[restarted].kill().unwrap();
    splitter.split(&mut pd, 10..20).await;
    c.member_proxies[first].partition();
    c.nodes[restarted].start().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while copies_loaded(&c, restarted) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the restarted follower did not load its copy"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Loaded, and not confirmed: it refuses every key, for longer than the silence bound.
    let mut f = client(&c, restarted).await;
    let loaded = std::time::Instant::now();
    while loaded.elapsed() < Duration::from_millis(1500) {
        let got = answers(&mut f, &h).await;
        assert!(
            got.iter().all(|s| *s == Seen::NotFound),
            "a loaded copy answered before the stream confirmed it: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(leader(&c, None), first, "the leader kept its term");

    c.member_proxies[first].heal();
    let want = answers(&mut pd, &h).await;
    assert_ne!(want[15], Seen::NotFound);
    converge(&c, restarted, &h, &want).await;
    assert_eq!(
        snapshots(&c, restarted),
        before,
        "the restarted follower went on from the leader's log"
    );
    let counter = |name: &str| tokio::task::block_in_place(|| c.counter(restarted, name)).unwrap();
    assert_eq!(counter("meridian_region_sync_snapshots_total"), 0);
    assert_eq!(counter("meridian_region_sync_copies_loaded_total"), 1);
}

/// What a member answers an empty split report: the refusal's words, from a status or a header.
async fn empty_split_report(pd: &mut PdClient<Channel>, h: &Option<pdpb::RequestHeader>) -> String {
    match pd
        .report_batch_split(pdpb::ReportBatchSplitRequest {
            header: h.clone(),
            regions: Vec::new(),
        })
        .await
    {
        Ok(r) => format!("{:?}", r.into_inner().header),
        Err(status) => status.message().to_string(),
    }
}

/// A leader that took over its syncer's copy serves routing from it at once, while it holds
/// region writes and says it is not ready until the copy is reconciled with the store: a
/// write applied to the copy before then could mix two states no leader held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_taken_over_holds_region_writes_until_it_is_reconciled() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, first, mut pd, h, mut splitter) = bootstrapped(tmp.path()).await;
    splitter.split(&mut pd, 0..5).await;
    let want = answers(&mut pd, &h).await;
    let followers: Vec<usize> = (0..3).filter(|i| *i != first).collect();
    for &f in &followers {
        converge(&c, f, &h, &want).await;
        arm(&c, f, points::RECONCILE, "return(hang)");
    }
    c.nodes[first].kill().unwrap();
    let next = super::on_etcd::leader(&c, Some(first));
    let mut pd = client(&c, next).await;
    // Routing from the copy as soon as the term serves.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while answers_once_serving(&mut pd, &h).await.as_ref() != Some(&want) {
        assert!(
            std::time::Instant::now() < deadline,
            "no routing from the copy"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ready = |c: &Cluster| {
        tokio::task::block_in_place(|| c.admin(next).unwrap().get_json("/ready").unwrap())
    };
    let (code, body) = ready(&c);
    assert_eq!(code, 503, "{body}");
    let refused = empty_split_report(&mut pd, &h).await;
    assert!(refused.contains("reconciling"), "{refused}");

    // Reconciled: ready, and the same report reaches the split checks.
    arm(&c, next, points::RECONCILE, "");
    wait_ready(&c, next);
    let checked = empty_split_report(&mut pd, &h).await;
    assert!(
        checked.contains("0 regions in one split report"),
        "{checked}"
    );
    splitter.split(&mut pd, 5..8).await;
}

/// Waits until member `i` serves and says it is ready.
fn wait_ready(c: &Cluster, i: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let ready = tokio::task::block_in_place(|| c.admin(i).unwrap().get_json("/ready"));
        if matches!(ready, Ok((200, _))) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "member {i} not ready: {ready:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The syncer streams a split once it is in the leader's index, before the leader has
/// written it. A leader that dies before the write leaves the split in its followers' copies
/// and not in the store; the follower that takes over must write it, or the next member to
/// load from the store serves a map that lost it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_taken_over_writes_the_splits_its_old_leader_never_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, first, mut pd, h, mut splitter) = bootstrapped(tmp.path()).await;
    splitter.split(&mut pd, 0..3).await;
    let before = answers(&mut pd, &h).await;

    let request = splitter.next_report(&mut pd, b"k0003").await;

    // From here the leader's writes hang: the split reaches its index and its syncer's
    // stream, never the store, and is never acknowledged.
    arm(&c, first, points::PERSIST_FLUSH, "return(hang)");
    let report_once = {
        let (mut pd, request) = (pd.clone(), request.clone());
        tokio::spawn(async move { pd.report_batch_split(request).await })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let want = loop {
        let now = answers(&mut pd, &h).await;
        if now != before {
            break now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the leader's index never held the split"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        !report_once.is_finished(),
        "a split acknowledged before it was written"
    );
    let followers: Vec<usize> = (0..3).filter(|i| *i != first).collect();
    for &f in &followers {
        converge(&c, f, &h, &want).await;
    }

    c.nodes[first].kill().unwrap();
    report_once.abort();
    let next = super::on_etcd::leader(&c, Some(first));
    wait_ready(&c, next);
    let mut pd = client(&c, next).await;
    assert_eq!(answers(&mut pd, &h).await, want);
    // The store reports its split again, as it does until it hears Done: the new leader
    // already holds it, and acknowledges it only once it is written.
    report(&mut pd, request).await;

    // Every member stopped, one started again with its copy on disk removed: it has no copy
    // and loads the store.
    for &f in &followers {
        c.nodes[f].kill().unwrap();
    }
    let last = followers[0];
    drop_copy(&c, last);
    c.nodes[last].start().unwrap();
    assert_eq!(super::on_etcd::leader(&c, None), last);
    wait_ready(&c, last);
    let mut pd = client(&c, last).await;
    assert_eq!(
        answers(&mut pd, &h).await,
        want,
        "a split the copy held was not written"
    );
}

/// Every link from the other members to the leader is cut: its proxy holds their bytes, as a
/// dead link does, while etcd and the test's clients reach every member directly. The leader
/// keeps its lease and acknowledges splits; each follower's syncer stream falls silent, and the
/// follower refuses routing reads from its copy (never answering with a region the leader
/// never had); when the partition heals, each answers what the leader made meanwhile, from the
/// leader's log, with no new snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_cut_off_from_the_leader_refuse_then_go_on_from_its_log_when_healed() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Cluster::start_members_proxied(tmp.path(), 3, ON_ETCD).unwrap();
    let (c, first, mut pd, h, mut splitter) = bootstrap_led(c).await;
    let followers: Vec<usize> = (0..3).filter(|i| *i != first).collect();
    let mut had: HashSet<Seen> = HashSet::from([splitter.rightmost()]);
    had.extend(splitter.split(&mut pd, 0..10).await);
    let want = answers(&mut pd, &h).await;
    for &f in &followers {
        converge(&c, f, &h, &want).await;
    }
    let before: Vec<usize> = followers.iter().map(|&f| snapshots(&c, f)).collect();

    c.member_proxies[first].partition();
    had.extend(splitter.split(&mut pd, 10..20).await);
    let mut fpd = Vec::new();
    for &f in &followers {
        fpd.push(client(&c, f).await);
    }
    let cut = std::time::Instant::now();
    let mut refused = vec![false; followers.len()];
    while refused.contains(&false) && cut.elapsed() < Duration::from_secs(10) {
        for (j, f) in fpd.iter_mut().enumerate() {
            match get(f, &h, b"k0015").await {
                Seen::NotFound => refused[j] = true,
                region => assert!(had.contains(&region), "invented: {region:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        refused,
        vec![true; followers.len()],
        "every follower cut off from the leader refuses"
    );
    assert_eq!(
        leader(&c, None),
        first,
        "the partition leaves the leader's etcd link, and its lease, alone"
    );

    c.member_proxies[first].heal();
    let want = answers(&mut pd, &h).await;
    assert_ne!(want[15], Seen::NotFound);
    for &f in &followers {
        converge(&c, f, &h, &want).await;
    }
    let after: Vec<usize> = followers.iter().map(|&f| snapshots(&c, f)).collect();
    assert_eq!(after, before, "the followers went on from the leader's log");
}

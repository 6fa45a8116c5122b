//! Elections against a real etcd: one winner, followers that know it, hand-over on resign, and
//! a lease proof that runs out while etcd is unreachable (T4).

use std::time::{Duration, Instant};

use meridian::election::{mono_ms, Election};
use meridian::harness::EtcdProcess;
use meridian::proto::MemberInfo;
use tokio::sync::watch;

fn member(name: &str, id: u64) -> MemberInfo {
    MemberInfo {
        name: name.into(),
        id,
        client_url: format!("127.0.0.1:{id}"),
        // A real address: a leader record whose addresses do not parse is ignored.
        admin_url: format!("https://127.0.0.1:{id}"),
        grpc_url: String::new(),
    }
}

async fn client(etcd: &EtcdProcess) -> etcd_client::Client {
    etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_followers_know_it_and_resign_hands_over() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
    let key = b"/meridian/1/leader".to_vec();
    let a = Election::new(client(&etcd).await, key.clone(), member("a", 1), 2, 300);
    let b = Election::new(client(&etcd).await, key.clone(), member("b", 2), 2, 300);
    let (_stop_tx, mut stop) = watch::channel(false);

    let (a_leader, _) = watch::channel(None);
    let term_a = a
        .campaign(&a_leader, &mut stop.clone())
        .await
        .unwrap()
        .expect("a leads");
    assert!(term_a.holds(mono_ms()));

    let (b_leader, mut b_sees) = watch::channel(None);
    let b_task = tokio::spawn(async move {
        let term = b.campaign(&b_leader, &mut stop).await.unwrap();
        (b, term)
    });
    tokio::time::timeout(
        Duration::from_secs(5),
        b_sees.wait_for(|l| l.as_ref().is_some_and(|m| m.name == "a")),
    )
    .await
    .expect("b learns that a leads")
    .unwrap();
    // The lease is kept alive past its TTL.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(term_a.holds(mono_ms()));
    assert!(!b_task.is_finished(), "b must not lead while a does");

    let resigned = Instant::now();
    a.resign(term_a).await;
    let (_b, term_b) = tokio::time::timeout(Duration::from_secs(5), b_task)
        .await
        .unwrap()
        .unwrap();
    let term_b = term_b.expect("b leads after a resigned");
    println!("hand-over after resign: {:?}", resigned.elapsed());
    assert!(term_b.holds(mono_ms()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proof_runs_out_while_etcd_is_down() {
    let tmp = tempfile::tempdir().unwrap();
    let mut etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
    let e = Election::new(
        client(&etcd).await,
        b"/meridian/1/leader".to_vec(),
        member("a", 1),
        2,
        300,
    );
    let (leader, _) = watch::channel(None);
    let (_stop_tx, mut stop) = watch::channel(false);
    let term = e.campaign(&leader, &mut stop).await.unwrap().unwrap();
    etcd.stop().unwrap();
    let stopped = mono_ms();
    // T4 as arithmetic on the proof: every acknowledgement came before the stop, so nothing is
    // proven beyond the stop plus the TTL minus the margin, however slowly this test runs.
    assert!(!term.holds(stopped + 2_000 - 300));
    let down = Instant::now();
    while term.holds(mono_ms()) {
        assert!(
            down.elapsed() < Duration::from_secs(10),
            "proof never ran out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

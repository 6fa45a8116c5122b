//! The software each simulated host runs: etcd (the model, served over turmoil TCP), a member
//! (its real control side on a real etcd client), and the clients that ask members for
//! timestamps and ids through their request path and report each answer to the checker. Owns the
//! hosts' programs; faults are the driver's, verdicts the checker's.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use meridian::clock::WallClock;
use meridian::meta::EtcdStore;
use meridian::proto::{Reply, Response};
use meridian::server::sim::SimMember;
use meridian::tso::Timestamp;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::cluster::{sim_ms, Cluster, ETCD, MEMBERS};
use crate::net;

/// The simulation's Unix time at its start: fixed, so timestamps are the same every run.
pub const EPOCH_MS: u64 = 1_800_000_000_000;

/// etcd: the model on port 2379, its knobs handed to the driver. A fresh process starts empty
/// (etcd is never crashed here).
pub async fn etcd(cluster: Rc<Cluster>) -> turmoil::Result {
    let model = etcd_model::EtcdModel::new();
    cluster.etcd_up(model.clone());
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", net::ETCD_PORT)).await?;
    model
        .router()
        .serve_with_incoming(net::Incoming::new(listener))
        .await?;
    Ok(())
}

/// Member `i`: a process that reads its (possibly shifted) clock, connects to etcd and starts
/// its control side, retrying while etcd cannot be reached, then runs until crashed.
pub async fn member(cluster: Rc<Cluster>, i: usize) -> turmoil::Result {
    let name = MEMBERS[i];
    let clock = Arc::new(WallClock::tokio(EPOCH_MS + sim_ms()));
    clock.shift(cluster.offset(i));
    let member = loop {
        let started = async {
            let client = net::etcd_client(ETCD).await?;
            SimMember::start(
                name,
                &cluster.config,
                EtcdStore::from_client(client),
                clock.clone(),
            )
            .await
        }
        .await;
        match started {
            Ok(member) => break member,
            Err(e) => {
                cluster.note(sim_ms(), format!("{name} start failed: {e:#}"));
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    cluster.note(
        sim_ms(),
        format!("{name} up id={}", member.shared.membership.me.id),
    );
    let stop = cluster.stop_signal(i);
    cluster.up(i, member);
    // Runs until crashed, or until a graceful stop: then it shuts down as on SIGTERM (the
    // allocator suspended, a leader resigning) and the process exits.
    stop.notified().await;
    if let Some(member) = cluster.member(i) {
        member.shut_down().await;
        cluster.down(i);
        cluster.note(sim_ms(), format!("{name} stopped"));
    }
    Ok(())
}

/// The client: until `until_ms`, every few milliseconds asks a member drawn from `rng` for a
/// timestamp, one request at a time (so each answer must exceed every earlier one).
pub async fn client(cluster: Rc<Cluster>, mut rng: ChaCha8Rng, until_ms: u64) -> turmoil::Result {
    while sim_ms() < until_ms {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(1..=20))).await;
        let i = rng.gen_range(0..cluster.size());
        let Some(member) = cluster.member(i) else {
            continue;
        };
        let response = member.tso(1).await;
        if let Response::Ok(Reply::Tso { first, .. }) = response {
            let at = sim_ms();
            let others = cluster.serving_except(Some(i));
            // Read in the same poll as the answer: nothing else ran in between.
            let limit = cluster.persisted_limit(member.cluster_id);
            let physical = Timestamp::from_u64(first).physical_ms();
            let mut checker = cluster.checker.borrow_mut();
            checker.handed_out(at, MEMBERS[i], first, &others);
            checker.within_limit(at, MEMBERS[i], physical, limit);
            drop(checker);
            cluster.note(at, format!("{} ts {first}", MEMBERS[i]));
        }
    }
    Ok(())
}

/// A second client: until `until_ms`, every few tens of milliseconds asks a member drawn from
/// `rng` for an id (`AllocId`), and reports each id handed out to the checker.
pub async fn id_client(
    cluster: Rc<Cluster>,
    mut rng: ChaCha8Rng,
    until_ms: u64,
) -> turmoil::Result {
    while sim_ms() < until_ms {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(10..=100))).await;
        let i = rng.gen_range(0..cluster.size());
        let Some(member) = cluster.member(i) else {
            continue;
        };
        if let Response::Ok(Reply::Id(id)) = member.alloc_id().await {
            let at = sim_ms();
            cluster.checker.borrow_mut().id(at, MEMBERS[i], id);
            cluster.note(at, format!("{} id {id}", MEMBERS[i]));
        }
    }
    Ok(())
}

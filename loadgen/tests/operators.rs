//! Stores that carry out operators as TiKV does (`loadgen cluster --carry-out-operators`,
//! driven as a library), against the real binary with a store Down after 3 s and a fast
//! patrol:
//! - a store stops heartbeating: once it is Down, every region is back to 3 voters on live
//!   stores;
//! - `meridian ctl store delete` drains a store: Offline, then no peer left, then Tombstone;
//! - a new store joins and receives regions;
//! - SplitRegions' split steps are carried out and reported;
//! - throughout, as the stores carry out each step and as the server reports the regions, no
//!   region has two peers on one store or fewer than 2 healthy voters, and no remove takes the
//!   leader's peer.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadgen::args::Protocol;
use loadgen::cluster::{self, ClusterArgs, Fleet};
use meridian::client::Client;
use meridian::harness::{connect_when_placement_loads, pd_header, test_binary, up_store};
use meridian::kvproto::pdpb;
use meridian::placement::{PeerRole, Region, StoreState, StoreStatus};

const STORES: u64 = 7;
const REGIONS: u64 = 240;
/// How long a repair, a drain or a fill may take before the test gives up: alone on two cores
/// each takes under 10 s; with other test binaries beside it, it was seen past 40 s.
const CONVERGE: Duration = Duration::from_secs(120);
/// A new peer's snapshot: reported pending this long, and so not promoted before.
const CATCH_UP: Duration = Duration::from_millis(300);

/// Down after 3 s of silence; the patrol passes every region twice a second; the store limits
/// are high enough that the patrol and the heartbeats, not the limits, pace the repairs.
const CONFIG: &str = "[schedule]
max_store_down_time_ms = 3000
patrol_interval_ms = 50
patrol_period_ms = 500
store_limit_add_per_min = 60000.0
store_limit_remove_per_min = 60000.0
";

/// What the server reports, read in one go.
struct View {
    stores: Vec<StoreStatus>,
    regions: Vec<Region>,
}

impl View {
    fn state(&self, store: u64) -> Option<StoreState> {
        self.stores
            .iter()
            .find(|s| s.store.id == store)
            .map(|s| s.store.state)
    }

    /// Peers and leaders on `store`.
    fn holds(&self, store: u64) -> (usize, usize) {
        let peers = self
            .regions
            .iter()
            .filter(|r| r.peers.iter().any(|p| p.store_id == store))
            .count();
        let leaders = self
            .regions
            .iter()
            .filter(|r| r.leader_peer().is_some_and(|p| p.store_id == store))
            .count();
        (peers, leaders)
    }

    /// The first region not made of exactly 3 voters on live stores, if any, or a count of
    /// regions other than `count`.
    fn not_whole(&self, fleet: &Fleet, count: u64) -> Result<(), String> {
        if self.regions.len() as u64 != count {
            return Err(format!("{} regions reported", self.regions.len()));
        }
        match self.regions.iter().find(|r| {
            r.peers.len() != 3
                || r.peers
                    .iter()
                    .any(|p| p.role != PeerRole::Voter || !fleet.is_live(p.store_id))
        }) {
            Some(r) => Err(format!(
                "region {} is {:?}; the live stores are {:?}",
                r.id,
                r.peers,
                fleet.live_stores().iter().map(|s| s.0).collect::<Vec<_>>()
            )),
            None => Ok(()),
        }
    }
}

struct Watch {
    client: Client,
    fleet: Arc<Fleet>,
    started: Instant,
}

impl Watch {
    async fn view(&self) -> View {
        View {
            stores: self.client.get_all_stores().await.unwrap(),
            regions: cluster::scan_all(&self.client).await.unwrap(),
        }
    }

    /// The safety rules on every step the stores carried out so far, and on the regions as
    /// the server reports them now.
    fn safe(&self, view: &View) {
        let (n, described) = self.fleet.violations();
        assert_eq!(
            n,
            0,
            "steps broke the safety rules:\n{}",
            described.join("\n")
        );
        for r in &view.regions {
            let mut stores: Vec<u64> = r.peers.iter().map(|p| p.store_id).collect();
            stores.sort_unstable();
            stores.dedup();
            assert_eq!(stores.len(), r.peers.len(), "two peers on one store: {r:?}");
            let healthy = cluster::healthy_voters(r, &|s: u64| self.fleet.is_live(s));
            assert!(healthy >= 2, "fewer than 2 healthy voters: {r:?}");
        }
    }

    /// Waits until `check` passes on what the server reports, checking safety on every look.
    async fn until(
        &self,
        what: &str,
        within: Duration,
        check: impl Fn(&View) -> Result<(), String>,
    ) -> View {
        let deadline = Instant::now() + within;
        loop {
            let view = self.view().await;
            self.safe(&view);
            match check(&view) {
                Ok(()) => {
                    eprintln!("{:>6.1} s: {what}", self.started.elapsed().as_secs_f64());
                    return view;
                }
                Err(why) => assert!(
                    Instant::now() < deadline,
                    "{what}: not within {within:?}; {why}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Ends the stores' run when dropped, so that a failed check does not leave the load running
/// out its duration.
struct EndOnDrop(Arc<Fleet>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.end();
    }
}

fn ctl_store_delete(endpoint: &str, data: &Path, store: u64) {
    let out = std::process::Command::new(test_binary())
        .args(["ctl", "--endpoints", endpoint, "--ca"])
        .arg(data.join("tls/ca.pem"))
        .args(["store", "delete", &store.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ctl store delete {store}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_carrying_out_operators_are_repaired_drained_and_filled_safely() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, target) = common::start_server(tmp.path(), CONFIG);
    let data = tmp.path().join("data");
    let client = target.connect().await.unwrap();
    let (stores, regions) = cluster::setup(&client, STORES, REGIONS).await.unwrap();
    let fleet = Fleet::new(&stores, &regions, CATCH_UP);
    let args = ClusterArgs {
        target,
        stores: STORES,
        regions: REGIONS,
        // Ended by the fleet once the last check passes.
        duration: Duration::from_secs(600),
        // Each region reported about every 0.2 s.
        rate: Some(1_200),
        connections: 1,
        streams: 2,
        depth: 32,
        protocol: Protocol::Quic,
        json: None,
        plot: None,
        no_pin: false,
        carry_out_operators: true,
        splits_per_sec: None,
        store_heartbeat_interval: Duration::from_millis(300),
        catch_up: CATCH_UP,
    };
    let run = {
        let (client, fleet, stores) = (client.clone(), fleet.clone(), stores.clone());
        tokio::spawn(async move {
            cluster::heartbeat(&args, &client, (&stores, regions), Some(fleet), 0.0).await
        })
    };
    let _end = EndOnDrop(fleet.clone());
    let watch = Watch {
        client: client.clone(),
        fleet: fleet.clone(),
        started: Instant::now(),
    };
    watch
        .until(
            "every region whole at the start",
            Duration::from_secs(10),
            |v| v.not_whole(&fleet, REGIONS),
        )
        .await;

    // A store stops: Down after 3 s, and its peers are replaced on the live stores.
    let lost = stores[0];
    fleet.stop(lost);
    watch
        .until(
            "the stopped store is Down",
            Duration::from_secs(20),
            |v| match v.state(lost) {
                Some(StoreState::Down) => Ok(()),
                s => Err(format!("store {lost} is {s:?}")),
            },
        )
        .await;
    watch
        .until(
            "every region back to 3 voters on live stores",
            CONVERGE,
            |v| v.not_whole(&fleet, REGIONS),
        )
        .await;

    // A store is decommissioned: Offline at once, drained, then a Tombstone once it reports
    // holding nothing.
    let drained = stores[1];
    tokio::task::block_in_place(|| ctl_store_delete(&server.client_addr, &data, drained));
    let offline = watch.view().await;
    assert_eq!(offline.state(drained), Some(StoreState::Offline));
    assert!(offline.holds(drained).0 > 0, "it held regions to drain");
    watch
        .until(
            "the deleted store drained to a Tombstone",
            CONVERGE,
            |v| match (v.state(drained), v.holds(drained)) {
                (Some(StoreState::Tombstone), (0, 0)) => Ok(()),
                (state, held) => Err(format!(
                    "store {drained} is {state:?}, the server shows it holding {held:?} \
                     (peers, leaders), it reports {:?}",
                    fleet.holds(drained)
                )),
            },
        )
        .await;
    // Moves the scheduler started meanwhile (balance, a learner on its way) may still run at
    // that moment; the safety rules were checked on every view and step, and every region is
    // whole on live stores again once they end.
    watch
        .until(
            "every region whole on live stores after the drain",
            CONVERGE,
            |v| v.not_whole(&fleet, REGIONS),
        )
        .await;

    // A new store joins and takes its share. It runs before it registers, so that no step
    // for it can come before it counts what it holds.
    let new = client.alloc_id().await.unwrap();
    fleet.join(new);
    client
        .put_store(up_store(new, &format!("sim-store-{new}:20160")))
        .await
        .unwrap();
    // 720 peers over 6 live stores: 120 each once balanced.
    let filled = watch
        .until(
            "the new store received regions and leaders",
            CONVERGE,
            |v| match v.holds(new) {
                (peers, leaders) if peers >= 60 && leaders >= 5 => Ok(()),
                held => Err(format!("store {new} holds {held:?} (peers, leaders)")),
            },
        )
        .await;
    eprintln!(
        "new store {new} holds {:?} (peers, leaders)",
        filled.holds(new)
    );
    let settled = watch
        .until(
            "every region whole after the new store filled",
            Duration::from_secs(20),
            |v| v.not_whole(&fleet, REGIONS),
        )
        .await;

    // SplitRegions: the leaders split their regions at the keys when the step comes, ask the
    // cluster for the ids and report the split.
    let keys: Vec<Vec<u8>> = settled.regions[1..3]
        .iter()
        .map(|r| [r.start_key.as_slice(), &[0x80]].concat())
        .collect();
    let grpc = server.grpc_addr.clone().unwrap();
    let (mut pd, cluster_id) =
        connect_when_placement_loads(&grpc, &server.trust(), Duration::from_secs(10))
            .await
            .unwrap();
    let answer = pd
        .split_regions(pdpb::SplitRegionsRequest {
            header: pd_header(cluster_id),
            split_keys: keys.clone(),
            retry_limit: 10,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.finished_percentage, 100, "{answer:?}");
    watch
        .until(
            "regions split at the keys, every one whole",
            Duration::from_secs(20),
            |v| {
                v.not_whole(&fleet, REGIONS + 2)?;
                match keys
                    .iter()
                    .find(|k| !v.regions.iter().any(|r| r.start_key == **k))
                {
                    Some(k) => Err(format!("no region starts at {k:?}")),
                    None => Ok(()),
                }
            },
        )
        .await;

    fleet.end();
    let report = run.await.unwrap().unwrap();
    eprintln!("{report:?}");
    assert_eq!(report.violations, 0, "{report:?}");
    assert_eq!(report.errors, 0, "{report:?}");
    assert!(report.changes > 0 && report.operators > 0, "{report:?}");
    server.stop().unwrap();
}

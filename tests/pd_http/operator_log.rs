//! PD's operator controller lines in the node's log, against the real binary: an operator
//! added (`add operator`), finished (`operator finish`, with PD's empty cancel reason), and
//! cancelled because its step went stale (`operator removed`, then `operator canceled` with
//! `stale status`), each with PD's fields (`region-id`, `takes`, `operator`,
//! `additional-info`). The node's own balancers may start operators on the region meanwhile
//! (a leader moved away is moved back), so only the admin operators' lines are read.

use super::operator_setup::{created, setup, Setup};
use super::*;
use meridian::harness::{metapb_peer as peer, metapb_region};
use serde_json::json;

/// The log's text with the terminal colours taken out.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("\x1b[") {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        rest = rest.find('m').map_or("", |j| &rest[j + 1..]);
    }
    out.push_str(rest);
    out
}

/// The node's log lines carrying `message` for region 10's admin transfer-leader, once there
/// are `n` (the node's own schedulers may log lines of their own).
async fn logged(node: &Node, message: &str, n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got: Vec<String> = plain(&node.server.log_text())
            .lines()
            .filter(|l| l.contains(&format!(" {message} ")) && l.contains("region-id=10 "))
            .filter(|l| l.contains("operator=admin-transfer-leader "))
            .map(str::to_string)
            .collect();
        if got.len() >= n {
            return got;
        }
        assert!(tokio::time::Instant::now() < deadline, "{message}: {got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Region 10 on `stores` (peers `10 + store`), at `conf_ver`, led by its peer on `leader`.
fn beat_of(s: &Setup, stores: &[u64], conf_ver: u64, leader: u64) -> pdpb::RegionHeartbeatRequest {
    let peers = stores.iter().map(|&st| peer(10 + st, st)).collect();
    pdpb::RegionHeartbeatRequest {
        region: Some(metapb_region(10, b"", b"", (conf_ver, 1), peers)),
        leader: Some(peer(10 + leader, leader)),
        ..s.beat.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_starts_and_ends_are_logged_as_pds_controller_logs_them() {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(&tmp, "8.5.0").await;

    // Added: PD's `add operator`, with the operator and no additional infos.
    let to_2 = json!({"name": "transfer-leader", "region_id": 10, "to_store_id": 2});
    created(&s.addr, &s.admin, to_2).await;
    let added = logged(&s.n, "add operator", 1).await;
    assert!(
        added[0].contains(
            "operator=admin-transfer-leader (kind:admin,leader, region:10(1, 3)) additional-info="
        ),
        "{added:?}"
    );
    assert!(!added[0].contains("takes="), "{added:?}");

    // The leader moves to store 2: finished, PD's empty cancel reason in its infos.
    s.tx.send(beat_of(&s, &[1, 2, 3], 3, 2)).await.unwrap();
    let finished = logged(&s.n, "operator finish", 1).await;
    let line = &finished[0];
    assert!(line.contains(" takes="), "{line}");
    assert!(
        line.contains(
            "operator=admin-transfer-leader (kind:admin,leader, region:10(1, 3)) finished"
        ),
        "{line}"
    );
    assert!(
        line.ends_with(r#"additional-info={"cancel-reason":""}"#),
        "{line}"
    );
    // Back to store 1, then store 1's peer goes: the transfer is stale, as PD cancels it.
    let to_1 = json!({"name": "transfer-leader", "region_id": 10, "to_store_id": 1});
    created(&s.addr, &s.admin, to_1).await;
    logged(&s.n, "add operator", 2).await;
    s.tx.send(beat_of(&s, &[2, 3], 4, 2)).await.unwrap();
    let removed = logged(&s.n, "operator removed", 1).await;
    assert!(
        removed[0].contains(" takes=")
            && removed[0]
                .contains("operator=admin-transfer-leader (kind:admin,leader, region:10(1, 3))"),
        "{removed:?}"
    );
    let cancelled = logged(&s.n, "operator canceled", 1).await;
    assert!(
        cancelled[0].ends_with(r#"additional-info={"cancel-reason":"stale status"}"#),
        "{cancelled:?}"
    );
    s.alive.abort();
}

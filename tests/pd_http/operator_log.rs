//! PD's operator controller lines in the node's log, against the real binary: an operator
//! added (`add operator`), finished (`operator finish`, with PD's empty cancel reason),
//! cancelled because its step went stale (`operator is stale` with PD's error, `operator
//! removed`, then `operator canceled` with `stale status`), and timed out (`operator timeout`,
//! on a node whose operators time out after 1.5 s), each with PD's fields (`region-id`,
//! `takes`, `operator` as PD's `Operator.String()`, `additional-info`). The node's own
//! balancers may start operators on the region meanwhile (a leader moved away is moved back),
//! so only the admin operators' lines are read.

use super::operator_setup::{created, setup, setup_with, Setup};
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
    lines(node, message, "operator=admin-transfer-leader ", n).await
}

/// The node's log lines carrying `message` for region 10 and `with`, once there are `n`.
async fn lines(node: &Node, message: &str, with: &str, n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got: Vec<String> = plain(&node.server.log_text())
            .lines()
            .filter(|l| l.contains(&format!(" {message} ")) && l.contains("region-id=10 "))
            .filter(|l| l.contains(with))
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
    let head = "operator=admin-transfer-leader {transfer leader: store 1 to 2} \
                (kind:admin,leader, region:10(1, 3), createAt:";
    let tail = ", currentStep:0, size:96, steps:[0:{transfer leader from store 1 to store 2}], \
                timeout:[10m0s]) additional-info=";
    assert!(
        added[0].contains(head) && added[0].contains(tail),
        "{added:?}"
    );
    assert!(!added[0].contains("takes="), "{added:?}");

    // The leader moves to store 2: finished, PD's empty cancel reason in its infos.
    s.tx.send(beat_of(&s, &[1, 2, 3], 3, 2)).await.unwrap();
    let finished = logged(&s.n, "operator finish", 1).await;
    let line = &finished[0];
    assert!(line.contains(" takes="), "{line}");
    assert!(line.contains(head), "{line}");
    assert!(
        line.contains(
            ", currentStep:1, size:96, steps:[0:{transfer leader from store 1 to store 2}], \
             timeout:[10m0s]) finished additional-info="
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
    // PD's heartbeat check first: the step's error, as PD's TransferLeader words it.
    let stale = lines(&s.n, "operator is stale", "region-id=10 ", 1).await;
    assert!(
        stale[0].ends_with("error=[peer does not existed]"),
        "{stale:?}"
    );
    let removed = logged(&s.n, "operator removed", 1).await;
    let back = "operator=admin-transfer-leader {transfer leader: store 2 to 1} \
                (kind:admin,leader, region:10(1, 3), createAt:";
    assert!(
        removed[0].contains(" takes=")
            && removed[0].contains(back)
            && removed[0].ends_with(
                "currentStep:0, size:96, \
                steps:[0:{transfer leader from store 2 to store 1}], timeout:[10m0s])"
            ),
        "{removed:?}"
    );
    let cancelled = logged(&s.n, "operator canceled", 1).await;
    assert!(
        cancelled[0].ends_with(r#"additional-info={"cancel-reason":"stale status"}"#),
        "{cancelled:?}"
    );
    s.alive.abort();
}

/// An operator past its deadline: PD's `operator timeout`, with how long it ran, the operator
/// at the step it was stuck on with PD's ` timeout` suffix, and PD's `timeout` cancel reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_past_its_deadline_is_logged_as_pds_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("meridian.toml");
    std::fs::write(&config, "[schedule]\noperator_timeout_ms = 1500\n").unwrap();
    let extra = ["--config".to_string(), config.display().to_string()];
    let s = setup_with(&tmp, "8.5.0", &extra).await;

    let to_2 = json!({"name": "transfer-leader", "region_id": 10, "to_store_id": 2});
    created(&s.addr, &s.admin, to_2).await;
    logged(&s.n, "add operator", 1).await;
    // The leader never moves; its reports go on until the deadline has passed.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let line = loop {
        s.tx.send(beat_of(&s, &[1, 2, 3], 3, 1)).await.unwrap();
        let text = plain(&s.n.server.log_text());
        let found = text
            .lines()
            .find(|l| {
                l.contains(" operator timeout ")
                    && l.contains("region-id=10 ")
                    && l.contains("operator=admin-transfer-leader ")
            })
            .map(str::to_string);
        if let Some(line) = found {
            break line;
        }
        assert!(tokio::time::Instant::now() < deadline, "no timeout line");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let takes = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("takes="))
        .unwrap_or_default();
    let seconds: f64 = takes.trim_end_matches('s').parse().unwrap_or(0.0);
    assert!(takes.ends_with('s') && seconds >= 1.5, "{line}");
    assert!(
        line.contains(
            "operator=admin-transfer-leader {transfer leader: store 1 to 2} \
             (kind:admin,leader, region:10(1, 3), createAt:"
        ) && line.contains(
            ", currentStep:0, size:96, steps:[0:{transfer leader from store 1 to store 2}], \
             timeout:[1.5s]) timeout additional-info="
        ),
        "{line}"
    );
    assert!(
        line.ends_with(r#"additional-info={"cancel-reason":"timeout"}"#),
        "{line}"
    );
    // Nothing else is said of it: no removal, no cancel.
    let text = plain(&s.n.server.log_text());
    let others = text.lines().filter(|l| {
        (l.contains(" operator removed ") || l.contains(" operator canceled "))
            && l.contains("operator=admin-transfer-leader ")
    });
    assert_eq!(others.count(), 0);
    s.alive.abort();
}

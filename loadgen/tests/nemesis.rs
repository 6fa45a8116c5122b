//! `loadgen nemesis` as a user runs it: the binary, a fixed seed, a short run. Every fault kind
//! is applied to real processes (etcd from PATH, three `meridian` nodes), and the run must end
//! with every promise kept, its JSON written and a zero exit code.

use std::process::Command;

use meridian::harness::test_binary;

#[test]
fn a_short_nemesis_run_keeps_every_promise_and_writes_its_json() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("nemesis.json");
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["nemesis", "--duration", "30s", "--seed", "42", "--json"])
        .arg(&json)
        .env("MERIDIAN_BIN", test_binary())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for key in ["violations", "duplicate_ids", "lost_splits"] {
        assert_eq!(report[key], 0, "{key}: {report}");
    }
    assert_eq!(report["coverage_errors"], serde_json::json!([]), "{report}");
    assert!(report["faults"].as_u64().unwrap() >= 5, "{report}");
    // The load ran through the faults: there was something to check.
    for key in ["timestamps", "ids", "splits_acknowledged"] {
        assert!(report[key].as_u64().unwrap() > 0, "{key}: {report}");
    }
    // Seed 42's plan uses more than one kind of fault in 30 s.
    assert!(
        report["faults_by_kind"].as_object().unwrap().len() >= 3,
        "{report}"
    );
}

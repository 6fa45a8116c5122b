//! `--log-format json`: every line the server logs is one JSON object with a level, a target
//! and its fields, so a log shipper can parse it; the default stays text.

use meridian::harness::{test_binary, ServerProcess};

#[test]
fn json_logs_are_one_object_per_line() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start_with(
        test_binary(),
        &data,
        "127.0.0.1:0",
        &["--log-format".into(), "json".into()],
    )
    .unwrap();
    server.stop().unwrap();
    let log = std::fs::read_to_string(data.with_extension("log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.len() >= 2, "{log}");
    let mut serving = false;
    for line in lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["level"].is_string() && v["target"].is_string(), "{line}");
        if v["fields"]["message"] == "serving" {
            assert!(v["fields"]["client_addr"].is_string(), "{line}");
            serving = true;
        }
    }
    assert!(serving, "no 'serving' line in {log}");
}

//! `loadgen tso --protocol grpc`: the same checker judges timestamps that came over kvproto's
//! `pdpb.PD` Tso stream, batched the way PD's client batches, and a batch's timestamps are
//! rebuilt from the last one as PD clients rebuild them.

use std::time::Duration;

use loadgen::args::{Protocol, TsoArgs};
use loadgen::run;
use meridian::harness::{test_binary, ServerProcess};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_tso_load_is_checked_and_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let grpc = server.grpc_addr.clone().unwrap();
    let mut args = TsoArgs::checked(
        vec![grpc],
        data.join("tls/ca.pem"),
        Duration::from_secs(2),
        256,
    );
    args.protocol = Protocol::Grpc;
    let report = run::run(&args).await.unwrap();
    assert!(report.ops > 1000, "only {} timestamps", report.ops);
    assert_eq!(report.errors, 0);
    assert_eq!(report.violations, 0);
    assert_eq!(
        report.checked, report.ops,
        "every timestamp went through the duplicate check"
    );
    server.stop().unwrap();
}

//! `loadgen attack` against a real node: under each attack the TSO keeps serving another
//! client with no violation, and the node refuses or cuts off what the attack sends. How much
//! throughput each attack costs is measured with the command (tuning.md), not asserted here.

use std::time::Duration;

use loadgen::args::TsoArgs;
use loadgen::attack::{self, Attack};
use loadgen::demo::{DemoServer, ServerSetup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tso_serves_through_every_attack_and_the_node_refuses_it() {
    std::env::set_var("MERIDIAN_BIN", meridian::harness::test_binary());
    let demo = DemoServer::start(&ServerSetup {
        server_cores: Some(2),
        ..Default::default()
    })
    .await
    .unwrap();
    let args = TsoArgs::checked(Vec::new(), demo.ca.clone(), Duration::from_secs(2), 64);
    let kinds = [
        Attack::Handshakes,
        Attack::Connections,
        Attack::Streams,
        Attack::OversizedKeys,
        Attack::Slowloris,
    ];
    let report = attack::run(args, &demo, &kinds, 1).await.unwrap();
    assert_eq!(report.violations, 0);
    assert!(report.median_quiet_tso_per_sec > 0.0);
    for a in &report.attacks {
        assert!(
            a.median_tso_per_sec > 0.0,
            "{:?}: the TSO stopped serving",
            a.kind
        );
        assert!(a.effect.attempts > 0, "{:?} did nothing", a.kind);
        match a.kind {
            // Every handshake without a certificate fails.
            Attack::Handshakes => assert_eq!(
                a.effect.refused, a.effect.attempts,
                "a handshake without a certificate got in: {:?}",
                a.effect
            ),
            // Every oversized request is answered with the limit (or its stream reset).
            Attack::OversizedKeys => assert_eq!(a.effect.refused, a.effect.attempts),
            // The streams are held, not refused, up to the per-connection limit.
            Attack::Streams => assert!(
                a.effect.attempts >= 4 * 1000,
                "streams opened: {:?}",
                a.effect
            ),
            // Idle admin sockets and trickles are cut off by the handshake and header
            // timeouts (5 s) only after this short run; the sockets were opened.
            Attack::Slowloris | Attack::Connections => {}
        }
    }
    demo.stop().await.unwrap();
}

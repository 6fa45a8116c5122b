//! A member that knows no leader, as PD's redirector answers it
//! (`pkg/utils/apiutil/serverapi/middleware.go`): a request only the leader answers waits for
//! a leader (100 ms, doubling, 3 s in all) and then gets 503 with PD's "redirect finds no
//! leader", in Go's `http.Error` shape (plain text, a newline); the local-only routes still
//! answer at once; and once a leader is elected the same request is answered again.
//!
//! The cluster is two members on real etcd. The survivor's path to etcd is slowed past etcd
//! client's 3 s request timeout before the leader is SIGKILLed: the survivor still sees the
//! leader key go (its watch delivers the delete, late), but each of its campaigns times out,
//! so it holds "no leader" until the path heals.

use super::*;
use meridian::harness::{Cluster, LinkFault};

const NO_LEADER: &str = "[PD:apiutil:ErrRedirectNoLeader]redirect finds no leader\n";
const REDIRECT_FAILED: &str = "[PD:apiutil:ErrRedirect]redirect failed\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_knows_no_leader_answers_pds_503_until_one_is_elected() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Cluster::start_proxied(tmp.path(), 2, "[election]\nlease_ttl_secs = 2\n").unwrap();
    let leader = c
        .leader_within(None, Duration::from_secs(20))
        .expect("a member leads within 20 s");
    let survivor = 1 - leader;
    let trust = c.trust();
    let at = c.nodes[survivor].process().client_addr.clone();
    let path = "/pd/api/v1/members";
    // With a leader, the survivor sends the request on and answers with the leader's answer.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while get(&at, &trust, Proto::H1, path).await.status != StatusCode::OK {
        assert!(std::time::Instant::now() < deadline, "sent on within 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Node 0 holds the CA; it may be the leader about to go.
    let admin = c.nodes[0]
        .process()
        .role_cert(meridian::tls::cert::Role::Admin, "admin")
        .unwrap();

    c.proxies[survivor].set(LinkFault::Delay(Duration::from_secs(2)));
    c.nodes[leader].kill().unwrap();

    // Until the survivor learns the leader is gone, it sends requests on to the dead leader:
    // PD's "redirect failed". Then it knows no leader.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (answer, waited) = loop {
        let started = std::time::Instant::now();
        let a = get(&at, &trust, Proto::H1, path).await;
        if a.status != StatusCode::INTERNAL_SERVER_ERROR {
            break (a, started.elapsed());
        }
        assert_eq!(a.text(), REDIRECT_FAILED);
        assert!(
            std::time::Instant::now() < deadline,
            "the leader's loss seen within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        answer.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        answer.text()
    );
    assert_eq!(answer.text(), NO_LEADER);
    assert_eq!(answer.content_type, "text/plain; charset=utf-8");
    // PD waits for a leader before it gives up.
    assert!(
        waited >= Duration::from_secs(3),
        "answered after {waited:?}"
    );

    // The same over HTTP/2, and for a change (an admin's) as for a read; `/leader` too is the
    // redirector's before it is the handler's.
    let asked = [
        (Proto::H2, Method::GET, "/pd/api/v1/leader", &trust),
        (Proto::H1, Method::DELETE, "/pd/api/v1/operators", &admin),
    ];
    for (proto, method, path, who) in asked {
        let a = send(&at, who, proto, method.clone(), path, &[], "")
            .await
            .unwrap();
        assert_eq!(
            (a.status, a.text()),
            (StatusCode::SERVICE_UNAVAILABLE, NO_LEADER.to_string()),
            "{method} {path} over {proto:?}"
        );
    }
    // PD's local-only routes answer without a leader.
    for path in [
        "/pd/api/v1/version",
        "/pd/api/v1/health",
        "/pd/api/v1/status",
    ] {
        let a = get(&at, &trust, Proto::H2, path).await;
        assert_eq!(a.status, StatusCode::OK, "{path}: {}", a.text());
    }

    // Once the path heals, the survivor is elected and answers itself.
    c.proxies[survivor].heal();
    poll(&at, &trust, path, Duration::from_secs(30), |a| {
        a.status == StatusCode::OK
    })
    .await;
    assert_eq!(
        c.leader_within(None, Duration::from_secs(5)),
        Some(survivor)
    );
}

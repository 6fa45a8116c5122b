//! A follower's HTTP API, on a cluster on etcd: what is the same on every member (version,
//! members, the node's config) it answers itself, as PD's redirector does; what only the
//! leader holds it sends to the leader's address, method, path and query kept.

use super::*;
use meridian::harness::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_answers_what_every_member_knows_and_redirects_the_rest_to_the_leader() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Cluster::start(tmp.path(), 2, "[election]\nlease_ttl_secs = 2\n").unwrap();
    let leader = c
        .leader_within(None, Duration::from_secs(20))
        .expect("a leader");
    let follower = 1 - leader;
    let trust = c.trust();
    let at = |i: usize| c.nodes[i].process().client_addr.clone();
    // The follower learns who leads from etcd; give it the time a lease takes.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let a = get(&at(follower), &trust, Proto::H1, "/pd/api/v1/leader").await;
        if a.status == StatusCode::OK && a.json()["name"] == format!("n{leader}") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the follower never knew the leader: {a:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    for proto in BOTH {
        for path in [
            "/pd/api/v1/version",
            "/pd/api/v1/members",
            "/pd/api/v1/config",
        ] {
            let a = get(&at(follower), &trust, proto, path).await;
            assert_eq!(a.status, StatusCode::OK, "{path}: {}", a.text());
        }
        for path in [
            "/pd/api/v1/stores?state=0",
            "/pd/api/v1/regions",
            "/pd/api/v1/config/rules",
        ] {
            let a = get(&at(follower), &trust, proto, path).await;
            assert_eq!(
                a.status,
                StatusCode::TEMPORARY_REDIRECT,
                "{path}: {}",
                a.text()
            );
            assert_eq!(
                a.location.as_deref(),
                Some(format!("https://{}{path}", at(leader)).as_str()),
                "{path}"
            );
        }
        // The leader answers what the follower sent on.
        let a = get(&at(leader), &trust, proto, "/pd/api/v1/regions").await;
        assert_ne!(a.status, StatusCode::TEMPORARY_REDIRECT);
    }
}

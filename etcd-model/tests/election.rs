//! Meridian's own election code (`meridian::election::Election`, unchanged) running on the
//! model through the real client: one member wins, another follows it, and when the model
//! revokes the winner's lease (a fault knob) the follower sees the key go and takes over.

use std::time::Duration;

use etcd_client::Client;
use etcd_model::EtcdModel;
use meridian::election::{mono_ms, Election};
use meridian::proto::MemberInfo;
use tokio::sync::watch;
use tokio::time::timeout;

fn member(name: &str, id: u64) -> MemberInfo {
    MemberInfo {
        name: name.into(),
        id,
        client_url: format!("127.0.0.1:{}", 2379 + id),
        admin_url: format!("https://127.0.0.1:{}", 3379 + id),
        grpc_url: String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_takes_over_when_the_model_revokes_the_leaders_lease() {
    let model = EtcdModel::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let endpoint = format!("http://{}", listener.local_addr().expect("its address"));
    let server = tokio::spawn(model.clone().serve(listener));
    let connect = || async {
        Client::connect([endpoint.as_str()], None)
            .await
            .expect("connect to the model")
    };
    let key = b"/meridian/leader".to_vec();
    let (_stop, shutdown) = watch::channel(false);

    let first = Election::new(connect().await, key.clone(), member("m1", 1), 3, 100);
    let (leader1, _) = watch::channel(None);
    let mut shutdown1 = shutdown.clone();
    let term = timeout(
        Duration::from_secs(5),
        first.campaign(&leader1, &mut shutdown1),
    )
    .await
    .expect("m1 campaigns in time")
    .expect("no etcd error")
    .expect("m1 wins an empty election");
    assert!(term.holds(mono_ms()), "a fresh term holds its lease");

    let second = Election::new(connect().await, key.clone(), member("m2", 2), 3, 100);
    let (leader2, mut seen_by_m2) = watch::channel(None);
    let mut shutdown2 = shutdown.clone();
    let follower = tokio::spawn(async move {
        second
            .campaign(&leader2, &mut shutdown2)
            .await
            .map(|t| t.map(|t| t.lease_id))
    });
    timeout(
        Duration::from_secs(5),
        seen_by_m2.wait_for(|m| m.as_ref().is_some_and(|m| m.name == "m1")),
    )
    .await
    .expect("m2 learns who leads in time")
    .expect("m2's campaign is running");

    let before = model.revision();
    let after = model
        .revoke_lease(term.lease_id)
        .expect("m1's lease exists");
    assert_eq!(after, before + 1, "the revocation deletes the leader key");
    let lease2 = timeout(Duration::from_secs(10), follower)
        .await
        .expect("m2 takes over in time")
        .expect("m2's task")
        .expect("no etcd error")
        .expect("m2 wins");
    assert_ne!(lease2, term.lease_id);
    let holder = model.with_etcd(|etcd, now| {
        etcd.range(
            &etcd_model::pb::RangeRequest {
                key: key.clone(),
                ..Default::default()
            },
            now,
        )
    });
    let kv = holder.expect("a read").kvs.remove(0);
    assert_eq!(kv.lease, lease2, "the key hangs on m2's lease");
    server.abort();
}

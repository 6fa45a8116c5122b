//! Who may call the HTTP API: a GET needs any role, anything else `admin` (as on the admin
//! port), and a caller without a certificate does not get through the handshake. A refusal is
//! 403 naming the role and the route does not run; the same certificate's gRPC calls are
//! checked as before.

use super::*;
use meridian::tls::cert::{self, Role};

/// A certificate from the node's own CA with `roles`, as a `Trust`.
pub(crate) fn holder(data: &Path, name: &str, roles: &[Role]) -> Trust {
    let dir = data.join("tls");
    let ca = cert::Pem {
        cert: std::fs::read_to_string(dir.join("ca.pem")).unwrap(),
        key: std::fs::read_to_string(dir.join("ca-key.pem")).unwrap(),
    };
    let pem = cert::create_client_with(&ca, name, roles).unwrap();
    let out = data.parent().unwrap().join(format!("certs-{name}"));
    std::fs::create_dir_all(&out).unwrap();
    cert::write_pair(&out, name, &pem).unwrap();
    Trust::Mutual {
        ca: dir.join("ca.pem"),
        cert: out.join(format!("{name}.pem")),
        key: out.join(format!("{name}-key.pem")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_need_a_role_changes_need_admin_and_strangers_do_not_get_in() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let n = start(&data).await;
    let addr = n.addr().to_string();
    let client = holder(&data, "client", &[Role::Client]);
    let store = holder(&data, "store", &[Role::Store]);
    let admin = holder(&data, "admin", &[Role::Admin]);
    let nobody = holder(&data, "nobody", &[]);

    for proto in BOTH {
        for trust in [&client, &store, &admin] {
            let a = get(&addr, trust, proto, "/pd/api/v1/version").await;
            assert_eq!(a.status, StatusCode::OK);
        }
        // A certificate from the CA with no role reads nothing.
        let a = get(&addr, &nobody, proto, "/pd/api/v1/version").await;
        assert_eq!(a.status, StatusCode::FORBIDDEN);
        assert!(a
            .json()
            .as_str()
            .unwrap()
            .contains("needs a client certificate with a role"));

        // A change needs admin: any other role is refused before the route runs.
        for (trust, method, path) in [
            (&client, Method::POST, "/pd/api/v1/config/rules"),
            (&store, Method::POST, "/pd/api/v1/config/rules/batch"),
            (
                &client,
                Method::PATCH,
                "/pd/api/v1/config/region-label/rules",
            ),
            (
                &store,
                Method::DELETE,
                "/pd/api/v1/config/region-label/rule/x",
            ),
            (&client, Method::POST, "/pd/api/v1/config/placement-rule"),
        ] {
            let a = send(&addr, trust, proto, method.clone(), path, &[], "[]")
                .await
                .unwrap();
            assert_eq!(
                a.status,
                StatusCode::FORBIDDEN,
                "{method} {path} over {proto:?}"
            );
            let why = a.json();
            assert!(why.as_str().unwrap().contains("`admin`"), "{why}");
        }
        // Admin passes the check and the route runs: it says the cluster is not bootstrapped.
        let a = send(
            &addr,
            &admin,
            proto,
            Method::POST,
            "/pd/api/v1/config/rules",
            &[],
            "[]",
        )
        .await
        .unwrap();
        assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            a.json(),
            serde_json::json!("[PD:cluster:ErrNotBootstrapped]TiKV cluster not bootstrapped, please start TiKV first")
        );
    }

    // No certificate at all: the handshake (or the first read after it) fails.
    let anonymous = n.server.anonymous_trust(&tmp.path().join("bare")).unwrap();
    for proto in BOTH {
        let tried = tokio::time::timeout(
            Duration::from_secs(10),
            send(
                &addr,
                &anonymous,
                proto,
                Method::GET,
                "/pd/api/v1/version",
                &[],
                "",
            ),
        )
        .await
        .expect("refused, not hung");
        assert!(tried.is_err(), "{proto:?}: {tried:?}");
    }
    n.server.stop().unwrap();
}

//! `meridian cert`: a CA, a node certificate and client certificates made by the binary; a
//! node started with the node certificate serves QUIC and gRPC clients that trust only the
//! CA, and the client certificates carry the roles asked for.

use std::path::Path;
use std::process::Command;

use meridian::client::{Client, ClientOptions};
use meridian::harness::{test_binary, ServerProcess};
use meridian::kvproto::pdpb;
use meridian::pd_grpc;
use meridian::tls::cert::{roles_of, Role};
use meridian::tls::Trust;

fn cert(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(test_binary())
        .args(["cert", "--certs-dir"])
        .arg(dir.join("certs"))
        .arg("--ca-key")
        .arg(dir.join("safe/ca-key.pem"))
        .args(args)
        .output()
        .unwrap()
}

fn roles(pem_path: &Path) -> Vec<Role> {
    let pem = std::fs::read(pem_path).unwrap();
    let der = rustls_pemfile::certs(&mut pem.as_slice())
        .next()
        .unwrap()
        .unwrap();
    roles_of(&der).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_ca_signed_certificate_serves_clients_that_trust_the_ca() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for args in [
        vec!["create-ca"],
        vec!["create-node", "localhost", "127.0.0.1"],
        vec!["create-client", "--role", "store"],
        vec!["create-client", "--role", "admin", "--name", "ops"],
    ] {
        let out = cert(dir, &args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A CA is made once; a key is never overwritten.
    assert!(!cert(dir, &["create-ca"]).status.success());
    assert!(!cert(dir, &["create-client", "--role", "store"])
        .status
        .success());

    let certs = dir.join("certs");
    assert_eq!(roles(&certs.join("node.pem")), vec![Role::Member]);
    assert_eq!(roles(&certs.join("client.pem")), vec![Role::Store]);
    assert_eq!(roles(&certs.join("ops.pem")), vec![Role::Admin]);
    assert!(
        !certs.join("ca-key.pem").exists(),
        "the CA key stays where --ca-key says"
    );

    let data = dir.join("data");
    let server = ServerProcess::start_with(
        test_binary(),
        &data,
        "127.0.0.1:0",
        &[
            "--tls-cert".into(),
            certs.join("node.pem").display().to_string(),
            "--tls-key".into(),
            certs.join("node-key.pem").display().to_string(),
        ],
    )
    .unwrap();
    let trust = Trust::Ca(certs.join("ca.pem"));
    let client = Client::connect(ClientOptions::new(
        vec![server.client_addr.clone()],
        trust.clone(),
    ))
    .await
    .unwrap();
    client.get_ts().await.unwrap();
    let mut pd = pd_grpc::connect(server.grpc_addr.as_deref().unwrap(), &trust)
        .await
        .unwrap();
    pd.get_members(pdpb::GetMembersRequest::default())
        .await
        .unwrap();
    server.stop().unwrap();
}

/// With no certificate given, a node makes a local CA, its own certificate signed by it, and a
/// client certificate (roles client, store, admin) under DATA_DIR/tls, with the names PD
/// clients' TLS settings use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_certificates_makes_a_local_ca_and_a_client_certificate() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(1)).unwrap();
    let tls = data.join("tls");
    for f in [
        "ca.pem",
        "cert.pem",
        "key.pem",
        "client.pem",
        "client-key.pem",
    ] {
        assert!(tls.join(f).exists(), "{f} missing");
    }
    assert_ne!(
        std::fs::read(tls.join("ca.pem")).unwrap(),
        std::fs::read(tls.join("cert.pem")).unwrap(),
        "ca.pem is a CA, not the node's own certificate"
    );
    assert_eq!(roles(&tls.join("cert.pem")), vec![Role::Member]);
    assert_eq!(
        roles(&tls.join("client.pem")),
        vec![Role::Client, Role::Store, Role::Admin]
    );
    let trust = Trust::Ca(tls.join("ca.pem"));
    let client = Client::connect(ClientOptions::new(vec![server.client_addr.clone()], trust))
        .await
        .unwrap();
    client.get_ts().await.unwrap();
    server.stop().unwrap();
}

#[test]
fn relative_directories_that_do_not_exist_yet_are_made() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        vec!["create-ca"],
        vec!["create-client", "--role", "admin", "--name", "ops"],
    ] {
        let out = Command::new(test_binary())
            .current_dir(tmp.path())
            .args([
                "cert",
                "--certs-dir",
                "certs",
                "--ca-key",
                "safe/ca-key.pem",
            ])
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(roles(&tmp.path().join("certs/ops.pem")), vec![Role::Admin]);
    assert!(tmp.path().join("safe/ca-key.pem").exists());
}

/// The extended key usages of a PEM certificate: (serverAuth, clientAuth).
fn usages(pem_path: &Path) -> (bool, bool) {
    let pem = std::fs::read(pem_path).unwrap();
    let der = rustls_pemfile::certs(&mut pem.as_slice())
        .next()
        .unwrap()
        .unwrap();
    let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
    let eku = c.extended_key_usage().unwrap().expect("an EKU extension");
    (eku.value.server_auth, eku.value.client_auth)
}

/// TiKV and TiDB present their server certificate as their client certificate:
/// `create-node --role` makes one that serves (a node runs on it here) and calls (a client
/// presents it, with its role) alike, and a store's may name its store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_create_node_with_a_role_serves_and_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for args in [
        vec!["create-ca"],
        vec![
            "create-node",
            "--role",
            "store",
            "--name",
            "tikv",
            "--store-id",
            "7",
            "localhost",
            "127.0.0.1",
        ],
        vec![
            "create-node",
            "--role",
            "client",
            "--name",
            "tidb",
            "tidb-0",
        ],
    ] {
        let out = cert(dir, &args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Only TiKV's and TiDB's roles, and only a store's certificate names a store.
    for bad in [
        vec!["create-node", "--role", "admin", "--name", "x", "h"],
        vec![
            "create-node",
            "--role",
            "client",
            "--name",
            "y",
            "--store-id",
            "3",
            "h",
        ],
        vec!["create-node", "--store-id", "3", "h"],
    ] {
        assert!(!cert(dir, &bad).status.success(), "{bad:?}");
    }
    let certs = dir.join("certs");
    assert_eq!(roles(&certs.join("tikv.pem")), vec![Role::Store]);
    assert_eq!(roles(&certs.join("tidb.pem")), vec![Role::Client]);
    assert_eq!(usages(&certs.join("tikv.pem")), (true, true));
    assert_eq!(usages(&certs.join("tidb.pem")), (true, true));
    let tikv_der = {
        let pem = std::fs::read(certs.join("tikv.pem")).unwrap();
        let der = rustls_pemfile::certs(&mut pem.as_slice())
            .next()
            .unwrap()
            .unwrap();
        der
    };
    let peer = meridian::tls::cert::read_peer(&tikv_der).unwrap();
    assert_eq!(peer.store, Some(7));
    assert_eq!(peer.common_name.as_deref(), Some("tikv"));

    // The store's certificate serves: a node runs on it and clients that trust the CA
    // verify it for 127.0.0.1.
    let server = ServerProcess::start_with(
        test_binary(),
        &dir.join("data"),
        "127.0.0.1:0",
        &[
            "--tls-cert".into(),
            certs.join("tikv.pem").display().to_string(),
            "--tls-key".into(),
            certs.join("tikv-key.pem").display().to_string(),
            "--cores".into(),
            "1".into(),
        ],
    )
    .unwrap();
    // And it calls: presented as a client certificate it carries `store`, over QUIC and gRPC.
    let as_client = Trust::Mutual {
        ca: certs.join("ca.pem"),
        cert: certs.join("tikv.pem"),
        key: certs.join("tikv-key.pem"),
    };
    let mut opts = ClientOptions::new(vec![server.client_addr.clone()], as_client.clone());
    opts.retry_budget = std::time::Duration::from_secs(15);
    let client = Client::connect(opts).await.unwrap();
    client.alloc_id().await.unwrap();
    let mut pd = pd_grpc::connect(server.grpc_addr.as_deref().unwrap(), &as_client)
        .await
        .unwrap();
    let cluster_id = pd
        .get_members(pdpb::GetMembersRequest::default())
        .await
        .unwrap()
        .into_inner()
        .header
        .unwrap()
        .cluster_id;
    let id = pd
        .alloc_id(pdpb::AllocIdRequest {
            header: Some(pdpb::RequestHeader {
                cluster_id,
                ..Default::default()
            }),
            count: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(id.id > 0, "{id:?}");
    // TiDB's certificate calls as a client: timestamps, and no store writes.
    let tidb = Trust::Mutual {
        ca: certs.join("ca.pem"),
        cert: certs.join("tidb.pem"),
        key: certs.join("tidb-key.pem"),
    };
    let client = Client::connect(ClientOptions::new(vec![server.client_addr.clone()], tidb))
        .await
        .unwrap();
    client.get_ts().await.unwrap();
    assert!(client.alloc_id().await.is_err());
    server.stop().unwrap();
}

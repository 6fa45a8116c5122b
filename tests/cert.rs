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

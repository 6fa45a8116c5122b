//! An operator's own PKI for a node started with `--tls-cert` and `--tls-key` instead of the
//! self-signed one it makes in `DATA_DIR/tls`: a CA and a node certificate for loopback. Owns
//! only making those files; the callers' certificates, and what a node grants them, are the
//! test's.

use std::path::Path;

use crate::tls::cert;

/// A CA with common name `ca_name` (`dir/ca.pem`, `ca-key.pem`) and a node certificate for
/// `localhost` and `127.0.0.1` signed by it (`node.pem`, `node-key.pem`); returns the CA, to
/// sign the callers' certificates with.
pub fn ca_and_node(dir: &Path, ca_name: &str) -> anyhow::Result<cert::Pem> {
    std::fs::create_dir_all(dir)?;
    let ca = cert::create_ca(ca_name)?;
    cert::write_pair(dir, "ca", &ca)?;
    let node = cert::create_node(&ca, &["localhost".into(), "127.0.0.1".into()])?;
    cert::write_pair(dir, "node", &node)?;
    Ok(ca)
}

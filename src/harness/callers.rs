//! Callers of a harness node other than its own client certificate ([`ServerProcess::trust`],
//! roles client, store and admin): a client certificate with one role, made from the CA the
//! node made in `DATA_DIR/tls` as an operator makes one (`meridian cert create-client`), and a
//! caller that verifies the node but presents no certificate. Owns only making those trusts;
//! what a node grants them is the test's to assert.

use std::path::Path;
use std::process::Command;

use super::ServerProcess;
use crate::tls::cert::Role;
use crate::tls::Trust;

impl ServerProcess {
    /// A client certificate with `role` and common name `name`, made by the node's binary
    /// with the node's CA key: `DATA_DIR/tls/<name>.pem` and `<name>-key.pem`.
    pub fn role_cert(&self, role: Role, name: &str) -> anyhow::Result<Trust> {
        let tls = self.data_dir.join("tls");
        let out = Command::new(&self.binary)
            .arg("cert")
            .arg("--certs-dir")
            .arg(&tls)
            .arg("--ca-key")
            .arg(tls.join("ca-key.pem"))
            .args(["create-client", "--role", role.name(), "--name", name])
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "meridian cert create-client --role {} --name {name}: {}",
            role.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(Trust::Mutual {
            ca: tls.join("ca.pem"),
            cert: tls.join(format!("{name}.pem")),
            key: tls.join(format!("{name}-key.pem")),
        })
    }

    /// A caller that verifies the node and presents no certificate: the node's CA copied
    /// alone into `dir`. (A [`Trust::Ca`] of the CA where the node keeps it presents the
    /// client certificate beside it.)
    pub fn anonymous_trust(&self, dir: &Path) -> anyhow::Result<Trust> {
        std::fs::create_dir_all(dir)?;
        let ca = dir.join("ca.pem");
        std::fs::copy(self.data_dir.join("tls").join("ca.pem"), &ca)?;
        Ok(Trust::Ca(ca))
    }
}

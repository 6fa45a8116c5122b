//! The node's TLS material while it serves: its certificate and key, and the CA that verifies
//! clients, read from files and read again on `reload` (SIGHUP), so a rotated certificate takes
//! effect without a restart. Every port's rustls config resolves through one `LiveTls`, so a
//! reload reaches QUIC, gRPC and admin at once; connections already open keep what they were
//! made with. Owns the swap; must not decide which files a node uses (the server's setup passes
//! the paths) or what a role may do.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use anyhow::Context;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::{provider, roots_of, Identity};

/// Where the material lives on disk.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The CA that signs client certificates; `None` when client authentication is off.
    pub client_ca: Option<PathBuf>,
}

/// One consistent set: a reload replaces all of it or none.
struct Material {
    key: Arc<CertifiedKey>,
    /// Client certificate required (QUIC, gRPC, admin).
    required: Option<Arc<dyn ClientCertVerifier>>,
    /// Client certificate optional (admin with open probes).
    optional: Option<Arc<dyn ClientCertVerifier>>,
}

pub struct LiveTls {
    files: TlsFiles,
    current: RwLock<Arc<Material>>,
    /// The files' modification times when last read, to notice a replaced file.
    stamps: Mutex<Vec<Option<SystemTime>>>,
}

impl std::fmt::Debug for LiveTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveTls")
            .field("files", &self.files)
            .finish()
    }
}

fn verifier(
    roots: &Arc<rustls::RootCertStore>,
    open: bool,
) -> anyhow::Result<Arc<dyn ClientCertVerifier>> {
    let builder =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider());
    let builder = if open {
        builder.allow_unauthenticated()
    } else {
        builder
    };
    Ok(builder.build()?)
}

fn load(files: &TlsFiles) -> anyhow::Result<Material> {
    let identity = Identity::read(&files.cert, &files.key)?;
    let signer = provider()
        .key_provider
        .load_private_key(identity.key)
        .with_context(|| format!("loading the key in {}", files.key.display()))?;
    let key = Arc::new(CertifiedKey::new(identity.certs, signer));
    key.keys_match().with_context(|| {
        format!(
            "{} is not {}'s key",
            files.key.display(),
            files.cert.display()
        )
    })?;
    let (required, optional) = match &files.client_ca {
        Some(path) => {
            let pem = std::fs::read(path).with_context(|| {
                format!(
                    "reading {}, the CA that signs client certificates (--tls-ca; \
                     --insecure-no-client-auth turns client authentication off)",
                    path.display()
                )
            })?;
            let roots = Arc::new(roots_of(&pem, path)?);
            (
                Some(verifier(&roots, false)?),
                Some(verifier(&roots, true)?),
            )
        }
        None => (None, None),
    };
    Ok(Material {
        key,
        required,
        optional,
    })
}

impl TlsFiles {
    /// Modification times, following symlinks: a Kubernetes Secret update swaps the `..data`
    /// link, which changes the time of the file each name resolves to.
    fn stamps(&self) -> Vec<Option<SystemTime>> {
        [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
            .collect()
    }
}

impl LiveTls {
    pub fn load(files: TlsFiles) -> anyhow::Result<Arc<LiveTls>> {
        let stamps = files.stamps();
        let material = load(&files)?;
        Ok(Arc::new(LiveTls {
            files,
            current: RwLock::new(Arc::new(material)),
            stamps: Mutex::new(stamps),
        }))
    }

    /// Reloads if any file changed since it was last read (the file watch; SIGHUP reloads at
    /// once). `Ok(false)`: nothing changed.
    pub fn reload_if_changed(&self) -> anyhow::Result<bool> {
        let now = self.files.stamps();
        let seen = match self.stamps.lock() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        if now == seen {
            return Ok(false);
        }
        self.reload().map(|()| true)
    }

    /// Reads the files again and swaps them in; on any error the old set keeps serving (and
    /// the same files are not tried again until they change once more).
    pub fn reload(&self) -> anyhow::Result<()> {
        let stamps = self.files.stamps();
        match self.stamps.lock() {
            Ok(mut s) => *s = stamps,
            Err(poisoned) => *poisoned.into_inner() = stamps,
        }
        let material = load(&self.files)?;
        match self.current.write() {
            Ok(mut current) => *current = Arc::new(material),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(material),
        }
        Ok(())
    }

    fn current(&self) -> Arc<Material> {
        match self.current.read() {
            Ok(m) => m.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn client_auth(&self) -> bool {
        self.files.client_ca.is_some()
    }

    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// The verifier for a port: `open` lets a client without a certificate finish the handshake
    /// (it is then granted nothing). `None` when client authentication is off.
    pub fn client_verifier(self: &Arc<Self>, open: bool) -> Option<Arc<dyn ClientCertVerifier>> {
        self.client_auth().then(|| {
            Arc::new(LiveVerifier {
                live: self.clone(),
                open,
            }) as Arc<dyn ClientCertVerifier>
        })
    }

    /// The certificate chain served now (tests, logs).
    pub fn served_chain(&self) -> Vec<CertificateDer<'static>> {
        self.current().key.cert.clone()
    }
}

impl ResolvesServerCert for LiveTls {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current().key.clone())
    }
}

#[derive(Debug)]
struct LiveVerifier {
    live: Arc<LiveTls>,
    open: bool,
}

impl LiveVerifier {
    fn inner(&self) -> Result<Arc<dyn ClientCertVerifier>, rustls::Error> {
        let m = self.live.current();
        let v = if self.open { &m.optional } else { &m.required };
        v.clone()
            .ok_or_else(|| rustls::Error::General("client authentication is off".into()))
    }
}

impl ClientCertVerifier for LiveVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        !self.open
    }

    // No CA names in the CertificateRequest: they would have to outlive a reload. Clients
    // then present the certificate they have, which the verifier judges.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.inner()?
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner()?.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner()
            .map(|v| v.supported_verify_schemes())
            .unwrap_or_default()
    }
}

/// `DATA_DIR/tls/cert.pem`/`key.pem` (the local pair) unless `--tls-cert/--tls-key` are given.
pub fn identity_files(
    data_dir: &Path,
    cert: Option<&Path>,
    key: Option<&Path>,
) -> (PathBuf, PathBuf) {
    match (cert, key) {
        (Some(c), Some(k)) => (c.to_path_buf(), k.to_path_buf()),
        _ => {
            let dir = data_dir.join("tls");
            (dir.join("cert.pem"), dir.join("key.pem"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::cert;

    fn write(dir: &Path, ca: &cert::Pem) {
        let node = cert::create_node(ca, &["localhost".into()]).unwrap();
        for (name, text) in [
            ("node.pem", &node.cert),
            ("node-key.pem", &node.key),
            ("ca.pem", &ca.cert),
        ] {
            let tmp = dir.join(format!("{name}.new"));
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, dir.join(name)).unwrap();
        }
    }

    #[test]
    fn replaced_files_are_noticed_and_broken_ones_keep_the_old_set() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &cert::create_ca("one").unwrap());
        let live = LiveTls::load(TlsFiles {
            cert: dir.path().join("node.pem"),
            key: dir.path().join("node-key.pem"),
            client_ca: Some(dir.path().join("ca.pem")),
        })
        .unwrap();
        let first = live.served_chain();
        assert!(!live.reload_if_changed().unwrap(), "nothing changed yet");
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(dir.path(), &cert::create_ca("two").unwrap());
        assert!(live.reload_if_changed().unwrap());
        let second = live.served_chain();
        assert_ne!(first, second);
        assert!(!live.reload_if_changed().unwrap());
        // A key that is not the certificate's: refused, the second set still serves, and the
        // same broken files are not retried every period.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let other = cert::create_node(&cert::create_ca("three").unwrap(), &["x".into()]).unwrap();
        std::fs::write(dir.path().join("node-key.pem"), other.key).unwrap();
        assert!(live.reload_if_changed().is_err());
        assert_eq!(live.served_chain(), second);
        assert!(!live.reload_if_changed().unwrap());
    }
}

//! TLS material and QUIC crypto configs: the server's certificate (given, or a local CA with a
//! node and a client certificate created once in the data dir and kept), and client configs that verify against a CA file or,
//! only when asked explicitly, skip verification. TLS 1.3 only, ALPN `meridian/1`.

pub mod cert;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::datagram;
use crate::proto::ALPN;

/// How a client decides to trust the server.
#[derive(Debug, Clone)]
pub enum Trust {
    /// PEM file with the server's certificate or the CA that signed it.
    Ca(PathBuf),
    /// No verification at all: for tests and local experiments only.
    Insecure,
}

pub struct Identity {
    pub certs: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// The same pair as PEM, for the gRPC front end's TLS.
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Loads `--tls-cert/--tls-key`, or the self-signed pair in `DATA_DIR/tls`, creating it (and
/// `ca.pem`, the file clients pass as `--ca`) on first start.
pub fn load_or_create_identity(
    data_dir: &Path,
    cert: Option<&Path>,
    key: Option<&Path>,
    names: &[String],
) -> anyhow::Result<Identity> {
    let (cert_path, key_path) = match (cert, key) {
        (Some(c), Some(k)) => (c.to_path_buf(), k.to_path_buf()),
        (None, None) => {
            let dir = data_dir.join("tls");
            let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
            if !c.exists() || !k.exists() {
                create_self_signed(&dir, names)?;
            }
            (c, k)
        }
        _ => anyhow::bail!("--tls-cert and --tls-key go together"),
    };
    let cert_pem =
        std::fs::read(&cert_path).with_context(|| format!("opening {}", cert_path.display()))?;
    let key_pem =
        std::fs::read(&key_path).with_context(|| format!("opening {}", key_path.display()))?;
    let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing {}", cert_path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{} holds no certificate", cert_path.display());
    }
    let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .with_context(|| format!("parsing {}", key_path.display()))?
        .with_context(|| format!("{} holds no private key", key_path.display()))?;
    Ok(Identity {
        certs,
        key,
        cert_pem,
        key_pem,
    })
}

/// A node started with no certificate makes a local CA and, signed by it, its own certificate
/// (`cert.pem`, `key.pem`, naming `names` and the loopback host) and a client certificate for
/// whoever runs it locally (`client.pem`, `client-key.pem`, roles client, store and admin): the
/// file names PD clients' TLS settings use. `ca.pem` is what clients trust.
fn create_self_signed(dir: &Path, names: &[String]) -> anyhow::Result<()> {
    let mut sans: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    sans.extend(names.iter().filter(|n| !n.is_empty()).cloned());
    sans.sort();
    sans.dedup();
    let ca = cert::create_ca("Meridian local CA").context("making the local CA")?;
    let node = cert::create_node(&ca, &sans).context("making the node certificate")?;
    let client = cert::create_client_with(
        &ca,
        "local",
        &[cert::Role::Client, cert::Role::Store, cert::Role::Admin],
    )
    .context("making the client certificate")?;
    create_dir_durably(dir)?;
    write_atomic(&dir.join("ca-key.pem"), ca.key.as_bytes(), 0o600)?;
    write_atomic(&dir.join("ca.pem"), ca.cert.as_bytes(), 0o644)?;
    write_atomic(&dir.join("client-key.pem"), client.key.as_bytes(), 0o600)?;
    write_atomic(&dir.join("client.pem"), client.cert.as_bytes(), 0o644)?;
    write_atomic(&dir.join("key.pem"), node.key.as_bytes(), 0o600)?;
    // cert.pem last: its presence marks the set complete.
    write_atomic(&dir.join("cert.pem"), node.cert.as_bytes(), 0o644)?;
    Ok(())
}

/// Writes `<dir>/<name>` atomically, creating the directory if needed.
pub fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    create_dir_durably(dir)?;
    write_atomic(&dir.join(name), bytes, 0o644)
}

pub(crate) fn create_dir_durably(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        std::fs::create_dir_all(dir)?;
        if let Some(parent) = dir.parent() {
            std::fs::File::open(parent)?.sync_all()?;
        }
    }
    Ok(())
}

/// Writes a file the node needs to start so that a crash leaves either the old file or the
/// whole new one, never an empty or partial one: temp file, fsync, rename, fsync of the dir.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = dir.join(name);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(mode)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// The endpoint secret, created once in `DATA_DIR/tls` and kept: it keys the stateless resets
/// and the connection-id check. After a crash and restart on the same address, the node still
/// recognises its old connection ids as its own and answers their packets with a reset the
/// clients accept, so they reconnect at once instead of waiting for the idle timeout.
pub fn endpoint_config(
    data_dir: &Path,
    max_udp_payload: u16,
) -> anyhow::Result<quinn::EndpointConfig> {
    let path = data_dir.join("tls").join("stateless_reset.key");
    let secret = match std::fs::read(&path) {
        Ok(bytes) if bytes.len() == 64 => bytes,
        Ok(bytes) => anyhow::bail!(
            "{} holds {} bytes, expected 64",
            path.display(),
            bytes.len()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut secret = vec![0u8; 64];
            ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret)
                .map_err(|_| anyhow::anyhow!("no randomness for the stateless-reset key"))?;
            create_dir_durably(path.parent().context("key path has a parent")?)?;
            write_atomic(&path, &secret, 0o600)?;
            secret
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let cid_key = u64::from_le_bytes(secret[..8].try_into().context("secret is 64 bytes")?);
    let reset_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret[8..]);
    let mut config = quinn::EndpointConfig::new(Arc::new(reset_key));
    datagram::accept_up_to(&mut config, max_udp_payload)?;
    config.cid_generator(move || {
        Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key))
    });
    Ok(config)
}

/// QUIC server config: TLS 1.3 with ALPN, migration off (SO_REUSEPORT routes by 4-tuple, so a
/// migrated path could land on another core's endpoint).
pub fn server_config(
    identity: Identity,
    max_streams: u32,
    max_udp_payload: u16,
) -> anyhow::Result<quinn::ServerConfig> {
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(identity.certs, identity.key)?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.max_early_data_size = 0;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls)?));
    config.migration(false);
    let transport =
        Arc::get_mut(&mut config.transport).context("fresh transport config is shared")?;
    transport.max_concurrent_bidi_streams(max_streams.into());
    transport.max_concurrent_uni_streams(0u32.into());
    transport.keep_alive_interval(Some(std::time::Duration::from_secs(5)));
    datagram::discover_up_to(transport, max_udp_payload);
    Ok(config)
}

/// QUIC client config for the given trust.
pub fn client_config(trust: &Trust) -> anyhow::Result<quinn::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let mut tls = match trust {
        Trust::Ca(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let file = std::fs::File::open(path)
                .with_context(|| format!("opening CA file {}", path.display()))?;
            for cert in rustls_pemfile::certs(&mut std::io::BufReader::new(file)) {
                roots.add(cert.with_context(|| format!("parsing {}", path.display()))?)?;
            }
            if roots.is_empty() {
                anyhow::bail!("CA file {} holds no certificate", path.display());
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider())))
            .with_no_client_auth(),
    };
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let mut config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls)?));
    let mut transport = quinn::TransportConfig::default();
    transport.keep_alive_interval(Some(std::time::Duration::from_secs(5)));
    transport.max_idle_timeout(Some(std::time::Duration::from_secs(10).try_into()?));
    datagram::discover_up_to(&mut transport, datagram::MAX_UDP_PAYLOAD);
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// Accepts any certificate but still checks the handshake signatures, so the session keys are
/// at least bound to the key the server presented.
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

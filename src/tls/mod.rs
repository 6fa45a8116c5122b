//! TLS material and the server's crypto configs: the server's certificate (given, or a local CA
//! with a node and a client certificate created once in the data dir and kept), and client
//! authentication (the CA that signs client certificates, or the explicit opt-out). TLS 1.3
//! only, ALPN `meridian/5` on QUIC. The client side (`Trust`, the client configs, the crypto
//! provider) is `meridian-client`'s and is re-exported here. What a verified certificate may
//! do is `auth`'s business, not this module's.

pub mod cert;
mod cert_roles;
mod live;

pub use cert_roles::CertRoles;
pub use live::{LiveTls, TlsFiles};
pub use meridian_client::tls::{client_builder, client_config, client_tls, Trust};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use meridian_client::tls::{provider, roots_of};
use quinn::crypto::rustls::QuicServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::auth::{Caller, Grants};
use crate::datagram;
use crate::proto::ALPN;

/// Who a server lets in. The certificates themselves are checked in the handshake, against
/// the CA that [`LiveTls`] holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// Every client presents a certificate that the cluster CA signed and that is in date;
    /// what it grants is read as `[security]` says (role SANs, else the name mapping).
    Required(Arc<CertRoles>),
    /// Anyone connects and is granted every role: `--insecure-no-client-auth`. No store is
    /// bound either: there is no certificate to bind.
    Off,
}

impl ClientAuth {
    pub fn is_required(&self) -> bool {
        matches!(self, ClientAuth::Required(_))
    }

    /// Who a connection whose verified chain is `chain` is, read once per connection; `peer`
    /// names it in the log line written when a certificate grants nothing.
    pub fn identify(
        &self,
        chain: Option<&[CertificateDer<'_>]>,
        peer: &dyn std::fmt::Display,
    ) -> Caller {
        match (self, chain) {
            (ClientAuth::Off, _) => Caller::of_grants(Grants::all()),
            (ClientAuth::Required(roles), Some(chain)) => roles.identify(chain, peer),
            (ClientAuth::Required(_), None) => Caller::default(),
        }
    }
}

/// The CA that signs client certificates: `--tls-ca`, else `ca.pem` beside `--tls-cert` (a
/// `meridian cert` directory), else the local CA in `DATA_DIR/tls`.
pub fn client_ca_path(data_dir: &Path, tls_cert: Option<&Path>, tls_ca: Option<&Path>) -> PathBuf {
    match (tls_ca, tls_cert) {
        (Some(ca), _) => ca.to_path_buf(),
        (None, Some(cert)) => cert.parent().unwrap_or(Path::new(".")).join("ca.pem"),
        (None, None) => data_dir.join("tls").join("ca.pem"),
    }
}

pub struct Identity {
    pub certs: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// The certificate and key files a node serves with: `--tls-cert/--tls-key`, or the local pair
/// in `DATA_DIR/tls`, created (with `ca.pem`, the file clients pass as `--ca`) on first start.
/// [`LiveTls`] reads them, at start and on every reload.
pub fn ensure_identity(
    data_dir: &Path,
    cert: Option<&Path>,
    key: Option<&Path>,
    names: &[String],
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let (cert_path, key_path) = match (cert, key) {
        (Some(_), Some(_)) | (None, None) => live::identity_files(data_dir, cert, key),
        _ => anyhow::bail!("--tls-cert and --tls-key go together"),
    };
    if cert.is_none() && (!cert_path.exists() || !key_path.exists()) {
        create_self_signed(&data_dir.join("tls"), names)?;
    }
    Ok((cert_path, key_path))
}

impl Identity {
    /// A certificate chain and its key from PEM files.
    pub fn read(cert_path: &Path, key_path: &Path) -> anyhow::Result<Identity> {
        let cert_pem =
            std::fs::read(cert_path).with_context(|| format!("opening {}", cert_path.display()))?;
        let key_pem =
            std::fs::read(key_path).with_context(|| format!("opening {}", key_path.display()))?;
        let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("parsing {}", cert_path.display()))?;
        if certs.is_empty() {
            anyhow::bail!("{} holds no certificate", cert_path.display());
        }
        let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
            .with_context(|| format!("parsing {}", key_path.display()))?
            .with_context(|| format!("{} holds no private key", key_path.display()))?;
        Ok(Identity { certs, key })
    }
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
        std::fs::File::open(parent_of(dir))?.sync_all()?;
    }
    Ok(())
}

/// The directory holding `path`: `.` for a bare relative name, whose `parent()` is "".
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Writes a file the node needs to start so that a crash leaves either the old file or the
/// whole new one, never an empty or partial one: temp file, fsync, rename, fsync of the dir.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = parent_of(path);
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
/// clients accept, so they reconnect at once instead of waiting for the idle timeout. Returns
/// the connection-id key beside the config, for generators that add to the id (steering).
pub fn endpoint_config(
    data_dir: &Path,
    max_udp_payload: u16,
) -> anyhow::Result<(quinn::EndpointConfig, u64)> {
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
    Ok((config, cid_key))
}

/// A TLS 1.3 server config presenting `live`'s certificate and checking clients against its
/// CA, both as they are at each handshake.
fn tls_server(live: &Arc<LiveTls>, open: bool) -> anyhow::Result<rustls::ServerConfig> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let builder = match live.client_verifier(open) {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    Ok(builder.with_cert_resolver(live.clone()))
}

/// The admin API's HTTPS config. With `open_probes`, a client without a certificate may finish
/// the handshake (kubelet probes and scrapers present none) and reaches only the probe routes.
pub fn admin_server_config(
    live: &Arc<LiveTls>,
    open_probes: bool,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let mut tls = tls_server(live, open_probes)?;
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(tls))
}

/// The PD front end's config: TLS 1.3, client certificate required. ALPN offers HTTP/2 (gRPC,
/// and the HTTP API) first and HTTP/1.1 (the HTTP API), as PD's client port does.
pub fn grpc_server_config(live: &Arc<LiveTls>) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let mut tls = tls_server(live, false)?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(tls))
}

/// QUIC server config: TLS 1.3 with ALPN and client authentication, migration off (SO_REUSEPORT
/// routes by 4-tuple, so a migrated path could land on another core's endpoint), and the
/// per-connection bounds of `limits`: streams, flow-control windows, idle timeout.
pub fn server_config(
    live: &Arc<LiveTls>,
    limits: &crate::config::ServerConfig,
) -> anyhow::Result<quinn::ServerConfig> {
    let mut tls = tls_server(live, false)?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.max_early_data_size = 0;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls)?));
    config.migration(false);
    let transport =
        Arc::get_mut(&mut config.transport).context("fresh transport config is shared")?;
    transport.max_concurrent_bidi_streams(limits.max_streams_per_connection.into());
    transport.max_concurrent_uni_streams(0u32.into());
    transport.stream_receive_window(limits.stream_receive_window.into());
    transport.receive_window(limits.connection_receive_window.into());
    // No keep-alive from the server: a client that stops talking (and pinging) is closed
    // after the idle timeout instead of being kept alive by our own pings.
    transport.keep_alive_interval(None);
    transport.max_idle_timeout(Some(
        quinn::VarInt::from_u32(limits.idle_timeout_ms.max(1)).into(),
    ));
    datagram::discover_up_to(transport, limits.max_udp_payload);
    Ok(config)
}

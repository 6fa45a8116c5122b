//! The TLS a client needs: how it trusts the server ([`Trust`]: a CA file, with or without a
//! client certificate, or no verification at all), the rustls and QUIC client configs built
//! from that, and the crypto provider (ring) every config of the project uses. TLS 1.3 only,
//! ALPN `meridian/5` on QUIC. It reads the files it is given and nothing else: making
//! certificates, the server's configs and what a role may do belong to the server crate.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::QuicClientConfig;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use crate::datagram;
use crate::proto::ALPN;

/// Why TLS settings could not be turned into a config.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file named by the settings could not be read.
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file is not the PEM it should be.
    #[error("parsing {path}: {source}")]
    Parse {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A certificate file holds no certificate.
    #[error("{0} holds no certificate")]
    NoCertificate(PathBuf),
    /// A key file holds no private key.
    #[error("{0} holds no private key")]
    NoKey(PathBuf),
    /// The flags do not say one way to trust the server.
    #[error("{0}")]
    Flags(&'static str),
    /// rustls refused the material (a certificate it cannot use, a key that is not the
    /// certificate's).
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// The rustls config cannot carry QUIC.
    #[error("QUIC over this TLS config: {0}")]
    Quic(#[from] quinn::crypto::rustls::NoInitialCipherSuite),
}

/// A certificate chain and its private key, PEM.
pub type PemPair = (Vec<u8>, Vec<u8>);

/// How a client decides to trust the server, and which certificate it presents.
#[derive(Debug, Clone)]
pub enum Trust {
    /// PEM file with the server's certificate or the CA that signed it. The client presents
    /// `client.pem` and `client-key.pem` from the same directory when both are there (a
    /// node's `DATA_DIR/tls`, or a `meridian cert` directory), and no certificate otherwise.
    Ca(PathBuf),
    /// The CA file and the client certificate and key to present.
    Mutual {
        ca: PathBuf,
        cert: PathBuf,
        key: PathBuf,
    },
    /// No verification of the server at all, and no client certificate: for tests and local
    /// experiments against a node run with `--insecure-no-client-auth`.
    Insecure,
}

impl Trust {
    /// `--ca`, `--cert`, `--key` as the command lines take them.
    pub fn from_flags(
        ca: Option<PathBuf>,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        insecure: bool,
    ) -> Result<Trust, TlsError> {
        match (ca, cert, key, insecure) {
            (Some(ca), None, None, false) => Ok(Trust::Ca(ca)),
            (Some(ca), Some(cert), Some(key), false) => Ok(Trust::Mutual { ca, cert, key }),
            (None, None, None, true) => Ok(Trust::Insecure),
            (_, Some(_), None, _) | (_, None, Some(_), _) => {
                Err(TlsError::Flags("--cert and --key go together"))
            }
            (None, _, _, false) => Err(TlsError::Flags(
                "pass --ca FILE (the server's DATA_DIR/tls/ca.pem) or --insecure",
            )),
            (Some(_), _, _, true) | (None, Some(_), Some(_), true) => Err(TlsError::Flags(
                "--insecure verifies nothing and presents nothing: drop --ca/--cert/--key",
            )),
        }
    }

    /// The CA file, unless verification is off.
    pub fn ca(&self) -> Option<&Path> {
        match self {
            Trust::Ca(ca) | Trust::Mutual { ca, .. } => Some(ca),
            Trust::Insecure => None,
        }
    }

    /// The client certificate and key to present, if any.
    pub fn identity_files(&self) -> Option<(PathBuf, PathBuf)> {
        match self {
            Trust::Ca(ca) => {
                let dir = ca.parent()?;
                let (cert, key) = (dir.join("client.pem"), dir.join("client-key.pem"));
                (cert.exists() && key.exists()).then_some((cert, key))
            }
            Trust::Mutual { cert, key, .. } => Some((cert.clone(), key.clone())),
            Trust::Insecure => None,
        }
    }

    /// The client identity as PEM (certificate chain, key), if any.
    pub fn identity_pem(&self) -> Result<Option<PemPair>, TlsError> {
        let Some((cert, key)) = self.identity_files() else {
            return Ok(None);
        };
        Ok(Some((read(&cert)?, read(&key)?)))
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The certificates of a PEM file (`origin` names it in errors) as trust roots.
pub fn roots_of(pem: &[u8], origin: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &pem[..]) {
        roots.add(cert.map_err(|source| TlsError::Parse {
            path: origin.to_path_buf(),
            source,
        })?)?;
    }
    if roots.is_empty() {
        return Err(TlsError::NoCertificate(origin.to_path_buf()));
    }
    Ok(roots)
}

/// The crypto provider of every TLS config in the project: ring, so that nothing needs a C
/// toolchain beyond what ring builds and no config picks a provider by chance.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// QUIC client config for the given trust.
pub fn client_config(trust: &Trust) -> Result<quinn::ClientConfig, TlsError> {
    let mut tls = client_tls(client_builder()?, trust)?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let mut config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls)?));
    let mut transport = quinn::TransportConfig::default();
    transport.keep_alive_interval(Some(Duration::from_secs(5)));
    transport.max_idle_timeout(Some(quinn::VarInt::from_u32(10_000).into()));
    datagram::discover_up_to(&mut transport, datagram::MAX_UDP_PAYLOAD);
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// A rustls client config for `trust` (the caller sets ALPN): the admin client uses it too.
pub fn client_tls(
    builder: rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier>,
    trust: &Trust,
) -> Result<rustls::ClientConfig, TlsError> {
    let builder = match trust.ca() {
        Some(path) => builder.with_root_certificates(roots_of(&read(path)?, path)?),
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider()))),
    };
    let Some((cert_pem, key_pem)) = trust.identity_pem()? else {
        return Ok(builder.with_no_client_auth());
    };
    // `identity_pem` read these two files; they are named again only for the errors.
    let (cert_path, key_path) = trust.identity_files().unwrap_or_default();
    let certs = rustls_pemfile::certs(&mut &cert_pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Parse {
            path: cert_path.clone(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(cert_path));
    }
    let key = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|source| TlsError::Parse {
            path: key_path.clone(),
            source,
        })?
        .ok_or(TlsError::NoKey(key_path))?;
    Ok(builder.with_client_auth_cert(certs, key)?)
}

/// TLS 1.3 client builder with the project's crypto provider.
pub fn client_builder(
) -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier>, TlsError> {
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?)
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

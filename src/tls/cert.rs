//! A cluster's certificates, as `meridian cert` makes them (CockroachDB's `cert` commands are
//! the model): a CA, node certificates for the members, certificates for TiKV and TiDB that
//! serve and call with one certificate, and client certificates, each carrying a role. Owns
//! the role and store encodings in a certificate and reading a peer's certificate back
//! ([`read_peer`], [`grants_of`]); must not decide what a role may do (that is `auth`'s).
//!
//! The role is a URI subject alternative name, `meridian://role/<role>`: SANs are the part of a
//! certificate every TLS library exposes and no other check reads this scheme, so a role never
//! passes for a host name, and one certificate may carry several roles. A store's certificate
//! may name its store the same way, `meridian://store/<id>` (bind-store-identity).

use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::CertificateDer;

pub use crate::auth::Role;
use crate::auth::{CertIdentity, Grants};

/// The scheme and path prefix of a role SAN.
pub const ROLE_URI_PREFIX: &str = "meridian://role/";

/// The scheme and path prefix of the SAN naming the one store a certificate may act for.
pub const STORE_URI_PREFIX: &str = "meridian://store/";

/// The SAN a certificate carries for `role`.
fn role_uri(role: Role) -> String {
    format!("{ROLE_URI_PREFIX}{}", role.name())
}

/// The role a SAN names, if it is a role SAN with a known role.
fn role_of_uri(uri: &str) -> Option<Role> {
    Role::of_name(uri.strip_prefix(ROLE_URI_PREFIX)?)
}

/// The store a SAN names: a decimal id above 0, nothing else.
fn store_of_uri(uri: &str) -> Option<u64> {
    let digits = uri.strip_prefix(STORE_URI_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|id| *id != 0)
}

/// When a certificate is valid. Defaults follow CockroachDB's: a CA for ten years, node and
/// client certificates for five, so a forgotten certificate expires instead of outliving the
/// cluster (rcgen's own default runs to the year 4096).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

const DAY: Duration = Duration::from_secs(24 * 3600);

impl Validity {
    pub const CA_DAYS: u32 = 3650;
    pub const LEAF_DAYS: u32 = 1825;

    /// From an hour ago (peers' clocks differ) for `days` days.
    pub fn days(days: u32) -> Validity {
        let now = SystemTime::now();
        Validity {
            not_before: now - Duration::from_secs(3600),
            not_after: now + DAY * days,
        }
    }

    fn apply(&self, params: &mut CertificateParams) {
        params.not_before = self.not_before.into();
        params.not_after = self.not_after.into();
    }
}

/// A certificate and its private key, PEM.
#[derive(Debug, Clone)]
pub struct Pem {
    pub cert: String,
    pub key: String,
}

fn named(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "Meridian");
    dn.push(DnType::CommonName, common_name);
    dn
}

/// A new CA for ten years: self-signed, allowed to sign certificates and nothing else.
pub fn create_ca(common_name: &str) -> anyhow::Result<Pem> {
    create_ca_valid(common_name, Validity::days(Validity::CA_DAYS))
}

/// A new CA valid over `validity`.
pub fn create_ca_valid(common_name: &str, validity: Validity) -> anyhow::Result<Pem> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = named(common_name);
    validity.apply(&mut params);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

fn signed(
    ca: &Pem,
    common_name: &str,
    hosts: &[String],
    roles: &[Role],
    store: Option<u64>,
    usages: Vec<ExtendedKeyUsagePurpose>,
    validity: Validity,
) -> anyhow::Result<Pem> {
    let ca_key = KeyPair::from_pem(&ca.key).context("reading the CA key")?;
    let issuer =
        Issuer::from_ca_cert_pem(&ca.cert, ca_key).context("reading the CA certificate")?;
    // Host names become DNS SANs, addresses IP SANs.
    let mut params = CertificateParams::new(hosts.to_vec())?;
    params.distinguished_name = named(common_name);
    validity.apply(&mut params);
    for role in roles {
        params
            .subject_alt_names
            .push(SanType::URI(role_uri(*role).try_into()?));
    }
    if let Some(id) = store {
        anyhow::ensure!(id != 0, "store ids start at 1");
        params
            .subject_alt_names
            .push(SanType::URI(format!("{STORE_URI_PREFIX}{id}").try_into()?));
    }
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = usages;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A member's certificate for five years: serves clients under `hosts` and speaks to other
/// members (role `member`).
pub fn create_node(ca: &Pem, hosts: &[String]) -> anyhow::Result<Pem> {
    create_node_valid(ca, hosts, Validity::days(Validity::LEAF_DAYS))
}

/// A member's certificate valid over `validity`.
pub fn create_node_valid(ca: &Pem, hosts: &[String], validity: Validity) -> anyhow::Result<Pem> {
    anyhow::ensure!(
        !hosts.is_empty(),
        "a node certificate names at least one host"
    );
    signed(
        ca,
        &hosts[0],
        hosts,
        &[Role::Member],
        None,
        vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        validity,
    )
}

/// What a TiKV store's or a TiDB server's certificate is made of: it serves under `hosts` (the
/// names and addresses its peers dial) and calls Meridian with the same certificate, as TiKV
/// and TiDB present their server certificate as their client certificate.
#[derive(Debug, Clone)]
pub struct NodeRole<'a> {
    pub name: &'a str,
    pub hosts: &'a [String],
    pub role: Role,
    /// The store it may act for under bind-store-identity (`meridian://store/<id>`).
    pub store: Option<u64>,
}

/// A certificate valid for both server and client authentication (extended key usages
/// serverAuth and clientAuth), carrying `spec.role` and, if given, the store it speaks for.
pub fn create_node_for_role(
    ca: &Pem,
    spec: &NodeRole<'_>,
    validity: Validity,
) -> anyhow::Result<Pem> {
    anyhow::ensure!(
        !spec.hosts.is_empty(),
        "a certificate that serves names at least one host"
    );
    anyhow::ensure!(
        spec.store.is_none() || spec.role == Role::Store,
        "only a `store` certificate names a store"
    );
    signed(
        ca,
        spec.name,
        spec.hosts,
        &[spec.role],
        spec.store,
        vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        validity,
    )
}

/// A client's certificate with `role`, for TLS client authentication only.
pub fn create_client(ca: &Pem, name: &str, role: Role) -> anyhow::Result<Pem> {
    create_client_with(ca, name, &[role])
}

/// A client's certificate carrying several roles, for five years.
pub fn create_client_with(ca: &Pem, name: &str, roles: &[Role]) -> anyhow::Result<Pem> {
    create_client_valid(ca, name, roles, Validity::days(Validity::LEAF_DAYS))
}

/// A client's certificate carrying `roles`, valid over `validity`.
pub fn create_client_valid(
    ca: &Pem,
    name: &str,
    roles: &[Role],
    validity: Validity,
) -> anyhow::Result<Pem> {
    signed(
        ca,
        name,
        &[],
        roles,
        None,
        vec![ExtendedKeyUsagePurpose::ClientAuth],
        validity,
    )
}

/// The roles a certificate (DER) carries, in order, without duplicates. Unknown role names are
/// ignored: they grant nothing.
pub fn roles_of(cert_der: &[u8]) -> anyhow::Result<Vec<Role>> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der)
        .map_err(|e| anyhow::anyhow!("not a certificate: {e}"))?;
    let mut roles = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::URI(uri) = name {
                if let Some(role) = role_of_uri(uri) {
                    roles.push(role);
                }
            }
        }
    }
    roles.sort();
    roles.dedup();
    Ok(roles)
}

/// What a verified peer's chain grants: the roles of its end-entity certificate (the first).
/// A certificate that cannot be read grants nothing, and so do the CAs after it.
pub fn grants_of(chain: &[CertificateDer<'_>]) -> Grants {
    match chain.first().map(|c| roles_of(c)) {
        Some(Ok(roles)) => Grants::of_roles(&roles),
        _ => Grants::NONE,
    }
}

/// What a peer's end-entity certificate says about who it is: read once per connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCert {
    /// The subject's common name (the first, if several), as PD's `cert-allowed-cn` reads it.
    pub common_name: Option<String>,
    /// The DNS names among its subject alternative names, lowercased.
    pub dns_names: Vec<String>,
    /// The roles its `meridian://role/` SANs carry, in order, without duplicates.
    pub roles: Vec<Role>,
    /// The store a `meridian://store/<id>` SAN names; a certificate naming two is refused any.
    pub store: Option<u64>,
    /// Who it is for store binding: subject and DNS and IP names, hashed.
    pub identity: CertIdentity,
}

impl PeerCert {
    /// How logs and refusals name it: the common name, else the first DNS name.
    pub fn display_name(&self) -> &str {
        self.common_name
            .as_deref()
            .or(self.dns_names.first().map(String::as_str))
            .unwrap_or("(no name)")
    }
}

/// Reads a verified peer's end-entity certificate (DER).
pub fn read_peer(cert_der: &[u8]) -> anyhow::Result<PeerCert> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der)
        .map_err(|e| anyhow::anyhow!("not a certificate: {e}"))?;
    let common_name = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_string);
    let mut dns_names = Vec::new();
    let mut ips: Vec<&[u8]> = Vec::new();
    let mut roles = Vec::new();
    let mut stores = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => dns_names.push(dns.to_ascii_lowercase()),
                GeneralName::IPAddress(ip) => ips.push(*ip),
                GeneralName::URI(uri) => {
                    if let Some(role) = role_of_uri(uri) {
                        roles.push(role);
                    } else if uri.starts_with(STORE_URI_PREFIX) {
                        stores.push(store_of_uri(uri));
                    }
                }
                _ => {}
            }
        }
    }
    roles.sort();
    roles.dedup();
    dns_names.sort();
    dns_names.dedup();
    ips.sort();
    ips.dedup();
    stores.sort();
    stores.dedup();
    // One well-formed store name, or none at all: a malformed one or two different ones name
    // no store, and the certificate is bound by its first registration instead.
    let store = match stores.as_slice() {
        [Some(id)] => Some(*id),
        _ => None,
    };
    let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
    let mut field = |tag: u8, bytes: &[u8]| {
        hash.update(&[tag]);
        hash.update(&(bytes.len() as u64).to_be_bytes());
        hash.update(bytes);
    };
    field(0, cert.subject().as_raw());
    for dns in &dns_names {
        field(1, dns.as_bytes());
    }
    for ip in &ips {
        field(2, ip);
    }
    let mut identity = [0u8; 32];
    identity.copy_from_slice(hash.finish().as_ref());
    Ok(PeerCert {
        common_name,
        dns_names,
        roles,
        store,
        identity: CertIdentity(identity),
    })
}

/// Reads a PEM pair back.
pub fn read_pem(cert: &Path, key: &Path) -> anyhow::Result<Pem> {
    Ok(Pem {
        cert: std::fs::read_to_string(cert)
            .with_context(|| format!("reading {}", cert.display()))?,
        key: std::fs::read_to_string(key).with_context(|| format!("reading {}", key.display()))?,
    })
}

/// Writes a pair as `<dir>/<name>.pem` and `<dir>/<name>-key.pem` (the key readable by the
/// owner only), each atomically; refuses to overwrite an existing key.
pub fn write_pair(dir: &Path, name: &str, pem: &Pem) -> anyhow::Result<()> {
    let key = dir.join(format!("{name}-key.pem"));
    anyhow::ensure!(
        !key.exists(),
        "{} exists: remove it first to replace it",
        key.display()
    );
    super::create_dir_durably(dir)?;
    super::write_atomic(&key, pem.key.as_bytes(), 0o600)?;
    super::write_atomic(&dir.join(format!("{name}.pem")), pem.cert.as_bytes(), 0o644)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use std::sync::Arc;

    fn der(pem: &str) -> CertificateDer<'static> {
        rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
    }

    fn roots(ca: &Pem) -> Arc<rustls::RootCertStore> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der(&ca.cert)).unwrap();
        Arc::new(roots)
    }

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    #[test]
    fn a_node_certificate_verifies_for_its_hosts_under_the_ca_and_carries_member() {
        let ca = create_ca("test CA").unwrap();
        let node = create_node(&ca, &["localhost".into(), "127.0.0.1".into()]).unwrap();
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots(&ca), provider())
                .build()
                .unwrap();
        let now = UnixTime::now();
        for host in ["localhost", "127.0.0.1"] {
            let name = ServerName::try_from(host).unwrap();
            verifier
                .verify_server_cert(&der(&node.cert), &[], &name, &[], now)
                .unwrap_or_else(|e| panic!("{host}: {e}"));
        }
        let other = ServerName::try_from("example.com").unwrap();
        assert!(verifier
            .verify_server_cert(&der(&node.cert), &[], &other, &[], now)
            .is_err());
        assert_eq!(roles_of(&der(&node.cert)).unwrap(), vec![Role::Member]);
        // The key is the certificate's.
        let key = rustls_pemfile::private_key(&mut node.key.as_bytes())
            .unwrap()
            .unwrap();
        let signer = provider().key_provider.load_private_key(key).unwrap();
        assert!(signer
            .choose_scheme(&[rustls::SignatureScheme::ECDSA_NISTP256_SHA256])
            .is_some());
        let _: PrivateKeyDer = rustls_pemfile::private_key(&mut ca.key.as_bytes())
            .unwrap()
            .unwrap();
    }

    #[test]
    fn client_certificates_carry_their_role_and_verify_as_clients_only_under_their_ca() {
        let ca = create_ca("test CA").unwrap();
        let now = UnixTime::now();
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots(&ca), provider())
                .build()
                .unwrap();
        for role in Role::ALL {
            let client = create_client(&ca, "someone", role).unwrap();
            assert_eq!(roles_of(&der(&client.cert)).unwrap(), vec![role]);
            verifier
                .verify_client_cert(&der(&client.cert), &[], now)
                .unwrap_or_else(|e| panic!("{role:?}: {e}"));
        }
        // Signed by another CA: refused.
        let stranger = create_client(&create_ca("other").unwrap(), "x", Role::Admin).unwrap();
        assert!(verifier
            .verify_client_cert(&der(&stranger.cert), &[], now)
            .is_err());
        // A client certificate cannot serve: it lacks the server usage.
        let client = create_client(&ca, "someone", Role::Client).unwrap();
        let server_verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots(&ca), provider())
                .build()
                .unwrap();
        let name = ServerName::try_from("someone").unwrap();
        assert!(server_verifier
            .verify_server_cert(&der(&client.cert), &[], &name, &[], now)
            .is_err());
    }

    #[test]
    fn certificates_expire_and_an_expired_client_is_refused() {
        let ca = create_ca("test CA").unwrap();
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots(&ca), provider())
                .build()
                .unwrap();
        let now = SystemTime::now();
        let expired = Validity {
            not_before: now - DAY * 30,
            not_after: now - DAY,
        };
        let old = create_client_valid(&ca, "old", &[Role::Admin], expired).unwrap();
        let err = verifier
            .verify_client_cert(&der(&old.cert), &[], UnixTime::now())
            .unwrap_err();
        assert!(format!("{err}").to_lowercase().contains("expired"), "{err}");
        // The defaults end: five years for a client, ten for the CA.
        for (pem, days) in [
            (
                &create_client(&ca, "c", Role::Client).unwrap().cert,
                Validity::LEAF_DAYS,
            ),
            (&ca.cert, Validity::CA_DAYS),
        ] {
            let der = der(pem);
            let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
            let left = cert.validity().not_after.timestamp()
                - now
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_secs() as i64;
            let want = i64::from(days) * 86_400;
            assert!((want - 7200..=want).contains(&left), "{left} vs {want}");
        }
    }

    #[test]
    fn a_chain_grants_exactly_its_leaf_roles() {
        let ca = create_ca("test").unwrap();
        let store = create_client(&ca, "s", Role::Store).unwrap();
        let g = grants_of(&[der(&store.cert), der(&ca.cert)]);
        assert!(g.has(Role::Store));
        for other in [Role::Client, Role::Admin, Role::Member] {
            assert!(!g.has(other), "{other:?}");
        }
        // The CA's certificate carries no role: second in the chain, it adds nothing.
        assert!(grants_of(&[der(&ca.cert)]).is_empty());
        assert!(grants_of(&[]).is_empty());
        assert!(grants_of(&[CertificateDer::from(b"junk".to_vec())]).is_empty());
    }

    #[test]
    fn unknown_role_names_and_plain_certificates_grant_nothing() {
        assert_eq!(role_of_uri("meridian://role/root"), None);
        assert_eq!(role_of_uri("https://role/admin"), None);
        assert_eq!(role_of_uri("meridian://role/admin"), Some(Role::Admin));
        let plain = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        assert!(roles_of(plain.cert.der()).unwrap().is_empty());
        assert!(roles_of(b"not a certificate").is_err());
    }

    #[test]
    fn pairs_are_written_once_with_a_private_key_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ca = create_ca("test CA").unwrap();
        write_pair(dir.path(), "ca", &ca).unwrap();
        let mode = std::fs::metadata(dir.path().join("ca-key.pem"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let back = read_pem(&dir.path().join("ca.pem"), &dir.path().join("ca-key.pem")).unwrap();
        assert_eq!(back.cert, ca.cert);
        assert!(
            write_pair(dir.path(), "ca", &ca).is_err(),
            "overwrote a key"
        );
    }
}

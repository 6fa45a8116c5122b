//! What a verified client certificate grants and who it is, read once per connection: the
//! roles its `meridian://role/` SANs carry, else the roles `[security]` maps its common name or
//! one of its DNS names to (PD's `cert-allowed-cn`, with roles), and, when bind-store-identity
//! is on and it holds `store`, the seat naming its store. A certificate that grants nothing is
//! logged here, once per connection, with the reason. Owns reading a certificate into a
//! [`Caller`]; must not decide what a role may do (`auth`) or serve anything.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;

use super::cert::{read_peer, PeerCert};
use crate::auth::{Caller, Grants, Role, StoreSeat};
use crate::config::SecurityConfig;

/// The `[security]` mapping and whether store certificates are bound, ready for lookups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertRoles {
    /// Common name (exact, as PD compares it) to roles.
    by_cn: HashMap<String, Grants>,
    /// DNS name (lowercase) to roles.
    by_dns: HashMap<String, Grants>,
    bind_store_identity: bool,
}

impl CertRoles {
    /// From a validated `[security]` section (`Config::load` refuses unknown roles).
    pub fn of_config(security: &SecurityConfig) -> CertRoles {
        let grants = |roles: &Vec<String>| {
            let roles: Vec<Role> = roles.iter().filter_map(|r| Role::of_name(r)).collect();
            Grants::of_roles(&roles)
        };
        CertRoles {
            by_cn: security
                .cn_roles
                .iter()
                .map(|(cn, roles)| (cn.clone(), grants(roles)))
                .collect(),
            by_dns: security
                .dns_roles
                .iter()
                .map(|(dns, roles)| (dns.to_ascii_lowercase(), grants(roles)))
                .collect(),
            bind_store_identity: security.bind_store_identity,
        }
    }

    pub fn binds_stores(&self) -> bool {
        self.bind_store_identity
    }

    /// The roles of a certificate. Its own role SANs win: a certificate that carries any is
    /// granted exactly those, and the mapping is not consulted (so a mapping can never widen
    /// what a Meridian-issued certificate says). One that carries none gets every role its
    /// common name and each of its DNS names are mapped to, together.
    pub fn grants_of(&self, peer: &PeerCert) -> Grants {
        if !peer.roles.is_empty() {
            return Grants::of_roles(&peer.roles);
        }
        let by_cn = peer
            .common_name
            .as_ref()
            .and_then(|cn| self.by_cn.get(cn))
            .copied()
            .unwrap_or(Grants::NONE);
        peer.dns_names
            .iter()
            .filter_map(|dns| self.by_dns.get(dns))
            .fold(by_cn, |acc, g| acc.union(*g))
    }

    /// Who a verified chain is. `peer` names the connection in the log line written when the
    /// certificate grants nothing (once per connection: this runs once per connection).
    pub fn identify(&self, chain: &[CertificateDer<'_>], peer: &dyn Display) -> Caller {
        let Some(leaf) = chain.first() else {
            return Caller::default();
        };
        let cert = match read_peer(leaf) {
            Ok(cert) => cert,
            Err(e) => {
                tracing::warn!(%peer, "a client certificate that does not parse grants no role: {e}");
                return Caller::default();
            }
        };
        let grants = self.grants_of(&cert);
        if grants.is_empty() {
            tracing::warn!(
                %peer,
                cn = cert.common_name.as_deref().unwrap_or(""),
                dns = ?cert.dns_names,
                "a client certificate from the trusted CA grants no role: it carries no \
                 meridian://role/ SAN, and neither its common name nor any of its DNS names is \
                 in [security] cn-roles or dns-roles; every call on this connection is refused"
            );
        }
        let store = (self.bind_store_identity && grants.has(Role::Store)).then(|| {
            Arc::new(StoreSeat::new(
                cert.identity,
                cert.display_name(),
                cert.store,
            ))
        });
        Caller { grants, store }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::cert::{self, NodeRole, Validity};
    use std::collections::BTreeMap;

    fn der(pem: &str) -> CertificateDer<'static> {
        rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
    }

    fn roles(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|r| r.to_string()).collect()))
            .collect()
    }

    /// A certificate as an operator's own CA makes it: a common name, DNS names, no role SAN.
    fn foreign_style(ca: &cert::Pem, cn: &str, hosts: &[&str]) -> CertificateDer<'static> {
        let mut params =
            rcgen::CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let ca_key = rcgen::KeyPair::from_pem(&ca.key).unwrap();
        let issuer = rcgen::Issuer::from_ca_cert_pem(&ca.cert, ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        params.signed_by(&key, &issuer).unwrap().der().clone()
    }

    #[test]
    fn common_names_and_dns_names_map_to_roles_and_role_sans_win() {
        let ca = cert::create_ca("op CA").unwrap();
        let map = CertRoles::of_config(&SecurityConfig {
            cn_roles: roles(&[("tikv", &["store"]), ("tidb", &["client"])]),
            dns_roles: roles(&[("ops.example.com", &["admin"])]),
            bind_store_identity: false,
        });
        let by = |c: CertificateDer<'static>| map.identify(&[c], &"test").grants;
        let tikv = by(foreign_style(&ca, "tikv", &["tikv-0.svc"]));
        assert!(tikv.has(Role::Store) && !tikv.has(Role::Client));
        assert!(by(foreign_style(&ca, "tidb", &[])).has(Role::Client));
        // DNS names compare without case; the CN's roles and the names' add up.
        let both = by(foreign_style(&ca, "tidb", &["OPS.example.com"]));
        assert!(both.has(Role::Client) && both.has(Role::Admin));
        // Exact common names, as PD compares them: no prefix, no case folding.
        assert!(by(foreign_style(&ca, "tikv-server", &[])).is_empty());
        assert!(by(foreign_style(&ca, "TIKV", &[])).is_empty());
        assert!(by(foreign_style(&ca, "nobody", &["elsewhere.example.com"])).is_empty());
        // A certificate with a role SAN is what it says, even under a mapped name.
        let own = cert::create_client(&ca, "tikv", Role::Client).unwrap();
        let own = by(der(&own.cert));
        assert!(own.has(Role::Client) && !own.has(Role::Store));
    }

    #[test]
    fn a_store_seat_is_made_only_when_binding_is_on_and_the_role_is_store() {
        let ca = cert::create_ca("CA").unwrap();
        let hosts = vec!["tikv-1".to_string()];
        let spec = |store| NodeRole {
            name: "tikv-1",
            hosts: &hosts,
            role: Role::Store,
            store,
        };
        let named = cert::create_node_for_role(&ca, &spec(Some(7)), Validity::days(1)).unwrap();
        let plain = cert::create_node_for_role(&ca, &spec(None), Validity::days(1)).unwrap();
        let client = cert::create_client(&ca, "tidb", Role::Client).unwrap();
        let on = CertRoles {
            bind_store_identity: true,
            ..CertRoles::default()
        };
        let seat = on.identify(&[der(&named.cert)], &"t").store.unwrap();
        assert_eq!((seat.named(), seat.bound()), (Some(7), Some(7)));
        let seat = on.identify(&[der(&plain.cert)], &"t").store.unwrap();
        assert_eq!(seat.bound(), None);
        assert!(on.identify(&[der(&client.cert)], &"t").store.is_none());
        assert!(CertRoles::default()
            .identify(&[der(&named.cert)], &"t")
            .store
            .is_none());
    }

    #[test]
    fn a_renewed_certificate_with_the_same_names_is_the_same_identity() {
        let ca = cert::create_ca("CA").unwrap();
        let hosts = vec!["tikv-1".to_string(), "10.0.0.1".to_string()];
        let other_hosts = vec!["tikv-2".to_string(), "10.0.0.2".to_string()];
        let make = |hosts: &[String]| {
            let spec = NodeRole {
                name: "tikv",
                hosts,
                role: Role::Store,
                store: None,
            };
            let pem = cert::create_node_for_role(&ca, &spec, Validity::days(1)).unwrap();
            cert::read_peer(&der(&pem.cert)).unwrap().identity
        };
        assert_eq!(make(&hosts), make(&hosts), "a new key, the same names");
        assert_ne!(make(&hosts), make(&other_hosts));
    }

    #[test]
    fn store_sans_name_one_store_or_none() {
        let ca = cert::create_ca("CA").unwrap();
        let with = |uris: &[&str]| {
            let mut params = rcgen::CertificateParams::new(vec!["h".to_string()]).unwrap();
            for u in uris {
                params
                    .subject_alt_names
                    .push(rcgen::SanType::URI(u.to_string().try_into().unwrap()));
            }
            let ca_key = rcgen::KeyPair::from_pem(&ca.key).unwrap();
            let issuer = rcgen::Issuer::from_ca_cert_pem(&ca.cert, ca_key).unwrap();
            let key = rcgen::KeyPair::generate().unwrap();
            let c = params.signed_by(&key, &issuer).unwrap();
            cert::read_peer(c.der()).unwrap().store
        };
        assert_eq!(with(&["meridian://store/12"]), Some(12));
        assert_eq!(
            with(&["meridian://store/12", "meridian://store/12"]),
            Some(12)
        );
        assert_eq!(with(&["meridian://store/12", "meridian://store/13"]), None);
        assert_eq!(with(&["meridian://store/0"]), None);
        assert_eq!(with(&["meridian://store/+1"]), None);
        assert_eq!(with(&["meridian://store/12", "meridian://store/x"]), None);
        assert_eq!(with(&[]), None);
    }
}

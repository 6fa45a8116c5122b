//! What a connection may do: the set of roles its verified client certificate carries, read
//! once when the connection is made. The TLS layer has already checked the chain, the CA and
//! the validity dates; this only reads the role SANs of the end-entity certificate.

use rustls::pki_types::CertificateDer;

use crate::tls::cert::{self, Role};

/// A set of roles, small enough to copy into every stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Grants(u8);

fn bit(role: Role) -> u8 {
    1 << (role as u8)
}

impl Grants {
    /// No role: a client with a certificate that names none, or none at all.
    pub const NONE: Grants = Grants(0);

    /// Every role: what a node run with `--insecure-no-client-auth` grants everyone.
    pub fn all() -> Grants {
        Grants::of_roles(&Role::ALL)
    }

    pub fn of_roles(roles: &[Role]) -> Grants {
        Grants(roles.iter().fold(0, |acc, r| acc | bit(*r)))
    }

    /// The roles of a verified peer's end-entity certificate (the first of its chain). A
    /// certificate that cannot be read grants nothing.
    pub fn of_chain(chain: &[CertificateDer<'_>]) -> Grants {
        match chain.first().map(|c| cert::roles_of(c)) {
            Some(Ok(roles)) => Grants::of_roles(&roles),
            _ => Grants::NONE,
        }
    }

    pub fn has(self, role: Role) -> bool {
        self.0 & bit(role) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_grants_exactly_its_leaf_roles() {
        let ca = cert::create_ca("test").unwrap();
        let der = |pem: &str| {
            rustls_pemfile::certs(&mut pem.as_bytes())
                .next()
                .unwrap()
                .unwrap()
        };
        let store = cert::create_client(&ca, "s", Role::Store).unwrap();
        let g = Grants::of_chain(&[der(&store.cert), der(&ca.cert)]);
        assert!(g.has(Role::Store));
        for other in [Role::Client, Role::Admin, Role::Member] {
            assert!(!g.has(other), "{other:?}");
        }
        // The CA's certificate carries no role: second in the chain, it adds nothing.
        assert!(Grants::of_chain(&[der(&ca.cert)]).is_empty());
        assert!(Grants::of_chain(&[]).is_empty());
        assert!(Grants::of_chain(&[CertificateDer::from(b"junk".to_vec())]).is_empty());
        let all = Grants::all();
        assert!(Role::ALL.iter().all(|r| all.has(*r)));
    }
}

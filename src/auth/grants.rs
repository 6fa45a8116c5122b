//! What a connection may do: the set of roles its verified client certificate grants, read
//! once when the connection is made (`tls::CertRoles` reads them out of the chain, which the
//! TLS layer has already checked). A set of roles and nothing more: no certificates here.

use super::Role;

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

    /// Every role either set has.
    pub fn union(self, other: Grants) -> Grants {
        Grants(self.0 | other.0)
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
    fn a_set_has_exactly_its_roles() {
        let g = Grants::of_roles(&[Role::Store]);
        assert!(g.has(Role::Store));
        for other in [Role::Client, Role::Admin, Role::Member] {
            assert!(!g.has(other), "{other:?}");
        }
        assert!(Grants::NONE.is_empty() && Grants::of_roles(&[]).is_empty());
        let all = Grants::all();
        assert!(Role::ALL.iter().all(|r| all.has(*r)));
    }
}

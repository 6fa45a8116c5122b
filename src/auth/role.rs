//! The roles a client certificate may carry. Owns the names and the set of roles; how a role
//! is written into a certificate is `tls::cert`'s business, and what a role may do is
//! `call.rs`'s.

/// Who a certificate speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Role {
    /// Timestamps and placement reads.
    Client,
    /// A storage node: heartbeats, store registration, bootstrap, splits, id allocation.
    Store,
    /// Operators of the cluster: leader transfer, resign, member deletion.
    Admin,
    /// Another member of the cluster (node to node).
    Member,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Client, Role::Store, Role::Admin, Role::Member];

    pub fn name(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Store => "store",
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }

    /// The role called `name`, if there is one.
    pub fn of_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }
}

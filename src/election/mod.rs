//! Leadership on etcd: campaign with a lease and a create-if-absent transaction on the leader
//! key, keep the lease alive, and prove at every moment whether it is still held (T4). The
//! proof arithmetic (`lease`) is pure; `campaign` is the etcd shell around it.

mod campaign;
mod command;
mod lease;
mod member_urls;
mod membership;

pub use campaign::{decode_member, encode_member, mono_ms, Election, Term};
pub use command::Command;
pub use lease::LeaseProof;
pub use member_urls::{check_member_urls, read_member, AddressError, BadMemberUrl};
pub use membership::Membership;

//! Authorization: the roles a certificate may carry ([`Role`]), which role each call needs
//! ([`Call`], [`need_of`]), what a set of roles grants ([`Grants`]), who a connection is
//! ([`Caller`]) and, under bind-store-identity, which store a `store` certificate may act for
//! ([`StoreSeat`], [`judge`], [`check`]). Every front end (QUIC, gRPC, admin HTTPS) asks here
//! and answers a refusal with its own typed "permission denied"; this module owns the policy
//! and must not touch TLS (`tls` reads the roles out of a verified certificate) or serving
//! (`server`, `admin`).

mod call;
mod caller;
mod grants;
mod role;
mod store_identity;

pub use call::{need_of, Call, Denied, Need, RequestCall};
pub use caller::Caller;
pub use grants::Grants;
pub use role::Role;
pub use store_identity::{check, judge, CertIdentity, StoreDenied, StoreSeat, Verdict};

//! Authorization: the roles a certificate may carry ([`Role`]), which role each call needs
//! ([`Call`], [`need_of`]) and what a set of roles grants ([`Grants`]). Every front end (QUIC,
//! gRPC, admin HTTPS) asks here and answers a refusal with its own typed "permission denied";
//! this module owns the policy and must not touch TLS (`tls` reads the roles out of a verified
//! certificate) or serving (`server`, `admin`).

mod call;
mod grants;
mod role;

pub use call::{need_of, Call, Denied, Need, RequestCall};
pub use grants::Grants;
pub use role::Role;

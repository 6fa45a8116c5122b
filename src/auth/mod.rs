//! Authorization: which role each call needs ([`Call`], [`need_of`]) and what a connection's
//! client certificate grants ([`Grants`]). Every front end (QUIC, gRPC, admin HTTPS) asks here
//! and answers a refusal with its own typed "permission denied"; this module owns the policy
//! and must not touch TLS configuration (`tls`) or serving (`server`, `admin`).

mod call;
mod grants;

pub use call::{need_of, Call, Denied, Need};
pub use grants::Grants;

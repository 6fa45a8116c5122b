//! Interoperability tests live in `tests/`: real PD clients (the `tikv-client` crate, as
//! published) against the real `meridian` binary. This crate has no code of its own.

//! Shared by the end-to-end tests: the `meridian` binary of this build and free ports.

#![allow(dead_code)] // each test binary uses its own subset

#[allow(unused_imports)] // as above: not every test binary uses both
pub use meridian::harness::{free_udp_port, test_binary as meridian_bin};

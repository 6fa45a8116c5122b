//! Fuzz targets: one entry point per decoder that reads bytes Meridian did not write itself or
//! that may be damaged on disk, each followed by what the process does with the result before
//! it touches shared state. Owns those entry points, the oracles they assert and the generator
//! of their seed corpus ([`seeds`]); serves nothing and is never called by `meridian serve`.
//!
//! Each target takes any bytes and must return normally: a decoder answers garbage with an
//! error, never a panic. The only panics here are the assertions of invariants (the decoded
//! value re-encodes to itself, the region map covers each key at most once, the shared index
//! agrees with its reference model, ...), so a panic is a bug either way.
//!
//! Run by `fuzz/` (cargo-fuzz with libFuzzer, nightly; `scripts/fuzz`) and replayed over the
//! committed corpus `fuzz/corpus/<target>/` by `tests/fuzz_corpus.rs` on stable. Compiled only
//! with the `testkit` feature, which both turn on.

mod frame;
mod member_record;
mod model;
mod pdpb;
mod region_bucket;
mod seeds;
mod wal;

pub use frame::frame_to_request;
pub use member_record::member_record;
pub use pdpb::{pdpb_request, PDPB_KINDS};
pub use region_bucket::region_bucket;
pub use seeds::{seeds, Seed};
pub use wal::wal_records;

/// A fuzz target: takes any bytes, returns normally unless it found a bug.
pub type Target = fn(&[u8]);

/// Every target by name: the name is the `fuzz/fuzz_targets/<name>.rs` binary and the
/// `fuzz/corpus/<name>/` directory.
pub const TARGETS: [(&str, Target); 5] = [
    ("frame_to_request", frame_to_request),
    ("wal_records", wal_records),
    ("region_bucket", region_bucket),
    ("member_record", member_record),
    ("pdpb_request", pdpb_request),
];

//! libFuzzer entry point for `meridian::fuzzing::wal_records` (what it feeds and checks is documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| meridian::fuzzing::wal_records(data));

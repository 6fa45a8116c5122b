//! libFuzzer entry point for `meridian::fuzzing::frame_to_request` (what it feeds and checks is documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| meridian::fuzzing::frame_to_request(data));

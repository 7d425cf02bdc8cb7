//! The response encoders: well-formed SSE and JSON: see `ccwire_core::fuzzing::encoders`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ccwire_core::fuzzing::encoders(data));

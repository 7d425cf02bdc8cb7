//! The three API request parsers and the history hash: see `ccwire_core::fuzzing::api_requests`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ccwire_core::fuzzing::api_requests(data));

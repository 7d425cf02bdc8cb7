//! The gateway engine with requests, CLI output and time: see `ccwire_core::fuzzing::gateway`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ccwire_core::fuzzing::gateway(data));

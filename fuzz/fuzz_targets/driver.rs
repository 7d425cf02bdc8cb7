//! The driver session with host actions in any order: see `ccwire_core::fuzzing::driver`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ccwire_core::fuzzing::driver(data));

//! Framing and the observer session: see `ccwire_core::fuzzing::session`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ccwire_core::fuzzing::session(data));

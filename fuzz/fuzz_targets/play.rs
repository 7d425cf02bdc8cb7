//! The transcript player: see `ccwire_core::fuzzing::play`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ccwire_core::fuzzing::play(data));

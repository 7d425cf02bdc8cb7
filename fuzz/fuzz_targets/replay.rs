//! Transcript replay, whole and split: see `ccwire_core::fuzzing::replay`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ccwire_core::fuzzing::replay(data));

//! Equal history hashes ⇔ equal canonical forms: see `ccwire_core::fuzzing::history`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ccwire_core::fuzzing::history(data));

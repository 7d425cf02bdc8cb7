//! Transcript replay of arbitrary bytes, whole and split in two; both give the same chunks.
#![no_main]

use ccwire_core::Replayer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole: Vec<String> = ccwire_core::replay(data).iter().map(|c| c.to_json()).collect();
    let at = data.first().map_or(0, |b| usize::from(*b) % (data.len() + 1));
    let mut replayer = Replayer::new();
    replayer.push(&data[..at]);
    replayer.push(&data[at..]);
    replayer.finish();
    let split: Vec<String> = std::iter::from_fn(|| replayer.poll_chunk()).map(|c| c.to_json()).collect();
    assert_eq!(whole, split);
});

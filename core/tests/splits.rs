//! Byte boundaries never change the output: every transcript fed one byte at a time, at random
//! boundaries, and (for a small one) split in two at every position gives the same chunks.

mod common;

use ccwire_core::Replayer;
use common::{corpus, to_jsonl};

fn replay_in_pieces(bytes: &[u8], mut next_len: impl FnMut() -> usize) -> String {
    let mut replayer = Replayer::new();
    let mut chunks = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = next_len().clamp(1, rest.len());
        replayer.push(&rest[..n]);
        rest = &rest[n..];
        chunks.extend(std::iter::from_fn(|| replayer.poll_chunk()));
    }
    replayer.finish();
    chunks.extend(std::iter::from_fn(|| replayer.poll_chunk()));
    to_jsonl(&chunks)
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[test]
fn one_byte_at_a_time_gives_the_same_chunks() {
    for (name, bytes) in corpus() {
        let whole = to_jsonl(&ccwire_core::replay(&bytes));
        assert_eq!(replay_in_pieces(&bytes, || 1), whole, "{name}");
    }
}

#[test]
fn random_boundaries_give_the_same_chunks() {
    let mut rng = Rng(0x5eed_cc31_e000_0001);
    for (name, bytes) in corpus() {
        let whole = to_jsonl(&ccwire_core::replay(&bytes));
        for round in 0..8 {
            let max = [3, 17, 256, 4096, 65536][round % 5];
            let split = replay_in_pieces(&bytes, || (rng.next() % max) as usize + 1);
            assert_eq!(split, whole, "{name}, round {round}");
        }
    }
}

#[test]
fn a_split_at_every_position_gives_the_same_chunks() {
    // A small transcript: the first lines of a permission scenario, multi-byte text included.
    let bytes = common::transcript("b_bash_allow");
    let small: Vec<u8> = std::str::from_utf8(&bytes)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("\"commands\""))
        .flat_map(|l| format!("{l}\n").into_bytes())
        .chain("{\"dir\":\"out\",\"t_ms\":1,\"msg\":{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"caf\u{e9} \u{1F600}\"}}}\n".bytes())
        .collect();
    let whole = to_jsonl(&ccwire_core::replay(&small));
    for at in 0..=small.len() {
        let mut replayer = Replayer::new();
        replayer.push(&small[..at]);
        replayer.push(&small[at..]);
        replayer.finish();
        let chunks: Vec<_> = std::iter::from_fn(|| replayer.poll_chunk()).collect();
        assert_eq!(to_jsonl(&chunks), whole, "split at {at}");
    }
}

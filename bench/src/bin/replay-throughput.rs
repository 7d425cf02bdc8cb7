//! Replay throughput of the core against a bare parse baseline, in one run.
//!
//! `cargo run --release -p ccwire-bench --bin replay-throughput [MB] [--compact]`
//!
//! `--compact`: the corpus lines in the CLI's own compact form (see `large_transcript`).
//!
//! - baseline: split the transcript into lines and parse each into `serde_json::Value`;
//! - engine: `Replayer` (framing + typed parse + session state + chunk serialization), fed in
//!   64 KiB pieces, every chunk serialized into a reused buffer.

use std::time::{Duration, Instant};

use ccwire_bench::{large_transcript, rss_kib};
use ccwire_core::Replayer;

fn baseline(data: &[u8]) -> usize {
    let mut messages = 0;
    for line in data.split(|b| *b == b'\n') {
        if line.is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_slice(line).expect("corpus lines are JSON");
        std::hint::black_box(&value);
        messages += 1;
    }
    messages
}

fn engine(data: &[u8]) -> (usize, usize) {
    let mut replayer = Replayer::new();
    let mut out = Vec::with_capacity(1 << 16);
    let mut chunks = 0;
    let mut bytes = 0;
    let mut drain = |replayer: &mut Replayer| {
        while let Some(chunk) = replayer.poll_chunk() {
            out.clear();
            serde_json::to_writer(&mut out, &chunk).expect("chunks serialize");
            bytes += out.len();
            chunks += 1;
        }
    };
    for piece in data.chunks(64 * 1024) {
        replayer.push(piece);
        drain(&mut replayer);
    }
    replayer.finish();
    drain(&mut replayer);
    (chunks, bytes)
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = None;
    let mut result = None;
    for _ in 0..runs {
        let start = Instant::now();
        let r = f();
        let took = start.elapsed();
        if best.is_none_or(|b| took < b) {
            best = Some(took);
        }
        result = Some(r);
    }
    (
        best.expect("at least one run"),
        result.expect("at least one run"),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let compact = args.iter().any(|a| a == "--compact");
    let mb: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(50);
    let data = large_transcript(mb << 20, compact);
    let lines = data
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    let size_mb = data.len() as f64 / (1 << 20) as f64;
    let form = if compact { "compact" } else { "spaced" };
    println!("transcript: {size_mb:.1} MiB, {lines} lines (the corpus repeated, {form})");

    let (base_t, messages) = best_of(3, || baseline(&data));
    let rss_before = rss_kib().unwrap_or(0);
    let (engine_t, (chunks, chunk_bytes)) = best_of(3, || engine(&data));
    let rss_after = rss_kib().unwrap_or(0);

    let rate = |t: Duration| size_mb / t.as_secs_f64();
    let per_s = |t: Duration| messages as f64 / t.as_secs_f64();
    println!(
        "baseline (split + serde_json::Value): {:8.1} MB/s {:10.0} msg/s",
        rate(base_t),
        per_s(base_t)
    );
    println!(
        "engine   (Replayer + chunk JSON):     {:8.1} MB/s {:10.0} msg/s  ({chunks} chunks, {:.1} MiB of chunk JSON)",
        rate(engine_t),
        per_s(engine_t),
        chunk_bytes as f64 / (1 << 20) as f64
    );
    println!(
        "ratio engine/baseline: {:.2}",
        base_t.as_secs_f64() / engine_t.as_secs_f64()
    );
    println!(
        "resident memory: {} KiB before the engine runs, {} KiB after (the transcript itself: {} KiB)",
        rss_before,
        rss_after,
        data.len() / 1024
    );
}

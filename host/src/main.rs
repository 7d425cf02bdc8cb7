//! The `ccwire` command line.

mod cli;
mod run;

// A gateway allocates per request and per line: mimalloc keeps that off the latency path
// (about 15% of the per-turn overhead against the system allocator; BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}

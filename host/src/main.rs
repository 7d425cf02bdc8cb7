//! The `ccwire` command line.

mod acp;
mod cli;
mod play;
mod run;

// A gateway allocates per request and per line: mimalloc keeps that cheaper than the system
// allocator on the latency path (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}

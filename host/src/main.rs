//! The `ccwire` command line.

mod cli;
mod run;

fn main() -> std::process::ExitCode {
    cli::main()
}

//! `ccwire play`: a recorded transcript stands in for the `claude` executable
//! ([`ccwire_core::play::Player`]), with faults to inject on purpose.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use ccwire_core::play::{Fault, PlayOutput, Player};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The exit status when the host diverged from the recording (`--verify`).
pub const DIVERGED: u8 = 3;

/// `ccwire play` arguments.
#[derive(Debug, clap::Args)]
pub struct PlayArgs {
    /// The transcript to play (what `ccwire record` writes).
    transcript: PathBuf,
    /// Check that the host says what the recorded host said (by meaning: not ids, times or
    /// field order); the first difference is reported on stderr and play exits with status 3.
    #[arg(long)]
    verify: bool,
    /// Play this many times as fast as recorded (default: as recorded).
    #[arg(long, conflicts_with = "instant")]
    speed: Option<f64>,
    /// Play every line as soon as the host's lines before it have come.
    #[arg(long)]
    instant: bool,
    /// A failure to inject (repeatable; N is the Nth line written, from 1): `garbage@N` (a line
    /// that is not JSON nor UTF-8 before line N), `oversize@N` (a 100 MiB line before it),
    /// `duplicate@N` (line N twice: a control request twice with one id),
    /// `unknown-response@N` / `unknown-cancel@N` (a control response / cancel for a request id
    /// the host never used, before line N), `exit-mid-line@N` (half of line N, then exit 1),
    /// `kill@N` (SIGKILL itself before line N), `stall@N` (write nothing from line N on and
    /// ignore stdin closing), `exit-code=K` (exit with K when the tape is over).
    #[arg(long = "fault", value_name = "FAULT")]
    faults: Vec<String>,
    /// The arguments a host passes to `claude` (ignored; with `--verify`, checked for the
    /// stream-json flags).
    #[arg(last = true, allow_hyphen_values = true)]
    cli_args: Vec<String>,
}

/// Runs `ccwire play`.
pub fn play(args: PlayArgs) -> ExitCode {
    // (Every path out of `run` ends the process itself; see below.)
    // The official SDKs ask the executable for its version before they start it.
    if args.cli_args.iter().any(|a| a == "-v" || a == "--version") {
        println!("{} (Claude Code)", ccwire_host::claude::TESTED_CLI_VERSION);
        return ExitCode::SUCCESS;
    }
    let faults: Vec<Fault> = match args.faults.iter().map(|f| f.parse()).collect() {
        Ok(faults) => faults,
        Err(message) => {
            eprintln!("ccwire play: --{message}");
            return ExitCode::from(2);
        }
    };
    if args.verify {
        let joined = args.cli_args.join(" ");
        for flag in [
            "--output-format stream-json",
            "--input-format stream-json",
            "--verbose",
        ] {
            if !args.cli_args.is_empty() && !joined.contains(flag) {
                eprintln!(
                    "ccwire play: diverged: the host did not pass {flag} (it passed: {joined})"
                );
                return ExitCode::from(DIVERGED);
            }
        }
    }
    let tape = match std::fs::read(&args.transcript) {
        Ok(tape) => tape,
        Err(err) => {
            eprintln!(
                "ccwire play: cannot read {}: {err}",
                args.transcript.display()
            );
            return ExitCode::from(2);
        }
    };
    let speed = if args.instant {
        None
    } else {
        Some(args.speed.unwrap_or(1.0).max(1e-6))
    };
    let mut player = match Player::new(&tape, args.verify, speed) {
        Ok(player) => player,
        Err(err) => {
            eprintln!("ccwire play: {}: {err}", args.transcript.display());
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("ccwire play: {err}");
            return ExitCode::FAILURE;
        }
    };
    player.inject(&faults);
    let code = runtime.block_on(run(player));
    // Now, as the CLI would: the runtime's reader of stdin may still wait for a line that
    // will not come, and dropping the runtime would wait for it.
    std::process::exit(code)
}

async fn run(mut player: Player) -> i32 {
    let start = tokio::time::Instant::now();
    let now = || start.elapsed().as_millis() as u64;
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let mut buf = vec![0u8; 64 * 1024];
    let mut stdin_open = true;
    loop {
        while let Some(output) = player.poll_output() {
            let written = match output {
                PlayOutput::Write { bytes, .. } => stdout.write_all(&bytes).await,
                PlayOutput::Filler { bytes } => {
                    let mut line = vec![b'x'; bytes];
                    line.push(b'\n');
                    stdout.write_all(&line).await
                }
                PlayOutput::Kill => {
                    let _ = stdout.flush().await;
                    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
                    Ok(())
                }
                PlayOutput::Diverged(divergence) => {
                    eprintln!("ccwire play: diverged: {divergence}");
                    return i32::from(DIVERGED);
                }
                PlayOutput::Exit(code) => {
                    let _ = stdout.flush().await;
                    return code;
                }
                _ => Ok(()),
            };
            if written.is_err() || stdout.flush().await.is_err() {
                // The host is gone.
                return 0;
            }
        }
        let due = player.poll_timeout();
        let sleep = due.map_or(Duration::from_secs(86_400), |at| {
            Duration::from_millis(at.saturating_sub(now()))
        });
        tokio::select! {
            read = stdin.read(&mut buf), if stdin_open => match read {
                Ok(0) | Err(_) => {
                    stdin_open = false;
                    // (A stalled player ignores it: its host must end it.)
                    player.handle_stdin_eof(now());
                }
                Ok(n) => player.handle_stdin(now(), &buf[..n]),
            },
            () = tokio::time::sleep(sleep), if due.is_some() => player.handle_timeout(now()),
            () = std::future::pending(), if !stdin_open && due.is_none() => {}
        }
    }
}

//! A light stand-in for the `claude` CLI in stream-json mode, for load tests: the fake CLI of
//! [`ccwire_tests::fake_cli`] (the one the gateway simulation runs) over stdin and stdout. It
//! answers every prompt at once with partial messages (echoing it; a prompt over 4 KiB is
//! echoed as its start and its length), and for a prompt `lookup: KEY` calls the client's
//! `lookup` tool through the `client` MCP server first (a held call), answering once the result
//! comes; a prompt `slow: MS …` is answered after MS milliseconds unless an interrupt comes
//! first. Of its argv, only `--session-mirror` (with `--session-id` or `--resume`) counts: with
//! it, each message it takes and gives comes back as a `transcript_mirror` line of the
//! session's transcript under `$CLAUDE_CONFIG_DIR` (or `~/.claude`), as the CLI's would, so a
//! session store keeps the conversation. Its `initialize` lists the model `default`. It exits
//! when its stdin closes. A few kilobytes of memory and no model: thousands can run at once.

use std::io::{BufRead, BufWriter, Write};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use ccwire_tests::fake_cli::{Config, FakeCli, Transcript};

fn main() {
    // Lines are read on a thread of their own, so that a slow answer can come between them.
    let (lines, input) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let config = Config {
        model: ("default", "Default (fake)"),
        projects_dir: projects_dir(),
        transcript: Transcript::Whole,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cli = FakeCli::new(config, &args);
    let start = Instant::now();
    let mut out = BufWriter::new(std::io::stdout().lock());
    loop {
        let line = match cli.poll_timeout() {
            Some(at) => {
                let at = start + Duration::from_millis(at);
                match input.recv_timeout(at.saturating_duration_since(Instant::now())) {
                    Ok(line) => Some(line),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            None => match input.recv() {
                Ok(line) => Some(line),
                Err(_) => return,
            },
        };
        let now = start.elapsed().as_millis() as u64;
        let printed = match line {
            Some(line) => cli.handle_line(now, &line),
            None => cli.handle_timeout(now),
        };
        // What it does not understand it skips, as the CLI does.
        cli.unexpected.clear();
        for printed in printed {
            if out.write_all(printed.as_bytes()).is_err() {
                return;
            }
        }
        if out.flush().is_err() {
            return;
        }
    }
}

/// The directory the CLI would keep this working directory's session transcripts in.
fn projects_dir() -> String {
    let config = std::env::var("CLAUDE_CONFIG_DIR")
        .unwrap_or_else(|_| format!("{}/.claude", std::env::var("HOME").unwrap_or_default()));
    let cwd = std::env::current_dir().unwrap_or_default();
    let project: String = cwd
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{config}/projects/{project}")
}

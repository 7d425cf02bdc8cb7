//! Shared pieces of the benchmark programs.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// Builds a large transcript by repeating the recorded corpus until it holds at least
/// `min_bytes`. Every copy gets its own tool, message and request ids, so the engine sees new
/// tool calls all the way through (as in a long live session) rather than repeats it skips.
///
/// The corpus lines are spaced (`", "`, `": "`, as its recorder wrote them); `compact` writes
/// each line as the CLI writes its own and `ccwire record` records them (`JSON.stringify`'s form).
pub fn large_transcript(min_bytes: usize, compact: bool) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the corpus folder exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    let corpus: Vec<Vec<u8>> = files
        .iter()
        .map(|p| std::fs::read(p).expect("readable"))
        .collect();
    let mut out = Vec::with_capacity(min_bytes + (1 << 20));
    let mut copy = 0;
    while out.len() < min_bytes {
        copy += 1;
        for file in &corpus {
            let text = std::str::from_utf8(file).expect("the corpus is UTF-8");
            let text = text
                .replace("toolu_", &format!("toolu_c{copy}_"))
                .replace("msg_", &format!("msg_c{copy}_"))
                .replace("\"request_id\": \"", &format!("\"request_id\": \"c{copy}-"));
            if compact {
                for line in text.lines().filter(|l| !l.is_empty()) {
                    let line = ccwire_core::Json::parse(line).expect("corpus lines are JSON");
                    out.extend_from_slice(line.get().as_bytes());
                    out.push(b'\n');
                }
            } else {
                out.extend_from_slice(text.as_bytes());
                if !text.ends_with('\n') {
                    out.push(b'\n');
                }
            }
        }
    }
    out
}

/// The peak resident set size of this process in KiB (`VmHWM`), where the OS reports it.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The current resident set size of this process in KiB (`VmRSS`).
pub fn rss_kib() -> Option<u64> {
    process_rss_kib("self")
}

/// The resident set size of process `pid` (or `self`) in KiB (`VmRSS`).
pub fn process_rss_kib(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The child processes of `pid` (the CLIs a gateway runs), but its watchdog.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .flat_map(|t| {
            std::fs::read_to_string(t.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmdline.split(|b| *b == 0).nth(1) != Some(b"watchdog".as_slice())
        })
        .collect()
}

/// Whether process `pid` is a zombie (ended, not yet reaped by its parent).
pub fn is_zombie(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .is_some_and(|rest| rest.trim_start().starts_with('Z'))
}

/// The open file descriptors of process `pid`.
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// A program built beside this one (`ccwire`, `fake-claude`); exits with the build command
/// when it is missing.
pub fn sibling(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the benchmark's path");
    let path = exe.parent().expect("a directory").join(name);
    if !path.exists() {
        eprintln!(
            "{} is missing: build it first with `cargo build --release -p ccwire-host -p ccwire-tests --bins`",
            path.display()
        );
        std::process::exit(2);
    }
    path
}

/// Lets this process and the gateway it starts hold one descriptor per socket and pipe.
pub fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// Starts `ccwire serve` on a free loopback port with `fake-claude` as its CLI and these
/// further arguments; returns the process and its address (`host:port`).
pub fn serve_fake(home: &std::path::Path, args: &[&str]) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut gateway = std::process::Command::new(sibling("ccwire"))
        .args(["serve", "--listen", "127.0.0.1:0", "--claude"])
        .arg(sibling("fake-claude"))
        .args(args)
        .env("HOME", home)
        .env_remove("CCWIRE_API_KEYS")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ccwire serve starts");
    let mut lines = std::io::BufReader::new(gateway.stderr.take().expect("stderr")).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("ccwire serve prints its address")
            .expect("a line");
        if let Some(addr) = line.strip_prefix("ccwire serve: listening on http://") {
            break addr.to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (gateway, addr)
}

/// The wire lines the gateway wrote to and read from its CLIs (the `ccwire::wire` trace
/// events): when, and the line (`< ` from the CLI, `> ` to it).
#[derive(Clone, Default)]
pub struct WireLog(Arc<Mutex<Vec<(Instant, String)>>>);

impl WireLog {
    /// The lines logged since the last call.
    pub fn take(&self) -> Vec<(Instant, String)> {
        std::mem::take(&mut *self.0.lock().expect("not poisoned"))
    }
}

struct MessageText(String);

impl Visit for MessageText {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for WireLog {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let at = Instant::now();
        let mut text = MessageText(String::new());
        event.record(&mut text);
        self.0.lock().expect("not poisoned").push((at, text.0));
    }
}

/// The value at rank `p` (0–1) of `values`, which it sorts.
pub fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() as f64 - 1.0) * p).round() as usize;
    values[rank]
}

/// A new conversation's first message through a gateway at `addr` (Messages API, `model`),
/// checked to be answered "Hello." (the benchmarks' fake model's answer).
pub async fn hello_turn(
    http: &reqwest::Client,
    addr: std::net::SocketAddr,
    model: &str,
    text: String,
) {
    let body = serde_json::json!({"model": model, "max_tokens": 256,
                                  "messages": [{"role": "user", "content": text}]});
    let response = http
        .post(format!("http://{addr}/v1/messages"))
        .json(&body)
        .send()
        .await
        .expect("a response");
    assert_eq!(response.status(), 200, "the gateway answered");
    let answer: serde_json::Value = response.json().await.expect("a JSON body");
    assert_eq!(answer["content"][0]["text"], "Hello.", "{answer}");
}

//! No request stalls another, with the real CLI: while one tenant sends a request with
//! 150,000 tools (which the CLI lists from the gateway's MCP server) and then a 32 MiB history
//! (which matches nothing, so the gateway writes it as the transcript a new CLI resumes),
//! another tenant's live conversation goes on and `/health` is asked every 100 ms.
//!
//! ```text
//! cargo build --release -p ccwire-host -p ccwire-tests --bins
//! cargo run --release -p ccwire-bench --bin stall-cli [ROUNDS]
//! ```
//!
//! `ccwire serve` (the release binary beside this one, its state in a temporary directory,
//! sandbox off) runs the real Claude Code CLI against a fake model in this process. Before the
//! big requests, for as long as they take, and after, it prints the live turns' and the
//! probes' p50 / p99 / max (each phase as its own rows, so every comparison is within a run).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccwire_bench::{percentile, sibling};
use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{big_requests, FakeAnthropic, Match, Reply, Script};
use serde_json::{json, Value};

const MODEL: &str = "claude-sonnet-4-5-20250929";
const PHASES: [&str; 3] = ["before", "during the big requests", "after"];

/// Samples by phase: (phase, milliseconds).
type Samples = Arc<Mutex<Vec<(usize, f64)>>>;

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(1, |a| a.parse().expect("ROUNDS is a number"));
    let fake = FakeAnthropic::start(
        Script::new()
            .when(Match::Probe, Reply::text("ok"))
            .when(Match::Any, Reply::text("A short answer.")),
    )
    .await;
    let home = OfflineHome::new();
    let state = tempfile::tempdir().expect("a directory");
    let mut command = tokio::process::Command::new(sibling("ccwire"));
    for key in inherited_to_remove() {
        command.env_remove(key);
    }
    let max_body = (64 * 1024 * 1024).to_string();
    let mut gateway = command
        .args(["serve", "--listen", "127.0.0.1:0", "--sandbox", "off"])
        .args(["--api-key", "tenant-a", "--api-key", "tenant-b"])
        .args(["--max-body", &max_body, "--state-dir"])
        .arg(state.path())
        .envs(home.env(&fake.base_url()))
        .env("CCWIRE_CLAUDE", claude_path())
        .env_remove("CCWIRE_API_KEYS")
        .current_dir(home.workdir())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("ccwire serve starts");
    let addr = {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(gateway.stderr.take().expect("stderr")).lines();
        let addr = loop {
            let line = lines
                .next_line()
                .await
                .expect("a line")
                .expect("ccwire serve listens");
            if let Some(addr) = line.strip_prefix("ccwire serve: listening on http://") {
                break addr.to_owned();
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        addr
    };
    let url = format!("http://{addr}");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .expect("a client");

    let phase = Arc::new(AtomicUsize::new(0));
    let (health, turns): (Samples, Samples) = Default::default();
    let probes = tokio::spawn({
        let (http, url, phase, health) = (http.clone(), url.clone(), phase.clone(), health.clone());
        async move {
            while phase.load(Ordering::Relaxed) < PHASES.len() {
                let at = phase.load(Ordering::Relaxed);
                let sent = Instant::now();
                let response = http
                    .get(format!("{url}/health"))
                    .send()
                    .await
                    .expect("health");
                assert_eq!(response.status(), 200);
                health
                    .lock()
                    .unwrap()
                    .push((at, sent.elapsed().as_secs_f64() * 1000.0));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    let live = tokio::spawn({
        let (http, url, phase, turns) = (http.clone(), url.clone(), phase.clone(), turns.clone());
        async move {
            let mut messages: Vec<Value> = Vec::new();
            let mut n = 0;
            while phase.load(Ordering::Relaxed) < PHASES.len() {
                n += 1;
                messages.push(json!({"role": "user", "content": format!("Turn {n}.")}));
                let body = json!({"model": MODEL, "max_tokens": 64, "messages": messages});
                let at = phase.load(Ordering::Relaxed);
                let sent = Instant::now();
                let response = http
                    .post(format!("{url}/v1/messages"))
                    .header("x-api-key", "tenant-a")
                    .json(&body)
                    .send()
                    .await
                    .expect("a turn");
                let answer: Value = response.json().await.expect("JSON");
                // The first turn starts the conversation's CLI: not a live turn.
                if n > 1 {
                    turns
                        .lock()
                        .unwrap()
                        .push((at, sent.elapsed().as_secs_f64() * 1000.0));
                }
                messages.push(json!({"role": "assistant", "content": answer["content"].clone()}));
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(8)).await;
    phase.store(1, Ordering::Relaxed);
    let mut took = Vec::new();
    for _ in 0..rounds {
        for (name, body) in [
            ("150,000 tools", big_requests::with_tools(MODEL, 150_000)),
            (
                "32 MiB history",
                big_requests::with_history(MODEL, 32 * 1024 * 1024),
            ),
        ] {
            let size = body.len() as f64 / (1024.0 * 1024.0);
            let sent = Instant::now();
            let response = http
                .post(format!("{url}/v1/messages"))
                .header("x-api-key", "tenant-b")
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("an answer");
            let status = response.status().as_u16();
            let _ = response.bytes().await;
            took.push(format!(
                "{name} ({size:.1} MiB): {status} in {:.1} s",
                sent.elapsed().as_secs_f64()
            ));
        }
    }
    phase.store(2, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(5)).await;
    phase.store(PHASES.len(), Ordering::Relaxed);
    let _ = probes.await;
    let _ = live.await;

    println!("stall-cli: ccwire serve in front of the real CLI; another tenant's live turns and /health every 100 ms");
    println!();
    println!("big requests: {}", took.join("; "));
    println!();
    println!("| what | phase | n | p50 | p99 | max |");
    println!("|---|---|---:|---:|---:|---:|");
    for (what, samples) in [("live turn", &turns), ("/health", &health)] {
        for (i, name) in PHASES.iter().enumerate() {
            let mut mine: Vec<f64> = (samples.lock().unwrap().iter())
                .filter(|(at, _)| *at == i)
                .map(|(_, ms)| *ms)
                .collect();
            println!(
                "| {what} | {name} | {} | {:.1} ms | {:.1} ms | {:.1} ms |",
                mine.len(),
                percentile(&mut mine.clone(), 0.5),
                percentile(&mut mine.clone(), 0.99),
                percentile(&mut mine, 1.0),
            );
        }
    }
    let _ = gateway.start_kill();
}

//! A soak: many thousands of turns through one `ccwire serve`, with held tool calls, client
//! disconnects and expiries mixed in, watching the gateway's memory, descriptors and
//! processes from before the first turn to after the last conversation expired.
//!
//! ```text
//! cargo build --release -p ccwire-host -p ccwire-tests --bins
//! cargo run --release -p ccwire-bench --bin soak [TURNS] [WORKERS] [ROUNDS]
//! ```
//!
//! The gateway runs `fake-claude` (from `ccwire-tests`) as its CLI, so turns are quick and
//! every byte of memory measured is the gateway's. `WORKERS` clients (default 32) run
//! conversations one after another until `TURNS` (default 10,000) requests were answered. Each
//! conversation is one of:
//!
//! - a chat of three turns (3 in 8 conversations);
//! - a client tool round trip: a turn, a call the response ends on (held), the result (2 in 8);
//! - an abandoned tool call: the call is held until `--held-call-timeout` (2 s) ends it;
//! - a disconnect: a streamed turn the client drops before the CLI answers;
//! - one turn, then the conversation is left to `--idle-ttl` (3 s).
//!
//! The turns run in `ROUNDS` rounds (default 4). After each, the clients close their
//! connections and the soak waits for every conversation to expire, then reads the gateway's
//! RSS, open descriptors, CLI processes and zombies (and, during the round, at its busiest).
//! The bounds it checks and prints as met or not: with everything expired, RSS grows by at
//! most 8 MiB from the first round to the last (memory is reused, not leaked), descriptors are
//! within 4 of the start, no CLI and no zombie is left; and no client saw an error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccwire_bench::{children, is_zombie, open_fds, process_rss_kib, raise_fd_limit, serve_fake};
use serde_json::{json, Value};

/// One reading of the gateway.
#[derive(Clone, Copy)]
struct Sample {
    turns: usize,
    rss_kib: u64,
    fds: usize,
    clis: usize,
    zombies: usize,
}

fn sample(pid: u32, turns: usize) -> Sample {
    let clis = children(pid);
    Sample {
        turns,
        rss_kib: process_rss_kib(&pid.to_string()).unwrap_or(0),
        fds: open_fds(pid),
        zombies: clis.iter().filter(|p| is_zombie(**p)).count(),
        clis: clis.len(),
    }
}

/// What the clients saw.
#[derive(Default)]
struct Tally {
    turns: AtomicUsize,
    errors: AtomicUsize,
    disconnects: AtomicUsize,
    abandoned: AtomicUsize,
    round_trips: AtomicUsize,
    first_error: Mutex<Option<String>>,
}

impl Tally {
    fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.first_error.lock().unwrap().get_or_insert(what);
    }
}

struct Conversation<'a> {
    http: &'a reqwest::Client,
    url: &'a str,
    tally: &'a Tally,
    messages: Vec<Value>,
}

impl Conversation<'_> {
    /// Sends the history plus `message`; on a 200 the answer joins the history.
    async fn turn(&mut self, message: Value) -> Option<Value> {
        self.messages.push(message);
        let body = json!({"model": "default", "max_tokens": 64, "messages": self.messages,
            "tools": [{"name": "lookup", "description": "Looks a key up.",
                       "input_schema": {"type": "object",
                                        "properties": {"key": {"type": "string"}}}}]});
        let response = self.http.post(self.url).json(&body).send().await;
        self.tally.turns.fetch_add(1, Ordering::Relaxed);
        let answer = match response {
            Ok(r) if r.status() == 200 => r.json::<Value>().await.ok(),
            Ok(r) => {
                let status = r.status();
                let text = r.text().await.unwrap_or_default();
                self.tally.error(format!("{status}: {text}"));
                None
            }
            Err(e) => {
                self.tally.error(e.to_string());
                None
            }
        }?;
        self.messages
            .push(json!({"role": "assistant", "content": answer["content"]}));
        Some(answer)
    }

    fn user(text: String) -> Value {
        json!({"role": "user", "content": text})
    }

    async fn run(mut self, index: usize) {
        match index % 8 {
            0..=2 => {
                for turn in 0..3 {
                    self.turn(Self::user(format!("Turn {turn} of {index}.")))
                        .await;
                }
            }
            3 | 4 => {
                self.turn(Self::user(format!("Hello from {index}."))).await;
                let call = self.turn(Self::user(format!("lookup: k{index}"))).await;
                let id = call
                    .as_ref()
                    .and_then(|a| a["content"].as_array())
                    .and_then(|blocks| blocks.iter().find(|b| b["type"] == "tool_use"))
                    .and_then(|b| b["id"].as_str())
                    .map(str::to_owned);
                let Some(id) = id else {
                    self.tally.error(format!("no tool call in {call:?}"));
                    return;
                };
                let result = json!({"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": id, "content": format!("value {index}")}]});
                let answer = self.turn(result).await;
                let text = answer
                    .as_ref()
                    .and_then(|a| a["content"][0]["text"].as_str());
                if text == Some(&format!("done: value {index}")) {
                    self.tally.round_trips.fetch_add(1, Ordering::Relaxed);
                } else {
                    self.tally.error(format!("round trip answered {answer:?}"));
                }
            }
            5 => {
                self.turn(Self::user(format!("lookup: gone{index}"))).await;
                self.tally.abandoned.fetch_add(1, Ordering::Relaxed);
            }
            6 => {
                let body = json!({"model": "default", "max_tokens": 64, "stream": true,
                    "messages": [Self::user(format!("slow: 1500 from {index}"))]});
                let response = self
                    .http
                    .post(self.url)
                    .json(&body)
                    .timeout(Duration::from_millis(200))
                    .send()
                    .await;
                if let Ok(response) = response {
                    // The head came; the body is dropped half-way.
                    drop(response);
                }
                self.tally.turns.fetch_add(1, Ordering::Relaxed);
                self.tally.disconnects.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                self.turn(Self::user(format!("Left idle by {index}.")))
                    .await;
            }
        }
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let target: usize = args
        .next()
        .map_or(10_000, |a| a.parse().expect("TURNS is a number"));
    let workers: usize = args
        .next()
        .map_or(32, |a| a.parse().expect("WORKERS is a number"));
    let rounds: usize = args
        .next()
        .map_or(4, |a| a.parse().expect("ROUNDS is a number"));
    raise_fd_limit();
    let home = tempfile::tempdir().expect("a home");
    let (mut gateway, addr) = serve_fake(
        home.path(),
        &[
            "--held-call-timeout",
            "2",
            "--idle-ttl",
            "3",
            "--max-sessions",
            "2000",
            "--max-concurrent",
            "256",
            "--max-queue",
            "4096",
        ],
    );
    let pid = gateway.id();
    let url = format!("http://{addr}/v1/messages");
    let tally = Arc::new(Tally::default());
    let start = Instant::now();
    let before = sample(pid, 0);
    let samples = Arc::new(Mutex::new(vec![before]));
    let sampler = {
        let (samples, tally) = (samples.clone(), tally.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let turns = tally.turns.load(Ordering::Relaxed);
                samples.lock().unwrap().push(sample(pid, turns));
            }
        })
    };
    let next = Arc::new(AtomicUsize::new(0));
    let mut rows = vec![("before the first turn".to_owned(), before)];
    let mut settled = Vec::new();
    for round in 1..=rounds {
        let goal = target * round / rounds;
        // A client of its own per round: its connections close with it, so that descriptors
        // still open after the round are the gateway's.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(workers)
            .timeout(Duration::from_secs(60))
            .build()
            .expect("a client");
        let clients = (0..workers).map(|_| {
            let (http, url, tally, next) = (&http, &url, &tally, &next);
            async move {
                while tally.turns.load(Ordering::Relaxed) < goal {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let conversation = Conversation {
                        http,
                        url,
                        tally,
                        messages: Vec::new(),
                    };
                    conversation.run(index).await;
                }
            }
        });
        futures::future::join_all(clients).await;
        drop(http);
        let turns = tally.turns.load(Ordering::Relaxed);
        let busy = samples
            .lock()
            .unwrap()
            .iter()
            .copied()
            .max_by_key(|s| s.clis)
            .unwrap_or(before);
        rows.push((format!("round {round}: busiest second"), busy));
        rows.push((
            format!("round {round}: after its last turn"),
            sample(pid, turns),
        ));
        // Every conversation expires: idle 3 s, held calls 2 s, checked at least once a second.
        tokio::time::sleep(Duration::from_secs(8)).await;
        let after = sample(pid, turns);
        rows.push((format!("round {round}: 8 s later, all expired"), after));
        settled.push(after);
        samples.lock().unwrap().clear();
    }
    sampler.abort();
    let elapsed = start.elapsed().as_secs_f64();

    let conversations = next.load(Ordering::Relaxed);
    let turns = tally.turns.load(Ordering::Relaxed);
    println!(
        "soak: {turns} turns in {conversations} conversations through one `ccwire serve` \
         ({workers} clients, {rounds} rounds, fake-claude), {elapsed:.0} s"
    );
    println!(
        "round trips answered: {}; abandoned held calls: {}; disconnects: {}; errors: {}",
        tally.round_trips.load(Ordering::Relaxed),
        tally.abandoned.load(Ordering::Relaxed),
        tally.disconnects.load(Ordering::Relaxed),
        tally.errors.load(Ordering::Relaxed)
    );
    if let Some(error) = tally.first_error.lock().unwrap().as_ref() {
        println!("first error: {error}");
    }
    println!();
    println!("| when | turns | gateway RSS | open fds | CLI processes | zombies |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (when, s) in &rows {
        println!(
            "| {when} | {} | {:.1} MiB | {} | {} | {} |",
            s.turns,
            s.rss_kib as f64 / 1024.0,
            s.fds,
            s.clis,
            s.zombies
        );
    }
    println!();
    let first = settled.first().copied().unwrap_or(before);
    let last = settled.last().copied().unwrap_or(before);
    let growth = (last.rss_kib as f64 - first.rss_kib as f64) / 1024.0;
    let fd_drift = last.fds as i64 - before.fds as i64;
    let zombies = settled.iter().map(|s| s.zombies).sum::<usize>();
    let check = |met: bool| if met { "met" } else { "NOT met" };
    println!(
        "bound: RSS with all expired grows ≤ 8 MiB from round 1 to round {rounds}: {growth:+.1} MiB, {}",
        check(growth <= 8.0)
    );
    println!(
        "bound: open fds with all expired within 4 of the start: {fd_drift:+}, {}",
        check(fd_drift.abs() <= 4)
    );
    println!(
        "bound: no CLI left with all expired: {}, {}",
        last.clis,
        check(settled.iter().all(|s| s.clis == 0))
    );
    println!(
        "bound: no zombie with all expired: {zombies}, {}",
        check(zombies == 0)
    );
    println!(
        "bound: every client tool round trip answered, no error: {}",
        check(tally.errors.load(Ordering::Relaxed) == 0)
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = gateway.wait();
}

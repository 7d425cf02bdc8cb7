//! Conversations that outlive their CLIs: what resuming one costs, what the model sees, and
//! what many conversations over time take.
//!
//! `cargo run --release -p ccwire-bench --bin resume [SAMPLES] [CONVERSATIONS]`
//! (`SAMPLES` 0: only the third part; `CCWIRE_CLAUDE` names another CLI, such as
//! `fake-claude`)
//!
//! `ccwire serve`'s server runs in this process with a session store and tenant directories,
//! in front of the real Claude Code CLI and a zero-delay fake model (also in this process):
//!
//! 1. **Time to first byte** (streamed Messages requests), `SAMPLES` conversations: a new
//!    conversation's first turn (a CLI starts), its second turn on the live CLI (`continued`),
//!    and its third after its CLI was hibernated (`resumed`: a CLI starts and reads the stored
//!    transcript).
//! 2. **The prefix the model sees again**: for each resumed turn, the share of the model
//!    request's bytes (tools, system prompt, messages, in that order) that the previous request
//!    of the same conversation began with — the part a real API reads from its prompt cache —
//!    against a gateway without a store, where the CLI gone means a new CLI that is told the
//!    history in one prompt.
//! 3. **Many conversations over time**: `CONVERSATIONS` conversations through a gateway with
//!    `max_sessions` 32, eight at a time, each continued once after the others have taken its
//!    CLI's place: the gateway process's RSS and the store's size per conversation.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ccwire_bench::{percentile, rss_kib};
use ccwire_host::serve::{GatewayOptions, Server};
use ccwire_host::store::{ConversationStore, DirStore};
use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{FakeAnthropic, Match, Reply, Script};
use futures::StreamExt;
use serde_json::{json, Value};

const MODEL: &str = "claude-sonnet-4-5-20250929";

/// How a conversation whose CLI is gone comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Back {
    /// Resumed from the session store.
    Store,
    /// No store: the history the request carries is written as a transcript and resumed.
    History,
    /// No store and no tenant directories (a library host): the history is retold in one
    /// prompt, as before the store.
    Retold,
}

async fn gateway(
    fake: &FakeAnthropic,
    home: &OfflineHome,
    state: &std::path::Path,
    back: Back,
    hibernate_after_ms: u64,
    max_sessions: usize,
) -> Server {
    let mut options = GatewayOptions {
        claude: Some(claude_path()),
        env: home.env(&fake.base_url()),
        env_remove: inherited_to_remove(),
        state_dir: (back != Back::Retold).then(|| state.to_owned()),
        cwd: (back == Back::Retold).then(|| home.workdir()),
        sandbox: ccwire_host::sandbox::SandboxMode::Off,
        ..GatewayOptions::default()
    };
    if back == Back::Store {
        let store: Arc<dyn ConversationStore> = Arc::new(DirStore::new(
            state.join("store"),
            Duration::from_secs(86_400),
        ));
        options.store = Some(store);
    }
    options.engine.limits.hibernate_after_ms = hibernate_after_ms;
    options.engine.max_sessions = max_sessions;
    Server::start("127.0.0.1:0".parse().expect("an address"), options)
        .await
        .expect("the gateway starts")
}

/// One streamed turn: its `x-ccwire-session`, the time to the first body byte, and the answer's
/// text.
async fn turn(
    http: &reqwest::Client,
    server: &Server,
    messages: &[Value],
) -> (String, f64, String) {
    let (kind, ms, answer) = try_turn(http, server, messages).await;
    assert!(!kind.starts_with("HTTP"), "the gateway answered: {kind}");
    (kind, ms, answer)
}

/// [`turn`], with an error status as its kind (`HTTP 429`) instead of a panic.
async fn try_turn(
    http: &reqwest::Client,
    server: &Server,
    messages: &[Value],
) -> (String, f64, String) {
    let body = json!({"model": MODEL, "max_tokens": 256, "stream": true, "messages": messages});
    let start = Instant::now();
    let response = match http
        .post(format!("http://{}/v1/messages", server.addr()))
        .json(&body)
        .send()
        .await
    {
        Ok(response) => response,
        Err(e) => return (format!("HTTP error {e}"), 0.0, String::new()),
    };
    if response.status() != 200 {
        return (
            format!("HTTP {}", response.status().as_u16()),
            0.0,
            String::new(),
        );
    }
    let kind = response
        .headers()
        .get("x-ccwire-session")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mut stream = response.bytes_stream();
    let mut first = None;
    let mut text = String::new();
    while let Some(piece) = stream.next().await {
        let Ok(piece) = piece else {
            return ("HTTP body cut".to_owned(), 0.0, text);
        };
        first.get_or_insert_with(|| start.elapsed().as_secs_f64() * 1000.0);
        text.push_str(&String::from_utf8_lossy(&piece));
    }
    let answer: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|e| e["delta"]["text"].as_str().map(str::to_owned))
        .collect();
    (kind, first.unwrap_or(0.0), answer)
}

/// The share of `later`'s bytes that `earlier` began with, reading a model request as the API
/// caches it: tools, system prompt, then each message.
fn common_prefix_share(earlier: &Value, later: &Value) -> f64 {
    let parts = |call: &Value| -> Vec<String> {
        let mut parts = vec![call["tools"].to_string(), call["system"].to_string()];
        parts.extend(
            call["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .map(Value::to_string),
        );
        parts
    };
    let (a, b) = (parts(earlier), parts(later));
    let total: usize = b.iter().map(String::len).sum();
    let common: usize = a
        .iter()
        .zip(&b)
        .take_while(|(x, y)| x == y)
        .map(|(_, y)| y.len())
        .sum();
    common as f64 / total.max(1) as f64
}

/// The model calls (streamed, not probes) whose messages mention `marker`.
fn calls_with(fake: &FakeAnthropic, marker: &str) -> Vec<Value> {
    fake.model_calls()
        .into_iter()
        .filter(|c| c.body["messages"].to_string().contains(marker))
        .map(|c| c.body)
        .collect()
}

/// `samples` conversations of three turns, the third after hibernation: time to first byte of
/// each kind of turn, and the prefix share of each resumed turn.
async fn first_bytes(
    fake: &FakeAnthropic,
    home: &OfflineHome,
    samples: usize,
    back: Back,
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let state = tempfile::tempdir().expect("a directory");
    let server = gateway(fake, home, state.path(), back, 300, 64).await;
    let http = reqwest::Client::new();
    let (mut new, mut live, mut resumed, mut shares) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..samples {
        let marker = format!("[{back:?}-{i}]");
        let mut messages = vec![json!({"role": "user", "content": format!("Hello {marker}")})];
        let (kind, ms, answer) = turn(&http, &server, &messages).await;
        assert_eq!(kind, "new");
        new.push(ms);
        messages.push(json!({"role": "assistant", "content": answer}));
        messages.push(json!({"role": "user", "content": "And then?"}));
        let (kind, ms, answer) = turn(&http, &server, &messages).await;
        assert_eq!(kind, "continued");
        live.push(ms);
        // Idle past the hibernation delay: the CLI is closed.
        tokio::time::sleep(Duration::from_millis(900)).await;
        messages.push(json!({"role": "assistant", "content": answer}));
        messages.push(json!({"role": "user", "content": "One more thing."}));
        let (kind, ms, _) = turn(&http, &server, &messages).await;
        assert_eq!(
            kind,
            if back == Back::Retold {
                "rebuilt"
            } else {
                "resumed"
            }
        );
        resumed.push(ms);
        let calls = calls_with(fake, &marker);
        let [.., before, after] = calls.as_slice() else {
            panic!("two calls of the conversation");
        };
        shares.push(common_prefix_share(before, after));
    }
    server.shutdown().await;
    (new, live, resumed, shares)
}

/// Bytes under `dir`.
fn size_of(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => size_of(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// `n` conversations, eight at a time, each continued once after the others took its place
/// under `max_sessions` 32.
async fn many(fake: &FakeAnthropic, home: &OfflineHome, n: usize) {
    // The fake model keeps every request it receives (about 50 KiB each); forgotten as the run
    // goes, so the process's RSS is the gateway's.
    fake.clear_requests();
    let state = tempfile::tempdir().expect("a directory");
    let server = gateway(fake, home, state.path(), Back::Store, u64::MAX, 32).await;
    let http = reqwest::Client::new();
    let rss_before = rss_kib().unwrap_or(0);
    let start = Instant::now();
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    let mut histories: Vec<Vec<Value>> = Vec::new();
    // New conversations, then each continued once 64 conversations later (its CLI long gone).
    for wave in 0..n.div_ceil(8) + 8 {
        let mut batch = Vec::new();
        for j in 0..8 {
            let i = wave * 8 + j;
            if i < n {
                batch.push((
                    i,
                    vec![json!({"role": "user", "content": format!("Hello [many-{i}]")})],
                ));
            }
            if let Some(back) = i.checked_sub(64).filter(|b| *b < n) {
                // Continued once: the history is not needed again (freed, so that the
                // process's RSS stays the gateway's).
                let mut messages = std::mem::take(&mut histories[back]);
                messages.push(json!({"role": "user", "content": "Still there?"}));
                batch.push((back, messages));
            }
        }
        if batch.is_empty() {
            break;
        }
        let answers = futures::future::join_all(
            batch
                .iter()
                .map(|(_, messages)| try_turn(&http, &server, messages)),
        )
        .await;
        for ((i, mut messages), (kind, _, answer)) in batch.into_iter().zip(answers) {
            *kinds.entry(kind).or_default() += 1;
            messages.push(json!({"role": "assistant", "content": answer}));
            if i == histories.len() {
                histories.push(messages);
            }
        }
        fake.clear_requests();
        if (wave + 1) % 125 == 0 {
            eprintln!(
                "{} conversations begun, {:.0} s, RSS {:.0} MiB, store {:.1} MiB, {kinds:?}",
                ((wave + 1) * 8).min(n),
                start.elapsed().as_secs_f64(),
                rss_kib().unwrap_or(0) as f64 / 1024.0,
                size_of(&state.path().join("store")) as f64 / 1_048_576.0,
            );
        }
    }
    let took = start.elapsed().as_secs_f64();
    let rss_after = rss_kib().unwrap_or(0);
    let store = size_of(&state.path().join("store"));
    println!("| conversations | turns by kind | took | gateway RSS before / after | store | store per conversation |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| {n} | {kinds:?} | {took:.0} s | {:.0} / {:.0} MiB | {:.1} MiB | {:.1} KiB |",
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0,
        store as f64 / 1_048_576.0,
        store as f64 / 1024.0 / n as f64,
    );
    server.shutdown().await;
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let samples: usize = args.next().map_or(8, |a| a.parse().expect("a number"));
    let conversations: usize = args.next().map_or(200, |a| a.parse().expect("a number"));
    let fake = FakeAnthropic::start(
        Script::new()
            .when(Match::Probe, Reply::text("ok"))
            .when(Match::Any, Reply::text("Hello.")),
    )
    .await;
    let home = OfflineHome::new();
    println!(
        "resume: {samples} conversations per kind, {conversations} over time; zero-delay fake \
         model, CLI {}",
        claude_path().display()
    );
    println!();
    if samples == 0 {
        // Only the conversations over time (with `CCWIRE_CLAUDE=…/fake-claude`, which needs
        // no model, the gateway's own cost of many: its memory and the store's size).
        many(&fake, &home, conversations).await;
        return;
    }
    let (mut new, mut live, mut resumed, mut shares) =
        first_bytes(&fake, &home, samples, Back::Store).await;
    let (_, _, mut written, mut written_shares) =
        first_bytes(&fake, &home, samples, Back::History).await;
    let (_, _, mut rebuilt, mut rebuilt_shares) =
        first_bytes(&fake, &home, samples, Back::Retold).await;
    let p50 = |v: &mut Vec<f64>| percentile(v, 0.5);
    let (new50, live50, resumed50) = (p50(&mut new), p50(&mut live), p50(&mut resumed));
    let (written50, rebuilt50) = (p50(&mut written), p50(&mut rebuilt));
    println!("| time to first byte, p50 | new conversation | live turn (`continued`) | resumed from the store | resumed / new | no store: history written | no store, no tenant dirs: retold |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {samples} each | {new50:.0} ms | {live50:.0} ms | {resumed50:.0} ms | **{:.2}×** | {written50:.0} ms | {rebuilt50:.0} ms |",
        resumed50 / new50
    );
    println!();
    println!(
        "target: resumed ≤ 1.2× new: {}",
        if resumed50 <= 1.2 * new50 {
            "met"
        } else {
            "NOT met"
        }
    );
    println!();
    println!("| the model request after the CLI was gone | share of its bytes the request before began with (p50 / min) |");
    println!("|---|---|");
    println!(
        "| resumed from the store | {:.1}% / {:.1}% |",
        100.0 * p50(&mut shares),
        100.0 * shares.iter().copied().fold(f64::INFINITY, f64::min)
    );
    println!(
        "| no store: the history written as a transcript | {:.1}% / {:.1}% |",
        100.0 * p50(&mut written_shares),
        100.0 * written_shares.iter().copied().fold(f64::INFINITY, f64::min)
    );
    println!(
        "| no store, no tenant directories: retold in one prompt | {:.1}% / {:.1}% |",
        100.0 * p50(&mut rebuilt_shares),
        100.0 * rebuilt_shares.iter().copied().fold(f64::INFINITY, f64::min)
    );
    println!();
    many(&fake, &home, conversations).await;
}

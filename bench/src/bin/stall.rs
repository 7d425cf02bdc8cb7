//! No request stalls another: a live conversation streams turns through one `ccwire serve`
//! while another client sends huge requests, and the live turns' latency is compared with
//! the same conversation's turns while nothing else runs.
//!
//! ```text
//! cargo build --release -p ccwire-host -p ccwire-tests --bins
//! cargo run --release -p ccwire-bench --bin stall [SECONDS] [ROUNDS] [SERVE ARGS…]
//! ```
//!
//! The gateway runs `fake-claude` (from `ccwire-tests`) as its CLI. One client streams turns
//! of a conversation back to back (a new conversation every 16 turns, so its history stays
//! small) and measures each: the time to its first body byte, the whole turn, and the largest
//! gap between two chunks of its stream. Meanwhile a second client, one request after another,
//! sends one of:
//!
//! - nothing (the baseline);
//! - a 32 MiB request: a history of ~32,000 messages of 1 KiB, then a question (a new
//!   conversation each time, rebuilt from its history);
//! - a request with 900,000 tools, each as small as a tool gets (`{"name":"t…","input_schema":{}}`),
//!   31.7 MiB: within the default body limit;
//! - a request with 900,000 small tools that each have a description and a property (104 MiB,
//!   so the gateway runs with `--max-body 256 MiB`).
//!
//! Each case runs `SECONDS` (default 10) in each of `ROUNDS` rounds (default 2), and on until
//! its last big request is answered; the cases are interleaved so that every ratio compares
//! turns of the same run. It prints, per case, the p50/p99/max of the live turns (absolute and
//! as a ratio of the baseline), how much the case adds to the baseline's p99 (the target: at
//! most 50 ms), and how long the big requests took.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccwire_bench::{percentile, raise_fd_limit, serve_fake};
use futures::StreamExt;
use serde_json::{json, Value};

/// The cases, in the order each round runs them.
const CASES: [&str; 4] = [
    "baseline (nothing else)",
    "32 MiB requests",
    "900,000-tool requests (31.7 MiB)",
    "900,000-tool requests (104 MiB)",
];

/// A live turn: the case it ran in, time to first byte, whole turn, largest chunk gap (ms).
#[derive(Clone, Copy)]
struct Turn {
    case: usize,
    first_byte: f64,
    whole: f64,
    gap: f64,
}

/// A big request: its case, how long it took (ms), and its status.
struct Big {
    case: usize,
    ms: f64,
    status: u16,
}

/// A history of user and assistant messages of 1 KiB each, then a question: `bytes` long
/// at most.
fn history_body(bytes: usize) -> Vec<u8> {
    let filler = "The quick brown fox jumps over the lazy dog. ".repeat(23);
    let mut messages = Vec::new();
    let mut size = 256;
    let mut i = 0;
    while size + filler.len() + 64 < bytes {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let message = json!({"role": role, "content": format!("{i}: {filler}")});
        size += message.to_string().len() + 1;
        messages.push(message);
        i += 1;
    }
    if messages.len() % 2 == 1 {
        messages.pop();
    }
    messages.push(json!({"role": "user", "content": "Summarise the conversation."}));
    let body = json!({"model": "default", "max_tokens": 64, "messages": messages});
    let body = serde_json::to_vec(&body).expect("JSON");
    assert!(body.len() <= bytes, "{} > {bytes}", body.len());
    body
}

/// A request with `n` tools and one message: the smallest valid tools, or small tools with
/// a description and a property.
fn tools_body(n: usize, smallest: bool) -> Vec<u8> {
    let mut body = String::from(r#"{"model":"default","max_tokens":64,"tools":["#);
    for i in 0..n {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&if smallest {
            format!(r#"{{"name":"t{i}","input_schema":{{}}}}"#)
        } else {
            format!(
                r#"{{"name":"tool_{i}","description":"Tool {i}.","input_schema":{{"type":"object","properties":{{"x":{{"type":"string"}}}}}}}}"#
            )
        });
    }
    body.push_str(r#"],"messages":[{"role":"user","content":"Hello."}]}"#);
    body.into_bytes()
}

/// Streams turns of a conversation until `stop`, each recorded with the case it ran in
/// (a turn that crossed a change of case is dropped).
async fn live(
    url: String,
    case: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    turns: Arc<Mutex<Vec<Turn>>>,
    continued: Arc<AtomicUsize>,
) {
    let http = reqwest::Client::new();
    let mut messages: Vec<Value> = Vec::new();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        if n.is_multiple_of(16) {
            messages.clear();
        }
        n += 1;
        let text = format!("Turn {n}.");
        messages.push(json!({"role": "user", "content": text}));
        let body = json!({"model": "default", "max_tokens": 64, "stream": true,
                          "messages": messages});
        let before = case.load(Ordering::Relaxed);
        let start = Instant::now();
        let response = http
            .post(&url)
            .json(&body)
            .send()
            .await
            .expect("a response");
        assert_eq!(response.status(), 200, "a live turn failed");
        if response
            .headers()
            .get("x-ccwire-session")
            .is_some_and(|v| v == "continued")
        {
            continued.fetch_add(1, Ordering::Relaxed);
        }
        let mut stream = response.bytes_stream();
        let mut first_byte = None;
        let mut last = start;
        let mut gap = 0f64;
        while let Some(chunk) = stream.next().await {
            chunk.expect("a chunk");
            let now = Instant::now();
            first_byte.get_or_insert(now - start);
            gap = gap.max((now - last).as_secs_f64() * 1000.0);
            last = now;
        }
        let whole = start.elapsed();
        messages.push(json!({"role": "assistant",
                             "content": [{"type": "text", "text": format!("echo: {text}")}]}));
        if case.load(Ordering::Relaxed) == before {
            turns.lock().unwrap().push(Turn {
                case: before,
                first_byte: first_byte.unwrap_or(whole).as_secs_f64() * 1000.0,
                whole: whole.as_secs_f64() * 1000.0,
                gap,
            });
        }
    }
}

/// Sends `body` again and again until `until`; the last one ends when it ends (the case lasts
/// as long as a big request is in the gateway).
async fn big(
    http: &reqwest::Client,
    url: &str,
    body: &[u8],
    until: Instant,
    mine: usize,
    bigs: &Mutex<Vec<Big>>,
) {
    while Instant::now() < until {
        let start = Instant::now();
        let response = http
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_vec())
            .send()
            .await;
        let status = match response {
            Ok(r) => {
                let status = r.status().as_u16();
                let _ = r.bytes().await;
                status
            }
            Err(_) => 0,
        };
        bigs.lock().unwrap().push(Big {
            case: mine,
            ms: start.elapsed().as_secs_f64() * 1000.0,
            status,
        });
    }
}

fn stats(values: &[f64]) -> (f64, f64, f64) {
    let mut values = values.to_vec();
    (
        percentile(&mut values, 0.5),
        percentile(&mut values, 0.99),
        percentile(&mut values, 1.0),
    )
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args
        .next()
        .map_or(10, |a| a.parse().expect("SECONDS is a number"));
    let rounds: usize = args
        .next()
        .map_or(2, |a| a.parse().expect("ROUNDS is a number"));
    // Further arguments go to `ccwire serve` (`--no-store`, …).
    let extra: Vec<String> = args.collect();
    raise_fd_limit();
    let history = history_body(32 * 1024 * 1024);
    let small_tools = tools_body(900_000, true);
    assert!(
        small_tools.len() <= 32 * 1024 * 1024,
        "within the default limit"
    );
    let tools = tools_body(900_000, false);
    let sizes = [0, history.len(), small_tools.len(), tools.len()];
    let home = tempfile::tempdir().expect("a home");
    let max_body = (256 * 1024 * 1024).to_string();
    let (mut gateway, addr) = serve_fake(
        home.path(),
        &[
            "--max-body",
            &max_body,
            "--max-sessions",
            "256",
            "--idle-ttl",
            "2",
        ]
        .into_iter()
        .chain(extra.iter().map(String::as_str))
        .collect::<Vec<_>>(),
    );
    let url = format!("http://{addr}/v1/messages");
    let case = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let turns = Arc::new(Mutex::new(Vec::new()));
    let continued = Arc::new(AtomicUsize::new(0));
    let live = tokio::spawn(live(
        url.clone(),
        case.clone(),
        stop.clone(),
        turns.clone(),
        continued.clone(),
    ));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("a client");
    let bigs = Mutex::new(Vec::new());
    let phase = Duration::from_secs(seconds);
    for _ in 0..rounds {
        for (index, body) in [
            None,
            Some(&history[..]),
            Some(&small_tools[..]),
            Some(&tools[..]),
        ]
        .into_iter()
        .enumerate()
        {
            case.store(index, Ordering::Relaxed);
            let until = Instant::now() + phase;
            match body {
                None => tokio::time::sleep(phase).await,
                Some(body) => big(&http, &url, body, until, index, &bigs).await,
            }
            // The sessions the big requests started expire before the next case.
            case.store(usize::MAX, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_secs(4)).await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = live.await;

    let turns = turns.lock().unwrap().clone();
    let bigs = bigs.into_inner().unwrap();
    println!(
        "stall: live streamed turns through one `ccwire serve` (fake-claude) while another client \
         sends big requests; {rounds} rounds of {seconds} s per case; {} of the turns continued \
         their session",
        continued.load(Ordering::Relaxed)
    );
    println!();
    println!(
        "| case | live turns | turn p50 | turn p99 | turn max | first byte p99 | largest gap p99 | \
         p99 vs baseline | p99 added |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let of = |i: usize| -> Vec<Turn> { turns.iter().copied().filter(|t| t.case == i).collect() };
    let base = of(0);
    let (_, base_p99, _) = stats(&base.iter().map(|t| t.whole).collect::<Vec<_>>());
    let (base_p50, _, base_max) = stats(&base.iter().map(|t| t.whole).collect::<Vec<_>>());
    for (i, name) in CASES.iter().enumerate() {
        let mine = of(i);
        let (p50, p99, max) = stats(&mine.iter().map(|t| t.whole).collect::<Vec<_>>());
        let (_, first_p99, _) = stats(&mine.iter().map(|t| t.first_byte).collect::<Vec<_>>());
        let (_, gap_p99, _) = stats(&mine.iter().map(|t| t.gap).collect::<Vec<_>>());
        println!(
            "| {name} | {} | {p50:.1} ms ({:.2}×) | {p99:.1} ms | {max:.1} ms ({:.1}×) | \
             {first_p99:.1} ms | {gap_p99:.1} ms | {:.2}× | {:+.1} ms |",
            mine.len(),
            p50 / base_p50,
            max / base_max,
            p99 / base_p99,
            p99 - base_p99
        );
    }
    println!();
    println!("| big request | size | sent | status 200 | took p50 | took max |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, name) in CASES.iter().enumerate().skip(1) {
        let mine: Vec<&Big> = bigs.iter().filter(|b| b.case == i).collect();
        let (p50, _, max) = stats(&mine.iter().map(|b| b.ms).collect::<Vec<_>>());
        println!(
            "| {name} | {:.1} MiB | {} | {} | {p50:.0} ms | {max:.0} ms |",
            sizes[i] as f64 / (1024.0 * 1024.0),
            mine.len(),
            mine.iter().filter(|b| b.status == 200).count()
        );
    }
    println!();
    for (i, name) in CASES.iter().enumerate().skip(1) {
        let (_, p99, _) = stats(&of(i).iter().map(|t| t.whole).collect::<Vec<_>>());
        let added = p99 - base_p99;
        println!(
            "target: {name} add ≤ 50 ms to the live turns' p99: {added:+.1} ms, {}",
            if added <= 50.0 { "met" } else { "NOT met" }
        );
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gateway.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = gateway.wait();
}

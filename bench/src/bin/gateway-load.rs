//! A thousand conversations at once through one `ccwire serve`.
//!
//! ```text
//! cargo build --release -p ccwire-host -p ccwire-tests --bins
//! cargo run --release -p ccwire-bench --bin gateway-load [CONVERSATIONS] [SERVE ARGS…]
//! ```
//!
//! Further arguments go to `ccwire serve` (`--sandbox off --no-store`: the gateway alone,
//! without the OS sandbox's processes and the session store's writes).
//!
//! The `ccwire` binary serves on loopback with a light stand-in for the CLI (`fake-claude`
//! from `ccwire-tests`, which answers at once, with partial messages, and calls the client's
//! `lookup` tool when asked), so every millisecond measured is the gateway's: HTTP, parsing,
//! hashing, routing, the engine, the pipes, process scheduling. Three phases, each with every
//! conversation sending one request at once:
//!
//! 1. new conversations: each starts a CLI process;
//! 2. a second turn on each live conversation;
//! 3. a client tool round trip on each: the model's call ends a response, the client's result
//!    continues the held turn.
//!
//! For each phase: requests, errors, p50 / p99 / max latency, and the gateway's resident
//! memory after it.

use std::time::{Duration, Instant};

use ccwire_bench::{children, percentile, raise_fd_limit, serve_fake};

use futures::future::join_all;
use serde_json::{json, Value};

struct Phase {
    latencies: Vec<f64>,
    errors: usize,
    wall: f64,
}

async fn post(http: &reqwest::Client, url: &str, body: &Value) -> (f64, Option<Value>) {
    let start = Instant::now();
    let result = http.post(url).json(body).send().await;
    let answer = match result {
        Ok(response) if response.status() == 200 => response.json::<Value>().await.ok(),
        _ => None,
    };
    (start.elapsed().as_secs_f64() * 1000.0, answer)
}

fn tools() -> Value {
    json!([{"name": "lookup", "description": "Looks a key up.",
            "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}}}])
}

fn body(messages: &[Value]) -> Value {
    json!({"model": "default", "max_tokens": 64, "tools": tools(), "messages": messages})
}

/// Sends one request per conversation at once; each conversation's history grows by the
/// request's last message and the answer.
async fn phase(
    http: &reqwest::Client,
    url: &str,
    histories: &mut [Vec<Value>],
    next: impl Fn(usize) -> Vec<Value>,
) -> Phase {
    let start = Instant::now();
    let requests = histories.iter().enumerate().map(|(i, history)| {
        let mut messages = history.clone();
        messages.extend(next(i));
        async move {
            let (ms, answer) = post(http, url, &body(&messages)).await;
            (messages, ms, answer)
        }
    });
    let results = join_all(requests).await;
    let wall = start.elapsed().as_secs_f64();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for ((messages, ms, answer), history) in results.into_iter().zip(histories.iter_mut()) {
        latencies.push(ms);
        *history = messages;
        match answer {
            Some(answer) => {
                history.push(json!({"role": "assistant", "content": answer["content"]}));
            }
            None => errors += 1,
        }
    }
    latencies.sort_by(f64::total_cmp);
    Phase {
        latencies,
        errors,
        wall,
    }
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(1000, |a| a.parse().expect("CONVERSATIONS is a number"));
    raise_fd_limit();
    let home = tempfile::tempdir().expect("a home");
    let limit = (n + 50).to_string();
    let connections = (2 * n).to_string();
    let extra: Vec<String> = std::env::args().skip(2).collect();
    let mut args = vec![
        "--max-sessions",
        &limit,
        "--max-concurrent",
        &limit,
        "--max-queue",
        &limit,
        "--queue-timeout",
        "600",
        // Every client here is one loopback address.
        "--max-connections-per-ip",
        &connections,
    ];
    args.extend(extra.iter().map(String::as_str));
    let (mut gateway, addr) = serve_fake(home.path(), &args);
    let pid = gateway.id();
    let url = format!("http://{addr}/v1/messages");
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(n)
        .timeout(Duration::from_secs(600))
        .build()
        .expect("a client");
    let rss_kib = |pid: u32| ccwire_bench::process_rss_kib(&pid.to_string()).unwrap_or(0);
    let idle_rss = rss_kib(pid);

    let mut histories: Vec<Vec<Value>> = vec![Vec::new(); n];
    let user = |text: String| vec![json!({"role": "user", "content": text})];
    let new = phase(&http, &url, &mut histories, |i| {
        user(format!("Hello from {i}."))
    })
    .await;
    let clis = children(pid).len();
    let new_rss = rss_kib(pid);
    let again = phase(&http, &url, &mut histories, |i| {
        user(format!("Again from {i}."))
    })
    .await;
    let again_rss = rss_kib(pid);
    let calls = phase(&http, &url, &mut histories, |i| {
        user(format!("lookup: k{i}"))
    })
    .await;
    let results = phase(&http, &url, &mut histories, |i| {
        // The client's result for the call its last response ended with.
        vec![json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": "toolu_1", "content": format!("value {i}")}]})]
    })
    .await;
    let tools_rss = rss_kib(pid);
    let answered = histories
        .iter()
        .filter(|h| {
            h.last()
                .and_then(|m| m["content"][0]["text"].as_str())
                .is_some_and(|t| t.starts_with("done: value "))
        })
        .count();

    println!(
        "gateway-load: {n} conversations at once through one `ccwire serve`, a light stand-in CLI"
    );
    println!();
    println!("| phase | requests | errors | p50 | p99 | max | wall | gateway RSS after |");
    println!("|---|---|---|---|---|---|---|---|");
    let row = |name: &str, p: &Phase, rss: u64| {
        println!(
            "| {name} | {} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.2} s | {:.1} MiB |",
            p.latencies.len(),
            p.errors,
            percentile(&mut p.latencies.clone(), 0.5),
            percentile(&mut p.latencies.clone(), 0.99),
            percentile(&mut p.latencies.clone(), 1.0),
            p.wall,
            rss as f64 / 1024.0
        );
    };
    row("new conversations (a CLI each)", &new, new_rss);
    row("second turn, live", &again, again_rss);
    row("tool call (response ends held)", &calls, tools_rss);
    row("tool result (held turn goes on)", &results, tools_rss);
    println!();
    println!(
        "CLI processes after the first phase: {clis}; tool round trips answered in full: {answered} of {n}; \
         gateway RSS idle {:.1} MiB",
        idle_rss as f64 / 1024.0
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = gateway.wait();
}

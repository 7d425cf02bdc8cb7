//! What `ccwire serve` adds to a turn, and what a live session saves over a fresh process.
//!
//! `cargo run --release -p ccwire-bench --bin gateway-latency [TURNS]`
//!
//! The gateway runs in this process in front of the real Claude Code CLI, which talks to a
//! zero-delay fake model (also in this process). Every line the CLI writes and every line
//! written to it is timestamped where the gateway reads or writes the pipe (the `ccwire::wire`
//! trace events), so each turn splits into:
//!
//! - the CLI's own time: from the prompt written to its stdin to its first `message_start`
//!   stream event (first byte) and to its `result` line (last byte);
//! - the client's time: from sending the HTTP request to the first and the last byte of the
//!   response body;
//! - added = client's time − CLI's time: parsing, routing, hashing, encoding and HTTP, both
//!   ways.
//!
//! Then the time to first byte of a turn on a live session against a new conversation, which
//! spawns and initializes a CLI process first; then what a session store adds to a turn (a
//! turn's response ends once the store keeps its record): the same turns with a directory
//! store and with a Redis server, and the time to the 503 while Redis is down.

// The allocator of the `ccwire` binary, so the gateway here runs as it does there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use std::sync::Arc;

use ccwire_host::serve::{GatewayOptions, Server};
use ccwire_host::store::{ConversationStore, DirStore, RedisStore};
use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{FakeAnthropic, Match, RedisServer, Reply, Script};
use futures::StreamExt;
use serde_json::{json, Value};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use ccwire_bench::{percentile, WireLog};

/// One turn as the client and as the CLI saw it, in microseconds.
#[derive(Debug, Clone, Copy)]
struct Turn {
    client_first: f64,
    client_last: f64,
    cli_first: f64,
    cli_last: f64,
    /// From sending the request to the prompt written to the CLI.
    inbound: f64,
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn line_type(line: &str) -> (String, String) {
    let value: Value = serde_json::from_str(line).unwrap_or(Value::Null);
    let kind = value["type"].as_str().unwrap_or_default().to_owned();
    let event = value["event"]["type"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (kind, event)
}

/// Sends one request and times it, then reads the CLI's times for the same turn off the log.
async fn turn(http: &reqwest::Client, url: &str, body: &Value, log: &WireLog) -> (Turn, String) {
    log.take();
    // The client's own work (serializing its request) is not the gateway's.
    let request = http.post(url).json(body).build().expect("a request");
    let sent = Instant::now();
    let response = http.execute(request).await.expect("a response");
    assert_eq!(response.status(), 200, "the gateway answered");
    let mut stream = response.bytes_stream();
    let mut first = None;
    let mut bytes = Vec::new();
    while let Some(piece) = stream.next().await {
        let piece = piece.expect("a body");
        first.get_or_insert_with(Instant::now);
        bytes.extend_from_slice(&piece);
    }
    let last = Instant::now();
    let first = first.expect("a body");
    // The lines before the last byte; later ones (the CLI going idle) are not this turn's.
    let lines: Vec<(Instant, String)> =
        log.take().into_iter().filter(|(t, _)| *t <= last).collect();
    let prompt = lines
        .iter()
        .find(|(_, l)| l.starts_with("> ") && line_type(&l[2..]).0 == "user")
        .map(|(t, _)| *t)
        .expect("the prompt was written to the CLI");
    let cli_first = lines
        .iter()
        .find(|(_, l)| {
            l.starts_with("< ")
                && line_type(&l[2..]) == ("stream_event".into(), "message_start".into())
        })
        .map(|(t, _)| *t)
        .expect("the CLI streamed a message");
    let cli_last = lines
        .iter()
        .find(|(_, l)| l.starts_with("< ") && line_type(&l[2..]).0 == "result")
        .map(|(t, _)| *t)
        .expect("the CLI ended the turn");
    let turn = Turn {
        client_first: micros(first - sent),
        client_last: micros(last - sent),
        cli_first: micros(cli_first - prompt),
        cli_last: micros(cli_last - prompt),
        inbound: micros(prompt - sent),
    };
    (turn, String::from_utf8_lossy(&bytes).into_owned())
}

fn report(name: &str, turns: &[Turn]) -> (f64, f64) {
    let mut add_first: Vec<f64> = turns.iter().map(|t| t.client_first - t.cli_first).collect();
    let mut add_last: Vec<f64> = turns.iter().map(|t| t.client_last - t.cli_last).collect();
    let mut cli_first: Vec<f64> = turns.iter().map(|t| t.cli_first).collect();
    let mut cli_last: Vec<f64> = turns.iter().map(|t| t.cli_last).collect();
    let mut inbound: Vec<f64> = turns.iter().map(|t| t.inbound).collect();
    let half = turns.len() / 2;
    let mut early: Vec<f64> = turns[..half].iter().map(|t| t.inbound).collect();
    let mut late: Vec<f64> = turns[half..].iter().map(|t| t.inbound).collect();
    let ms = |us: f64| us / 1000.0;
    let p50_first = percentile(&mut add_first, 0.5);
    let p50_last = percentile(&mut add_last, 0.5);
    println!(
        "| {name} | {} | {:.1} ms / {:.1} ms | {:.2} ms / {:.2} ms / {:.2} ms | {:.2} ms / {:.2} ms / {:.2} ms | {:.2} ms ({:.2} / {:.2}) |",
        turns.len(),
        ms(percentile(&mut cli_first, 0.5)),
        ms(percentile(&mut cli_last, 0.5)),
        ms(p50_first),
        ms(percentile(&mut add_first, 0.9)),
        ms(percentile(&mut add_first, 1.0)),
        ms(p50_last),
        ms(percentile(&mut add_last, 0.9)),
        ms(percentile(&mut add_last, 1.0)),
        ms(percentile(&mut inbound, 0.5)),
        ms(percentile(&mut early, 0.5)),
        ms(percentile(&mut late, 0.5)),
    );
    (p50_first, p50_last)
}

fn request(api: &str, messages: &[Value]) -> Value {
    match api {
        "anthropic" => json!({
            "model": "claude-sonnet-4-5-20250929", "max_tokens": 1024, "stream": true,
            "messages": messages,
        }),
        _ => json!({
            "model": "claude-sonnet-4-5-20250929", "stream": true,
            "stream_options": {"include_usage": true}, "messages": messages,
        }),
    }
}

/// The answer's text out of an SSE body of either API.
fn streamed_text(body: &str) -> String {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|e| {
            e["delta"]["text"]
                .as_str()
                .or(e["choices"][0]["delta"]["content"].as_str())
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::main]
async fn main() {
    let turns: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("TURNS is a number"))
        .unwrap_or(40);
    let log = WireLog::default();
    tracing_subscriber::registry()
        .with(
            log.clone()
                .with_filter(Targets::new().with_target("ccwire::wire", tracing::Level::TRACE)),
        )
        .init();
    let answer = "A short answer from a model that wastes no time. ".repeat(4);
    let fake = FakeAnthropic::start(
        Script::new()
            .when(Match::Probe, Reply::text("ok"))
            .when(Match::Any, Reply::text(answer.trim_end())),
    )
    .await;
    let home = OfflineHome::new();
    let server = gateway(&home, &fake, None).await;
    let http = reqwest::Client::new();
    println!(
        "gateway-latency: {turns} warm turns per API, zero-delay fake model, CLI {}",
        claude_path().display()
    );
    println!();
    println!("| API (streamed) | turns | CLI's own first / last byte (p50) | added to first byte p50 / p90 / max | added to last byte p50 / p90 / max | request to prompt p50 (first / second half) |");
    println!("|---|---|---|---|---|---|");

    let mut warm_first = Vec::new();
    let mut added = Vec::new();
    for (api, path) in [
        ("anthropic", "/v1/messages"),
        ("openai", "/v1/chat/completions"),
    ] {
        let url = format!("http://{}{path}", server.addr());
        let mut messages =
            vec![json!({"role": "user", "content": format!("Hello over {api}, turn 0.")})];
        // The first turn spawns the process; it is not a warm turn.
        let (_, mut body) = turn(&http, &url, &request(api, &messages), &log).await;
        let mut measured = Vec::new();
        for i in 1..=turns {
            messages.push(json!({"role": "assistant", "content": streamed_text(&body)}));
            messages.push(json!({"role": "user", "content": format!("And turn {i}.")}));
            let (t, next) = turn(&http, &url, &request(api, &messages), &log).await;
            warm_first.push(t.client_first);
            measured.push(t);
            body = next;
        }
        added.push(report(api, &measured));
    }
    println!();

    // Cold: every request a new conversation, so a new CLI process.
    let url = format!("http://{}/v1/messages", server.addr());
    let mut cold_first = Vec::new();
    for i in 0..8 {
        let messages =
            [json!({"role": "user", "content": format!("A new conversation, number {i}.")})];
        let (t, _) = turn(&http, &url, &request("anthropic", &messages), &log).await;
        cold_first.push(t.client_first);
    }
    let warm = percentile(&mut warm_first, 0.5);
    let cold = percentile(&mut cold_first, 0.5);
    println!("| time to first byte (p50) | live session | fresh process | fresh / live |");
    println!("|---|---|---|---|");
    println!(
        "| {} warm turns, {} new conversations | {:.1} ms | {:.1} ms | **{:.1}×** |",
        warm_first.len(),
        cold_first.len(),
        warm / 1000.0,
        cold / 1000.0,
        cold / warm
    );
    println!();
    let worst = added.iter().flat_map(|(a, b)| [*a, *b]).fold(0.0, f64::max);
    println!(
        "targets: added p50 ≤ 1 ms: {} (worst p50 {:.2} ms); second turn ≥ 10× faster to first byte: {} ({:.1}×)",
        if worst <= 1000.0 { "met" } else { "NOT met" },
        worst / 1000.0,
        if cold / warm >= 10.0 { "met" } else { "NOT met" },
        cold / warm
    );
    server.shutdown().await;

    stores(&home, &fake, &http, &log, turns).await;
}

/// A gateway in this process in front of the real CLI, with `store`.
async fn gateway(
    home: &OfflineHome,
    fake: &FakeAnthropic,
    store: Option<Arc<dyn ConversationStore>>,
) -> Server {
    Server::start(
        "127.0.0.1:0".parse().expect("an address"),
        GatewayOptions {
            claude: Some(claude_path()),
            cwd: Some(home.workdir()),
            env: home.env(&fake.base_url()),
            env_remove: inherited_to_remove(),
            store,
            ..GatewayOptions::default()
        },
    )
    .await
    .expect("the gateway starts")
}

/// What a session store adds to a turn: the same warm turns without one, with a directory
/// store and with Redis (the end of each response waits for its record); then the time to the
/// 503 of a turn while Redis is down.
async fn stores(
    home: &OfflineHome,
    fake: &FakeAnthropic,
    http: &reqwest::Client,
    log: &WireLog,
    turns: usize,
) {
    let ttl = Duration::from_secs(3600);
    let dir = tempfile::tempdir().expect("a directory");
    let mut redis = RedisServer::start();
    let redis_store = RedisStore::connect(&redis.url(), ttl)
        .await
        .expect("Redis answers");
    println!();
    println!("| session store (Anthropic, streamed) | turns | CLI's own last byte p50 | added to last byte p50 / p90 / max | store's part of p50 |");
    println!("|---|---|---|---|---|");
    let mut none = 0.0;
    let stores: [(&str, Option<Arc<dyn ConversationStore>>); 3] = [
        ("none", None),
        ("directory", Some(Arc::new(DirStore::new(dir.path(), ttl)))),
        ("Redis", Some(Arc::new(redis_store))),
    ];
    let mut redis_gateway = None;
    for (name, store) in stores {
        let server = gateway(home, fake, store).await;
        let url = format!("http://{}/v1/messages", server.addr());
        let mut messages = vec![json!({"role": "user", "content": format!("Kept in {name}.")})];
        let (_, mut body) = turn(http, &url, &request("anthropic", &messages), log).await;
        let mut added = Vec::new();
        let mut cli = Vec::new();
        for i in 1..=turns {
            messages.push(json!({"role": "assistant", "content": streamed_text(&body)}));
            messages.push(json!({"role": "user", "content": format!("And turn {i}.")}));
            let (t, next) = turn(http, &url, &request("anthropic", &messages), log).await;
            added.push(t.client_last - t.cli_last);
            cli.push(t.cli_last);
            body = next;
        }
        let p50 = percentile(&mut added, 0.5);
        if name == "none" {
            none = p50;
        }
        println!(
            "| {name} | {turns} | {:.1} ms | {:.2} / {:.2} / {:.2} ms | {:+.2} ms |",
            percentile(&mut cli, 0.5) / 1000.0,
            p50 / 1000.0,
            percentile(&mut added, 0.9) / 1000.0,
            percentile(&mut added, 1.0) / 1000.0,
            (p50 - none) / 1000.0,
        );
        if name == "Redis" {
            redis_gateway = Some((server, messages, body));
        } else {
            server.shutdown().await;
        }
    }

    // Redis down: the live CLI answers, the turn cannot be kept, the client gets a 503.
    let (server, mut messages, body) = redis_gateway.expect("the Redis gateway");
    redis.stop();
    let url = format!("http://{}/v1/messages", server.addr());
    messages.push(json!({"role": "assistant", "content": streamed_text(&body)}));
    messages.push(json!({"role": "user", "content": "Redis is down."}));
    let mut plain = request("anthropic", &messages);
    plain["stream"] = json!(false);
    let mut to_503 = Vec::new();
    for _ in 0..8 {
        let sent = Instant::now();
        let response = http
            .post(&url)
            .json(&plain)
            .send()
            .await
            .expect("an answer");
        assert_eq!(response.status(), 503, "a turn that cannot be kept");
        to_503.push(micros(sent.elapsed()));
    }
    println!();
    println!(
        "Redis down: {} turns each answered 503, p50 {:.1} ms / max {:.1} ms from request to the 503 (the first: the live CLI's turn, then not kept; the others: the lookup failing)",
        to_503.len(),
        percentile(&mut to_503.clone(), 0.5) / 1000.0,
        percentile(&mut to_503, 1.0) / 1000.0,
    );
    server.shutdown().await;
}

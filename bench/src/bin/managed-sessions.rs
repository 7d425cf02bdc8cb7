//! A Managed Agents session's turn against the same turn through the Messages API, and how
//! many events a session's streams carry.
//!
//! `cargo run --release -p ccwire-bench --bin managed-sessions [TURNS] [STREAMS]`
//!
//! `ccwire serve`'s server runs in this process with a session store, in front of the real
//! Claude Code CLI and a zero-delay fake model (also in this process):
//!
//! 1. **A turn**, `TURNS` times each (default 20), on a live CLI: a Messages API request
//!    (`POST /v1/messages`, the history in the request) from send to the whole answer, against
//!    a session's (`POST /v1/sessions/{id}/events` with a `user.message`) from send to the
//!    `session.status_idle` on the session's event stream, and to its first event there.
//! 2. **Streams**: `STREAMS` streams open on one session (default 50) while it runs `TURNS`
//!    turns: the events delivered to all of them per second.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ccwire_bench::percentile;
use ccwire_host::serve::{GatewayOptions, Server};
use ccwire_host::store::{ConversationStore, DirStore};
use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{FakeAnthropic, Match, Reply, Script};
use futures::StreamExt;
use serde_json::{json, Value};

const MODEL: &str = "claude-sonnet-4-5-20250929";

/// The frames of an SSE stream, each as it arrives.
fn frames(response: reqwest::Response) -> tokio::sync::mpsc::UnboundedReceiver<(Instant, String)> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = response.bytes_stream();
        let mut text = String::new();
        while let Some(Ok(bytes)) = stream.next().await {
            text.push_str(&String::from_utf8_lossy(&bytes));
            while let Some(at) = text.find("\n\n") {
                let frame: String = text.drain(..at + 2).collect();
                if tx.send((Instant::now(), frame)).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// The event a frame names (`event: NAME`, after its `id:` line), if it names one.
fn event(frame: &str) -> Option<&str> {
    frame.lines().find_map(|l| l.strip_prefix("event: "))
}

async fn post(http: &reqwest::Client, url: &str, body: Value) -> Value {
    http.post(url)
        .json(&body)
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let turns: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let streams: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50);
    let fake = FakeAnthropic::start(
        Script::new()
            .when(Match::Probe, Reply::text("ok"))
            .when(Match::Any, Reply::Echo),
    )
    .await;
    let home = OfflineHome::new();
    let state = tempfile::tempdir().expect("a dir");
    let store: Arc<dyn ConversationStore> = Arc::new(DirStore::new(
        state.path().join("store"),
        Duration::from_secs(86_400),
    ));
    let options = GatewayOptions {
        claude: Some(claude_path()),
        env: home.env(&fake.base_url()),
        env_remove: inherited_to_remove(),
        state_dir: Some(state.path().to_owned()),
        sandbox: ccwire_host::sandbox::SandboxMode::Off,
        store: Some(store),
        ..GatewayOptions::default()
    };
    let server = Server::start("127.0.0.1:0".parse().expect("an address"), options)
        .await
        .expect("the gateway starts");
    let base = format!("http://{}", server.addr());
    let http = reqwest::Client::new();
    println!(
        "managed-sessions: {turns} turns each, {streams} streams; real CLI, zero-delay fake model"
    );
    println!();

    // The Messages API: one conversation, a turn at a time on its live CLI.
    let mut messages = vec![json!({"role": "user", "content": "warm up"})];
    let mut api = Vec::new();
    for i in 0..=turns {
        let start = Instant::now();
        let answer = post(
            &http,
            &format!("{base}/v1/messages"),
            json!({"model": MODEL, "max_tokens": 256, "messages": messages}),
        )
        .await;
        if i > 0 {
            api.push(ms(start.elapsed()));
        }
        messages.push(json!({"role": "assistant", "content": answer["content"]}));
        messages.push(json!({"role": "user", "content": format!("turn {i}")}));
    }

    // A session: the same turns, on its stream.
    let agent = post(
        &http,
        &format!("{base}/v1/agents"),
        json!({"name": "bench", "model": MODEL}),
    )
    .await;
    let env = post(
        &http,
        &format!("{base}/v1/environments"),
        json!({"name": "bench"}),
    )
    .await;
    let session = post(
        &http,
        &format!("{base}/v1/sessions"),
        json!({"agent": agent["id"], "environment_id": env["id"]}),
    )
    .await;
    let id = session["id"].as_str().expect("a session").to_owned();
    let events = format!("{base}/v1/sessions/{id}/events");
    let stream = http
        .get(format!("{events}/stream"))
        .send()
        .await
        .expect("a stream");
    let mut seen = frames(stream);
    let say = |text: String| json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": text}]}]});
    let (mut first, mut idle) = (Vec::new(), Vec::new());
    for i in 0..=turns {
        let start = Instant::now();
        post(&http, &events, say(format!("turn {i}"))).await;
        let mut first_at = None;
        loop {
            let (at, frame) = seen.recv().await.expect("the stream goes on");
            let Some(name) = event(&frame).filter(|e| !e.starts_with("user.")) else {
                continue;
            };
            first_at.get_or_insert(at);
            if name == "session.status_idle" {
                if i > 0 {
                    first.push(ms(first_at.unwrap_or(at) - start));
                    idle.push(ms(at - start));
                }
                break;
            }
        }
    }
    let (api50, idle50) = (percentile(&mut api, 0.5), percentile(&mut idle, 0.5));
    println!("| a turn on a live CLI, p50 ({turns} each) | Messages API, whole answer | session: first event on its stream | session: `session.status_idle` | session / Messages |");
    println!("|---|---|---|---|---|");
    println!(
        "| zero-delay fake model | {api50:.1} ms | {:.1} ms | {idle50:.1} ms | **{:.2}×** |",
        percentile(&mut first, 0.5),
        idle50 / api50
    );
    println!();
    println!(
        "target: a session's turn ≤ 1.1× the Messages API's: {}",
        if idle50 <= 1.1 * api50 {
            "met"
        } else {
            "NOT met"
        }
    );
    println!();

    // Many streams on one session.
    let mut open = Vec::new();
    for _ in 0..streams {
        let stream = http
            .get(format!("{events}/stream"))
            .send()
            .await
            .expect("a stream");
        open.push(frames(stream));
    }
    let start = Instant::now();
    for i in 0..turns {
        post(&http, &events, say(format!("fan {i}"))).await;
        loop {
            let (_, frame) = seen.recv().await.expect("the stream goes on");
            if event(&frame) == Some("session.status_idle") {
                break;
            }
        }
    }
    // Every stream has every event (the last one's idle included).
    let mut delivered = 0usize;
    for rx in &mut open {
        let mut idles = 0;
        while idles < turns {
            let (_, frame) = rx.recv().await.expect("a stream goes on");
            let name = event(&frame);
            if name.is_some() {
                delivered += 1;
            }
            if name == Some("session.status_idle") {
                idles += 1;
            }
        }
    }
    let took = start.elapsed().as_secs_f64();
    println!("| streams on one session | turns | events delivered | took | events per second, all streams |");
    println!("|---|---|---|---|---|");
    println!(
        "| {streams} | {turns} | {delivered} | {took:.2} s | **{:.0}** |",
        delivered as f64 / took
    );
    drop(open);
    server.shutdown().await;
}

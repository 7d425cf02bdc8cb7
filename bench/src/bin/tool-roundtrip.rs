//! A client tool round trip through `ccwire serve`, beside the same two model turns on a CLI
//! driven directly.
//!
//! `cargo run --release -p ccwire-bench --bin tool-roundtrip [ROUNDS]`
//!
//! The model (a zero-delay fake in this process) calls the client's `lookup` tool, then answers
//! with text once it has the result. Each round, on one live conversation per API:
//!
//! - **through the gateway**: request 1 (the user's question) → a response that ends with the
//!   tool call, held in the CLI → request 2 with the client's result → the final answer. The
//!   time runs from request 1 sent to the last byte of response 2, the client's part (reading
//!   the call, building the next request) included, as an HTTP client lives it.
//! - **the CLI driven directly**: the same question to a live CLI through ccwire's Rust
//!   `Client`, with `lookup` as an in-process tool that answers at once; from the prompt sent
//!   to the end of the turn.
//!
//! Rounds alternate between the four (direct, Anthropic, Chat Completions, Responses) so every
//! figure sees the same machine. The gateway runs in this process with the `ccwire` binary's
//! allocator, in front of the real Claude Code CLI.

// The allocator of the `ccwire` binary, so the gateway here runs as it does there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use ccwire_core::McpCallResult;
use ccwire_host::client::Tool;
use ccwire_host::serve::{GatewayOptions, Server};
use ccwire_host::{Client, ClientOptions};
use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{FakeAnthropic, Match, Reply, Script};
use serde_json::{json, Value};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use ccwire_bench::{percentile, WireLog};

/// Where a gateway round's time went, in microseconds: the CLI's own time from the prompt to
/// its result (its wait for the client's result included), and that wait alone — from the
/// CLI's `tools/call` to the answer written to it.
#[derive(Default, Clone, Copy)]
struct Split {
    cli: f64,
    held: f64,
}

fn split(lines: &[(Instant, String)]) -> Option<Split> {
    let find = |dir: &str, needle: &str| {
        lines
            .iter()
            .find(|(_, l)| l.starts_with(dir) && l.contains(needle))
            .map(|(t, _)| *t)
    };
    let prompt = find("> ", r#""type":"user""#)?;
    let call = find("< ", r#""tools/call""#)?;
    let answer = lines
        .iter()
        .find(|(t, l)| *t >= call && l.starts_with("> ") && l.contains("mcp_response"))
        .map(|(t, _)| *t)?;
    let result = find("< ", r#""type":"result""#)?;
    Some(Split {
        cli: micros(result - prompt),
        held: micros(answer - call),
    })
}

const ANSWER: &str = "The lookup says the record is fine.";

fn schema() -> Value {
    json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]})
}

/// One conversation through one of the gateway's APIs.
struct Conversation {
    api: &'static str,
    path: &'static str,
    /// Anthropic / Chat Completions messages, or Responses input items.
    history: Vec<Value>,
}

impl Conversation {
    fn new(api: &'static str) -> Conversation {
        let path = match api {
            "anthropic" => "/v1/messages",
            "openai" => "/v1/chat/completions",
            _ => "/v1/responses",
        };
        Conversation {
            api,
            path,
            history: Vec::new(),
        }
    }

    fn ask(&mut self, text: &str) {
        self.history.push(match self.api {
            "responses" => json!({"type": "message", "role": "user", "content": text}),
            _ => json!({"role": "user", "content": text}),
        });
    }

    fn body(&self) -> Value {
        match self.api {
            "anthropic" => json!({
                "model": "claude-sonnet-4-5-20250929", "max_tokens": 1024,
                "tools": [{"name": "lookup", "description": "Looks a record up.", "input_schema": schema()}],
                "messages": self.history,
            }),
            "openai" => json!({
                "model": "claude-sonnet-4-5-20250929",
                "tools": [{"type": "function", "function": {"name": "lookup",
                    "description": "Looks a record up.", "parameters": schema()}}],
                "messages": self.history,
            }),
            _ => json!({
                "model": "claude-sonnet-4-5-20250929", "store": false,
                "tools": [{"type": "function", "name": "lookup", "description": "Looks a record up.",
                           "parameters": schema()}],
                "input": self.history,
            }),
        }
    }

    /// Adds a response to the history; with `results`, the client's result for each of its
    /// tool calls. Returns how many tool calls it had.
    fn answered(&mut self, response: &Value) -> usize {
        match self.api {
            "anthropic" => {
                let content = response["content"].clone();
                let ids: Vec<Value> = content
                    .as_array()
                    .expect("content")
                    .iter()
                    .filter(|b| b["type"] == "tool_use")
                    .map(|b| b["id"].clone())
                    .collect();
                self.history
                    .push(json!({"role": "assistant", "content": content}));
                if !ids.is_empty() {
                    let results: Vec<Value> = ids
                        .iter()
                        .map(|id| json!({"type": "tool_result", "tool_use_id": id, "content": "fine"}))
                        .collect();
                    self.history
                        .push(json!({"role": "user", "content": results}));
                }
                ids.len()
            }
            "openai" => {
                let message = response["choices"][0]["message"].clone();
                let ids: Vec<Value> = message["tool_calls"]
                    .as_array()
                    .map(|calls| calls.iter().map(|c| c["id"].clone()).collect())
                    .unwrap_or_default();
                self.history.push(message);
                for id in &ids {
                    self.history
                        .push(json!({"role": "tool", "tool_call_id": id, "content": "fine"}));
                }
                ids.len()
            }
            _ => {
                let output = response["output"].as_array().expect("output").clone();
                let mut calls = 0;
                for item in output {
                    let call = (item["type"] == "function_call").then(|| item["call_id"].clone());
                    self.history.push(item);
                    if let Some(id) = call {
                        calls += 1;
                        self.history.push(json!({"type": "function_call_output",
                            "call_id": id, "output": "fine"}));
                    }
                }
                calls
            }
        }
    }
}

/// One request; the response body, parsed.
async fn post(http: &reqwest::Client, url: &str, body: &Value) -> Value {
    let request = http.post(url).json(body).build().expect("a request");
    let response = http.execute(request).await.expect("a response");
    assert_eq!(response.status(), 200, "the gateway answered");
    response.json().await.expect("a JSON body")
}

/// A tool round trip through the gateway, in microseconds.
async fn gateway_round(
    http: &reqwest::Client,
    base: &str,
    conversation: &mut Conversation,
    round: usize,
) -> f64 {
    let url = format!("{base}{}", conversation.path);
    conversation.ask(&format!("round trip {round}: look the record up."));
    let start = Instant::now();
    let first = post(http, &url, &conversation.body()).await;
    let calls = conversation.answered(&first);
    let second = post(http, &url, &conversation.body()).await;
    let elapsed = start.elapsed();
    assert_eq!(calls, 1, "the model called the tool");
    assert_eq!(conversation.answered(&second), 0, "the model answered");
    micros(elapsed)
}

/// The same two model turns on a CLI driven directly, in microseconds.
async fn direct_round(client: &mut Client, round: usize) -> f64 {
    let start = Instant::now();
    let turn = client
        .query(&format!("round trip {round}: look the record up."))
        .await
        .expect("a turn");
    let chunks = turn.collect().await.expect("the turn ends");
    let elapsed = start.elapsed();
    let answered = chunks.iter().any(|c| {
        matches!(c, ccwire_core::Chunk::TurnComplete { result: Some(text), .. } if text == ANSWER)
    });
    assert!(answered, "the model answered after the tool");
    micros(elapsed)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("ROUNDS is a number"))
        .unwrap_or(30);
    let log = WireLog::default();
    tracing_subscriber::registry()
        .with(
            log.clone()
                .with_filter(Targets::new().with_target("ccwire::wire", tracing::Level::TRACE)),
        )
        .init();
    let fake = FakeAnthropic::start(
        Script::new()
            .when(Match::Probe, Reply::text("ok"))
            .on_tool_result(Reply::text(ANSWER))
            .on_prompt(
                "round trip",
                Reply::tool("mcp__client__lookup", json!({"key": "r"})),
            )
            .when(Match::Any, Reply::text("Ready.")),
    )
    .await;
    let home = OfflineHome::new();
    let server = Server::start(
        "127.0.0.1:0".parse().expect("an address"),
        GatewayOptions {
            claude: Some(claude_path()),
            cwd: Some(home.workdir()),
            env: home.env(&fake.base_url()),
            env_remove: inherited_to_remove(),
            ..GatewayOptions::default()
        },
    )
    .await
    .expect("the gateway starts");
    let base = format!("http://{}", server.addr());
    let http = reqwest::Client::new();

    // The CLI as the gateway starts it: the same model, the tool with the same annotation.
    let mut lookup = Tool::new("lookup", "Looks a record up.", schema(), |_| async {
        McpCallResult::text("fine")
    });
    lookup.definition.annotations = Some(json!({"readOnlyHint": true}));
    let mut options = ClientOptions::default().tool_server("client", vec![lookup]);
    options.claude.claude = Some(claude_path());
    options.claude.args.model = Some("claude-sonnet-4-5-20250929".to_owned());
    options.claude.cwd = Some(home.workdir());
    options.claude.env = home
        .env(&fake.base_url())
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    options.claude.env_remove = inherited_to_remove().into_iter().map(Into::into).collect();
    // The MCP server as the gateway declares its own (docs/HOLD.md, "What ccwire does").
    let config = json!({"alwaysLoad": true, "disableAutoBackground": true});
    options.claude.args.sdk_mcp_servers = vec![(
        "client".to_owned(),
        config.as_object().expect("an object").clone(),
    )];
    options.claude.args.allowed_tools = vec!["mcp__client".into()];
    options.claude.args.tools = Some(Vec::new());
    options.claude.args.include_partial_messages = true;
    let mut client = Client::connect(options).await.expect("the CLI starts");

    // Warm every path up: the first turn of each spawns its process.
    let mut conversations: Vec<Conversation> = ["anthropic", "openai", "responses"]
        .into_iter()
        .map(Conversation::new)
        .collect();
    for conversation in &mut conversations {
        gateway_round(&http, &base, conversation, 0).await;
    }
    direct_round(&mut client, 0).await;

    let mut direct = Vec::new();
    let mut through: Vec<Vec<f64>> = vec![Vec::new(); conversations.len()];
    let mut splits: Vec<Vec<Split>> = vec![Vec::new(); conversations.len()];
    let mut direct_cli = Vec::new();
    for round in 1..=rounds {
        log.take();
        direct.push(direct_round(&mut client, round).await);
        if let Some(s) = split(&log.take()) {
            direct_cli.push(s.cli);
        }
        for (i, conversation) in conversations.iter_mut().enumerate() {
            through[i].push(gateway_round(&http, &base, conversation, round).await);
            if let Some(s) = split(&log.take()) {
                splits[i].push(s);
            }
        }
    }
    println!(
        "tool-roundtrip: {rounds} rounds per path, zero-delay fake model, CLI {}",
        claude_path().display()
    );
    println!();
    println!("| path | round trip p50 | p90 | max | p50 / direct p50 | CLI prompt → result p50 | CLI waiting for the client's result p50 |");
    println!("|---|---|---|---|---|---|---|");
    let direct_p50 = percentile(&mut direct, 0.5);
    let ms = |us: f64| us / 1000.0;
    let p50_of = |values: &[f64]| {
        if values.is_empty() {
            "–".to_owned()
        } else {
            format!("{:.1} ms", ms(percentile(&mut values.to_vec(), 0.5)))
        }
    };
    println!(
        "| CLI driven directly (Rust `Client`) | {:.1} ms | {:.1} ms | {:.1} ms | 1.00 | {} | – |",
        ms(direct_p50),
        ms(percentile(&mut direct, 0.9)),
        ms(percentile(&mut direct, 1.0)),
        p50_of(&direct_cli),
    );
    let mut worst: f64 = 0.0;
    for ((conversation, times), split) in conversations.iter().zip(&through).zip(&splits) {
        let mut times = times.clone();
        let p50 = percentile(&mut times, 0.5);
        worst = worst.max(p50 / direct_p50);
        let cli: Vec<f64> = split.iter().map(|s| s.cli).collect();
        let held: Vec<f64> = split.iter().map(|s| s.held).collect();
        println!(
            "| gateway, {} | {:.1} ms | {:.1} ms | {:.1} ms | **{:.2}** | {} | {} |",
            conversation.path,
            ms(p50),
            ms(percentile(&mut times, 0.9)),
            ms(percentile(&mut times, 1.0)),
            p50 / direct_p50,
            p50_of(&cli),
            p50_of(&held),
        );
    }
    println!();
    println!(
        "target: a tool round trip through the gateway ≤ 1.1× the CLI driven directly: {} (worst {:.2}×)",
        if worst <= 1.1 { "met" } else { "NOT met" },
        worst
    );
    client.close().await;
    server.shutdown().await;
}

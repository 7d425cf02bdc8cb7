//! Ten new conversations at once through `ccwire serve`: with a warm pool, without one, and
//! beside ten CLIs spawned ahead answering at once.
//!
//! `cargo run --release -p ccwire-bench --bin pool-start [CONVERSATIONS] [RUNS]`
//!
//! Each figure is the time from sending every first message at once to the last complete
//! answer, with a zero-delay fake model (in this process) in front of the real Claude Code CLI:
//!
//! - **CLIs spawned ahead**: that many CLIs started and initialized through ccwire's Rust
//!   `Client` beforehand (as the gateway starts them: same model, no tools), then one prompt to
//!   each at once — the floor a gateway can reach;
//! - **gateway, warm pool**: `ccwire serve`'s server (in this process) with `pool` set to the
//!   number of conversations, after one conversation with the same settings has taught the pool
//!   and the pool reports every CLI ready;
//! - **gateway, no pool**: every new conversation starts its CLI.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use ccwire_host::serve::{GatewayOptions, Server};
use ccwire_host::{Client, ClientOptions};
use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{FakeAnthropic, Match, Reply, Script};
use futures::future::join_all;

const MODEL: &str = "claude-sonnet-4-5-20250929";

async fn gateway(pool: usize, fake: &FakeAnthropic, home: &OfflineHome) -> Server {
    let mut options = GatewayOptions {
        claude: Some(claude_path()),
        cwd: Some(home.workdir()),
        env: home.env(&fake.base_url()),
        env_remove: inherited_to_remove(),
        ..GatewayOptions::default()
    };
    options.engine.pool = pool;
    Server::start("127.0.0.1:0".parse().expect("an address"), options)
        .await
        .expect("the gateway starts")
}

async fn converse(http: &reqwest::Client, server: &Server, text: String) {
    ccwire_bench::hello_turn(http, server.addr(), MODEL, text).await;
}

/// Ten (or `n`) new conversations at once; seconds until the last answer.
async fn burst(http: &reqwest::Client, server: &Server, n: usize, run: usize) -> f64 {
    let start = Instant::now();
    join_all((0..n).map(|i| converse(http, server, format!("New conversation {run}.{i}.")))).await;
    start.elapsed().as_secs_f64()
}

/// The value of a metric without labels.
async fn metric(http: &reqwest::Client, server: &Server, name: &str) -> f64 {
    let text = http
        .get(format!("http://{}/metrics", server.addr()))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

async fn pool_ready(http: &reqwest::Client, server: &Server, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while metric(http, server, "ccwire_pool_ready").await < n as f64 {
        assert!(Instant::now() < deadline, "the pool did not fill");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `n` CLIs started ahead, then one prompt to each at once; seconds until the last answer.
async fn spawned_ahead(n: usize, fake: &FakeAnthropic, home: &OfflineHome, run: usize) -> f64 {
    let mut clients = join_all((0..n).map(|_| {
        let mut options = ClientOptions::default();
        options.claude.claude = Some(claude_path());
        options.claude.args.model = Some(MODEL.to_owned());
        options.claude.cwd = Some(home.workdir());
        options.claude.env = home
            .env(&fake.base_url())
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        options.claude.env_remove = inherited_to_remove().into_iter().map(Into::into).collect();
        options.claude.args.tools = Some(Vec::new());
        options.claude.args.include_partial_messages = true;
        Client::connect(options)
    }))
    .await
    .into_iter()
    .map(|c| c.expect("the CLI starts"))
    .collect::<Vec<_>>();
    let start = Instant::now();
    join_all(
        clients
            .iter_mut()
            .enumerate()
            .map(|(i, client)| async move {
                let turn = client
                    .query(&format!("Spawned ahead {run}.{i}."))
                    .await
                    .expect("a turn");
                turn.collect().await.expect("the turn ends");
            }),
    )
    .await;
    let elapsed = start.elapsed().as_secs_f64();
    for client in clients {
        client.close().await;
    }
    elapsed
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(10, |a| a.parse().expect("a number"));
    let runs: usize = args.next().map_or(3, |a| a.parse().expect("a number"));
    let fake = FakeAnthropic::start(
        Script::new()
            .when(Match::Probe, Reply::text("ok"))
            .when(Match::Any, Reply::text("Hello.")),
    )
    .await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    println!(
        "pool-start: {n} new conversations at once, {runs} runs, zero-delay fake model, CLI {}",
        claude_path().display()
    );
    println!();
    println!("| run | CLIs spawned ahead | gateway, warm pool | gateway, no pool | warm / ahead | no pool / ahead |");
    println!("|---|---|---|---|---|---|");
    let mut worst: f64 = 0.0;
    for run in 1..=runs {
        let ahead = spawned_ahead(n, &fake, &home, run).await;

        let warm_server = gateway(n, &fake, &home).await;
        // One conversation teaches the pool its settings; then it fills.
        converse(&http, &warm_server, format!("Teach the pool {run}.")).await;
        pool_ready(&http, &warm_server, n).await;
        let warm = burst(&http, &warm_server, n, run).await;
        let hits = metric(&http, &warm_server, "ccwire_pool_hits_total").await;
        assert_eq!(hits as usize, n, "every conversation found a warm CLI");
        warm_server.shutdown().await;

        let cold_server = gateway(0, &fake, &home).await;
        let cold = burst(&http, &cold_server, n, run).await;
        cold_server.shutdown().await;

        worst = worst.max(warm / ahead);
        println!(
            "| {run} | {:.2} s | {:.2} s | {:.2} s | **{:.2}** | {:.2} |",
            ahead,
            warm,
            cold,
            warm / ahead,
            cold / ahead
        );
    }
    println!();
    println!(
        "target: {n} new conversations with a warm pool ≤ 1.25× {n} CLIs spawned ahead: {} (worst {:.2}×)",
        if worst <= 1.25 { "met" } else { "NOT met" },
        worst
    );
}

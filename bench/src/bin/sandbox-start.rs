//! What the OS sandbox costs a new conversation: the time from a first message to its whole
//! answer through `ccwire serve`, each conversation starting its own real Claude Code CLI, with
//! the CLIs in the sandbox (bubblewrap) and without it, interleaved in one run.
//!
//! `cargo run --release -p ccwire-bench --bin sandbox-start [CONVERSATIONS]`
//!
//! The gateway (in this process) gives every conversation a tenant home under a state
//! directory, as `ccwire serve` does; a zero-delay fake model (in this process) answers. It
//! prints the median and p90 of each, and the sandbox's median cost per CLI start.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Instant;

use ccwire_bench::{hello_turn, percentile, sibling};
use ccwire_host::sandbox::SandboxMode;
use ccwire_host::serve::{GatewayOptions, Server};
use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{FakeAnthropic, Match, Reply, Script};

const MODEL: &str = "claude-sonnet-4-5-20250929";

async fn gateway(sandbox: SandboxMode, fake: &FakeAnthropic, home: &OfflineHome) -> Server {
    let options = GatewayOptions {
        claude: Some(claude_path()),
        env: home.env(&fake.base_url()),
        env_remove: inherited_to_remove(),
        state_dir: Some(home.path().join(format!("state-{sandbox:?}"))),
        sandbox,
        sandbox_relay: Some(sibling("ccwire")),
        ..GatewayOptions::default()
    };
    Server::start("127.0.0.1:0".parse().expect("an address"), options)
        .await
        .expect("the gateway starts (with the sandbox: bubblewrap works here)")
}

/// Seconds from a new conversation's first message to its whole answer.
async fn conversation(http: &reqwest::Client, server: &Server, n: usize) -> f64 {
    let start = Instant::now();
    hello_turn(http, server.addr(), MODEL, format!("Hello {n}")).await;
    start.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(12);
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .when(Match::Any, Reply::text("Hello."));
    let fake = FakeAnthropic::start(script).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    let plain = gateway(SandboxMode::Off, &fake, &home).await;
    let boxed = gateway(SandboxMode::On, &fake, &home).await;
    // One of each first: the CLI's files in the page cache for both.
    conversation(&http, &plain, 0).await;
    conversation(&http, &boxed, 0).await;
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for i in 1..=n {
        off.push(conversation(&http, &plain, i).await);
        on.push(conversation(&http, &boxed, i).await);
    }
    plain.shutdown().await;
    boxed.shutdown().await;
    let ms = |s: f64| s * 1000.0;
    println!("sandbox-start: {n} new conversations each, a real CLI started for every one");
    println!();
    println!("| CLIs | first answer p50 | p90 |");
    println!("|---|---:|---:|");
    for (name, times) in [
        ("without the sandbox", &mut off),
        ("in the sandbox", &mut on),
    ] {
        println!(
            "| {name} | {:.0} ms | {:.0} ms |",
            ms(percentile(times, 0.5)),
            ms(percentile(times, 0.9))
        );
    }
    let cost = percentile(&mut on, 0.5) - percentile(&mut off, 0.5);
    println!();
    println!(
        "the sandbox adds {:.0} ms to a new conversation's median ({:.2}x)",
        ms(cost),
        percentile(&mut on, 0.5) / percentile(&mut off, 0.5)
    );
}

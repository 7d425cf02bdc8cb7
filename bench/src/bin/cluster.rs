//! Gateways of a cluster on one Redis server (`ccwire serve --store redis://… --advertise`).
//!
//! ```text
//! cargo build --release -p ccwire-host -p ccwire-tests --bins
//! cargo run --release -p ccwire-bench --bin cluster [SAMPLES] [CONVERSATIONS] [REAL]
//! ```
//!
//! A `redis-server` on a loopback port (as the tests start it: `appendfsync always`) and
//! `ccwire serve` processes with `fake-claude` (from `ccwire-tests`, which answers at once and
//! mirrors its transcript like the CLI) as their CLI, so what is measured is the gateways',
//! Redis's and loopback's:
//!
//! 1. **A forwarded turn against a local one**, `SAMPLES` conversations (default 300), one
//!    request at a time: each starts on a gateway, and its second turn is sent to a gateway
//!    without `--advertise` (no cluster), to the node that runs it (local), or to another
//!    node (forwarded). Whole-response time, p50 and p90, and what forwarding adds.
//! 2. **Redis commands per turn**: a new conversation, a turn on the node that runs it, a turn
//!    forwarded (the server's own command counts, `INFO commandstats`, over 100 of each).
//! 3. **Load with a node killed**: `CONVERSATIONS` conversations (default 1,000) of three
//!    turns each, 32 at a time, over three nodes, each turn sent to the next node as a load
//!    balancer without affinity would; when half have begun, one node is killed (`SIGKILL`).
//!    A request that fails is sent again to the next node, as a client behind a load
//!    balancer retries a 502. Conversations lost (a turn never answered, or answered with
//!    another conversation's words), those affected (a turn retried or resumed from the
//!    store) and their turns' p50 / p99 against the others'; Redis's memory per conversation.
//! 4. **Redis per conversation with the real CLI**: `REAL` conversations (default 20) of four
//!    turns through one node whose CLI is the real Claude Code CLI, against a zero-delay fake
//!    model: what Redis holds for each.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccwire_bench::{percentile, raise_fd_limit, serve_fake, sibling};
use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{FakeAnthropic, Match, RedisServer, Reply, Script};
use serde_json::{json, Value};

/// A gateway process and its base URL.
struct Node {
    child: Child,
    url: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ccwire serve` with `fake-claude`, the Redis store at `redis`, its state in `state`; a node
/// of the cluster named `name` when there is one.
fn node(home: &std::path::Path, redis: &str, state: &std::path::Path, name: Option<&str>) -> Node {
    let state = state.to_str().expect("a UTF-8 path");
    let mut args = vec![
        "--store",
        redis,
        "--state-dir",
        state,
        "--sandbox",
        "off",
        "--max-sessions",
        "4000",
        "--max-concurrent",
        "256",
        "--max-queue",
        "4096",
    ];
    if let Some(name) = name {
        args.extend(["--advertise", "127.0.0.1", "--node", name]);
    }
    let (child, addr) = serve_fake(home, &args);
    Node {
        child,
        url: format!("http://{addr}"),
    }
}

/// How a turn went: its time (ms), the answer, `x-ccwire-session` and `x-ccwire-node`.
struct Turn {
    ms: f64,
    answer: Value,
    kind: String,
    node: String,
}

async fn turn(http: &reqwest::Client, url: &str, messages: &[Value]) -> Result<Turn, String> {
    let body = json!({"model": "default", "max_tokens": 64, "messages": messages});
    let start = Instant::now();
    let response = http
        .post(format!("{url}/v1/messages"))
        .json(&body)
        .send()
        .await
        .map_err(|e| match e.is_connect() {
            true => format!("connect: {e}"),
            false => format!("transport: {e}"),
        })?;
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let (kind, node) = (header("x-ccwire-session"), header("x-ccwire-node"));
    let status = response.status().as_u16();
    let answer: Value = response
        .json()
        .await
        .map_err(|e| format!("transport: {e}"))?;
    if status != 200 {
        return Err(format!("HTTP {status}"));
    }
    Ok(Turn {
        ms: start.elapsed().as_secs_f64() * 1000.0,
        answer,
        kind,
        node,
    })
}

fn text(answer: &Value) -> String {
    answer["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The commands a Redis server runs, as `MONITOR` shows them: those the gateways send (round
/// trips; a pipeline's each count) and those ccwire's scripts run inside the server, by name.
/// The nodes' lease renewals (every 3 s) and this program's own commands are left out.
#[derive(Clone, Default)]
struct Monitor(Arc<Mutex<Counts>>);

/// Commands by name: those sent, and those run by a script.
type Counts = (BTreeMap<String, u64>, BTreeMap<String, u64>);

impl Monitor {
    async fn start(url: &str) -> Monitor {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let addr = url.trim_start_matches("redis://").trim_end_matches('/');
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("Redis answers");
        stream.write_all(b"MONITOR\r\n").await.expect("MONITOR");
        let monitor = Monitor::default();
        let counts = monitor.0.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                // +<time> [<db> <client>] "<command>" "<arg>"…
                let Some((client, rest)) = line.split_once("] ") else {
                    continue;
                };
                let name = rest.split('"').nth(1).unwrap_or("").to_lowercase();
                let lease = rest.contains(":node:") || rest.contains(":names\"");
                if lease || matches!(name.as_str(), "info" | "dbsize" | "monitor" | "ping") {
                    continue;
                }
                let mut counts = counts.lock().expect("counts lock");
                let side = if client.ends_with(" lua") {
                    &mut counts.1
                } else {
                    &mut counts.0
                };
                *side.entry(name).or_default() += 1;
            }
        });
        monitor
    }

    /// What was counted since the last call.
    async fn take(&self) -> Counts {
        // What the server ran last has reached this side.
        tokio::time::sleep(Duration::from_millis(300)).await;
        std::mem::take(&mut *self.0.lock().expect("counts lock"))
    }
}

async fn used_memory(redis: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(redis)
        .await
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:")?.trim().parse().ok())
        .unwrap_or(0)
}

fn ms(values: &mut [f64], p: f64) -> String {
    format!("{:.2} ms", percentile(values, p))
}

/// Part 1: one request at a time, a second turn sent without a cluster, to its node, or to
/// another node.
async fn forwarded(http: &reqwest::Client, nodes: &[Node; 3], samples: usize) {
    let [a, b, c] = nodes;
    let mut times: [Vec<f64>; 3] = Default::default();
    let mut wrong = 0;
    for i in 0..samples {
        let case = i % 3;
        let first = if case == 0 { &c.url } else { &a.url };
        let mut messages = vec![json!({"role": "user", "content": format!("Hello {i}")})];
        let answer = turn(http, first, &messages).await.expect("a first turn");
        messages.push(json!({"role": "assistant", "content": answer.answer["content"]}));
        messages.push(json!({"role": "user", "content": format!("Again {i}")}));
        let to = [&c.url, &a.url, &b.url][case];
        let second = turn(http, to, &messages).await.expect("a second turn");
        if second.kind != "continued" || (case > 0 && second.node != "a") {
            wrong += 1;
        }
        times[case].push(second.ms);
    }
    let [alone, local, forwarded] = &mut times;
    let added = percentile(forwarded, 0.5) - percentile(local, 0.5);
    println!("| second turn, whole response | no cluster | cluster, on its node | cluster, forwarded | forwarding adds (p50) |");
    println!("|---|---|---|---|---|");
    println!(
        "| p50 ({} each) | {} | {} | {} | **{added:.2} ms** |",
        local.len(),
        ms(alone, 0.5),
        ms(local, 0.5),
        ms(forwarded, 0.5)
    );
    println!(
        "| p90 | {} | {} | {} | |",
        ms(alone, 0.9),
        ms(local, 0.9),
        ms(forwarded, 0.9)
    );
    println!();
    println!(
        "target: forwarding adds ≤ 2 ms at p50: {}; turns not continued by their node: {wrong}",
        if added <= 2.0 { "met" } else { "NOT met" }
    );
    println!();
}

/// Part 2: Redis commands per request.
async fn commands(http: &reqwest::Client, nodes: &[Node; 3], monitor: &Monitor) {
    const N: usize = 100;
    let [a, b, _] = nodes;
    let mut histories = Vec::new();
    monitor.take().await;
    for i in 0..N {
        let mut messages = vec![json!({"role": "user", "content": format!("Count {i}")})];
        let answer = turn(http, &a.url, &messages).await.expect("a turn");
        messages.push(json!({"role": "assistant", "content": answer.answer["content"]}));
        histories.push(messages);
    }
    let new = monitor.take().await;
    let local = continued(http, &a.url, &mut histories, monitor).await;
    let forwarded = continued(http, &b.url, &mut histories, monitor).await;
    let per = |counts: &BTreeMap<String, u64>, name: &str| {
        counts.get(name).copied().unwrap_or(0) as f64 / N as f64
    };
    let total = |counts: &BTreeMap<String, u64>| counts.values().sum::<u64>() as f64 / N as f64;
    println!("| Redis commands per request ({N} each) | new conversation | turn on its node | turn forwarded |");
    println!("|---|---|---|---|");
    for (side, label) in [(0, "sent"), (1, "run by a script")] {
        let pick = |c: &Counts| match side {
            0 => c.0.clone(),
            _ => c.1.clone(),
        };
        let (new, local, forwarded) = (pick(&new), pick(&local), pick(&forwarded));
        let names: std::collections::BTreeSet<&String> = new
            .keys()
            .chain(local.keys())
            .chain(forwarded.keys())
            .collect();
        for name in &names {
            println!(
                "| {label}: `{name}` | {:.2} | {:.2} | {:.2} |",
                per(&new, name),
                per(&local, name),
                per(&forwarded, name)
            );
        }
        println!(
            "| **{label}, all** | **{:.2}** | **{:.2}** | **{:.2}** |",
            total(&new),
            total(&local),
            total(&forwarded)
        );
    }
    println!();
    println!("(`sent`: the round trips of the gateways, each node's lease renewal every 3 s left out; `evalsha` runs one of ccwire's scripts — the transcript append, the record save, the claim lookup, the claim release — whose own commands are the `run by a script` rows.)");
    println!();
}

/// One more turn of each of `histories` at `url`; the Redis commands they took.
async fn continued(
    http: &reqwest::Client,
    url: &str,
    histories: &mut [Vec<Value>],
    monitor: &Monitor,
) -> Counts {
    monitor.take().await;
    for (i, messages) in histories.iter_mut().enumerate() {
        messages.push(json!({"role": "user", "content": format!("More {i}")}));
        let answer = turn(http, url, messages).await.expect("a turn");
        messages.push(json!({"role": "assistant", "content": answer.answer["content"]}));
    }
    monitor.take().await
}

/// What the load of part 3 found.
#[derive(Default)]
struct Load {
    lost: Vec<String>,
    affected: usize,
    retries: usize,
    resumed: usize,
    affected_ms: Vec<f64>,
    other_ms: Vec<f64>,
}

/// Part 3: `n` conversations over three nodes, one killed when half have begun.
async fn load(home: &std::path::Path, n: usize) {
    let redis = RedisServer::start();
    let url = redis.url();
    let states: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("a dir"))
        .collect();
    let nodes: Vec<Node> = ["x", "y", "z"]
        .iter()
        .zip(&states)
        .map(|(name, state)| node(home, &url, state.path(), Some(name)))
        .collect();
    let urls: Arc<Vec<String>> = Arc::new(nodes.iter().map(|n| n.url.clone()).collect());
    let nodes = Arc::new(Mutex::new(nodes));
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .expect("a client");
    let begun = Arc::new(AtomicUsize::new(0));
    // The load balancer's view: a node it could not connect to is down from then on.
    let down: Arc<Vec<AtomicBool>> = Arc::new((0..3).map(|_| AtomicBool::new(false)).collect());
    let killed = Arc::new(AtomicBool::new(false));
    let found = Arc::new(Mutex::new(Load::default()));
    let started = Instant::now();
    let workers = (0..32).map(|_| {
        let (http, urls, nodes, begun, killed, found, down) = (
            http.clone(),
            urls.clone(),
            nodes.clone(),
            begun.clone(),
            killed.clone(),
            found.clone(),
            down.clone(),
        );
        tokio::spawn(async move {
            loop {
                let i = begun.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return;
                }
                if i == n / 2 && !killed.swap(true, Ordering::Relaxed) {
                    // The node in the middle dies.
                    let mut nodes = nodes.lock().expect("nodes lock");
                    let _ = nodes[1].child.kill();
                    let _ = nodes[1].child.wait();
                }
                let mut messages = Vec::new();
                let (mut times, mut affected, mut lost) = (Vec::new(), false, None);
                for t in 0..3 {
                    let said = format!("conversation {i} turn {t}");
                    messages.push(json!({"role": "user", "content": said}));
                    let start = Instant::now();
                    let mut answer = None;
                    let mut errors = Vec::new();
                    for attempt in 0..3 {
                        let mut at = (i + t + attempt) % 3;
                        while down[at].load(Ordering::Relaxed) {
                            at = (at + 1) % 3;
                        }
                        match turn(&http, &urls[at], &messages).await {
                            Ok(done) => {
                                answer = Some(done);
                                break;
                            }
                            Err(error) => {
                                if error.starts_with("connect:") {
                                    down[at].store(true, Ordering::Relaxed);
                                }
                                errors.push(error);
                                affected = true;
                                found.lock().expect("load lock").retries += 1;
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                        }
                    }
                    let Some(done) = answer else {
                        lost = Some(format!("conversation {i} turn {t}: {errors:?}"));
                        break;
                    };
                    if done.kind == "resumed" {
                        affected = true;
                        found.lock().expect("load lock").resumed += 1;
                    }
                    if text(&done.answer) != format!("echo: {said}") {
                        lost = Some(format!(
                            "conversation {i} turn {t}: answered {:?}",
                            text(&done.answer)
                        ));
                        break;
                    }
                    times.push(start.elapsed().as_secs_f64() * 1000.0);
                    messages.push(json!({"role": "assistant", "content": done.answer["content"]}));
                }
                let mut found = found.lock().expect("load lock");
                match lost {
                    Some(why) => found.lost.push(why),
                    None if affected => {
                        found.affected += 1;
                        found.affected_ms.extend(times);
                    }
                    None => found.other_ms.extend(times),
                }
            }
        })
    });
    for worker in futures::future::join_all(workers).await {
        worker.expect("a worker");
    }
    let took = started.elapsed().as_secs_f64();
    let mut conn = redis_connection(&url).await;
    let memory = used_memory(&mut conn).await;
    let keys: u64 = redis::cmd("DBSIZE")
        .query_async(&mut conn)
        .await
        .expect("DBSIZE");
    let mut found = std::mem::take(&mut *found.lock().expect("load lock"));
    println!(
        "| conversations (3 turns, 32 at a time, 3 nodes, one killed) | lost | affected (a turn retried or resumed) | retried requests | resumed turns | affected turns p50 / p99 | other turns p50 / p99 | took |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {n} | **{}** | {} | {} | {} | {} / **{}** | {} / {} | {took:.1} s |",
        found.lost.len(),
        found.affected,
        found.retries,
        found.resumed,
        ms(&mut found.affected_ms, 0.5),
        ms(&mut found.affected_ms, 0.99),
        ms(&mut found.other_ms, 0.5),
        ms(&mut found.other_ms, 0.99),
    );
    println!();
    println!(
        "Redis after the load: {keys} keys, {:.1} MiB used, {:.1} KiB per conversation (fake-claude's transcripts: a few short lines each)",
        memory as f64 / 1_048_576.0,
        memory as f64 / 1024.0 / n as f64
    );
    for why in found.lost.iter().take(5) {
        println!("lost: {why}");
    }
    println!();
}

async fn redis_connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("a Redis URL")
        .get_multiplexed_async_connection()
        .await
        .expect("Redis answers")
}

/// Part 4: what Redis holds per conversation of the real CLI.
async fn real(n: usize) {
    let redis = RedisServer::start();
    let url = redis.url();
    let mut conn = redis_connection(&url).await;
    let fake = FakeAnthropic::start(
        Script::new()
            .when(Match::Probe, Reply::text("ok"))
            .when(Match::Any, Reply::Echo),
    )
    .await;
    let home = OfflineHome::new();
    let state = tempfile::tempdir().expect("a dir");
    let mut command = std::process::Command::new(sibling("ccwire"));
    for key in inherited_to_remove() {
        command.env_remove(key);
    }
    let mut child = command
        .args(["serve", "--listen", "127.0.0.1:0", "--sandbox", "off"])
        .arg("--state-dir")
        .arg(state.path())
        .args([
            "--store",
            &url,
            "--advertise",
            "127.0.0.1",
            "--node",
            "real",
        ])
        .arg("--claude")
        .arg(claude_path())
        .envs(home.env(&fake.base_url()))
        .env_remove("CCWIRE_API_KEYS")
        .current_dir(home.workdir())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ccwire serve starts");
    let addr = {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
        let addr = loop {
            let line = lines.next().expect("an address").expect("a line");
            if let Some(addr) = line.strip_prefix("ccwire serve: listening on http://") {
                break addr.to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        addr
    };
    let node = Node {
        child,
        url: format!("http://{addr}"),
    };
    let http = reqwest::Client::new();
    let before = used_memory(&mut conn).await;
    let texts = [
        "Hello, who are you?",
        "And then?",
        "One more thing.",
        "Thanks.",
    ];
    for i in 0..n {
        let mut messages = Vec::new();
        for text in texts {
            messages.push(json!({"role": "user", "content": format!("{text} ({i})")}));
            let done = turn(&http, &node.url, &messages).await.expect("a turn");
            messages.push(json!({"role": "assistant", "content": done.answer["content"]}));
        }
    }
    // The records are saved before each response ends; the transcript lines come as the
    // CLI writes them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = used_memory(&mut conn).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("ccwire:*")
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    let (mut all, mut transcripts, mut lines) = (0u64, 0u64, 0u64);
    for key in &keys {
        let usage: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("MEMORY USAGE");
        all += usage.unwrap_or(0);
        if key.ends_with(":t") {
            transcripts += usage.unwrap_or(0);
            let len: u64 = redis::cmd("LLEN")
                .arg(key)
                .query_async(&mut conn)
                .await
                .expect("LLEN");
            lines += len;
        }
    }
    let kib = |bytes: u64| bytes as f64 / 1024.0 / n as f64;
    println!("| real CLI, 4 turns each, zero-delay fake model | keys per conversation | transcript lines | Redis memory per conversation (`MEMORY USAGE`) | of it, the transcript | `used_memory` grew by, per conversation |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| {n} conversations | {:.1} | {:.1} | **{:.1} KiB** | {:.1} KiB | {:.1} KiB |",
        keys.len() as f64 / n as f64,
        lines as f64 / n as f64,
        kib(all),
        kib(transcripts),
        kib(after.saturating_sub(before)),
    );
    drop(node);
}

#[tokio::main]
async fn main() {
    raise_fd_limit();
    let mut args = std::env::args().skip(1);
    let samples: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(300);
    let conversations: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let real_conversations: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let home = tempfile::tempdir().expect("a home");
    let http = reqwest::Client::new();
    println!("cluster: {samples} samples, {conversations} conversations under load, {real_conversations} with the real CLI; fake-claude, redis-server on loopback");
    println!();
    {
        let redis = RedisServer::start();
        let url = redis.url();
        let states: Vec<_> = (0..3)
            .map(|_| tempfile::tempdir().expect("a dir"))
            .collect();
        let nodes = [
            node(home.path(), &url, states[0].path(), Some("a")),
            node(home.path(), &url, states[1].path(), Some("b")),
            node(home.path(), &url, states[2].path(), None),
        ];
        forwarded(&http, &nodes, samples).await;
        let monitor = Monitor::start(&url).await;
        commands(&http, &nodes, &monitor).await;
    }
    load(home.path(), conversations).await;
    if real_conversations > 0 {
        real(real_conversations).await;
    }
}

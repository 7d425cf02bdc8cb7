//! What a CLI's tools leave running ends with the CLI: the real gateway and the real CLI, whose
//! Bash tool backgrounds a long-lived process (in a session of its own, out of the CLI's
//! process group). With the sandbox it dies with the CLI's PID namespace; without it, the
//! gateway's sweep kills it once the CLI has ended, and a gateway killed by SIGKILL leaves it
//! to its watchdog (or, should that be killed too, to the next gateway's start).

mod support;

use std::path::Path;
use std::time::Duration;

use ccwire_host::sandbox::SandboxMode;
use ccwire_tests::cli::OfflineHome;
use ccwire_tests::{FakeAnthropic, Match, Reply, Script};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::json;
use support::{alive, anthropic, eventually, Gw, ServeProcess};

/// The gateways of one test sweep at start what others' killed gateways left: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A fake model whose Bash call backgrounds `tail -f /dev/null`, marked `TREE_TEST=<token>`.
fn script(token: &str) -> Script {
    let command = format!("TREE_TEST={token} tail -f /dev/null >/dev/null 2>&1 & echo started");
    Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .on_tool_result(Reply::Echo)
        .on_prompt(
            "PLEASE-BACKGROUND",
            Reply::tool(
                "Bash",
                json!({"command": command, "description": "Start a background job"}),
            ),
        )
        .when(Match::Any, Reply::Echo)
}

/// A value no other run of these tests uses.
fn token() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    format!("tree-{}-{}", std::process::id(), now.unwrap().as_nanos())
}

/// The running processes whose environment holds `TREE_TEST=<token>`.
fn marked(token: &str) -> Vec<u32> {
    let needle = format!("TREE_TEST={token}");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()) && alive(pid) {
            pids.push(pid);
        }
    }
    pids
}

fn ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The Claude Code process under `root` (itself, or inside its sandbox).
fn the_cli(root: u32) -> u32 {
    let is_cli = |pid: u32| {
        let args = cmdline(pid);
        args[0].contains("claude") && !args[0].ends_with("bwrap")
    };
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        if is_cli(pid) {
            return pid;
        }
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            if let Some(child) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
                if ppid(child) == Some(pid) {
                    todo.push(child);
                }
            }
        }
    }
    panic!("no Claude Code process under {root}");
}

fn sigkill(pid: u32) {
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
}

/// An in-process gateway with Bash enabled and tenants under `state`, in `mode`.
async fn gateway(token: &str, state: &Path, mode: SandboxMode) -> Gw {
    let state = state.to_owned();
    Gw::start_with(script(token), move |o| {
        o.engine.enabled_tools = vec!["Bash".into()];
        o.state_dir = Some(state);
        o.sandbox = mode;
        o.cwd = None;
    })
    .await
}

/// Asks for the background job and waits until it runs.
async fn background(http: &reqwest::Client, addr: &str, token: &str) {
    let body = anthropic(json!([{"role": "user", "content": "PLEASE-BACKGROUND"}]));
    let response = http
        .post(format!("http://{addr}/v1/messages"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer = support::text_of(&response.json().await.unwrap());
    assert!(answer.contains("started"), "{answer}");
    eventually("the background job runs", || !marked(token).is_empty()).await;
}

async fn dies_when_the_gateway_closes_the_session(mode: SandboxMode) {
    let _one = SERIAL.lock().await;
    let (token, state) = (token(), tempfile::tempdir().unwrap());
    let gw = gateway(&token, state.path(), mode).await;
    background(&gw.http, &gw.server().addr().to_string(), &token).await;

    gw.stop().await;

    eventually("nothing of the session runs", || marked(&token).is_empty()).await;
}

async fn dies_when_the_cli_is_killed(mode: SandboxMode) {
    let _one = SERIAL.lock().await;
    let (token, state) = (token(), tempfile::tempdir().unwrap());
    let gw = gateway(&token, state.path(), mode).await;
    background(&gw.http, &gw.server().addr().to_string(), &token).await;
    let pids = gw.server().session_pids();
    assert_eq!(pids.len(), 1, "{pids:?}");

    sigkill(the_cli(pids[0]));

    eventually("nothing of the session runs", || marked(&token).is_empty()).await;
    eventually("the gateway saw the CLI end", || {
        gw.server().session_pids().is_empty()
    })
    .await;
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsandboxed_a_tool_s_background_job_dies_when_the_session_is_closed() {
    dies_when_the_gateway_closes_the_session(SandboxMode::Off).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxed_a_tool_s_background_job_dies_when_the_session_is_closed() {
    dies_when_the_gateway_closes_the_session(SandboxMode::On).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsandboxed_a_tool_s_background_job_dies_when_its_cli_is_killed() {
    dies_when_the_cli_is_killed(SandboxMode::Off).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxed_a_tool_s_background_job_dies_when_its_cli_is_killed() {
    dies_when_the_cli_is_killed(SandboxMode::On).await;
}

/// `ccwire serve` on `state`, sandboxed or not, with the job its fake model asks for running.
async fn serve_with_a_job(
    home: &OfflineHome,
    fake: &FakeAnthropic,
    state: &Path,
    sandbox: &str,
    token: &str,
) -> ServeProcess {
    let state = state.to_str().unwrap();
    let args = [
        "--enable-tool",
        "Bash",
        "--state-dir",
        state,
        "--sandbox",
        sandbox,
    ];
    let serve = ServeProcess::start(home, fake, &args, &[]).await;
    background(&reqwest::Client::new(), &serve.addr, token).await;
    serve
}

async fn sigkill_serve(mut serve: ServeProcess) {
    sigkill(serve.child.id().unwrap());
    tokio::time::timeout(Duration::from_secs(10), serve.child.wait())
        .await
        .expect("ccwire serve ends on SIGKILL")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxed_a_tool_s_background_job_dies_with_a_sigkilled_gateway() {
    let _one = SERIAL.lock().await;
    let (token, state) = (token(), tempfile::tempdir().unwrap());
    let (fake, home) = (
        FakeAnthropic::start(script(&token)).await,
        OfflineHome::new(),
    );
    let serve = serve_with_a_job(&home, &fake, state.path(), "on", &token).await;

    sigkill_serve(serve).await;

    eventually("nothing of the gateway runs", || marked(&token).is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsandboxed_a_tool_s_background_job_dies_with_a_sigkilled_gateway() {
    let _one = SERIAL.lock().await;
    let (token, state) = (token(), tempfile::tempdir().unwrap());
    let (fake, home) = (
        FakeAnthropic::start(script(&token)).await,
        OfflineHome::new(),
    );
    let serve = serve_with_a_job(&home, &fake, state.path(), "off", &token).await;
    let watchdog = the_watchdog(serve.child.id().unwrap());

    sigkill_serve(serve).await;

    eventually("the job is gone", || marked(&token).is_empty()).await;
    eventually("the watchdog has ended", || !alive(watchdog)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsandboxed_leftovers_of_a_gateway_sigkilled_with_its_watchdog_die_when_the_next_one_starts(
) {
    let _one = SERIAL.lock().await;
    let (token, state) = (token(), tempfile::tempdir().unwrap());
    let (fake, home) = (
        FakeAnthropic::start(script(&token)).await,
        OfflineHome::new(),
    );
    let serve = serve_with_a_job(&home, &fake, state.path(), "off", &token).await;
    sigkill(the_watchdog(serve.child.id().unwrap()));
    sigkill_serve(serve).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !marked(&token).is_empty(),
        "with the watchdog killed, nothing kills the job but the next gateway"
    );

    let next = ServeProcess::start(
        &home,
        &fake,
        &[
            "--state-dir",
            state.path().to_str().unwrap(),
            "--sandbox",
            "off",
        ],
        &[],
    )
    .await;

    eventually("the job is gone", || marked(&token).is_empty()).await;
    next.stop().await;
}

/// The watchdog `ccwire serve` (process `serve`) started.
fn the_watchdog(serve: u32) -> u32 {
    let children: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|pid| ppid(*pid) == Some(serve))
        .collect();
    *children
        .iter()
        .find(|pid| cmdline(**pid).get(1).is_some_and(|a| a == "watchdog"))
        .unwrap_or_else(|| panic!("no watchdog among the children of ccwire serve: {children:?}"))
}

/// `ccwire serve` adopts what the CLIs' tools leave running (Linux's child subreaper), and
/// what it kills or what ends by itself is reaped: no zombie is left under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_reaps_the_jobs_it_adopts() {
    let _one = SERIAL.lock().await;
    let (token, state) = (token(), tempfile::tempdir().unwrap());
    let (fake, home) = (
        FakeAnthropic::start(script(&token)).await,
        OfflineHome::new(),
    );
    let serve = serve_with_a_job(&home, &fake, state.path(), "off", &token).await;
    let gateway = serve.child.id().unwrap();
    let jobs = marked(&token);
    assert!(
        jobs.iter().all(|job| ppid(*job) == Some(gateway)),
        "the gateway adopted the job"
    );
    let clis: Vec<u32> = (serve.cli_pids().into_iter())
        .filter(|pid| cmdline(*pid)[0].contains("claude"))
        .collect();
    assert_eq!(clis.len(), 1, "{clis:?}");

    sigkill(clis[0]);

    eventually("the job is gone", || marked(&token).is_empty()).await;
    let zombies = || {
        (serve.cli_pids().into_iter())
            .filter(|pid| !alive(*pid))
            .collect::<Vec<_>>()
    };
    eventually("no zombie under the gateway", || zombies().is_empty()).await;
    serve.stop().await;
}

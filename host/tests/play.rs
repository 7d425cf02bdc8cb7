//! `ccwire play` as the `claude` executable of real hosts: ccwire's Rust `Client`, `ccwire
//! run` and the gateway run recorded sessions with no model, `--verify` catches a host that
//! decides otherwise, and the injected faults reach each host as the errors they are.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ccwire_core::{Chunk, McpCallResult, PermissionDecision};
use ccwire_host::client::Tool;
use ccwire_host::{Client, ClientError, ClientOptions};
use serde_json::{json, Value};

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpus")
        .join(format!("{name}.jsonl"))
}

/// A `claude` stand-in: a script that runs `ccwire play` on a transcript with these options
/// (the host's own arguments go after `--`, as they would to the CLI).
fn player(dir: &Path, name: &str, options: &[&str]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join(format!(
        "claude-{name}-{}",
        options.join("_").replace(['@', '='], "-")
    ));
    let text = format!(
        "#!/bin/sh\nexec '{}' play '{}' --instant {} -- \"$@\"\n",
        env!("CARGO_BIN_EXE_ccwire"),
        corpus(name).display(),
        options.join(" ")
    );
    std::fs::write(&script, text).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// The recorded result text of a transcript's turn (none for a turn that was interrupted).
fn recorded_result(name: &str) -> Option<String> {
    let result = std::fs::read_to_string(corpus(name))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["msg"]["type"] == "result")
        .expect("the transcript has a result");
    result["msg"]["result"].as_str().map(str::to_owned)
}

fn options(claude: PathBuf) -> ClientOptions {
    let mut options = ClientOptions::default();
    options.claude.claude = Some(claude);
    options
}

fn result_of(chunks: &[Chunk]) -> Option<String> {
    chunks.iter().find_map(|c| match c {
        Chunk::TurnComplete { result, .. } => result.clone(),
        _ => None,
    })
}

#[tokio::test]
async fn a_client_with_a_permission_handler_gets_the_recorded_session() {
    let dir = tempfile::tempdir().unwrap();
    let claude = player(dir.path(), "b_bash_allow", &["--verify"]);
    let mut client =
        Client::connect(options(claude).on_permission(|_| async { PermissionDecision::allow() }))
            .await
            .unwrap();
    let chunks = client
        .query("Run echo hi in the shell, writing it to out.txt.")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert!(chunks
        .iter()
        .any(|c| matches!(c, Chunk::PermissionRequest { tool_name, .. } if tool_name == "Bash")));
    assert_eq!(result_of(&chunks), recorded_result("b_bash_allow"));
    let exit = client.close().await.unwrap();
    assert_eq!(exit.code, Some(0), "exits as the CLI did");
}

#[tokio::test]
async fn verify_catches_a_host_that_denies_what_the_recording_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let claude = player(dir.path(), "b_bash_allow", &["--verify"]);
    let mut client = Client::connect(
        options(claude).on_permission(|_| async { PermissionDecision::deny("No shell here.") }),
    )
    .await
    .unwrap();
    let turn = client
        .query("Run echo hi in the shell, writing it to out.txt.")
        .await
        .unwrap()
        .collect()
        .await;
    let Err(ClientError::ProcessExited { exit, stderr, .. }) = turn else {
        panic!("the player stopped the session: {turn:?}");
    };
    assert_eq!(exit.code, Some(3));
    assert!(
        stderr.contains("diverged") && stderr.contains("\"deny\""),
        "{stderr}"
    );
}

#[tokio::test]
async fn verify_catches_a_host_that_allows_what_the_recording_denied() {
    let dir = tempfile::tempdir().unwrap();
    let claude = player(dir.path(), "c_bash_deny_interrupt", &["--verify"]);
    let prompt = "Run echo hi in the shell, writing it to out.txt.";
    // The recorded decision: denied, with its message, interrupting the turn.
    let deny = || async {
        PermissionDecision::Deny {
            message: "The user refused this command.".into(),
            interrupt: true,
        }
    };
    let mut client = Client::connect(options(claude.clone()).on_permission(move |_| deny()))
        .await
        .unwrap();
    let chunks = client.query(prompt).await.unwrap().collect().await.unwrap();
    assert_eq!(result_of(&chunks), recorded_result("c_bash_deny_interrupt"));
    // This host allows it.
    let mut client =
        Client::connect(options(claude).on_permission(|_| async { PermissionDecision::allow() }))
            .await
            .unwrap();
    let turn = client.query(prompt).await.unwrap().collect().await;
    let Err(ClientError::ProcessExited { exit, stderr, .. }) = turn else {
        panic!("the player stopped the session: {turn:?}");
    };
    assert_eq!(exit.code, Some(3));
    assert!(stderr.contains(r#""behavior":"allow""#), "{stderr}");
    assert!(
        stderr.contains("The user refused this command."),
        "{stderr}"
    );
}

#[tokio::test]
async fn hooks_and_in_process_tools_are_played_with_the_host_s_own_ids() {
    let dir = tempfile::tempdir().unwrap();
    let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = calls.clone();
    let claude = player(dir.path(), "i_hook_pretooluse", &["--verify"]);
    let mut options = options(claude)
        .hook("PreToolUse", Some("Bash"), |_| async {
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "allow", "permissionDecisionReason": "allowed by the recording hook"}})
        })
        .hook("PostToolUse", None, move |input| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(input["hook_event_name"].clone());
                json!({})
            }
        });
    options.claude.args.allowed_tools = vec!["Bash".into()];
    let mut client = Client::connect(options).await.unwrap();
    let turn = client.query("Echo something in the shell.").await.unwrap();
    // The hook answers are compared by meaning (--verify): the reason text must match too.
    let chunks = turn.collect().await.unwrap();
    assert_eq!(result_of(&chunks), recorded_result("i_hook_pretooluse"));
    assert_eq!(calls.lock().unwrap().as_slice(), [json!("PostToolUse")]);

    let claude = player(dir.path(), "d_sdk_mcp", &[]);
    let add = Tool::new(
        "add",
        "Add two numbers",
        json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}),
        |args| async move {
            let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
            McpCallResult::text(sum.to_string())
        },
    );
    let mut client = Client::connect(options_with_tool(claude, add))
        .await
        .unwrap();
    let chunks = client
        .query("Use the calc tool to add 2 and 3.")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert!(chunks
        .iter()
        .any(|c| matches!(c, Chunk::McpToolCall { .. })));
    assert_eq!(result_of(&chunks), recorded_result("d_sdk_mcp"));
}

fn options_with_tool(claude: PathBuf, tool: Tool) -> ClientOptions {
    options(claude).tool_server("calc", vec![tool])
}

#[tokio::test]
async fn an_interrupt_is_answered_from_the_tape() {
    let dir = tempfile::tempdir().unwrap();
    let claude = player(dir.path(), "g_interrupt_tool", &["--verify"]);
    let mut client =
        Client::connect(options(claude).on_permission(|_| async { PermissionDecision::allow() }))
            .await
            .unwrap();
    let handle = client.handle();
    let mut turn = client
        .query("Sleep for a while in the shell.")
        .await
        .unwrap();
    let mut interrupted = false;
    let mut ended = None;
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(10), turn.next())
        .await
        .expect("the tape goes on")
    {
        let chunk = chunk.unwrap();
        if !interrupted && matches!(chunk, Chunk::ToolStatus { .. }) {
            interrupted = true;
            // The tape answers the interrupt as the CLI did.
            handle.interrupt().await.unwrap();
        }
        if let Chunk::TurnComplete { subtype, .. } = chunk {
            ended = subtype;
        }
    }
    assert!(interrupted);
    assert_eq!(ended.as_deref(), Some("error_during_execution"));
}

/// `ccwire run` with a faulty CLI: each fault reaches the user as the error it is.
#[test]
fn run_survives_each_fault_with_the_right_error() {
    let dir = tempfile::tempdir().unwrap();
    let run = |fault: &str| {
        let claude = player(dir.path(), "a_text", &["--fault", fault]);
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_ccwire"))
            .args(["run", "--json", "--claude"])
            .arg(&claude)
            .arg("What is 2 + 2?")
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // Garbage and an oversized line are errors in the stream; the turn still ends well.
    let (code, stdout, _) = run("garbage@3");
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("malformed_line"), "{stdout}");
    let (code, stdout, _) = run("oversize@3");
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("line_too_long"),
        "{}",
        &stdout[..stdout.len().min(2000)]
    );
    // A CLI that dies mid-line, is killed, or fails: run says so and exits 1.
    let (code, _, stderr) = run("exit-mid-line@4");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("exit code 1") || stderr.contains("status 1"),
        "{stderr}"
    );
    let (code, _, stderr) = run("kill@4");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("signal 9") || stderr.contains("SIGKILL"),
        "{stderr}"
    );
    let (code, _, _) = run("exit-code=7");
    assert_eq!(code, Some(0), "the turn ended before the CLI's exit status");
    // Control lines for ids run never used are shown; the session goes on.
    let (code, stdout, _) = run("unknown-response@3");
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains(r#""request_id":"req_ccwire_play_unknown""#),
        "{stdout}"
    );
    let (code, stdout, _) = run("unknown-cancel@3");
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains(r#""type":"unknown""#), "{stdout}");
    // A permission request sent twice under one id is asked and answered once.
    let duplicate = format!("duplicate@{}", line_with("b_bash_allow", "can_use_tool"));
    let claude = player(dir.path(), "b_bash_allow", &["--fault", &duplicate]);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ccwire"))
        .args(["run", "--json", "--permission", "allow", "--claude"])
        .arg(&claude)
        .arg("Go.")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("reuses the id"), "{stdout}");
    assert_eq!(stdout.matches(r#""type":"permission_request""#).count(), 1);
    // A CLI that reports an API error and exits 1: the error is what run says.
    let claude = player(dir.path(), "f_api_error_400", &["--fault", "exit-code=1"]);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ccwire"))
        .args(["run", "--claude"])
        .arg(&claude)
        .arg("Go.")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let recorded = recorded_result("f_api_error_400").unwrap();
    assert!(
        stderr.contains(&recorded),
        "{stderr} / {}",
        String::from_utf8_lossy(&output.stdout)
    );
    // A CLI that stalls mid-turn: with a stall timeout, run stops it and says why.
    let claude = player(dir.path(), "a_text", &["--fault", "stall@4"]);
    let started = std::time::Instant::now();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ccwire"))
        .args(["run", "--stall-timeout", "1", "--claude"])
        .arg(&claude)
        .arg("What is 2 + 2?")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("wrote nothing for 1 s during a turn (stall timeout)"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// The gateway in front of a played CLI: the recorded answer, and a killed CLI as a 500 that
/// says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_serves_a_played_cli_and_reports_one_that_is_killed() {
    use ccwire_host::serve::{GatewayOptions, Server};
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let body = json!({"model": "sonnet", "max_tokens": 100,
                      "messages": [{"role": "user", "content": "What is 2 + 2?"}]});
    for (fault, status) in [(None, 200), (Some("kill@4"), 500)] {
        let options: Vec<&str> = fault.map(|f| vec!["--fault", f]).unwrap_or_default();
        let server = Server::start(
            "127.0.0.1:0".parse().unwrap(),
            GatewayOptions {
                claude: Some(player(dir.path(), "a_text", &options)),
                ..GatewayOptions::default()
            },
        )
        .await
        .unwrap();
        let response = http
            .post(format!("http://{}/v1/messages", server.addr()))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), status, "{fault:?}");
        let answer: Value = response.json().await.unwrap();
        if status == 200 {
            assert_eq!(
                answer["content"][0]["text"],
                recorded_result("a_text").unwrap()
            );
        } else {
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(message.contains("killed by signal 9"), "{message}");
        }
        server.shutdown().await;
    }
}

/// A CLI that stalls mid-turn: the client gives up, the gateway interrupts the turn, and when
/// the CLI does not settle it is closed — nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_closes_a_cli_that_stalls() {
    use ccwire_host::serve::{GatewayOptions, Server};
    let dir = tempfile::tempdir().unwrap();
    let mut options = GatewayOptions {
        claude: Some(player(dir.path(), "a_text", &["--fault", "stall@4"])),
        ..GatewayOptions::default()
    };
    options.engine.settle_grace_ms = 300;
    let server = Server::start("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let body = json!({"model": "sonnet", "max_tokens": 100, "stream": true,
                      "messages": [{"role": "user", "content": "What is 2 + 2?"}]});
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(800))
        .build()
        .unwrap();
    let gave_up = async {
        let response = http
            .post(format!("http://{}/v1/messages", server.addr()))
            .json(&body)
            .send()
            .await?;
        response.text().await
    }
    .await;
    assert!(
        gave_up.is_err(),
        "the stalled answer never ended: {gave_up:?}"
    );
    let pids = server.session_pids();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !server.session_pids().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the stalled CLI was closed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // It ignores its stdin closing, as a stalled CLI may: after the grace it is terminated.
    let running = |pid: &u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .to_owned();
        !state.is_empty() && !state.starts_with('Z')
    };
    assert_eq!(pids.len(), 1);
    while pids.iter().any(running) {
        assert!(
            std::time::Instant::now() < deadline,
            "the stalled CLI ended"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.shutdown().await;
}

/// A gateway killed with SIGKILL runs no code to end its CLIs: they die with it all the same,
/// even one that hangs and would never notice its stdin closing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clis_die_with_a_gateway_killed_by_sigkill() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let claude = player(dir.path(), "e_partial_messages", &["--fault", "stall@8"]);
    let mut gateway = tokio::process::Command::new(env!("CARGO_BIN_EXE_ccwire"))
        // The player is a script that runs ccwire from the build tree: outside the sandbox,
        // which shows a CLI nothing but its own executable.
        .args([
            "serve",
            "--sandbox",
            "off",
            "--listen",
            "127.0.0.1:0",
            "--claude",
        ])
        .arg(&claude)
        .env("HOME", dir.path())
        .env_remove("CCWIRE_API_KEYS")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(gateway.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("ccwire serve says where it listens");
        if let Some(addr) = line.strip_prefix("ccwire serve: listening on http://") {
            break addr.to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let body = json!({"model": "sonnet", "max_tokens": 100, "stream": true,
                      "messages": [{"role": "user", "content": "What is 2 + 2?"}]});
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/v1/messages"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        200,
        "the turn started, then the CLI stalled"
    );
    let gateway_pid = gateway.id().unwrap();
    let mut clis: Vec<u32> = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{gateway_pid}/task"))
        .unwrap()
        .flatten()
    {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        clis.extend(text.split_whitespace().map(|p| p.parse::<u32>().unwrap()));
    }
    // Its watchdog is no CLI.
    clis.retain(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        cmdline.split(|b| *b == 0).nth(1) != Some(b"watchdog".as_slice())
    });
    assert_eq!(clis.len(), 1, "one CLI");
    gateway.start_kill().unwrap();
    gateway.wait().await.unwrap();
    let running = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .to_owned();
        !state.is_empty() && !state.starts_with('Z')
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while running(clis[0]) {
        assert!(
            std::time::Instant::now() < deadline,
            "the CLI outlived its gateway"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(response);
}

/// The number (from 1) of the first line the CLI wrote in a transcript that contains `text`:
/// where a `--fault …@N` hits it.
fn line_with(name: &str, text: &str) -> usize {
    let out: Vec<Value> = std::fs::read_to_string(corpus(name))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["dir"] == "out" && e.get("msg").is_some())
        .collect();
    1 + out
        .iter()
        .position(|e| e["msg"].to_string().contains(text))
        .unwrap_or_else(|| panic!("{name} has no line with {text}"))
}

/// Whether a process runs (a zombie or a reaped one does not).
fn running(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .trim_start()
        .to_owned();
    !state.is_empty() && !state.starts_with('Z')
}

/// What a turn of the Rust `Client` gave: its chunks and how it ended.
struct Outcome {
    chunks: Vec<Chunk>,
    error: Option<String>,
}

impl Outcome {
    fn has_error(&self, kind: &str, detail: &str) -> bool {
        self.chunks.iter().any(|c| {
            matches!(c, Chunk::Error { kind: k, detail: d, .. }
                if serde_json::to_value(k).unwrap() == kind && d.contains(detail))
        })
    }
}

/// The Rust `Client` with a faulty CLI: every fault reaches the app as what it is — an error
/// chunk while the turn goes on, or the turn's error when the CLI is gone — the client closes,
/// and the CLI's process is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gets_each_fault_as_what_it_is_and_no_process_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let permission = line_with("b_bash_allow", "can_use_tool");
    let duplicate = format!("duplicate@{permission}");
    type Check = Box<dyn Fn(&Outcome)>;
    let cases: Vec<(&str, Vec<&str>, Check)> = vec![
        (
            "a_text",
            vec!["garbage@3"],
            Box::new(|o: &Outcome| {
                assert!(o.error.is_none(), "{:?}", o.error);
                assert!(o.has_error("malformed_line", ""), "{:?}", o.chunks);
                assert_eq!(result_of(&o.chunks), recorded_result("a_text"));
            }),
        ),
        (
            "a_text",
            vec!["oversize@3"],
            Box::new(|o: &Outcome| {
                assert!(o.error.is_none(), "{:?}", o.error);
                assert!(o.has_error("line_too_long", ""));
                assert_eq!(result_of(&o.chunks), recorded_result("a_text"));
            }),
        ),
        (
            "b_bash_allow",
            vec![&duplicate],
            Box::new(|o: &Outcome| {
                assert!(o.error.is_none(), "{:?}", o.error);
                assert!(
                    o.has_error("invalid_message", "reuses the id"),
                    "{:?}",
                    o.chunks
                );
                let asked = o
                    .chunks
                    .iter()
                    .filter(|c| matches!(c, Chunk::PermissionRequest { .. }))
                    .count();
                assert_eq!(asked, 1, "the app is asked once");
                assert_eq!(result_of(&o.chunks), recorded_result("b_bash_allow"));
            }),
        ),
        (
            "a_text",
            vec!["unknown-response@3"],
            Box::new(|o: &Outcome| {
                assert!(o.error.is_none(), "{:?}", o.error);
                assert!(
                    o.chunks
                        .iter()
                        .any(|c| matches!(c, Chunk::ControlResult { request_id, .. }
                        if request_id == "req_ccwire_play_unknown")),
                    "{:?}",
                    o.chunks
                );
                assert_eq!(result_of(&o.chunks), recorded_result("a_text"));
            }),
        ),
        (
            "a_text",
            vec!["unknown-cancel@3"],
            Box::new(|o: &Outcome| {
                assert!(o.error.is_none(), "{:?}", o.error);
                assert!(
                    o.chunks
                        .iter()
                        .any(|c| matches!(c, Chunk::Unknown { message }
                        if message.to_string().contains("req_ccwire_play_unknown"))),
                    "{:?}",
                    o.chunks
                );
                assert_eq!(result_of(&o.chunks), recorded_result("a_text"));
            }),
        ),
        (
            "a_text",
            vec!["exit-mid-line@4"],
            Box::new(|o: &Outcome| {
                let error = o.error.as_deref().expect("the turn fails");
                assert!(
                    error.contains("exit code 1") || error.contains("status 1"),
                    "{error}"
                );
            }),
        ),
        (
            "a_text",
            vec!["kill@4"],
            Box::new(|o: &Outcome| {
                let error = o.error.as_deref().expect("the turn fails");
                assert!(error.contains("signal 9"), "{error}");
            }),
        ),
        (
            "a_text",
            vec!["stall@4"],
            Box::new(|o: &Outcome| {
                let error = o.error.as_deref().expect("the turn fails");
                assert!(error.contains("stall timeout"), "{error}");
            }),
        ),
        (
            "f_api_error_400",
            vec!["exit-code=1"],
            Box::new(|o: &Outcome| {
                assert!(o.error.is_none(), "{:?}", o.error);
                assert!(o
                    .chunks
                    .iter()
                    .any(|c| matches!(c, Chunk::TurnComplete { is_error: true, .. })));
            }),
        ),
    ];
    for (tape, faults, check) in cases {
        let mut args = Vec::new();
        for fault in &faults {
            args.extend(["--fault", fault]);
        }
        let mut options = options(player(dir.path(), tape, &args))
            .on_permission(|_| async { PermissionDecision::allow() });
        options.stall_timeout = Some(Duration::from_secs(1));
        let mut client = Client::connect(options).await.unwrap();
        let pid = client.pid();
        let mut outcome = Outcome {
            chunks: Vec::new(),
            error: None,
        };
        let turn = tokio::time::timeout(Duration::from_secs(20), async {
            let mut turn = client.query("Go.").await.unwrap();
            while let Some(next) = turn.next().await {
                match next {
                    Ok(chunk) => outcome.chunks.push(chunk),
                    Err(error) => outcome.error = Some(error.to_string()),
                }
            }
        })
        .await;
        assert!(turn.is_ok(), "{tape} {faults:?}: the turn ended");
        check(&outcome);
        let exit = tokio::time::timeout(Duration::from_secs(20), client.close())
            .await
            .unwrap_or_else(|_| panic!("{tape} {faults:?}: the client closed"));
        if faults == ["exit-code=1"] {
            assert_eq!(
                exit.unwrap().code,
                Some(1),
                "the CLI's exit code reaches the app"
            );
        }
        assert!(!running(pid), "{tape} {faults:?}: the CLI is gone");
    }
}

/// The gateway in front of a faulty CLI: a fault the session survives leaves the answer as
/// recorded; a CLI that dies mid-turn is a 500 that says how; an API error the CLI reports is
/// the client's error; and after shutdown no CLI is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_answers_each_fault_as_what_it_is_and_leaves_no_process() {
    use ccwire_host::serve::{GatewayOptions, Server};
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let duplicate = format!("duplicate@{}", line_with("b_bash_allow", "can_use_tool"));
    let api_error = recorded_result("f_api_error_400").unwrap();
    let cases: Vec<(&str, &str, u16, &str)> = vec![
        ("a_text", "garbage@3", 200, ""),
        ("a_text", "oversize@3", 200, ""),
        ("a_text", "unknown-response@3", 200, ""),
        ("a_text", "unknown-cancel@3", 200, ""),
        ("b_bash_allow", &duplicate, 200, ""),
        ("a_text", "exit-mid-line@4", 500, "exited with status 1"),
        ("a_text", "kill@4", 500, "killed by signal 9"),
        ("f_api_error_400", "exit-code=1", 400, &api_error),
    ];
    for (tape, fault, status, message) in cases {
        let server = Server::start(
            "127.0.0.1:0".parse().unwrap(),
            GatewayOptions {
                claude: Some(player(dir.path(), tape, &["--fault", fault])),
                ..GatewayOptions::default()
            },
        )
        .await
        .unwrap();
        let body = json!({"model": "sonnet", "max_tokens": 100,
                          "messages": [{"role": "user", "content": "Go."}]});
        let response = tokio::time::timeout(
            Duration::from_secs(20),
            http.post(format!("http://{}/v1/messages", server.addr()))
                .json(&body)
                .send(),
        )
        .await
        .unwrap_or_else(|_| panic!("{tape} {fault}: answered"))
        .unwrap();
        assert_eq!(response.status().as_u16(), status, "{tape} {fault}");
        let answer: Value = response.json().await.unwrap();
        if status == 200 {
            let text = answer["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<String>();
            // The response holds every model message of the turn; the result is the last.
            let recorded = recorded_result(tape).unwrap();
            assert!(text.ends_with(&recorded), "{tape} {fault}: {text}");
        } else {
            let error = answer["error"]["message"].as_str().unwrap();
            assert!(error.contains(message), "{tape} {fault}: {error}");
        }
        let pids = server.session_pids();
        server.shutdown().await;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while pids.iter().any(|p| running(*p)) {
            assert!(
                std::time::Instant::now() < deadline,
                "{tape} {fault}: no CLI is left"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A tape made from a recorded session with an MCP server's elicitation and a dialog put in
/// before its result, each answered as `answers` says.
fn tape_with_requests(dir: &Path, answers: [Value; 2]) -> PathBuf {
    let text = std::fs::read_to_string(corpus("a_text")).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let at = lines
        .iter()
        .position(|l| l.contains(r#""type": "result""#))
        .unwrap();
    let entry = |dir: &str, msg: Value| json!({"dir": dir, "t_ms": 1, "msg": msg}).to_string();
    let [elicited, dialog] = answers;
    let inserted = [
        entry(
            "out",
            json!({"type": "control_request", "request_id": "e1", "request": {
                "subtype": "elicitation", "mcp_server_name": "notes",
                "message": "Which folder?", "mode": "form",
                "requested_schema": {"type": "object",
                    "properties": {"folder": {"type": "string"}}}}}),
        ),
        entry(
            "in",
            json!({"type": "control_response", "response": {"subtype": "success",
                "request_id": "e1", "response": elicited}}),
        ),
        entry(
            "out",
            json!({"type": "control_request", "request_id": "d1", "request": {
                "subtype": "request_user_dialog", "dialog_kind": "refusal_fallback_prompt",
                "payload": {"model": "claude-x"}}}),
        ),
        entry(
            "in",
            json!({"type": "control_response", "response": {"subtype": "success",
                "request_id": "d1", "response": dialog}}),
        ),
    ];
    lines.splice(at..at, inserted);
    let path = dir.join("tape-requests.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// The host's answers in a client's recording of its session.
fn answers_in(recording: &Path) -> Vec<Value> {
    std::fs::read_to_string(recording)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["dir"] == "in" && e["msg"]["type"] == "control_response")
        .map(|e| e["msg"]["response"].clone())
        .collect()
}

/// The Rust `Client` answers an MCP server's elicitation and renders a dialog through its
/// handlers; the dialog kinds it renders go to the CLI in `initialize`.
#[tokio::test]
async fn a_client_answers_elicitations_and_dialogs_through_its_handlers() {
    let dir = tempfile::tempdir().unwrap();
    let accept = json!({"action": "accept", "content": {"folder": "inbox"}});
    let completed = json!({"behavior": "completed", "result": {"choice": "retry"}});
    let tape = tape_with_requests(dir.path(), [accept.clone(), completed.clone()]);
    let claude = dir.path().join("claude-requests");
    std::fs::write(
        &claude,
        format!(
            "#!/bin/sh\nexec '{}' play '{}' --instant -- \"$@\"\n",
            env!("CARGO_BIN_EXE_ccwire"),
            tape.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let recording = dir.path().join("session.jsonl");
    let mut with_handlers = options(claude.clone())
        .on_elicitation(|request| async move {
            assert_eq!(request["server"], "notes");
            assert_eq!(
                request["requested_schema"]["properties"]["folder"]["type"],
                "string"
            );
            json!({"action": "accept", "content": {"folder": "inbox"}})
        })
        .on_user_dialog(&["refusal_fallback_prompt"], |request| async move {
            assert_eq!(request["payload"]["model"], "claude-x");
            json!({"behavior": "completed", "result": {"choice": "retry"}})
        });
    with_handlers.record = Some(recording.clone());
    let mut client = Client::connect(with_handlers).await.unwrap();
    let chunks = client.query("Go.").await.unwrap().collect().await.unwrap();
    client.close().await;
    for kind in ["elicitation_request", "dialog_request", "request_resolved"] {
        assert!(
            chunks.iter().any(|c| c.kind() == kind),
            "{kind} reaches the app"
        );
    }
    let answers = answers_in(&recording);
    let answer_to = |id: &str| {
        answers
            .iter()
            .find(|a| a["request_id"] == id)
            .unwrap_or_else(|| panic!("{id} answered: {answers:?}"))["response"]
            .clone()
    };
    assert_eq!(answer_to("e1"), accept);
    assert_eq!(answer_to("d1"), completed);
    let initialize = std::fs::read_to_string(&recording)
        .unwrap()
        .lines()
        .find(|l| l.contains(r#""subtype":"initialize""#))
        .map(str::to_owned)
        .unwrap();
    assert!(initialize.contains(r#""supportedDialogKinds":["refusal_fallback_prompt"]"#));

    // With no handlers: the elicitation is declined at once and the dialog left alone.
    let recording = dir.path().join("session-2.jsonl");
    let mut without = options(claude);
    without.record = Some(recording.clone());
    let mut client = Client::connect(without).await.unwrap();
    {
        let mut turn = client.query("Go.").await.unwrap();
        while let Some(chunk) = turn.next().await {
            if matches!(chunk.unwrap(), Chunk::DialogRequest { .. }) {
                break;
            }
        }
    }
    client.close().await;
    let answers = answers_in(&recording);
    assert!(answers
        .iter()
        .any(|a| a["request_id"] == "e1" && a["response"] == json!({"action": "decline"})));
    assert!(
        !answers.iter().any(|a| a["request_id"] == "d1"),
        "a dialog is never answered for the app: {answers:?}"
    );
}

//! `ccwire run` and `ccwire record` against the real CLI, run offline.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{FakeAnthropic, Match, Reply, Script};
use serde_json::{json, Value};

const MODEL: &str = "claude-sonnet-4-5-20250929";

fn ccwire(home: &OfflineHome, server: &FakeAnthropic, args: &[&str], stdin: &[u8]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ccwire"));
    for key in inherited_to_remove() {
        command.env_remove(key);
    }
    let mut child = command
        .args(args)
        .envs(home.env(&server.base_url()))
        .env("CCWIRE_CLAUDE", claude_path())
        .current_dir(home.workdir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn script() -> Script {
    Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .on_tool_result(Reply::text("The file is written."))
        .on_prompt(
            "PLEASE-WRITE",
            Reply::tool(
                "Bash",
                json!({"command": "echo hi > out.txt", "description": "write"}),
            ),
        )
        .on_prompt(
            "PLEASE-FAIL",
            Reply::error(500, "api_error", "fake failure"),
        )
        .on_prompt("PLEASE-GREET", Reply::text("Hello from the fake model."))
        .on_prompt(
            "PLEASE-ECHO",
            Reply::tool(
                "Bash",
                json!({"command": "node -p \"'hello-' + 'from-bash'\"", "description": "greet"}),
            ),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_streams_the_answer_and_exits_0() {
    let server = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let out = ccwire(
        &home,
        &server,
        &["run", "--model", MODEL, "PLEASE-GREET me"],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Hello from the fake model."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_shows_tool_calls_with_their_status_and_records_a_transcript() {
    let server = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let transcript = home.path().join("run.jsonl");
    let args = [
        "run",
        "--model",
        MODEL,
        "--permission",
        "allow",
        "--record",
        transcript.to_str().unwrap(),
        "PLEASE-WRITE the file",
    ];
    let out = ccwire(&home, &server, &args, b"");
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("⏺ Bash"), "{stdout}");
    assert!(
        stdout.contains("Bash: running") && stdout.contains("Bash: success"),
        "{stdout}"
    );
    assert!(stdout.contains("The file is written."), "{stdout}");
    assert!(home.workdir().join("out.txt").exists());
    let chunks = ccwire_core::replay(&std::fs::read(&transcript).unwrap());
    assert!(chunks.iter().any(|c| matches!(
        c,
        ccwire_core::Chunk::TurnComplete {
            is_error: false,
            ..
        }
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_denies_and_prints_json_chunks() {
    let server = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let out = ccwire(
        &home,
        &server,
        &[
            "run",
            "--json",
            "--model",
            MODEL,
            "--permission",
            "deny",
            "PLEASE-WRITE the file",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(0));
    let chunks: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let resolved = chunks
        .iter()
        .find(|c| c["type"] == "permission_resolved")
        .unwrap();
    assert_eq!(resolved["behavior"], "deny");
    assert_eq!(chunks.last().unwrap()["type"], "turn_complete");
    assert!(!home.workdir().join("out.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_exits_1_when_the_turn_fails() {
    let server = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let out = ccwire(
        &home,
        &server,
        &["run", "--model", MODEL, "PLEASE-FAIL now"],
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ccwire run: the turn failed: "), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_without_a_cli_names_the_install_command() {
    let out = Command::new(env!("CARGO_BIN_EXE_ccwire"))
        .args(["run", "--claude", "/nonexistent/claude", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("npm install -g @anthropic-ai/claude-code@2.1.332"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_passes_the_session_through_and_writes_the_transcript() {
    let server = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let transcript = home.path().join("rec.jsonl");
    let user = "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"PLEASE-GREET me\"},\"parent_tool_use_id\":null,\"session_id\":\"\"}\n";
    let args = [
        "record",
        "--out",
        transcript.to_str().unwrap(),
        "--",
        "--output-format",
        "stream-json",
        "--input-format",
        "stream-json",
        "--verbose",
        "--model",
        MODEL,
    ];
    let out = ccwire(&home, &server, &args, user.as_bytes());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l.contains("\"type\":\"result\"")),
        "the CLI's output passes through"
    );
    let recorded = std::fs::read_to_string(&transcript).unwrap();
    let lines: Vec<Value> = recorded
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["dir"], "in");
    assert_eq!(lines[0]["msg"]["type"], "user");
    assert!(lines
        .iter()
        .any(|l| l["dir"] == "out" && l["msg"]["type"] == "result"));
    let chunks = ccwire_core::replay(recorded.as_bytes());
    let text: String = chunks
        .iter()
        .filter_map(|c| match c {
            ccwire_core::Chunk::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello from the fake model.");
    assert_eq!(lines.last().unwrap()["note"], "CLI exit code 0");

    // The recording plays the CLI's part: the same input gives the same output, checked.
    let played = ccwire(
        &home,
        &server,
        &[
            "play",
            transcript.to_str().unwrap(),
            "--verify",
            "--instant",
        ],
        user.as_bytes(),
    );
    assert_eq!(
        played.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&played.stderr)
    );
    let out_lines: Vec<Value> = lines
        .iter()
        .filter(|l| l["dir"] == "out")
        .map(|l| l["msg"].clone())
        .collect();
    let played: Vec<Value> = String::from_utf8_lossy(&played.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(played, out_lines);
}

/// The child processes of `pid`.
fn children(pid: u32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect::<Vec<i32>>()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_run_takes_the_cli_down_with_it() {
    let script = Script::new().when_slow(
        Match::LastUserContains {
            text: "PLEASE-DAWDLE".into(),
        },
        Reply::text("this answer takes a very long time to stream"),
        std::time::Duration::from_secs(2),
    );
    let server = FakeAnthropic::start(script).await;
    let home = OfflineHome::new();
    let mut command = Command::new(env!("CARGO_BIN_EXE_ccwire"));
    for key in inherited_to_remove() {
        command.env_remove(key);
    }
    let mut child = command
        .args(["run", "--model", MODEL, "PLEASE-DAWDLE"])
        .envs(home.env(&server.base_url()))
        .env("CCWIRE_CLAUDE", claude_path())
        .current_dir(home.workdir())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while server.model_calls().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the CLI never called the model"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let cli = children(child.id());
    assert_eq!(cli.len(), 1, "ccwire runs one CLI process");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!running(cli[0]), "the CLI is not running any more");
}

/// Whether a process exists and is not a zombie (an orphaned zombie waits for its reaper).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(") ")
                .map(|(_, rest)| !rest.starts_with('Z'))
        })
        .unwrap_or(false)
}

/// `ccwire run` on a terminal: "a" (always) at the permission prompt saves the CLI's suggested
/// rule, so the next run of the same command is not asked at all — even with
/// `--permission deny`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_at_the_prompt_saves_the_rule_for_the_next_run() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` to give ccwire run a terminal");
        return;
    }
    let server = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let line = format!(
        "{} run --model {MODEL} {}",
        quote(env!("CARGO_BIN_EXE_ccwire")),
        quote("PLEASE-ECHO something")
    );
    let mut command = Command::new("script");
    for key in inherited_to_remove() {
        command.env_remove(key);
    }
    let mut child = command
        .args(["-qec", &line, "/dev/null"])
        .envs(home.env(&server.base_url()))
        .env("CCWIRE_CLAUDE", claude_path())
        .current_dir(home.workdir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"a\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("a = always (Bash(node -p"),
        "the prompt offers to always allow the command: {shown}"
    );
    assert!(shown.contains("hello-from-bash"), "{shown}");
    let settings = std::fs::read_to_string(home.workdir().join(".claude/settings.local.json"))
        .expect("the rule is saved in the local settings");
    assert!(settings.contains("Bash(node -p"), "{settings}");

    let again = ccwire(
        &home,
        &server,
        &[
            "run",
            "--json",
            "--model",
            MODEL,
            "--permission",
            "deny",
            "PLEASE-ECHO again",
        ],
        b"",
    );
    let chunks: Vec<Value> = String::from_utf8_lossy(&again.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(again.status.code(), Some(0));
    assert!(
        !chunks.iter().any(|c| c["type"] == "permission_request"),
        "not asked again"
    );
    let result = chunks.iter().find(|c| c["type"] == "tool_result").unwrap();
    assert_eq!(result["is_error"], false, "{result}");
    assert!(result["content"].to_string().contains("hello-from-bash"));
}

/// Whatever the CLI prints is recorded whole — text that is not JSON, bytes that are not
/// UTF-8, a line over the limit — and the transcript replays to the chunks the live session
/// gave for those bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_keeps_every_line_and_replays_it_as_the_live_session_read_it() {
    let server = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let cli = home.path().join("odd-cli.sh");
    std::fs::write(
        &cli,
        "#!/bin/sh\n\
         printf '%s\\n' '{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s1\",\"tools\":[],\"model\":\"m\"}'\n\
         printf 'not json at all\\n'\n\
         printf 'bad \\377\\376 bytes\\n'\n\
         head -c 34000000 /dev/zero | tr '\\000' 'a'\n\
         printf '\\n'\n",
    )
    .unwrap();
    std::fs::set_permissions(&cli, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let transcript = home.path().join("odd.jsonl");
    let args = [
        "record",
        "--claude",
        cli.to_str().unwrap(),
        "--out",
        transcript.to_str().unwrap(),
        "--",
    ];
    let out = ccwire(&home, &server, &args, b"");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let live = ccwire_core::replay(&out.stdout);
    let recorded = std::fs::read(&transcript).unwrap();
    assert!(recorded.len() < 10_000, "the long line is not kept whole");
    let lines: Vec<Value> = String::from_utf8(recorded.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let out_lines: Vec<&Value> = lines.iter().filter(|l| l["dir"] == "out").collect();
    assert_eq!(out_lines.len(), 4, "{lines:?}");
    assert_eq!(out_lines[0]["msg"]["subtype"], "init");
    assert_eq!(out_lines[1]["text"], "not json at all");
    assert_eq!(
        out_lines[2]["base64"], "YmFkIP/+IGJ5dGVz",
        "the bytes as they were"
    );
    assert_eq!(out_lines[3]["too_long"], 34_000_000);
    let replayed = ccwire_core::replay(&recorded);
    let errors = |chunks: &[ccwire_core::Chunk]| -> Vec<Value> {
        chunks
            .iter()
            .filter(|c| matches!(c, ccwire_core::Chunk::Error { .. }))
            .map(|c| serde_json::to_value(c).unwrap())
            .collect()
    };
    assert_eq!(errors(&live).len(), 3, "{live:?}");
    assert_eq!(errors(&replayed), errors(&live));
}

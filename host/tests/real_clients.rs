//! End-to-end with the clients people point at a gateway, run unchanged: Claude Code 2.1.332
//! itself (`claude -p`) as the Anthropic client of `ccwire serve`, and the Codex CLI
//! (`codex exec`) as its Responses API client; the gateway runs the real CLI against the
//! scripted model. The model calls the client's own shell tool through a held tool call; the
//! client runs it on its side and the turn ends with the model's text.

mod support;

use std::time::Duration;

use ccwire_tests::cli::{claude_path, codex_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{Match, Reply, Script, Usage};
use serde_json::{json, Value};
use support::*;

const CALL: Usage = Usage {
    input_tokens: 1500,
    output_tokens: 30,
    cache_creation_input_tokens: 200,
    cache_read_input_tokens: 9000,
};
const ANSWER: Usage = Usage {
    input_tokens: 1600,
    output_tokens: 12,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 9200,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_as_the_client_runs_its_own_bash_through_a_held_call() {
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .when(
            Match::ToolResult {
                tool: Some("mcp__client__multi_agent_v1__close_agent".into()),
            },
            Reply::Echo,
        )
        .on_tool_result(Reply::text("The file is made."))
        .usage(ANSWER)
        .on_prompt(
            "PLEASE-MAKE",
            Reply::tool(
                "mcp__client__Bash",
                json!({"command": "echo made-by-the-client > made.txt", "description": "Make a file"}),
            ),
        )
        .usage(CALL)
        .when(Match::Any, Reply::text("(unexpected request)"));
    let gw = Gw::start_with(script, |_| {}).await;
    let client_home = OfflineHome::new();
    let mut command = tokio::process::Command::new(claude_path());
    for key in inherited_to_remove() {
        command.env_remove(key);
    }
    let run = command
        .args([
            "-p",
            "PLEASE-MAKE a file",
            "--allowedTools",
            "Bash",
            "--output-format",
            "json",
        ])
        .envs(client_home.env(&gw.url("")))
        .current_dir(client_home.workdir())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the client finishes in time")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "claude -p failed: {stderr}");
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();

    // What the client got: its own Bash ran on its side, then the model's final text.
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["result"], "The file is made.", "{result}");
    let made = std::fs::read_to_string(client_home.workdir().join("made.txt")).unwrap();
    assert_eq!(made.trim(), "made-by-the-client");
    // Exact usage, as the model reported it for each of the two responses.
    for field in [
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ] {
        let of = |u: Usage| serde_json::to_value(u).unwrap()[field].as_u64().unwrap();
        assert_eq!(result["usage"][field], of(CALL) + of(ANSWER), "{field}");
    }

    // What the model got: the client's tools offered, the prompt, then the client's result,
    // all on one CLI session of the gateway.
    let calls = gw.fake.model_calls();
    let first = calls
        .iter()
        .find(|c| c.last_user_text().contains("PLEASE-MAKE"))
        .expect("the prompt reached the model");
    let tools: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"mcp__client__Bash"), "{tools:?}");
    let last = calls.last().unwrap();
    let results: Vec<&Value> = last.body["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 1, "{}", last.body);
    assert_eq!(
        gw.server().session_pids().len(),
        1,
        "one CLI for the conversation"
    );
    gw.stop().await;
}

/// Runs `codex exec <prompt>` against the gateway, as a user who configured a provider on its
/// Responses API would: a private `CODEX_HOME`, no sandbox and no approvals (the test's own
/// temporary directory is its workspace), Codex's own retries.
async fn codex_exec(gw: &Gw, home: &OfflineHome, prompt: &str) -> std::process::Output {
    let codex_home = home.workdir().join(".codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = format!(
        r#"model = "claude-sonnet-4-5"
model_provider = "ccwire"

[model_providers.ccwire]
name = "ccwire"
base_url = "{}"
wire_api = "responses"
env_key = "CODEX_GATEWAY_KEY"
"#,
        gw.url("/v1")
    );
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    let mut command = tokio::process::Command::new(codex_path());
    for key in inherited_to_remove() {
        command.env_remove(key);
    }
    let run = command
        .args([
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            prompt,
        ])
        .envs(home.env(&gw.url("")))
        .env("CODEX_HOME", &codex_home)
        .env("CODEX_GATEWAY_KEY", "unused")
        .current_dir(home.workdir())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("codex finishes in time")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_as_the_client_answers_and_runs_its_own_exec_command_through_a_held_call() {
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .when(
            Match::ToolResult {
                tool: Some("mcp__client__multi_agent_v1__close_agent".into()),
            },
            Reply::Echo,
        )
        .on_tool_result(Reply::text("The file is made."))
        .usage(ANSWER)
        .on_prompt(
            "PLEASE-MAKE",
            Reply::tool(
                "mcp__client__exec_command",
                json!({"cmd": "echo made-by-codex > made.txt"}),
            ),
        )
        .usage(CALL)
        .on_prompt(
            "PLEASE-CLOSE",
            Reply::tool(
                "mcp__client__multi_agent_v1__close_agent",
                json!({"target": "no-such-agent"}),
            ),
        )
        .on_prompt("SAY-HI", Reply::text("Hi from the model."))
        .when(Match::Any, Reply::text("(unexpected request)"));
    let gw = Gw::start_with(script, |_| {}).await;

    // A text answer.
    let home = OfflineHome::new();
    let output = codex_exec(&gw, &home, "SAY-HI please").await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "codex exec failed: {stderr}");
    assert_eq!(stdout.trim(), "Hi from the model.", "{stderr}");

    // A round trip: the model calls Codex's exec_command, Codex runs it on its side and sends
    // the output back with the whole conversation, the held call gets it, the model answers.
    let home = OfflineHome::new();
    let output = codex_exec(&gw, &home, "PLEASE-MAKE a file").await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "codex exec failed: {stderr}");
    assert_eq!(stdout.trim(), "The file is made.", "{stderr}");
    let made = std::fs::read_to_string(home.workdir().join("made.txt")).unwrap();
    assert_eq!(made.trim(), "made-by-codex");
    // Usage: Codex totals the input outside the cache (`input_tokens` less
    // `input_tokens_details.cached_tokens`) and the output of both responses as "tokens used";
    // the numbers are the model's own.
    let counted = |u: Usage| u.input_tokens + u.cache_creation_input_tokens + u.output_tokens;
    let total = counted(CALL) + counted(ANSWER);
    let shown = format!("{},{:03}", total / 1000, total % 1000);
    assert!(
        stderr.contains(&format!("tokens used\n{shown}\n")),
        "{shown} tokens used: {stderr}"
    );

    // What the model got: Codex's tools under their own names, its developer instructions as
    // the system prompt, and the command's output as the held call's result.
    let calls = gw.fake.model_calls();
    let first = calls
        .iter()
        .find(|c| c.last_user_text().contains("PLEASE-MAKE"))
        .expect("the prompt reached the model");
    let tools: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"mcp__client__exec_command"), "{tools:?}");
    eprintln!("TOOLS {tools:?}");
    for c in gw.fake.requests() {
        eprintln!(
            "REQ {} {}",
            c.path,
            c.body.to_string().chars().take(200).collect::<String>()
        );
    }
    let system = first.body["system"].to_string();
    assert!(
        system.contains("Codex"),
        "Codex's developer prompt: {system:.300}"
    );
    let result = last_tool_result(&calls);
    assert!(
        result.to_string().contains("exit"),
        "the command's outcome as Codex reports it: {result}"
    );

    // A function of one of Codex's `namespace` tools (its sub-agents): offered to the model,
    // called by its namespace, answered by Codex.
    let home = OfflineHome::new();
    let output = codex_exec(&gw, &home, "PLEASE-CLOSE the agent").await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "codex exec failed: {stderr}");
    let calls = gw.fake.model_calls();
    let first = calls
        .iter()
        .find(|c| c.last_user_text().contains("PLEASE-CLOSE"))
        .expect("the prompt reached the model");
    assert!(
        first.body["tools"]
            .to_string()
            .contains("mcp__client__multi_agent_v1__close_agent"),
        "the namespace's functions are offered"
    );
    let result = last_tool_result(&calls);
    assert!(
        result.to_string().contains("no-such-agent"),
        "Codex's answer: {result}"
    );
    gw.stop().await;
}

/// The tool result in the last user message of the last model call (the CLI may put system
/// turns after it).
fn last_tool_result(calls: &[ccwire_tests::fake_anthropic::Recorded]) -> Value {
    let last = calls.last().expect("a model call");
    (last.body["messages"].as_array().unwrap().iter().rev())
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_array())
        .and_then(|blocks| blocks.iter().find(|b| b["type"] == "tool_result").cloned())
        .unwrap_or_else(|| panic!("{}", last.body))
}

//! End-to-end with the clients people point at a gateway, run unchanged: here Claude Code
//! 2.1.330 itself (`claude -p`) as the Anthropic client of `ccwire serve`, which runs the same
//! CLI against the scripted model. The model calls the client's own Bash through a held tool
//! call; the client runs it on its side and the turn ends with the model's text.

mod support;

use std::time::Duration;

use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
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

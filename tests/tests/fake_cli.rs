//! The fake CLI's own behaviours that the gateway simulation does not reach: time, long prompts
//! and its transcript as the `fake-claude` binary mirrors it.

use ccwire_tests::fake_cli::{Config, FakeCli, Transcript};
use serde_json::{json, Value};

fn fake(args: &[&str]) -> FakeCli {
    let config = Config {
        model: ("default", "Default (fake)"),
        projects_dir: "/home/u/.claude/projects/-w".to_owned(),
        transcript: Transcript::Whole,
    };
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    FakeCli::new(config, &args)
}

fn prompt(text: &str) -> String {
    json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]}})
        .to_string()
}

fn parsed(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l.strip_suffix('\n').expect("a whole line")).unwrap())
        .collect()
}

fn result_of(lines: &[String]) -> Option<Value> {
    parsed(lines).into_iter().find(|l| l["type"] == "result")
}

#[test]
fn a_slow_prompt_is_answered_when_its_time_comes() {
    let mut cli = fake(&[]);
    let now = cli.handle_line(1_000, &prompt("slow: 250 please"));
    assert_eq!(result_of(&now), None);
    assert_eq!(cli.poll_timeout(), Some(1_250));
    assert!(cli.handle_timeout(1_249).is_empty());
    let later = cli.handle_timeout(1_250);
    assert_eq!(
        result_of(&later).unwrap()["result"],
        "echo: slow: 250 please"
    );
    assert_eq!(cli.poll_timeout(), None);
}

#[test]
fn an_interrupt_ends_a_slow_prompt_before_its_answer() {
    let mut cli = fake(&[]);
    cli.handle_line(0, &prompt("slow: 100 wait"));
    let interrupt = json!({"type": "control_request", "request_id": "i1",
                           "request": {"subtype": "interrupt"}});
    let out = cli.handle_line(10, &interrupt.to_string());
    assert_eq!(result_of(&out).unwrap()["is_error"], true);
    assert_eq!(cli.poll_timeout(), None);
    assert!(cli.handle_timeout(100).is_empty());
}

#[test]
fn a_long_prompt_is_echoed_as_its_start_and_length() {
    let mut cli = fake(&[]);
    let text = "é".repeat(3_000);
    let out = cli.handle_line(0, &prompt(&text));
    let answer = result_of(&out).unwrap()["result"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(answer, format!("echo: {}… (6000 bytes)", "é".repeat(32)));
}

#[test]
fn the_whole_transcript_is_mirrored_to_the_sessions_file() {
    let mut cli = fake(&["--session-mirror", "--session-id", "s1"]);
    let out = parsed(&cli.handle_line(0, &prompt("hi")));
    let mirrored: Vec<(&str, &Value)> = out
        .iter()
        .filter(|l| l["type"] == "transcript_mirror")
        .map(|l| (l["filePath"].as_str().unwrap(), &l["entries"][0]))
        .collect();
    let own = "/home/u/.claude/projects/-w/s1.jsonl";
    assert_eq!(mirrored.len(), 3, "{mirrored:?}");
    assert_eq!(mirrored[0].0, own);
    assert_eq!(mirrored[0].1["message"]["content"][0]["text"], "hi");
    assert_eq!(
        mirrored[1].0,
        "/home/u/.claude/projects/-w/s1/subagents/agent-1.jsonl"
    );
    assert_eq!(mirrored[2].0, own);
    assert_eq!(mirrored[2].1["type"], "assistant");
}

#[test]
fn a_line_it_does_not_know_is_set_aside_and_a_request_still_answered() {
    let mut cli = fake(&[]);
    assert!(cli.handle_line(0, "not json").is_empty());
    let request = json!({"type": "control_request", "request_id": "r1",
                         "request": {"subtype": "mcp_status"}});
    let out = parsed(&cli.handle_line(0, &request.to_string()));
    assert_eq!(out[0]["response"]["subtype"], "success");
    assert_eq!(cli.unexpected.len(), 2);
}

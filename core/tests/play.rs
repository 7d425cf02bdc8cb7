//! The transcript player: a host that writes what the recorded host wrote gets every recorded
//! CLI line back, in order, with its own ids; a host that answers otherwise is caught.

mod common;

use ccwire_core::play::{PlayOutput, Player};
use serde_json::Value;

/// The transcript's lines: (dir, message or note).
fn entries(bytes: &[u8]) -> Vec<(String, Value)> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let dir = v["dir"].as_str().unwrap().to_owned();
            let body = if dir == "note" {
                v["note"].clone()
            } else {
                v["msg"].clone()
            };
            (dir, body)
        })
        .collect()
}

/// Plays a transcript to a host that writes exactly what the recorded host wrote, when the
/// recorded host wrote it (after the CLI lines it answered); returns what the player wrote.
fn play_back(name: &str, verify: bool) -> (Vec<Value>, Option<i32>) {
    let bytes = common::transcript(name);
    let mut player = Player::new(&bytes, verify, None).unwrap();
    let mut written = Vec::new();
    let mut exit = None;
    let drain = |player: &mut Player, written: &mut Vec<Value>, exit: &mut Option<i32>| {
        while let Some(output) = player.poll_output() {
            match output {
                PlayOutput::Write { bytes, .. } => {
                    written.push(serde_json::from_slice(&bytes).unwrap());
                }
                PlayOutput::Exit(code) => *exit = Some(code),
                PlayOutput::Diverged(d) => panic!("{name}: {d}"),
                other => panic!("{other:?}"),
            }
        }
    };
    drain(&mut player, &mut written, &mut exit);
    for (dir, body) in entries(&bytes) {
        match dir.as_str() {
            "in" => player.handle_stdin(0, format!("{body}\n").as_bytes()),
            "note" if body.as_str().unwrap_or("").contains("closing CLI stdin") => {
                player.handle_stdin_eof(0);
            }
            _ => {}
        }
        drain(&mut player, &mut written, &mut exit);
    }
    if exit.is_none() {
        player.handle_stdin_eof(0);
        drain(&mut player, &mut written, &mut exit);
    }
    (written, exit)
}

#[test]
fn every_corpus_transcript_plays_back_its_cli_lines_in_order() {
    for entry in std::fs::read_dir(common::corpus_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let Some(name) = name.strip_suffix(".jsonl") else {
            continue;
        };
        let bytes = common::transcript(name);
        let recorded: Vec<Value> = entries(&bytes)
            .into_iter()
            .filter(|(dir, _)| dir == "out")
            .map(|(_, msg)| msg)
            .collect();
        // The code the recording's note gives (`CLI exit code 1` after a login failure).
        let code = String::from_utf8_lossy(&bytes)
            .lines()
            .rev()
            .filter_map(|l| l.split("\"CLI exit code ").nth(1))
            .find_map(|rest| rest.split('"').next()?.parse::<i32>().ok())
            .unwrap_or(0);
        let (written, exit) = play_back(name, true);
        assert_eq!(written.len(), recorded.len(), "{name}");
        assert_eq!(written, recorded, "{name}");
        assert_eq!(exit, Some(code), "{name}: exits as the CLI did");
    }
}

#[test]
fn the_host_s_own_request_and_callback_ids_come_back_in_the_cli_s_answers() {
    let bytes = common::transcript("i_hook_pretooluse");
    let mut player = Player::new(&bytes, true, None).unwrap();
    let mut hook_ids = Vec::new();
    let mut init_answer = None;
    let mut feed = |player: &mut Player, line: String| {
        player.handle_stdin(0, format!("{line}\n").as_bytes());
        while let Some(output) = player.poll_output() {
            if let PlayOutput::Write { bytes, .. } = output {
                let msg: Value = serde_json::from_slice(&bytes).unwrap();
                if msg["type"] == "control_response" {
                    init_answer.get_or_insert(msg["response"]["request_id"].clone());
                }
                if msg["request"]["subtype"] == "hook_callback" {
                    hook_ids.push(msg["request"]["callback_id"].clone());
                }
            }
        }
    };
    for (dir, mut msg) in entries(&bytes) {
        if dir != "in" {
            continue;
        }
        if msg["request"]["subtype"] == "initialize" {
            // This host names its requests and hooks its own way.
            msg["request_id"] = "init-by-another-host".into();
            msg["request"]["hooks"]["PreToolUse"][0]["hookCallbackIds"][0] = "pre".into();
            msg["request"]["hooks"]["PostToolUse"][0]["hookCallbackIds"][0] = "post".into();
        }
        feed(&mut player, msg.to_string());
    }
    assert_eq!(init_answer, Some("init-by-another-host".into()));
    assert_eq!(hook_ids, ["pre", "post"]);
}

#[test]
fn with_verify_a_host_that_decides_otherwise_is_caught_where_it_diverged() {
    let bytes = common::transcript("b_bash_allow");
    let mut player = Player::new(&bytes, true, None).unwrap();
    let mut diverged = None;
    for (dir, mut msg) in entries(&bytes) {
        if dir != "in" {
            continue;
        }
        if msg["type"] == "control_response" {
            // The recording allowed the Bash call; this host denies it.
            msg["response"]["response"] =
                serde_json::json!({"behavior": "deny", "message": "No shell."});
        }
        player.handle_stdin(0, format!("{msg}\n").as_bytes());
        while let Some(output) = player.poll_output() {
            if let PlayOutput::Diverged(d) = output {
                diverged = Some(d);
            }
        }
    }
    let d = diverged.expect("the player noticed");
    let text = d.to_string();
    assert!(text.contains("differs from the recording"), "{text}");
    assert!(
        text.contains(r#""behavior":"allow""#) && text.contains(r#""behavior":"deny""#),
        "{text}"
    );
    assert!(d.line.is_some());
}

#[test]
fn a_paced_tape_says_when_its_next_line_is_due() {
    let bytes = common::transcript("a_text");
    let mut player = Player::new(&bytes, false, Some(2.0)).unwrap();
    for (dir, msg) in entries(&bytes) {
        if dir == "in" {
            player.handle_stdin(1_000, format!("{msg}\n").as_bytes());
        }
    }
    let mut lines = 0;
    while player.poll_output().is_some() {
        lines += 1;
    }
    let due = player.poll_timeout().expect("the rest is paced");
    assert!(due > 1_000, "{due}");
    player.handle_timeout(due);
    let mut more = 0;
    while player.poll_output().is_some() {
        more += 1;
    }
    assert!(more > 0, "{lines} then {more}");
}

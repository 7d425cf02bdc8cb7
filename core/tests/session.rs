//! Driver-mode behaviour: deadlines (with a harness that jumps time to the next deadline),
//! cancellations, process exit, misuse of the API, MCP handshakes and request ids.

mod common;

use ccwire_core::{
    CommandError, Delivery, McpCallResult, McpServer, McpTool, PermissionDecision, Session,
    SessionConfig, TimeoutReason, Timeouts, UserMessage,
};
use common::{drain, values};
use serde_json::{json, Value};

/// A driver session and a clock that jumps straight to the next deadline.
struct Harness {
    session: Session,
    now: u64,
}

impl Harness {
    fn new(config: SessionConfig) -> Harness {
        Harness {
            session: Session::driver(config),
            now: 1_000,
        }
    }

    fn with_timeouts(timeouts: Timeouts) -> Harness {
        Harness::new(SessionConfig {
            timeouts,
            ..SessionConfig::default()
        })
    }

    /// The CLI writes these messages.
    fn cli(&mut self, messages: &[Value]) -> (Vec<Value>, Vec<Value>) {
        let mut bytes = Vec::new();
        for m in messages {
            bytes.extend(serde_json::to_vec(m).unwrap());
            bytes.push(b'\n');
        }
        self.session.handle_stdout(self.now, &bytes);
        self.drain()
    }

    fn drain(&mut self) -> (Vec<Value>, Vec<Value>) {
        let (chunks, writes) = drain(&mut self.session);
        (values(&chunks), writes)
    }

    /// Jumps to the next deadline and applies it.
    fn jump(&mut self) -> (TimeoutReason, Vec<Value>, Vec<Value>) {
        let (at, reason) = self.session.poll_timeout().expect("a deadline is set");
        assert!(at >= self.now, "deadlines are in the future");
        self.now = at;
        self.session.handle_timeout(self.now);
        let (chunks, writes) = self.drain();
        (reason, chunks, writes)
    }

    /// A turn with one Bash call, announced by assistant frames.
    fn start_tool_turn(&mut self, tool: &str) {
        self.session
            .send_user_message(self.now, UserMessage::text("go"))
            .unwrap();
        self.drain();
        self.cli(&[
            json!({"type":"system","subtype":"init","session_id":"s1","model":"m","cwd":"/w","tools":[],"mcp_servers":[]}),
            json!({"type":"assistant","message":{"id":"msg_1","model":"m","content":[
                {"type":"tool_use","id":tool,"name":"Bash","input":{"command":"touch x"}}]},"parent_tool_use_id":null}),
        ]);
    }
}

fn can_use_tool(request_id: &str, tool: &str) -> Value {
    json!({"type":"control_request","request_id":request_id,"request":{
        "subtype":"can_use_tool","tool_name":"Bash","input":{"command":"touch x"},"tool_use_id":tool}})
}

fn tool_result(tool: &str, is_error: bool, text: &str) -> Value {
    json!({"type":"user","message":{"role":"user","content":[
        {"type":"tool_result","tool_use_id":tool,"content":text,"is_error":is_error}]},"parent_tool_use_id":null})
}

fn tools_call(request_id: &str, rpc_id: u64, tool_use_id: &str) -> Value {
    json!({"type":"control_request","request_id":request_id,"request":{"subtype":"mcp_message","server_name":"client",
        "message":{"jsonrpc":"2.0","id":rpc_id,"method":"tools/call","params":{"name":"lookup","arguments":{"q":"x"},
        "_meta":{"claudecode/toolUseId":tool_use_id}}}}})
}

fn find<'a>(chunks: &'a [Value], kind: &str) -> &'a Value {
    chunks
        .iter()
        .find(|c| c["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} chunk in {chunks:#?}"))
}

fn statuses(chunks: &[Value]) -> Vec<(String, Option<String>)> {
    chunks
        .iter()
        .filter(|c| c["type"] == "tool_status")
        .map(|c| {
            (
                c["status"].as_str().unwrap().to_owned(),
                c["reason"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn an_unanswered_permission_is_denied_at_its_deadline() {
    let mut h = Harness::with_timeouts(Timeouts {
        permission_ms: Some(30_000),
        ..Timeouts::default()
    });
    h.start_tool_turn("toolu_1");
    let (chunks, _) = h.cli(&[can_use_tool("p1", "toolu_1")]);
    assert_eq!(find(&chunks, "permission_request")["deadline_ms"], 31_000);
    assert!(h.session.tool_wait().waiting);

    let (reason, chunks, writes) = h.jump();
    assert_eq!(
        reason,
        TimeoutReason::Permission {
            request_id: "p1".into()
        }
    );
    assert_eq!(h.now, 31_000);
    let resolved = find(&chunks, "permission_resolved");
    assert_eq!(
        (resolved["behavior"].as_str(), resolved["reason"].as_str()),
        (Some("deny"), Some("timeout"))
    );
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0]["response"]["request_id"], "p1");
    assert_eq!(writes[0]["response"]["response"]["behavior"], "deny");
    assert!(!h.session.tool_wait().waiting);
    assert_eq!(h.session.poll_timeout(), None);

    // A late answer is dropped and writes nothing.
    let late = h
        .session
        .respond_permission(h.now, "p1", PermissionDecision::allow());
    assert_eq!(late, Ok(Delivery::Dropped));
    assert!(h.drain().1.is_empty());

    let (chunks, _) = h.cli(&[tool_result("toolu_1", true, "denied")]);
    assert_eq!(
        statuses(&chunks),
        [("error".into(), Some("timeout".into()))]
    );
}

#[test]
fn an_unanswered_mcp_call_gets_an_error_result_at_its_deadline() {
    let mut h = Harness::with_timeouts(Timeouts {
        mcp_call_ms: Some(600_000),
        ..Timeouts::default()
    });
    h.start_tool_turn("toolu_2");
    let (chunks, _) = h.cli(&[tools_call("c1", 7, "toolu_2")]);
    assert_eq!(find(&chunks, "mcp_tool_call")["deadline_ms"], 601_000);

    let (reason, _, writes) = h.jump();
    assert_eq!(
        reason,
        TimeoutReason::McpCall {
            request_id: "c1".into()
        }
    );
    let answer = &writes[0]["response"]["response"]["mcp_response"];
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["result"]["isError"], true);
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("did not return a result"), "{text}");
    assert_eq!(
        h.session
            .respond_mcp(h.now, "c1", McpCallResult::text("late")),
        Ok(Delivery::Dropped)
    );
}

#[test]
fn an_unanswered_hook_gets_an_empty_answer_at_its_deadline() {
    let mut h = Harness::with_timeouts(Timeouts {
        hook_ms: Some(5_000),
        ..Timeouts::default()
    });
    h.start_tool_turn("toolu_3");
    h.cli(&[json!({"type":"control_request","request_id":"h1","request":{"subtype":"hook_callback",
        "callback_id":"hook_0","input":{"hook_event_name":"PreToolUse","tool_use_id":"toolu_3"},"tool_use_id":"toolu_3"}})]);
    assert_eq!(
        h.session.tool_wait().blocked_on.len(),
        1,
        "a PreToolUse hook blocks the tool"
    );
    let (reason, _, writes) = h.jump();
    assert_eq!(
        reason,
        TimeoutReason::Hook {
            request_id: "h1".into()
        }
    );
    assert_eq!(writes[0]["response"]["response"], json!({}));
    assert!(h.session.tool_wait().blocked_on.is_empty());
}

#[test]
fn an_unanswered_request_of_the_host_times_out_and_a_late_answer_is_dropped() {
    let mut h = Harness::with_timeouts(Timeouts {
        request_ms: Some(60_000),
        ..Timeouts::default()
    });
    let id = h.session.interrupt(h.now).unwrap();
    h.drain();
    let (reason, chunks, _) = h.jump();
    assert_eq!(
        reason,
        TimeoutReason::Request {
            request_id: id.clone(),
            subtype: "interrupt".into()
        }
    );
    let result = find(&chunks, "control_result");
    assert_eq!(
        (result["ok"].as_bool(), result["error"].as_str()),
        (Some(false), Some("timeout"))
    );
    let (chunks, _) = h.cli(&[json!({"type":"control_response","response":{"subtype":"success","request_id":id,"response":{}}})]);
    assert!(chunks.is_empty(), "{chunks:?}");
}

#[test]
fn the_earliest_deadline_comes_first_and_nothing_fires_early() {
    let mut h = Harness::with_timeouts(Timeouts {
        permission_ms: Some(10_000),
        mcp_call_ms: Some(5_000),
        ..Timeouts::default()
    });
    h.start_tool_turn("toolu_4");
    h.cli(&[
        can_use_tool("p4", "toolu_4"),
        tools_call("c4", 1, "toolu_4"),
    ]);
    assert_eq!(h.session.poll_timeout().unwrap().0, 6_000);
    h.session.handle_timeout(5_999);
    assert!(h.drain().1.is_empty());
    let (first, _, _) = h.jump();
    assert_eq!(
        first,
        TimeoutReason::McpCall {
            request_id: "c4".into()
        }
    );
    let (second, _, _) = h.jump();
    assert_eq!(
        second,
        TimeoutReason::Permission {
            request_id: "p4".into()
        }
    );
}

#[test]
fn without_a_policy_there_are_no_deadlines() {
    let mut h = Harness::new(SessionConfig::default());
    h.start_tool_turn("toolu_5");
    let (chunks, _) = h.cli(&[can_use_tool("p5", "toolu_5")]);
    assert_eq!(
        find(&chunks, "permission_request")["deadline_ms"],
        Value::Null
    );
    assert_eq!(h.session.poll_timeout(), None);
}

#[test]
fn a_permission_the_cli_cancels_resolves_once_and_drops_the_answer() {
    let mut h = Harness::new(SessionConfig::default());
    h.start_tool_turn("toolu_6");
    h.cli(&[can_use_tool("p6", "toolu_6")]);
    let (chunks, _) = h.cli(&[json!({"type":"control_cancel_request","request_id":"p6"})]);
    let resolved = find(&chunks, "permission_resolved");
    assert_eq!(
        (resolved["behavior"].as_str(), resolved["reason"].as_str()),
        (Some("deny"), Some("cancelled"))
    );
    assert_eq!(
        h.session
            .respond_permission(h.now, "p6", PermissionDecision::allow()),
        Ok(Delivery::Dropped)
    );
    let (_, writes) = h.drain();
    assert!(writes.is_empty());
    let (chunks, _) = h.cli(&[tool_result(
        "toolu_6",
        true,
        "The user doesn't want to proceed",
    )]);
    assert_eq!(
        statuses(&chunks),
        [("error".into(), Some("cancelled".into()))]
    );
    assert_eq!(
        chunks
            .iter()
            .filter(|c| c["type"] == "permission_resolved")
            .count(),
        0
    );
}

#[test]
fn allow_writes_the_original_input_and_runs_the_tool() {
    let mut h = Harness::new(SessionConfig::default());
    h.start_tool_turn("toolu_7");
    h.cli(&[can_use_tool("p7", "toolu_7")]);
    assert_eq!(
        h.session
            .respond_permission(h.now, "p7", PermissionDecision::allow()),
        Ok(Delivery::Sent)
    );
    let (chunks, writes) = h.drain();
    assert_eq!(
        writes,
        [
            json!({"type":"control_response","response":{"subtype":"success","request_id":"p7",
            "response":{"behavior":"allow","updatedInput":{"command":"touch x"}}}})
        ]
    );
    assert_eq!(statuses(&chunks), [("running".into(), None)]);
    assert_eq!(
        h.session
            .respond_permission(h.now, "p7", PermissionDecision::allow()),
        Ok(Delivery::Dropped),
        "a second answer is dropped"
    );
}

#[test]
fn deny_with_interrupt_writes_the_flag_and_the_result_says_denied() {
    let mut h = Harness::new(SessionConfig::default());
    h.start_tool_turn("toolu_8");
    h.cli(&[can_use_tool("p8", "toolu_8")]);
    let deny = PermissionDecision::Deny {
        message: "no".into(),
        interrupt: true,
    };
    assert_eq!(
        h.session.respond_permission(h.now, "p8", deny),
        Ok(Delivery::Sent)
    );
    let (_, writes) = h.drain();
    assert_eq!(
        writes[0]["response"]["response"],
        json!({"behavior":"deny","message":"no","interrupt":true})
    );
    let (chunks, _) = h.cli(&[tool_result("toolu_8", true, "no")]);
    assert_eq!(statuses(&chunks), [("error".into(), Some("denied".into()))]);
}

#[test]
fn a_process_exit_mid_turn_cancels_the_tools_and_fails_pending_requests() {
    let mut h = Harness::new(SessionConfig::default());
    h.start_tool_turn("toolu_9");
    let id = h.session.interrupt(h.now).unwrap();
    h.drain();
    h.session.handle_process_exit(h.now, None, Some(9));
    let (chunks, _) = h.drain();
    assert_eq!(
        chunks[0],
        json!({"type":"process_exit","code":null,"signal":9})
    );
    assert_eq!(find(&chunks, "error")["kind"], "process_exit");
    assert_eq!(
        statuses(&chunks),
        [("cancelled".into(), Some("process_exit".into()))]
    );
    let failed = find(&chunks, "control_result");
    assert_eq!(
        (failed["request_id"].as_str(), failed["ok"].as_bool()),
        (Some(id.as_str()), Some(false))
    );
    assert!(!h.session.turn_running());
    assert_eq!(
        h.session
            .send_user_message(h.now, UserMessage::text("again")),
        Err(CommandError::ProcessEnded)
    );
    assert!(!find(&chunks, "tool_wait")["waiting"].as_bool().unwrap());
}

#[test]
fn a_turn_that_ends_without_a_tool_result_cancels_the_tool() {
    let mut h = Harness::new(SessionConfig::default());
    h.start_tool_turn("toolu_10");
    let (chunks, _) =
        h.cli(&[json!({"type":"result","subtype":"error_max_turns","is_error":true})]);
    assert_eq!(
        statuses(&chunks),
        [("cancelled".into(), Some("turn_ended".into()))]
    );
}

#[test]
fn misuse_of_the_api_is_an_error() {
    let mut h = Harness::new(SessionConfig::default());
    h.start_tool_turn("toolu_11");
    assert_eq!(
        h.session
            .respond_permission(h.now, "nope", PermissionDecision::allow()),
        Err(CommandError::UnknownRequest("nope".into()))
    );
    h.cli(&[tools_call("c11", 1, "toolu_11")]);
    assert!(matches!(
        h.session
            .respond_permission(h.now, "c11", PermissionDecision::allow()),
        Err(CommandError::WrongRequestKind {
            expected: "permission",
            ..
        })
    ));
    let mut observer = Session::observer(SessionConfig::default());
    assert_eq!(observer.interrupt(0), Err(CommandError::NotDriver));
}

#[test]
fn the_session_answers_the_mcp_handshake_of_a_registered_server() {
    let server = McpServer::new("calc").with_tool(McpTool::new(
        "add",
        "Add two numbers",
        json!({"type":"object","properties":{"a":{"type":"number"}}}),
    ));
    let mut h = Harness::new(SessionConfig {
        mcp_servers: vec![server],
        ..SessionConfig::default()
    });
    let mcp = |id: &str, server: &str, message: Value| json!({"type":"control_request","request_id":id,"request":{"subtype":"mcp_message","server_name":server,"message":message}});
    let (_, writes) = h.cli(&[
        mcp("m1", "calc", json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}})),
        mcp("m2", "calc", json!({"jsonrpc":"2.0","method":"notifications/initialized"})),
        mcp("m3", "calc", json!({"jsonrpc":"2.0","id":1,"method":"tools/list"})),
        mcp("m4", "other", json!({"jsonrpc":"2.0","id":0,"method":"initialize"})),
    ]);
    let answers: Vec<&Value> = writes
        .iter()
        .map(|w| &w["response"]["response"]["mcp_response"])
        .collect();
    assert_eq!(answers[0]["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        answers[0]["result"]["serverInfo"],
        json!({"name":"calc","version":"1.0.0"})
    );
    assert_eq!(*answers[1], json!({"jsonrpc":"2.0","result":{}}));
    assert_eq!(answers[2]["result"]["tools"][0]["name"], "add");
    assert_eq!(
        answers[2]["result"]["tools"][0]["inputSchema"]["properties"]["a"]["type"],
        "number"
    );
    assert_eq!(answers[3]["error"]["code"], -32601);
}

#[test]
fn a_cancelled_mcp_call_is_reported_and_its_late_answer_dropped() {
    let mut h = Harness::new(SessionConfig::default());
    h.start_tool_turn("toolu_12");
    h.cli(&[tools_call("c12", 5, "toolu_12")]);
    let (chunks, writes) = h.cli(&[json!({"type":"control_request","request_id":"n12","request":{"subtype":"mcp_message",
        "server_name":"client","message":{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"interrupted"}}}})]);
    let cancelled = find(&chunks, "mcp_tool_cancelled");
    assert_eq!(cancelled["request_id"], "c12");
    assert_eq!(cancelled["cancel_request_id"], "n12");
    assert_eq!(writes.len(), 1, "the notification is acknowledged");
    assert_eq!(
        h.session
            .respond_mcp(h.now, "c12", McpCallResult::text("x")),
        Ok(Delivery::Dropped)
    );
    let (chunks, _) = h.cli(&[tool_result("toolu_12", true, "cancelled")]);
    assert_eq!(
        statuses(&chunks),
        [("error".into(), Some("interrupted".into()))]
    );
}

#[test]
fn request_ids_come_from_the_counter_and_the_seed() {
    let ids = |seed| {
        let mut s = Session::driver(SessionConfig {
            seed,
            ..SessionConfig::default()
        });
        (s.interrupt(0).unwrap(), s.interrupt(0).unwrap())
    };
    let (a1, a2) = ids(1);
    assert!(
        a1.starts_with("req_1_") && a2.starts_with("req_2_"),
        "{a1} {a2}"
    );
    assert_eq!(ids(1), (a1.clone(), a2));
    assert_ne!(ids(2).0, a1);
}

#[test]
fn an_aborted_frame_adds_only_the_text_that_did_not_stream() {
    let mut s = Session::observer(SessionConfig::default());
    let lines = [
        json!({"type":"stream_event","event":{"type":"message_start","message":{"id":"m1","model":"x"}},"api_message_id":"m1"}),
        json!({"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}},"api_message_id":"m1"}),
        json!({"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, wo"}},"api_message_id":"m1"}),
        json!({"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Hello, world"}]},"aborted":true}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    s.handle_stdout(0, text.as_bytes());
    let chunks = values(&drain(&mut s).0);
    let deltas: Vec<&str> = chunks
        .iter()
        .filter(|c| c["type"] == "text_delta")
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, ["Hello, wo", "rld"]);
}

#[test]
fn the_drivers_own_answers_and_prompts_move_the_tools_as_observed_ones_do() {
    // A PreToolUse hook answered "deny" leaves the tool denied; "allow" starts it.
    for decision in ["deny", "allow"] {
        let mut h = Harness::new(SessionConfig::default());
        h.start_tool_turn("toolu_h");
        h.cli(&[json!({"type":"control_request","request_id":"h2","request":{"subtype":"hook_callback",
            "callback_id":"hook_0","input":{"hook_event_name":"PreToolUse","tool_use_id":"toolu_h"},"tool_use_id":"toolu_h"}})]);
        let output = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision}});
        assert_eq!(
            h.session.respond_hook(h.now, "h2", output.clone()),
            Ok(Delivery::Sent)
        );
        let (chunks, writes) = h.drain();
        assert_eq!(writes[0]["response"]["response"], output);
        assert!(
            h.session.tool_wait().blocked_on.is_empty(),
            "{decision}: answered"
        );
        if decision == "allow" {
            assert_eq!(statuses(&chunks), [("running".into(), None)]);
        } else {
            let (chunks, _) = h.cli(&[tool_result("toolu_h", true, "blocked by hook")]);
            assert_eq!(statuses(&chunks), [("error".into(), Some("denied".into()))]);
        }
    }

    // A prompt sent with priority "now" during a turn interrupts its running tools: their end
    // says so.
    let mut h = Harness::new(SessionConfig::default());
    h.start_tool_turn("toolu_n");
    h.cli(&[can_use_tool("p9", "toolu_n")]);
    assert_eq!(
        h.session
            .respond_permission(h.now, "p9", PermissionDecision::allow()),
        Ok(Delivery::Sent)
    );
    h.drain();
    let mut urgent = UserMessage::text("stop that");
    urgent.priority = Some("now".into());
    h.session.send_user_message(h.now, urgent).unwrap();
    let (chunks, writes) = h.drain();
    assert_eq!(writes[0]["priority"], "now");
    let prompt = find(&chunks, "user_prompt");
    assert_eq!(
        (prompt["content"].clone(), prompt["priority"].clone()),
        (json!("stop that"), json!("now"))
    );
    assert!(
        statuses(&chunks).is_empty(),
        "the tool ends when the CLI says so"
    );
    let (chunks, _) = h.cli(&[tool_result("toolu_n", true, "Interrupted by user")]);
    assert_eq!(
        statuses(&chunks)[0].1.as_deref(),
        Some("interrupted"),
        "{chunks:#?}"
    );
}

#[test]
fn a_prompt_without_content_is_written_and_said_to_be_invalid() {
    let mut h = Harness::new(SessionConfig::default());
    let mut empty = UserMessage::text("");
    empty.content = Value::Null;
    h.session.send_user_message(h.now, empty).unwrap();
    let (chunks, writes) = h.drain();
    assert_eq!(
        writes[0]["message"],
        json!({"role": "user", "content": null})
    );
    let error = find(&chunks, "error");
    assert_eq!(error["kind"], "invalid_message");
    assert!(
        error["detail"]
            .as_str()
            .unwrap()
            .contains("message.content"),
        "{error}"
    );
    assert!(
        error["excerpt"].as_str().is_some(),
        "the line is quoted: {error}"
    );
    assert!(chunks.iter().all(|c| c["type"] != "user_prompt"));
    assert!(!h.session.turn_running());
}

/// The CLI (2.1.332 on) asks a `PreSkillShellCommand` hook before a skill's shell preamble runs,
/// before the session's `init`: a hook request like any other, answered in time, which blocks
/// no tool of the transcript (its `tool_use_id` names the preamble, not a model's call).
#[test]
fn a_skill_shell_command_hook_is_a_hook_request_that_blocks_no_tool() {
    let mut h = Harness::with_timeouts(Timeouts {
        hook_ms: Some(5_000),
        ..Timeouts::default()
    });
    let id = "0f4b7a52-3c1e-4d8b-9a57-2f1e6c3d9b10:inner:preamble-0";
    let (chunks, _) = h.cli(&[json!({"type":"control_request","request_id":"h9","request":{"subtype":"hook_callback",
        "callback_id":"hook_0","input":{"session_id":"s","hook_event_name":"PreSkillShellCommand","tool_name":"Bash",
        "tool_input":{"command":"echo hi"},"tool_use_id":id,"command_name":"hi","command_source":"projectSettings",
        "invoked_by":"user"},"tool_use_id":id}})]);
    let hook = find(&chunks, "hook_request");
    assert_eq!(hook["event"], "PreSkillShellCommand");
    assert_eq!(hook["input"]["command_name"], "hi");
    assert!(h.session.tool_wait().blocked_on.is_empty());
    let (reason, _, writes) = h.jump();
    assert_eq!(
        reason,
        TimeoutReason::Hook {
            request_id: "h9".into()
        }
    );
    assert_eq!(writes[0]["response"]["response"], json!({}));
}

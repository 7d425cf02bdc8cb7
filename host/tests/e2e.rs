//! End-to-end: the client API against the real Claude Code CLI, run offline against the scripted
//! fake Messages API. Every run records its transcript, and replaying the recording must give
//! the chunks the live run produced.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ccwire_core::{Chunk, McpCallResult, PermissionDecision, ToolStatus};
use ccwire_host::client::Tool;
use ccwire_host::{
    ClaudeOptions, CliArgs, Client, ClientError, ClientOptions, Event, SystemPrompt,
};
use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{FakeAnthropic, Match, Reply, Script};
use serde_json::{json, Value};

const MODEL: &str = "claude-sonnet-4-5-20250929";

struct Harness {
    server: FakeAnthropic,
    home: OfflineHome,
    transcripts: Vec<PathBuf>,
}

impl Harness {
    async fn new(script: Script) -> Harness {
        Harness {
            server: FakeAnthropic::start(script.when(Match::Probe, Reply::text("ok"))).await,
            home: OfflineHome::new(),
            transcripts: Vec::new(),
        }
    }

    fn options(&mut self) -> ClientOptions {
        let transcript = self
            .home
            .path()
            .join(format!("transcript-{}.jsonl", self.transcripts.len()));
        self.transcripts.push(transcript.clone());
        ClientOptions {
            claude: ClaudeOptions {
                claude: Some(claude_path()),
                args: CliArgs {
                    model: Some(MODEL.into()),
                    max_turns: 6,
                    system_prompt: SystemPrompt::Custom(String::new()),
                    include_partial_messages: true,
                    ..CliArgs::default()
                },
                cwd: Some(self.home.workdir()),
                env: self
                    .home
                    .env(&self.server.base_url())
                    .into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
                env_remove: inherited_to_remove().into_iter().map(Into::into).collect(),
            },
            record: Some(transcript),
            initialize_timeout: Some(Duration::from_secs(30)),
            ..ClientOptions::default()
        }
    }
}

/// Everything the client saw: the chunks of every turn, then the rest until the process exits.
#[derive(Default)]
struct Seen {
    chunks: Vec<Chunk>,
}

impl Seen {
    async fn turn(&mut self, client: &mut Client, prompt: &str) -> Vec<Chunk> {
        let turn = client.query(prompt).await.expect("the prompt is sent");
        let chunks = tokio::time::timeout(Duration::from_secs(60), turn.collect())
            .await
            .expect("the turn ends in time")
            .expect("the turn completes");
        self.chunks.extend(chunks.iter().cloned());
        chunks
    }

    /// Closes stdin, reads the remaining events, and checks the recording replays alike.
    async fn close(mut self, mut client: Client, transcript: &PathBuf) -> Vec<Chunk> {
        client.end_input();
        let rest = tokio::time::timeout(Duration::from_secs(30), async {
            let mut exit = None;
            while let Some(event) = client.next_event().await {
                match event {
                    Event::Chunk(chunk) => self.chunks.push(chunk),
                    Event::Exited { exit: e, .. } => exit = Some(e),
                }
            }
            exit
        })
        .await
        .expect("the CLI exits after its stdin closes");
        assert!(rest.is_some(), "the exit is reported");
        assert_replays_alike(transcript, &self.chunks);
        self.chunks
    }
}

/// Chunks as JSON, without what only a live run knows: deadlines, the process's end, and that
/// a deny was written because a deadline passed (on the wire it is the host's answer).
fn comparable(chunks: &[Chunk]) -> Vec<Value> {
    chunks
        .iter()
        .filter(|c| !matches!(c, Chunk::ProcessExit { .. }))
        .map(|c| {
            let mut v: Value = serde_json::from_str(&c.to_json()).unwrap();
            if v.get("deadline_ms").is_some() {
                v["deadline_ms"] = Value::Null;
            }
            if v["type"] == "permission_resolved" && v["reason"] == "timeout" {
                v["reason"] = json!("host");
            }
            if v["type"] == "tool_status" && v["reason"] == "timeout" {
                v["reason"] = json!("denied");
            }
            v
        })
        .collect()
}

fn assert_replays_alike(transcript: &PathBuf, live: &[Chunk]) {
    let recorded = std::fs::read(transcript).expect("the transcript was written");
    let replayed = ccwire_core::replay(&recorded);
    let (live, replayed) = (comparable(live), comparable(&replayed));
    for (i, (a, b)) in live.iter().zip(&replayed).enumerate() {
        assert_eq!(
            a, b,
            "chunk {i} differs between the live run and the replay"
        );
    }
    assert_eq!(
        live.len(),
        replayed.len(),
        "the replay has as many chunks as the live run"
    );
}

fn text_of(chunks: &[Chunk]) -> String {
    chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn turn_complete(chunks: &[Chunk]) -> Value {
    let c = chunks
        .iter()
        .rev()
        .find(|c| matches!(c, Chunk::TurnComplete { .. }))
        .expect("a turn_complete");
    serde_json::from_str(&c.to_json()).unwrap()
}

fn statuses(chunks: &[Chunk]) -> Vec<(ToolStatus, Option<String>)> {
    chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::ToolStatus { status, reason, .. } => Some((
                *status,
                reason.map(|r| {
                    serde_json::to_value(r)
                        .unwrap()
                        .as_str()
                        .unwrap()
                        .to_owned()
                }),
            )),
            _ => None,
        })
        .collect()
}

fn bash(command: &str) -> Reply {
    Reply::tool("Bash", json!({"command": command, "description": "run it"}))
}

#[tokio::test]
async fn a_text_answer_streams_in_pieces_and_replays_alike() {
    let mut h = Harness::new(Script::new().on_prompt(
        "hello",
        Reply::text("Hello from the fake model, in pieces."),
    ))
    .await;
    let mut client = Client::connect(h.options()).await.unwrap();
    assert_eq!(client.server_info()["claude_code_version"], "2.1.332");
    let mut seen = Seen::default();
    let chunks = seen.turn(&mut client, "hello there").await;
    assert_eq!(text_of(&chunks), "Hello from the fake model, in pieces.");
    assert!(
        chunks
            .iter()
            .filter(|c| matches!(c, Chunk::TextDelta { .. }))
            .count()
            > 1,
        "token streaming"
    );
    assert!(chunks
        .iter()
        .any(|c| matches!(c, Chunk::MessageStart { .. })));
    let done = turn_complete(&chunks);
    assert_eq!(
        (done["subtype"].as_str(), done["is_error"].as_bool()),
        (Some("success"), Some(false))
    );
    let calls = h.server.model_calls();
    assert!(calls
        .last()
        .unwrap()
        .last_user_text()
        .contains("hello there"));
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;
}

#[tokio::test]
async fn an_allowed_permission_runs_the_tool() {
    let script = Script::new()
        .on_tool_result(Reply::text("Done."))
        .on_prompt("write", bash("echo hi > out.txt"));
    let mut h = Harness::new(script).await;
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let options = h.options().on_permission(move |request| {
        let counter = counter.clone();
        async move {
            assert_eq!(request.tool_name, "Bash");
            counter.fetch_add(1, Ordering::SeqCst);
            PermissionDecision::allow()
        }
    });
    let mut client = Client::connect(options).await.unwrap();
    let mut seen = Seen::default();
    let chunks = seen.turn(&mut client, "write the file").await;
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    let states: Vec<ToolStatus> = statuses(&chunks).into_iter().map(|(s, _)| s).collect();
    assert_eq!(
        states,
        [
            ToolStatus::Pending,
            ToolStatus::AwaitingApproval,
            ToolStatus::Running,
            ToolStatus::Success
        ]
    );
    assert_eq!(
        std::fs::read_to_string(h.home.workdir().join("out.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(text_of(&chunks), "Done.");
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;
}

#[tokio::test]
async fn a_denied_permission_reaches_the_model_as_an_error_result() {
    let script = Script::new()
        .on_tool_result(Reply::Echo)
        .on_prompt("write", bash("echo hi > out.txt"));
    let mut h = Harness::new(script).await;
    let options = h
        .options()
        .on_permission(|_| async { PermissionDecision::deny("not today") });
    let mut client = Client::connect(options).await.unwrap();
    let mut seen = Seen::default();
    let chunks = seen.turn(&mut client, "write the file").await;
    assert_eq!(
        statuses(&chunks).last().unwrap(),
        &(ToolStatus::Error, Some("denied".to_owned()))
    );
    assert!(!h.home.workdir().join("out.txt").exists());
    let last = h.server.model_calls().last().unwrap().body.clone();
    assert!(
        last["messages"].to_string().contains("not today"),
        "the model saw the deny message"
    );
    assert_eq!(turn_complete(&chunks)["is_error"], false);
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;
}

#[tokio::test]
async fn deny_with_interrupt_aborts_the_turn() {
    let script = Script::new()
        .on_tool_result(Reply::text("should not be asked"))
        .on_prompt("write", bash("echo hi > out.txt"));
    let mut h = Harness::new(script).await;
    let options = h.options().on_permission(|_| async {
        PermissionDecision::Deny {
            message: "stop".into(),
            interrupt: true,
        }
    });
    let mut client = Client::connect(options).await.unwrap();
    let mut seen = Seen::default();
    let chunks = seen.turn(&mut client, "write the file").await;
    let done = turn_complete(&chunks);
    assert_eq!(done["is_error"], true);
    assert_eq!(done["terminal_reason"], "aborted_tools");
    assert_eq!(h.server.model_calls().len(), 1, "no second model call");
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;
}

#[tokio::test]
async fn a_permission_not_answered_in_time_is_denied() {
    let script = Script::new()
        .on_tool_result(Reply::text("I could not run it."))
        .on_prompt("write", bash("echo hi > out.txt"));
    let mut h = Harness::new(script).await;
    let mut options = h.options().on_permission(|_| async {
        std::future::pending::<()>().await;
        PermissionDecision::allow()
    });
    options.permission_timeout = Some(Duration::from_millis(300));
    let mut client = Client::connect(options).await.unwrap();
    let mut seen = Seen::default();
    let chunks = seen.turn(&mut client, "write the file").await;
    let resolved = chunks.iter().find_map(|c| match c {
        Chunk::PermissionResolved {
            reason, behavior, ..
        } => Some((*reason, *behavior)),
        _ => None,
    });
    assert_eq!(
        resolved,
        Some((
            ccwire_core::ResolveReason::Timeout,
            ccwire_core::Behavior::Deny
        ))
    );
    assert_eq!(
        statuses(&chunks).last().unwrap(),
        &(ToolStatus::Error, Some("timeout".to_owned()))
    );
    assert!(!h.home.workdir().join("out.txt").exists());
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;
}

#[tokio::test]
async fn pre_and_post_tool_use_hooks_are_called() {
    let script = Script::new()
        .on_tool_result(Reply::text("Hooked."))
        .on_prompt("write", bash("echo hooked > hook.txt"));
    let mut h = Harness::new(script).await;
    let seen_events = Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let (pre, post) = (seen_events.clone(), seen_events.clone());
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let options = h
        .options()
        .hook("PreToolUse", Some("Bash"), move |input| {
            let pre = pre.clone();
            async move {
                pre.lock().unwrap().push(input);
                json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "permissionDecisionReason": "test hook"}})
            }
        })
        .hook("PostToolUse", None, move |input| {
            let post = post.clone();
            async move {
                post.lock().unwrap().push(input);
                json!({})
            }
        })
        .on_permission(move |_| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                PermissionDecision::deny("the hook should have allowed it")
            }
        });
    let mut client = Client::connect(options).await.unwrap();
    let mut seen = Seen::default();
    let chunks = seen.turn(&mut client, "write the file").await;
    let events: Vec<String> = seen_events
        .lock()
        .unwrap()
        .iter()
        .map(|i| i["hook_event_name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events, ["PreToolUse", "PostToolUse"]);
    assert_eq!(
        asked.load(Ordering::SeqCst),
        0,
        "a PreToolUse allow skips the permission prompt"
    );
    assert_eq!(
        std::fs::read_to_string(h.home.workdir().join("hook.txt")).unwrap(),
        "hooked\n"
    );
    let states: Vec<ToolStatus> = statuses(&chunks).into_iter().map(|(s, _)| s).collect();
    assert_eq!(
        states,
        [
            ToolStatus::Pending,
            ToolStatus::Running,
            ToolStatus::Success
        ]
    );
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;
}

#[tokio::test]
async fn an_in_process_mcp_tool_written_in_rust_is_called() {
    let script = Script::new().on_tool_result(Reply::Echo).on_prompt(
        "add",
        Reply::tool("mcp__calc__add", json!({"a": 2, "b": 3})),
    );
    let mut h = Harness::new(script).await;
    let add = Tool::new(
        "add",
        "Add two numbers",
        json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        |args| async move {
            let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
            McpCallResult::text(format!("{sum}"))
        },
    );
    let mut options = h.options().tool_server("calc", vec![add]);
    options.claude.args.allowed_tools = vec!["mcp__calc__add".into()];
    let mut client = Client::connect(options).await.unwrap();
    let mut seen = Seen::default();
    let chunks = seen.turn(&mut client, "add 2 and 3").await;
    let call = chunks.iter().find_map(|c| match c {
        Chunk::McpToolCall {
            server,
            tool,
            arguments,
            ..
        } => Some((server.clone(), tool.clone(), arguments.to_value())),
        _ => None,
    });
    assert_eq!(
        call,
        Some(("calc".into(), "add".into(), json!({"a": 2, "b": 3})))
    );
    let result = chunks.iter().find_map(|c| match c {
        Chunk::ToolResult {
            content, is_error, ..
        } => Some((content.to_string(), *is_error)),
        _ => None,
    });
    let (content, is_error) = result.expect("a tool result");
    assert!(content.contains('5') && !is_error, "{content}");
    let last = h.server.model_calls().last().unwrap().body.clone();
    assert!(last["messages"].to_string().contains("tool_result"));
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;
}

#[tokio::test]
async fn interrupt_mid_stream_ends_the_turn_and_the_session_goes_on() {
    let script = Script::new()
        .on_prompt("second", Reply::text("Still here."))
        .when_slow(
            Match::LastUserContains {
                text: "long".into(),
            },
            Reply::text("This answer streams very slowly, piece by piece, for a long time."),
            Duration::from_millis(400),
        );
    let mut h = Harness::new(script).await;
    let mut client = Client::connect(h.options()).await.unwrap();
    let mut seen = Seen::default();
    let mut turn = client.query("a long answer please").await.unwrap();
    let mut chunks = Vec::new();
    let mut interrupted = false;
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(30), turn.next())
        .await
        .unwrap()
    {
        let chunk = chunk.unwrap();
        if matches!(chunk, Chunk::TextDelta { .. }) && !interrupted {
            turn.client().interrupt().await.unwrap();
            interrupted = true;
        }
        chunks.push(chunk);
    }
    seen.chunks.extend(chunks.iter().cloned());
    let done = turn_complete(&chunks);
    assert_eq!(done["terminal_reason"], "aborted_streaming");
    let second = seen.turn(&mut client, "second question").await;
    assert_eq!(text_of(&second), "Still here.");
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;
}

#[tokio::test]
async fn interrupt_mid_tool_aborts_the_running_command() {
    let script = Script::new()
        .on_tool_result(Reply::text("unexpected"))
        .on_prompt("sleep", bash("sleep 20"));
    let mut h = Harness::new(script).await;
    let options = h
        .options()
        .on_permission(|_| async { PermissionDecision::allow() });
    let mut client = Client::connect(options).await.unwrap();
    let mut seen = Seen::default();
    let started = std::time::Instant::now();
    let mut turn = client.query("sleep a while").await.unwrap();
    let mut chunks = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(30), turn.next())
        .await
        .unwrap()
    {
        let chunk = chunk.unwrap();
        // `sleep` is read-only, so it runs without a prompt as soon as its call is complete.
        if matches!(chunk, Chunk::ToolUse { complete: true, .. }) {
            tokio::time::sleep(Duration::from_millis(1000)).await;
            turn.client().interrupt().await.unwrap();
        }
        chunks.push(chunk);
    }
    seen.chunks.extend(chunks.iter().cloned());
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the 20 s command did not run to its end"
    );
    assert_eq!(turn_complete(&chunks)["terminal_reason"], "aborted_tools");
    assert_eq!(
        statuses(&chunks).last().unwrap(),
        &(ToolStatus::Error, Some("interrupted".to_owned()))
    );
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;
}

#[tokio::test]
async fn two_turns_run_on_one_process_and_resume_works_in_a_new_one() {
    let script = Script::new()
        .on_prompt(
            "first",
            Reply::text("First answer: the code word is PELICAN."),
        )
        .on_prompt("second", Reply::text("Second answer."))
        .on_prompt("third", Reply::Echo);
    let mut h = Harness::new(script).await;
    let mut client = Client::connect(h.options()).await.unwrap();
    let pid = client.pid();
    let mut seen = Seen::default();
    let first = seen.turn(&mut client, "first question").await;
    let second = seen.turn(&mut client, "second question").await;
    assert_eq!(text_of(&second), "Second answer.");
    assert_eq!(client.pid(), pid);
    let session_id = turn_complete(&first)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;

    // A new process resumes the session: the model sees the earlier turns.
    let mut options = h.options();
    options.claude.args.resume = Some(session_id.clone());
    let mut resumed = Client::connect(options).await.unwrap();
    assert_ne!(resumed.pid(), pid);
    let mut seen = Seen::default();
    let third = seen.turn(&mut resumed, "third question").await;
    assert_eq!(turn_complete(&third)["session_id"], session_id.as_str());
    let last = h.server.model_calls().last().unwrap().body.clone();
    assert!(
        last["messages"].to_string().contains("PELICAN"),
        "the resumed request carries the first turn"
    );
    let transcript = h.transcripts[1].clone();
    seen.close(resumed, &transcript).await;
}

#[tokio::test]
async fn an_api_error_ends_the_turn_with_an_error() {
    let script = Script::new().on_prompt(
        "boom",
        Reply::error(500, "api_error", "fake: internal failure"),
    );
    let mut h = Harness::new(script).await;
    let mut client = Client::connect(h.options()).await.unwrap();
    let mut seen = Seen::default();
    let chunks = seen.turn(&mut client, "boom").await;
    let done = turn_complete(&chunks);
    assert_eq!(done["is_error"], true);
    assert_eq!(done["terminal_reason"], "api_error");
    assert!(done["result"].as_str().unwrap().contains("500"), "{done}");
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;
}

#[tokio::test]
async fn a_cli_killed_mid_turn_is_an_error_and_leaves_no_process() {
    let script = Script::new().when_slow(
        Match::LastUserContains {
            text: "slow".into(),
        },
        Reply::text("a slow answer that never finishes streaming in time"),
        Duration::from_millis(500),
    );
    let mut h = Harness::new(script).await;
    let mut client = Client::connect(h.options()).await.unwrap();
    let pid = client.pid() as i32;
    let mut turn = client.query("slow please").await.unwrap();
    let mut error = None;
    while let Some(item) = tokio::time::timeout(Duration::from_secs(30), turn.next())
        .await
        .unwrap()
    {
        match item {
            Ok(Chunk::TextDelta { .. }) => {
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .unwrap();
            }
            Ok(_) => {}
            Err(err) => error = Some(err),
        }
    }
    match error {
        Some(ClientError::ProcessExited { exit, .. }) => assert_eq!(exit.signal, Some(9)),
        other => panic!("expected the process's end as an error, got {other:?}"),
    }
    // Neither the CLI nor anything in its process group is left.
    let group = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), None);
    assert_eq!(
        group,
        Err(nix::errno::Errno::ESRCH),
        "the process group is gone"
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "no zombie"
    );
}

/// Every typed host request, sent to the real CLI: each gets its answer (never a hang), and
/// the ones the CLI serves offline succeed.
#[tokio::test]
async fn every_typed_host_request_is_answered_by_the_cli() {
    use ccwire_core::HostRequest;
    let mut h = Harness::new(Script::new()).await;
    let mut options = h.options();
    options.request_timeout = Some(Duration::from_secs(20));
    std::fs::write(h.home.workdir().join("notes.txt"), "hello").unwrap();
    let client = Client::connect(options).await.unwrap();
    let file = h.home.workdir().join("notes.txt").display().to_string();
    let repo = h.home.workdir().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let workdir = repo.display().to_string();
    let requests: Vec<Value> = vec![
        json!({"subtype": "mcp_status"}),
        json!({"subtype": "get_context_usage"}),
        json!({"subtype": "get_session_cost"}),
        json!({"subtype": "list_models"}),
        json!({"subtype": "get_usage"}),
        json!({"subtype": "get_binary_version"}),
        json!({"subtype": "set_max_thinking_tokens", "max_thinking_tokens": 2048}),
        json!({"subtype": "rename_session", "title": "ccwire test"}),
        json!({"subtype": "set_color", "color": "blue"}),
        json!({"subtype": "file_suggestions", "query": "notes"}),
        json!({"subtype": "background_tasks"}),
        json!({"subtype": "get_settings"}),
        json!({"subtype": "get_hooks_listing"}),
        json!({"subtype": "list_permission_rules"}),
        json!({"subtype": "reload_skills"}),
        json!({"subtype": "reload_output_styles"}),
        json!({"subtype": "reload_plugins"}),
        json!({"subtype": "apply_flag_settings", "settings": {"cleanupPeriodDays": 30}}),
        json!({"subtype": "update_settings", "source": "localSettings", "settings": {"cleanupPeriodDays": 31}}),
        json!({"subtype": "set_has_subscribers", "has_subscribers": true}),
        json!({"subtype": "set_model", "model": null}),
        json!({"subtype": "set_permission_mode", "mode": "default"}),
        json!({"subtype": "read_file", "path": file}),
        json!({"subtype": "seed_read_state", "path": file, "mtime": 0}),
        json!({"subtype": "register_repo_root", "directory": workdir}),
        json!({"subtype": "mcp_set_servers", "servers": {}}),
        json!({"subtype": "mcp_reconnect", "serverName": "nowhere"}),
        json!({"subtype": "mcp_toggle", "serverName": "nowhere", "enabled": false}),
        json!({"subtype": "mcp_read_resource", "serverName": "nowhere", "uri": "x://y"}),
        json!({"subtype": "mcp_call", "tool": "mcp__nowhere__x"}),
        json!({"subtype": "stop_task", "task_id": "nope"}),
        json!({"subtype": "get_task_output", "task_id": "nope"}),
        json!({"subtype": "cancel_async_message", "message_uuid": "00000000-0000-0000-0000-000000000000"}),
        json!({"subtype": "rewind_files", "user_message_id": "nope", "dry_run": true}),
        json!({"subtype": "prompt_draft_activity"}),
        json!({"subtype": "interrupt"}),
    ];
    let mut seen = Vec::new();
    for request in requests {
        let subtype = request["subtype"].as_str().unwrap().to_owned();
        let typed: HostRequest = serde_json::from_value(request).unwrap();
        let answer = client.request(typed).await;
        let outcome = match &answer {
            Ok(_) => "ok".to_owned(),
            Err(ClientError::Refused { error, .. }) => format!("refused: {error}"),
            Err(other) => panic!("{subtype}: {other}"),
        };
        seen.push((subtype, outcome));
    }
    assert_eq!(
        seen.len(),
        HostRequest::SUBTYPES.len(),
        "every subtype is tried"
    );
    // Refused on purpose (nothing by those names), by this release (set_color), or for the
    // settings key (update_settings takes a short list of keys); every other one succeeds.
    let refused = [
        "set_color",
        "update_settings",
        "mcp_reconnect",
        "mcp_toggle",
        "mcp_read_resource",
        "mcp_call",
        "get_task_output",
    ];
    for (subtype, outcome) in &seen {
        if refused.contains(&subtype.as_str()) {
            assert!(outcome.starts_with("refused: "), "{subtype}: {outcome}");
        } else {
            assert_eq!(outcome, "ok", "{subtype}");
        }
    }
    client.close().await;
}

/// An external stdio MCP server given in `CliArgs::mcp_servers`: the model calls its
/// tools, and when one asks the user a question (an MCP elicitation) the client's
/// `on_elicitation` handler answers it.
#[tokio::test]
async fn an_external_mcp_server_s_elicitation_is_answered_by_the_client() {
    let script = Script::new()
        .on_tool_result(Reply::Echo)
        .on_prompt("save", Reply::tool("mcp__ask__ask", json!({})))
        .on_prompt("echo", Reply::tool("mcp__ask__echo", json!({"text": "hi"})));
    let mut h = Harness::new(script).await;
    let server =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/ask-server.mjs");
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let mut options = h.options().on_elicitation(move |request| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move {
            assert_eq!(request["server"], "ask");
            assert_eq!(request["message"], "Which folder?");
            json!({"action": "accept", "content": {"folder": "inbox"}})
        }
    });
    options.claude.args.mcp_servers = vec![(
        "ask".into(),
        json!({"type": "stdio", "command": "node", "args": [server]}),
    )];
    options.claude.args.strict_mcp_config = true;
    options.claude.args.allowed_tools = vec!["mcp__ask__ask".into(), "mcp__ask__echo".into()];
    // The rest of the CLI's settings, which the CLI must accept as given.
    let extra = h.home.workdir().join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    options.claude.args.add_dirs = vec![extra.to_str().unwrap().to_owned()];
    options.claude.args.settings = Some(r#"{"cleanupPeriodDays": 30}"#.into());
    options.claude.args.fallback_model = Some("claude-haiku-4-5".into());
    options.claude.args.betas = vec!["context-1m-2025-08-07".into()];
    options.claude.args.max_budget_usd = Some(5.0);
    options.claude.args.effort = Some("high".into());
    options.claude.args.thinking = Some(ccwire_host::Thinking::Budget(2048));
    options.claude.args.agents =
        Some(json!({"reviewer": {"description": "Reviews", "prompt": "Review."}}));
    let mut client = Client::connect(options).await.unwrap();
    let mut seen = Seen::default();
    let chunks = seen.turn(&mut client, "echo something").await;
    let result = |chunks: &[Chunk]| {
        chunks.iter().find_map(|c| match c {
            Chunk::ToolResult { content, .. } => Some(content.to_string()),
            _ => None,
        })
    };
    assert!(result(&chunks).unwrap().contains("echo: hi"), "{chunks:?}");
    let chunks = seen.turn(&mut client, "save the note").await;
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "the handler was asked once"
    );
    assert!(chunks
        .iter()
        .any(|c| matches!(c, Chunk::ElicitationRequest { server, .. } if server == "ask")));
    let content = result(&chunks).expect("the tool's result");
    assert!(content.contains("folder: inbox"), "{content}");
    // The settings reached the model requests.
    let body = h.server.model_calls().last().unwrap().body.clone();
    assert_eq!(
        body["thinking"]["budget_tokens"], 2048,
        "{}",
        body["thinking"]
    );
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;
}

/// A CLI that ends before it answers `initialize` (here: a flag it does not know) fails
/// `connect` with how it ended and what it said, not a refusal without either.
#[tokio::test]
async fn a_cli_that_dies_at_start_reports_its_exit_and_stderr() {
    let mut h = Harness::new(Script::new()).await;
    let mut options = h.options();
    options.claude.args.extra_args = vec!["--no-such-flag-for-ccwire".into()];
    let error = match Client::connect(options).await {
        Ok(_) => panic!("the CLI took a flag it does not know"),
        Err(error) => error,
    };
    let ClientError::ProcessExited { exit, stderr, .. } = &error else {
        panic!("not a process exit: {error:?}");
    };
    assert!(
        exit.code.is_some_and(|c| c != 0) || exit.signal.is_some(),
        "{exit:?}"
    );
    assert!(stderr.contains("--no-such-flag-for-ccwire"), "{stderr:?}");
    let text = error.to_string();
    assert!(
        text.starts_with("the Claude Code CLI ended (exit code"),
        "{text}"
    );
    assert!(
        text.contains("stderr: ") && text.contains("--no-such-flag-for-ccwire"),
        "{text}"
    );
}

/// A CLI that cannot be found is named with the ways a library user has to name it.
#[tokio::test]
async fn a_missing_cli_names_the_option_that_sets_its_path() {
    let mut h = Harness::new(Script::new()).await;
    let mut options = h.options();
    options.claude.claude = Some(h.home.path().join("no-claude-here"));
    let error = match Client::connect(options).await {
        Ok(_) => panic!("a CLI that does not exist started"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains("no-claude-here does not exist"), "{error}");
    assert!(error.contains("ClaudeOptions::claude"), "{error}");
    assert!(
        error.contains("npm install -g @anthropic-ai/claude-code@"),
        "{error}"
    );
}

/// A system prompt of any size and an output schema reach the CLI in `initialize`, not on its
/// command line: a 1 MiB prompt arrives whole, and the turn ends with the model's object.
#[tokio::test]
async fn a_large_system_prompt_and_an_output_schema_reach_the_model() {
    let mut h = Harness::new(
        Script::new()
            .when(
                Match::SystemContains {
                    text: "END-OF-THE-LONG-PROMPT".into(),
                },
                Reply::tool("StructuredOutput", json!({"answer": 42})),
            )
            .when(Match::Any, Reply::text("the prompt did not arrive")),
    )
    .await;
    let prompt = format!(
        "{}END-OF-THE-LONG-PROMPT",
        "All work and no play. ".repeat(48 << 10)
    );
    assert!(prompt.len() > 1 << 20);
    let mut options = h.options();
    options.claude.args.system_prompt = SystemPrompt::Custom(prompt);
    options.claude.args.json_schema = Some(json!({
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }));
    let mut client = Client::connect(options).await.unwrap();
    let mut seen = Seen::default();
    let chunks = seen.turn(&mut client, "what is the answer?").await;
    let done = turn_complete(&chunks);
    assert_eq!(done["structured_output"], json!({"answer": 42}), "{done}");
    let system = h.server.model_calls().pop().unwrap().body["system"].to_string();
    assert!(system.contains("END-OF-THE-LONG-PROMPT"));
    let transcript = h.transcripts[0].clone();
    seen.close(client, &transcript).await;
}

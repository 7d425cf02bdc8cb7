//! The ACP engine in simulation: an editor's JSON-RPC in, recorded CLI traffic from the corpus
//! as each session's CLI, and what the editor and the CLI get back.

mod common;

use ccwire_core::acp::{AcpOutput, Agent, AgentConfig, CliId};
use serde_json::{json, Value};

/// An agent, with what it wrote to the editor and to each CLI.
struct Rig {
    agent: Agent,
    editor: Vec<Value>,
    cli: Vec<(CliId, Value)>,
    spawned: Vec<(CliId, String, String, Vec<String>)>,
    stopped: Vec<CliId>,
    /// Transcripts asked for: session id and work directory.
    reads: Vec<(String, String)>,
    /// Transcript lists asked for: the list, the directory, how many to pass over and to take.
    lists: Vec<(u64, Option<String>, usize, usize)>,
}

impl Rig {
    fn new() -> Rig {
        let config = AgentConfig {
            version: "0.0.0-test".into(),
            ..AgentConfig::default()
        };
        Rig {
            agent: Agent::new(config),
            editor: Vec::new(),
            cli: Vec::new(),
            spawned: Vec::new(),
            stopped: Vec::new(),
            reads: Vec::new(),
            lists: Vec::new(),
        }
    }

    fn raw(&mut self, bytes: &[u8]) {
        self.agent.handle_input(0, bytes);
        self.drain();
    }

    fn send(&mut self, message: Value) {
        self.raw(format!("{message}\n").as_bytes());
    }

    fn request(&mut self, id: u64, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    fn cli_says(&mut self, cli: CliId, message: &Value) {
        self.agent
            .handle_cli_stdout(0, cli, format!("{message}\n").as_bytes());
        self.drain();
    }

    fn drain(&mut self) {
        while let Some(output) = self.agent.poll_output() {
            match output {
                AcpOutput::Send(line) => {
                    assert_eq!(line.last(), Some(&b'\n'));
                    self.editor.push(serde_json::from_slice(&line).unwrap());
                }
                AcpOutput::Spawn {
                    cli,
                    session_id,
                    cwd,
                    args,
                } => self.spawned.push((cli, session_id, cwd, args.to_args())),
                AcpOutput::Write { cli, bytes } => {
                    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                        self.cli.push((cli, serde_json::from_slice(line).unwrap()));
                    }
                }
                AcpOutput::Stop { cli } => self.stopped.push(cli),
                AcpOutput::ReadTranscript { session_id, cwd } => {
                    self.reads.push((session_id, cwd));
                }
                AcpOutput::ListTranscripts {
                    list,
                    cwd,
                    skip,
                    take,
                } => self.lists.push((list, cwd, skip, take)),
                _ => panic!("an output this test does not know"),
            }
        }
    }

    fn take_editor(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.editor)
    }

    /// The answer to request `id` the editor got.
    fn answer(&self, id: u64) -> Value {
        self.editor
            .iter()
            .find(|m| m["id"] == id && m.get("method").is_none())
            .cloned()
            .unwrap_or_else(|| panic!("no answer to {id} in {:#?}", self.editor))
    }

    /// `session/update`s the editor got, as their `update` objects.
    fn updates(&self) -> Vec<Value> {
        self.editor
            .iter()
            .filter(|m| m["method"] == "session/update")
            .map(|m| m["params"]["update"].clone())
            .collect()
    }

    /// Opens a session whose CLI answers `initialize` with the recorded answer of `transcript`.
    fn open(&mut self, id: u64, transcript: &[common::Line]) -> (String, CliId) {
        self.request(
            id,
            "session/new",
            json!({"cwd": "/home/dev/project", "mcpServers": []}),
        );
        self.ready(transcript)
    }

    /// The last CLI started answers `initialize` with the recorded answer of `transcript`.
    fn ready(&mut self, transcript: &[common::Line]) -> (String, CliId) {
        let (cli, session_id, ..) = self.spawned.last().cloned().expect("a CLI was started");
        let (_, init) = self
            .cli
            .last()
            .cloned()
            .expect("the CLI was sent initialize");
        assert_eq!(init["request"]["subtype"], "initialize");
        let mut ready = transcript
            .iter()
            .find(|l| l.dir == "out" && l.msg["type"] == "control_response")
            .expect("the transcript has the CLI's initialize answer")
            .msg
            .clone();
        ready["response"]["request_id"] = init["request_id"].clone();
        self.cli_says(cli, &ready);
        (session_id, cli)
    }

    /// Opens a session on `transcript` (what the editor got of it dropped), prompts it, and
    /// plays the CLI up to its permission request, which the editor is asked: the session, its
    /// CLI, the request's place in the transcript and the editor's question.
    fn ask_permission(&mut self, transcript: &[common::Line]) -> (String, CliId, usize, Value) {
        let (session_id, cli) = self.open(1, transcript);
        self.take_editor();
        self.request(2, "session/prompt", prompt(&session_id, "Run echo hi."));
        let at = self.play(cli, transcript, 2, |m| m["type"] == "control_request");
        self.cli_says(cli, &transcript[at].msg);
        let ask = self.editor.last().cloned().expect("the editor was asked");
        assert_eq!(ask["method"], "session/request_permission");
        (session_id, cli, at, ask)
    }

    /// Plays the CLI's side of `transcript` after its initialize answer, stopping before the
    /// first line for which `stop` holds.
    fn play(
        &mut self,
        cli: CliId,
        transcript: &[common::Line],
        from: usize,
        stop: impl Fn(&Value) -> bool,
    ) -> usize {
        let mut i = from;
        while i < transcript.len() {
            let line = &transcript[i];
            if line.dir == "out" && line.msg["type"] != "control_response" {
                if stop(&line.msg) {
                    return i;
                }
                self.cli_says(cli, &line.msg);
            }
            i += 1;
        }
        i
    }
}

fn prompt(session_id: &str, text: &str) -> Value {
    json!({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
}

#[test]
fn initialize_names_the_agent_and_what_it_takes() {
    let mut rig = Rig::new();
    rig.request(
        0,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let result = &rig.answer(0)["result"];
    assert_eq!(result["protocolVersion"], 1);
    assert_eq!(result["agentInfo"]["name"], "ccwire");
    assert_eq!(result["agentInfo"]["version"], "0.0.0-test");
    assert_eq!(
        result["agentCapabilities"]["promptCapabilities"]["image"],
        true
    );
    assert_eq!(
        result["agentCapabilities"]["promptCapabilities"]["embeddedContext"],
        true
    );
    assert_eq!(
        result["agentCapabilities"]["mcpCapabilities"],
        json!({"http": true, "sse": true})
    );
}

#[test]
fn a_new_session_starts_its_cli_and_is_answered_when_the_cli_is_ready() {
    let transcript = common::lines(&common::transcript("b_bash_allow"));
    let mut rig = Rig::new();
    rig.request(
        1,
        "session/new",
        json!({"cwd": "/home/dev/project", "mcpServers": [
            {"name": "files", "command": "/bin/files-mcp", "args": ["--ro"], "env": [{"name": "K", "value": "v"}]},
            {"type": "http", "name": "docs", "url": "https://docs.example/mcp", "headers": [{"name": "Authorization", "value": "Bearer t"}]},
        ]}),
    );
    assert!(
        rig.editor.is_empty(),
        "answered before the CLI was ready: {:?}",
        rig.editor
    );
    let (cli, session_id, cwd, args) = rig.spawned[0].clone();
    assert_eq!(cwd, "/home/dev/project");
    assert!(
        args.contains(&format!("--session-id={session_id}")),
        "{args:?}"
    );
    assert!(
        args.windows(2)
            .any(|w| w == ["--permission-prompt-tool", "stdio"]),
        "{args:?}"
    );
    assert!(
        args.contains(&"--include-partial-messages".to_owned()),
        "{args:?}"
    );
    let config = &args[args.iter().position(|a| a == "--mcp-config").unwrap() + 1];
    let config: Value = serde_json::from_str(config).unwrap();
    assert_eq!(
        config["mcpServers"],
        json!({
            "files": {"type": "stdio", "command": "/bin/files-mcp", "args": ["--ro"], "env": {"K": "v"}},
            "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"Authorization": "Bearer t"}},
        })
    );

    let (_, init) = rig.cli[0].clone();
    let mut ready = transcript[1].msg.clone();
    ready["response"]["request_id"] = init["request_id"].clone();
    rig.cli_says(cli, &ready);
    let result = &rig.answer(1)["result"];
    assert_eq!(result["sessionId"], session_id.as_str());
    assert_eq!(result["modes"]["currentModeId"], "default");
    let modes: Vec<&str> = result["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        modes,
        ["default", "acceptEdits", "plan", "bypassPermissions"]
    );
    let updates = rig.updates();
    assert_eq!(updates[0]["sessionUpdate"], "available_commands_update");
    assert!(
        updates[0]["availableCommands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "deep-research"),
        "{:?}",
        updates[0]
    );
}

#[test]
fn a_tool_call_the_editor_allows_runs_and_the_prompt_ends_its_turn() {
    let transcript = common::lines(&common::transcript("b_bash_allow"));
    let mut rig = Rig::new();
    let (session_id, cli, at, ask) = rig.ask_permission(&transcript);
    let (_, user) = rig
        .cli
        .iter()
        .rev()
        .find(|(_, m)| m["type"] == "user")
        .cloned()
        .unwrap();
    assert_eq!(
        user["message"]["content"],
        json!([{"type": "text", "text": "Run echo hi."}])
    );

    // The call is shown before the CLI asks about it.
    let updates = rig.updates();
    assert_eq!(updates[0]["sessionUpdate"], "agent_message_chunk");
    assert_eq!(
        updates[0]["content"],
        json!({"type": "text", "text": "I'll run the command."})
    );
    let shown = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .expect("a tool_call update");
    assert_eq!(shown["toolCallId"], "toolu_fake_12f3f961030b4a95");
    assert_eq!(shown["kind"], "execute");
    let whole = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["rawInput"].is_object())
        .expect("the call with its whole input");
    assert_eq!(whole["toolCallId"], "toolu_fake_12f3f961030b4a95");
    assert_eq!(whole["rawInput"]["command"], "echo hi > out.txt");
    assert_eq!(whole["title"], "`echo hi > out.txt`");

    // The CLI's question, then the editor's answer.
    assert_eq!(ask["params"]["sessionId"], session_id.as_str());
    let call = &ask["params"]["toolCall"];
    assert_eq!(call["toolCallId"], "toolu_fake_12f3f961030b4a95");
    assert_eq!(call["kind"], "execute");
    assert_eq!(call["title"], "`echo hi > out.txt`");
    let options: Vec<(&str, &str)> = ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["optionId"].as_str().unwrap(), o["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        options,
        [
            ("allow_always", "allow_always"),
            ("allow", "allow_once"),
            ("reject", "reject_once")
        ]
    );
    let asked = rig.cli.len();
    rig.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}));
    let (_, answer) = rig.cli[asked].clone();
    assert_eq!(answer["response"]["response"]["behavior"], "allow");

    rig.take_editor();
    rig.play(cli, &transcript, at + 1, |_| false);
    let updates = rig.updates();
    let done = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .expect("the call completed");
    assert_eq!(
        done["content"],
        json!([{"type": "content", "content": {"type": "text", "text": "```console\n(Bash completed with no output)\n```"}}])
    );
    assert_eq!(rig.answer(2)["result"], json!({"stopReason": "end_turn"}));
}

#[test]
fn always_allow_sends_the_clis_suggestions_and_reject_refuses() {
    let transcript = common::lines(&common::transcript("b_bash_allow"));
    for (option, behavior) in [("allow_always", "allow"), ("reject", "deny")] {
        let mut rig = Rig::new();
        let (_, _, at, ask) = rig.ask_permission(&transcript);
        let asked = rig.cli.len();
        rig.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "selected", "optionId": option}}}));
        let (_, answer) = rig.cli[asked].clone();
        let decision = &answer["response"]["response"];
        assert_eq!(decision["behavior"], behavior, "{option}: {decision}");
        if option == "allow_always" {
            assert_eq!(
                decision["updatedPermissions"],
                transcript[at].msg["request"]["permission_suggestions"],
            );
        } else {
            assert_eq!(decision["message"], "The user refused this tool call.");
        }
    }
}

#[test]
fn cancel_settles_the_pending_question_interrupts_and_the_prompt_says_cancelled() {
    let transcript = common::lines(&common::transcript("b_bash_allow"));
    let mut rig = Rig::new();
    let (session_id, cli, _, ask) = rig.ask_permission(&transcript);
    let before = rig.cli.len();
    rig.send(
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}),
    );
    let written: Vec<Value> = rig.cli[before..].iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(written[0]["response"]["response"]["behavior"], "deny");
    assert_eq!(written[0]["response"]["response"]["interrupt"], true);
    assert_eq!(written[1]["request"]["subtype"], "interrupt");
    // The editor's late answer to the question changes nothing.
    rig.send(
        json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "cancelled"}}}),
    );
    assert_eq!(rig.cli.len(), before + 2);
    let result = transcript
        .iter()
        .rev()
        .find(|l| l.msg["type"] == "result")
        .unwrap();
    rig.cli_says(cli, &result.msg);
    assert_eq!(rig.answer(2)["result"], json!({"stopReason": "cancelled"}));
}

#[test]
fn streamed_text_arrives_in_pieces_and_a_read_shows_its_file() {
    let transcript = common::lines(&common::transcript("e_partial_messages"));
    let mut rig = Rig::new();
    let (session_id, cli) = rig.open(1, &transcript);
    rig.take_editor();
    rig.request(2, "session/prompt", prompt(&session_id, "Read hello.txt."));
    rig.play(cli, &transcript, 2, |_| false);
    let updates = rig.updates();
    let text: Vec<&str> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        text[..5],
        ["Let me ", "read th", "at file", " for yo", "u now."]
    );
    assert_eq!(
        text.concat(),
        "Let me read that file for you now.All done: the file was read and it says hello."
    );
    let read = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["kind"] == "read")
        .expect("the read, once its input is whole");
    assert_eq!(read["title"], "Read /home/dev/project/hello.txt");
    assert_eq!(
        read["locations"],
        json!([{"path": "/home/dev/project/hello.txt"}])
    );
    assert_eq!(rig.answer(2)["result"], json!({"stopReason": "end_turn"}));
    // Before the answer: the context the session takes (the last message's input and output
    // tokens) out of the model's window, and the cost.
    let result = &transcript
        .iter()
        .rev()
        .find(|l| l.msg["type"] == "result")
        .unwrap()
        .msg;
    let last = transcript
        .iter()
        .rev()
        .find(|l| l.msg["event"]["type"] == "message_start")
        .unwrap();
    let given = &last.msg["event"]["message"]["usage"];
    let delta = transcript
        .iter()
        .rev()
        .find(|l| l.msg["event"]["type"] == "message_delta")
        .unwrap();
    let used = given["input_tokens"].as_u64().unwrap()
        + given["cache_creation_input_tokens"].as_u64().unwrap()
        + given["cache_read_input_tokens"].as_u64().unwrap()
        + delta.msg["event"]["usage"]["output_tokens"]
            .as_u64()
            .unwrap();
    let usage = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "usage_update")
        .expect("a usage_update");
    assert_eq!(
        usage,
        &json!({"sessionUpdate": "usage_update", "used": used, "size": 200000,
            "cost": {"amount": result["total_cost_usd"], "currency": "USD"}})
    );
}

#[test]
fn bad_messages_get_json_rpc_errors_and_the_agent_goes_on() {
    let mut rig = Rig::new();
    rig.raw(b"{not json\n");
    rig.raw(b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}]\n");
    rig.request(3, "no/such_method", json!({}));
    rig.request(4, "session/new", json!({"cwd": 7}));
    rig.request(
        5,
        "session/new",
        json!({"cwd": "relative/dir", "mcpServers": []}),
    );
    rig.request(6, "session/prompt", prompt("nope", "hi"));
    rig.send(json!({"jsonrpc": "2.0", "method": "no/such_notification"}));
    let codes: Vec<(Value, i64)> = rig
        .take_editor()
        .iter()
        .map(|m| (m["id"].clone(), m["error"]["code"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        codes,
        [
            (Value::Null, -32700),
            (Value::Null, -32600),
            (json!(3), -32601),
            (json!(4), -32602),
            (json!(5), -32602),
            (json!(6), -32002),
        ]
    );
    assert!(rig.spawned.is_empty());
    rig.request(7, "initialize", json!({"protocolVersion": 1}));
    assert_eq!(rig.answer(7)["result"]["protocolVersion"], 1);
}

#[test]
fn a_cli_that_exits_before_it_is_ready_fails_the_new_session() {
    let mut rig = Rig::new();
    rig.request(1, "session/new", json!({"cwd": "/w", "mcpServers": []}));
    let (cli, session_id, ..) = rig.spawned[0].clone();
    rig.agent.handle_cli_exit(0, cli, Some(1), None);
    rig.drain();
    let error = &rig.answer(1)["error"];
    assert_eq!(error["code"], -32603);
    assert!(
        error["data"].as_str().unwrap().contains("status 1"),
        "{error}"
    );
    rig.request(2, "session/prompt", prompt(&session_id, "hi"));
    assert_eq!(rig.answer(2)["error"]["code"], -32600);
}

#[test]
fn two_sessions_have_their_own_clis() {
    let transcript = common::lines(&common::transcript("b_bash_allow"));
    let mut rig = Rig::new();
    let (a, cli_a) = rig.open(1, &transcript);
    let (b, cli_b) = rig.open(2, &transcript);
    assert_ne!(a, b);
    assert_ne!(cli_a, cli_b);
    rig.request(3, "session/prompt", prompt(&b, "to b"));
    let (to, user) = rig.cli.last().cloned().unwrap();
    assert_eq!((to, user["type"].as_str()), (cli_b, Some("user")));
    rig.agent.handle_input_eof(0);
    rig.drain();
    assert_eq!(rig.stopped, [cli_a, cli_b]);
}

/// A session's transcript as the CLI writes it: one JSON entry per line.
fn cli_transcript(entries: &[Value]) -> Vec<u8> {
    entries
        .iter()
        .flat_map(|e| format!("{e}\n").into_bytes())
        .collect()
}

#[test]
fn a_loaded_session_shows_its_history_then_a_new_cli_resumes_it() {
    let transcript = common::lines(&common::transcript("b_bash_allow"));
    let mut rig = Rig::new();
    let id = "15f2d71a-1bc5-4647-92ce-c709fa6e5cc2";
    rig.request(
        1,
        "session/load",
        json!({"sessionId": id, "cwd": "/home/dev/project", "mcpServers": []}),
    );
    assert_eq!(rig.reads, [(id.to_owned(), "/home/dev/project".to_owned())]);
    assert!(rig.editor.is_empty() && rig.spawned.is_empty());
    let history = cli_transcript(&[
        json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "Run echo hi."}]}}),
        json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "I'll run it."}]}}),
        json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "echo hi"}}]}}),
        json!({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "hi"}]}}),
        json!({"type": "last-prompt", "lastPrompt": "Run echo hi."}),
    ]);
    rig.agent.handle_transcript(0, id, Some(&history));
    rig.drain();
    // The history, before the answer.
    let shown: Vec<(String, String)> = rig
        .updates()
        .iter()
        .map(|u| {
            let what = u["content"]["text"].as_str().or(u["title"].as_str());
            let what = what.or(u["status"].as_str()).unwrap_or_default();
            (
                u["sessionUpdate"].as_str().unwrap().to_owned(),
                what.to_owned(),
            )
        })
        .collect();
    let expected = [
        ("user_message_chunk", "Run echo hi."),
        ("agent_message_chunk", "I'll run it."),
        ("tool_call", "`echo hi`"),
        ("tool_call_update", "completed"),
    ];
    assert_eq!(shown, expected.map(|(a, b)| (a.to_owned(), b.to_owned())));
    assert!(rig.editor.iter().all(|m| m.get("id").is_none()));
    let (_, session_id, cwd, args) = rig.spawned[0].clone();
    assert_eq!(
        (session_id.as_str(), cwd.as_str()),
        (id, "/home/dev/project")
    );
    assert!(args.contains(&format!("--resume={id}")), "{args:?}");
    assert!(
        !args.iter().any(|a| a.starts_with("--session-id")),
        "{args:?}"
    );
    rig.ready(&transcript);
    let result = &rig.answer(1)["result"];
    assert_eq!(result["modes"]["currentModeId"], "default");
    assert!(result.get("sessionId").is_none(), "{result}");

    // A session the CLI has no transcript of, and an id that is not one.
    let other = "00000000-0000-4000-8000-000000000000";
    rig.request(
        2,
        "session/load",
        json!({"sessionId": other, "cwd": "/w", "mcpServers": []}),
    );
    rig.agent.handle_transcript(0, other, None);
    rig.drain();
    assert_eq!(rig.answer(2)["error"]["code"], -32002);
    rig.request(
        3,
        "session/load",
        json!({"sessionId": "../../x", "cwd": "/w", "mcpServers": []}),
    );
    assert_eq!(rig.answer(3)["error"]["code"], -32002);
    assert_eq!(rig.reads.len(), 2);
    assert_eq!(rig.spawned.len(), 1);
}

#[test]
fn resume_starts_a_cli_without_the_history_and_close_ends_it() {
    let transcript = common::lines(&common::transcript("b_bash_allow"));
    let mut rig = Rig::new();
    let id = "15f2d71a-1bc5-4647-92ce-c709fa6e5cc2";
    rig.request(1, "session/resume", json!({"sessionId": id, "cwd": "/w"}));
    let history =
        cli_transcript(&[json!({"type": "user", "message": {"role": "user", "content": "hello"}})]);
    rig.agent.handle_transcript(0, id, Some(&history));
    rig.drain();
    let (_, cli) = rig.ready(&transcript);
    assert!(rig.answer(1)["result"]["modes"].is_object());
    assert!(
        !rig.updates()
            .iter()
            .any(|u| u["sessionUpdate"] == "user_message_chunk"),
        "{:?}",
        rig.updates()
    );
    rig.request(2, "session/prompt", prompt(id, "again"));
    rig.request(3, "session/close", json!({"sessionId": id}));
    assert_eq!(rig.answer(2)["result"], json!({"stopReason": "cancelled"}));
    assert_eq!(rig.answer(3)["result"], json!({}));
    assert_eq!(rig.stopped, [cli]);
    rig.request(4, "session/prompt", prompt(id, "after"));
    assert_eq!(rig.answer(4)["error"]["code"], -32002);
    // The CLI's exit after the close changes nothing for the editor.
    let before = rig.editor.len();
    rig.agent.handle_cli_exit(0, cli, Some(0), None);
    rig.drain();
    assert_eq!(rig.editor.len(), before);
}

#[test]
fn the_model_is_a_config_option_the_editor_sets() {
    let transcript = common::lines(&common::transcript("b_bash_allow"));
    let mut rig = Rig::new();
    let (session_id, cli) = rig.open(1, &transcript);
    let options = rig.answer(1)["result"]["configOptions"].clone();
    let ids: Vec<&str> = options
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mode", "model"]);
    let model = &options[1];
    assert_eq!(
        (&model["category"], &model["currentValue"]),
        (&json!("model"), &json!("default"))
    );
    let values: Vec<&str> = model["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    assert!(values.contains(&"haiku"), "{values:?}");

    rig.request(
        2,
        "session/set_config_option",
        json!({"sessionId": session_id, "configId": "model", "value": "gpt-4o"}),
    );
    assert_eq!(rig.answer(2)["error"]["code"], -32602);
    rig.request(
        3,
        "session/set_config_option",
        json!({"sessionId": session_id, "configId": "model", "value": "haiku"}),
    );
    let (_, set) = rig.cli.last().cloned().unwrap();
    assert_eq!(
        set["request"],
        json!({"subtype": "set_model", "model": "haiku"})
    );
    rig.cli_says(
        cli,
        &json!({"type": "control_response", "response": {"subtype": "success", "request_id": set["request_id"], "response": {}}}),
    );
    let options = &rig.answer(3)["result"]["configOptions"];
    assert_eq!(options[1]["currentValue"], "haiku");

    // A mode set as a config option is a mode change the editor is told of both ways.
    rig.take_editor();
    rig.request(
        4,
        "session/set_config_option",
        json!({"sessionId": session_id, "configId": "mode", "value": "plan"}),
    );
    let (_, set) = rig.cli.last().cloned().unwrap();
    assert_eq!(set["request"]["subtype"], "set_permission_mode");
    rig.cli_says(
        cli,
        &json!({"type": "control_response", "response": {"subtype": "success", "request_id": set["request_id"], "response": {"mode": "plan"}}}),
    );
    assert_eq!(
        rig.answer(4)["result"]["configOptions"][0]["currentValue"],
        "plan"
    );
    let kinds: Vec<Value> = rig
        .updates()
        .iter()
        .map(|u| u["sessionUpdate"].clone())
        .collect();
    assert_eq!(
        kinds,
        [json!("current_mode_update"), json!("config_option_update")]
    );
}

#[test]
fn an_editor_that_offers_its_files_reads_them_for_the_cli() {
    let transcript = common::lines(&common::transcript("b_bash_allow"));
    let mut rig = Rig::new();
    rig.request(
        0,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}}}),
    );
    let (session_id, cli) = rig.open(1, &transcript);
    let args = &rig.spawned[0].3;
    let disallowed = &args[args.iter().position(|a| a == "--disallowedTools").unwrap() + 1];
    assert_eq!(disallowed, "Read,Write,Edit");
    let config = &args[args.iter().position(|a| a == "--mcp-config").unwrap() + 1];
    let config: Value = serde_json::from_str(config).unwrap();
    assert_eq!(config["mcpServers"]["acp"]["type"], "sdk", "{config}");

    rig.take_editor();
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "Read", "arguments": {"file_path": "/home/dev/project/a.txt", "offset": 2},
        "_meta": {"claudecode/toolUseId": "t1"}}});
    rig.cli_says(
        cli,
        &json!({"type": "control_request", "request_id": "m1", "request": {"subtype": "mcp_message", "server_name": "acp", "message": call}}),
    );
    let read = rig.editor.last().cloned().unwrap();
    assert_eq!(read["method"], "fs/read_text_file");
    assert_eq!(
        read["params"],
        json!({"sessionId": session_id, "path": "/home/dev/project/a.txt", "line": 2, "limit": 2000})
    );
    rig.send(json!({"jsonrpc": "2.0", "id": read["id"], "result": {"content": "two\nthree"}}));
    let (_, answer) = rig.cli.last().cloned().unwrap();
    assert_eq!(answer["response"]["request_id"], "m1");
    let result = &answer["response"]["response"]["mcp_response"]["result"];
    assert_eq!(
        result["content"],
        json!([{"type": "text", "text": "     2\ttwo\n     3\tthree\n"}])
    );
}

#[test]
fn a_cli_with_no_login_fails_the_prompt_with_auth_required() {
    let transcript = common::lines(&common::transcript("b_bash_allow"));
    let mut rig = Rig::new();
    let (session_id, cli) = rig.open(1, &transcript);
    rig.request(2, "session/prompt", prompt(&session_id, "hi"));
    let mut result = transcript
        .iter()
        .rev()
        .find(|l| l.msg["type"] == "result")
        .unwrap()
        .msg
        .clone();
    result["is_error"] = json!(true);
    result["result"] = json!("Not logged in · Please run /login");
    rig.cli_says(cli, &result);
    let error = &rig.answer(2)["error"];
    assert_eq!(error["code"], -32000, "{error}");
    assert_eq!(error["data"], "Not logged in · Please run /login");
}

#[test]
fn sessions_are_listed_from_the_clis_transcripts_a_page_at_a_time() {
    use ccwire_core::acp::TranscriptHead;
    let mut rig = Rig::new();
    rig.request(1, "session/list", json!({"cwd": "/w/p"}));
    let (list, cwd, skip, take) = rig.lists[0].clone();
    assert_eq!((cwd.as_deref(), skip), (Some("/w/p"), 0));
    let head = |n: usize, cwd: &str| TranscriptHead {
        session_id: format!("00000000-0000-4000-8000-{n:012}"),
        modified_ms: 1_796_000_000_000 - n as u64 * 1000,
        head: cli_transcript(&[
            json!({"type": "user", "cwd": cwd, "message": {"content": format!("prompt {n}")}}),
        ]),
    };
    // One more than a page: there is a next one. One transcript is of another directory that
    // the CLI names the same.
    let mut found: Vec<TranscriptHead> = (0..take).map(|n| head(n, "/w/p")).collect();
    found[1] = head(1, "/w-p");
    rig.agent.handle_transcript_list(0, list, found);
    rig.drain();
    let result = &rig.answer(1)["result"];
    let sessions = result["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), take - 2);
    assert_eq!(
        sessions[0],
        json!({"sessionId": "00000000-0000-4000-8000-000000000000", "cwd": "/w/p", "title": "prompt 0", "updatedAt": "2026-11-30T00:53:20.000Z"})
    );
    assert_eq!(sessions[1]["title"], "prompt 2");
    let cursor = result["nextCursor"].as_str().unwrap().to_owned();

    rig.request(2, "session/list", json!({"cwd": "/w/p", "cursor": cursor}));
    assert_eq!(rig.lists[1].2, take - 1);
    rig.request(3, "session/list", json!({"cursor": "page two"}));
    assert_eq!(rig.answer(3)["error"]["code"], -32602);
}

#[test]
fn with_editor_tools_off_the_cli_keeps_its_own() {
    let transcript = common::lines(&common::transcript("b_bash_allow"));
    let mut rig = Rig::new();
    rig.agent = Agent::new(AgentConfig {
        editor_tools: false,
        ..AgentConfig::default()
    });
    rig.request(
        0,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true}}),
    );
    rig.open(1, &transcript);
    let args = &rig.spawned[0].3;
    assert!(!args.iter().any(|a| a == "--disallowedTools"), "{args:?}");
    assert!(!args.iter().any(|a| a.contains("\"sdk\"")), "{args:?}");
}

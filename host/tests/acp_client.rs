//! `ccwire acp` driven by the official Rust ACP client (`agent-client-protocol`), which spawns it
//! as an editor does, in front of the real CLI and the scripted fake model.

use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, LoadSessionRequest, NewSessionRequest, PromptRequest,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent, Client};
use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{FakeAnthropic, Reply, Script};
use serde_json::json;

/// What the editor saw: the updates, and the titles of the tool calls it was asked about.
#[derive(Default)]
struct Seen {
    updates: Vec<SessionNotification>,
    asked: Vec<String>,
}

impl Seen {
    fn said(&self, pick: fn(&SessionUpdate) -> Option<&ContentBlock>) -> String {
        (self.updates.iter())
            .filter_map(|n| match pick(&n.update)? {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            })
            .collect()
    }
}

fn agent_text(update: &SessionUpdate) -> Option<&ContentBlock> {
    match update {
        SessionUpdate::AgentMessageChunk(chunk) => Some(&chunk.content),
        _ => None,
    }
}

fn user_text(update: &SessionUpdate) -> Option<&ContentBlock> {
    match update {
        SessionUpdate::UserMessageChunk(chunk) => Some(&chunk.content),
        _ => None,
    }
}

/// `ccwire acp` as an editor configures it, offline against the fake (through `env`, which
/// drops inherited variables that would point the CLI elsewhere).
fn agent(home: &OfflineHome, server: &FakeAnthropic) -> AcpAgent {
    let mut args: Vec<String> = Vec::new();
    for key in inherited_to_remove() {
        args.extend(["-u".to_owned(), key]);
    }
    args.extend([env!("CARGO_BIN_EXE_ccwire").to_owned(), "acp".to_owned()]);
    args.extend(["--claude".to_owned(), claude_path().display().to_string()]);
    AcpAgent::new(
        AcpAgentConfig::new("/usr/bin/env")
            .args(args)
            .envs(home.env(&server.base_url())),
    )
}

fn text(prompt: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::Text(TextContent::new(prompt.to_owned()))]
}

/// Runs `op` as an editor connected to a new `ccwire acp`, which allows every tool call.
async fn as_editor(
    agent: AcpAgent,
    seen: Arc<Mutex<Seen>>,
    op: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<(), agent_client_protocol::Error>,
) {
    let updates = seen.clone();
    Client
        .v1()
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                updates.lock().unwrap().updates.push(notification);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                let title = request.tool_call.fields.title.clone().unwrap_or_default();
                seen.lock().unwrap().asked.push(title);
                responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new("allow")),
                ))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(agent, op)
        .await
        .expect("the editor's work with the agent succeeds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_streams_an_answer_allows_a_tool_and_loads_the_session_in_a_new_agent() {
    let server = FakeAnthropic::start(
        Script::new()
            .on_prompt("PLEASE-GREET", Reply::text("Hello from the fake model."))
            .on_prompt(
                "PLEASE-WRITE",
                Reply::tool(
                    "Bash",
                    json!({"command": "echo rust > rust.txt", "description": "write"}),
                ),
            )
            .on_tool_result(Reply::text("Written.")),
    )
    .await;
    let home = OfflineHome::new();
    let work = home.workdir();

    let seen = Arc::new(Mutex::new(Seen::default()));
    let cwd = work.clone();
    let session = Arc::new(Mutex::new(None));
    let opened = session.clone();
    as_editor(agent(&home, &server), seen.clone(), async move |cx| {
        let init = (cx.send_request(InitializeRequest::new(ProtocolVersion::V1)))
            .block_task()
            .await?;
        assert!(init.agent_capabilities.load_session);
        let new = (cx.send_request(NewSessionRequest::new(cwd)))
            .block_task()
            .await?;
        let sid = new.session_id;
        for prompt in ["PLEASE-GREET", "PLEASE-WRITE"] {
            let answer = (cx.send_request(PromptRequest::new(sid.clone(), text(prompt))))
                .block_task()
                .await?;
            assert_eq!(answer.stop_reason, StopReason::EndTurn, "{prompt}");
        }
        *opened.lock().unwrap() = Some(sid);
        Ok(())
    })
    .await;
    let sid = session.lock().unwrap().clone().expect("a session");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.said(agent_text), "Hello from the fake model.Written.");
        assert_eq!(seen.asked, ["`echo rust > rust.txt`"]);
    }
    assert_eq!(
        std::fs::read_to_string(work.join("rust.txt")).unwrap(),
        "rust\n"
    );

    // A new agent process: the session is loaded with its history, and goes on.
    let again = Arc::new(Mutex::new(Seen::default()));
    let cwd = work.clone();
    let loaded = sid.clone();
    as_editor(agent(&home, &server), again.clone(), async move |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let load = (cx.send_request(LoadSessionRequest::new(loaded.clone(), cwd)))
            .block_task()
            .await?;
        assert!(load.modes.is_some());
        let answer = (cx.send_request(PromptRequest::new(loaded, text("PLEASE-GREET again"))))
            .block_task()
            .await?;
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;
    let again = again.lock().unwrap();
    assert!(again.updates.iter().all(|n| n.session_id == sid));
    assert_eq!(again.said(user_text), "PLEASE-GREETPLEASE-WRITE");
    assert_eq!(
        again.said(agent_text),
        "Hello from the fake model.Written.Hello from the fake model."
    );
    assert!(
        again.updates.iter().any(|n| matches!(
            &n.update,
            SessionUpdate::ToolCall(call) if call.title == "`echo rust > rust.txt`"
        )),
        "the history shows the tool call"
    );
    let last = server.model_calls().pop().expect("a model call");
    let body = serde_json::to_string(&last.body).unwrap();
    assert!(
        body.contains("PLEASE-WRITE"),
        "the resumed CLI sent the earlier turns"
    );
}

#[test]
fn login_runs_the_clis_own_login_in_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let said = dir.path().join("args");
    let claude = dir.path().join("claude");
    std::fs::write(
        &claude,
        format!("#!/bin/sh\necho \"$@\" > '{}'\nexit 0\n", said.display()),
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_ccwire"))
        .args(["acp", "--login", "--claude"])
        .arg(&claude)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(std::fs::read_to_string(&said).unwrap(), "auth login\n");
}

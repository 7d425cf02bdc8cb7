//! The harness of the gateway's end-to-end tests: `ccwire serve` in process, in front of the
//! real CLI and the scripted fake Messages API.
#![allow(dead_code)] // each test file uses its own part of it

use std::time::Duration;

use ccwire_host::serve::{GatewayOptions, Server};
use ccwire_tests::cli::{claude_path, inherited_to_remove, OfflineHome};
use ccwire_tests::{FakeAnthropic, Match, Reply, Script, ToolCall};
use serde_json::{json, Value};

pub const MODEL: &str = "claude-sonnet-4-5-20250929";

pub struct Gw {
    pub fake: FakeAnthropic,
    pub home: OfflineHome,
    server: Option<Server>,
    pub http: reqwest::Client,
}

pub fn lookup_tool() -> Value {
    json!({
        "name": "lookup",
        "description": "Looks a record up.",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    })
}

pub fn two_lookups() -> Reply {
    Reply::ToolUse {
        text: Some("Looking both up.".into()),
        calls: vec![
            ToolCall {
                name: "mcp__client__lookup".into(),
                input: json!({"query": "alpha"}),
            },
            ToolCall {
                name: "mcp__client__lookup".into(),
                input: json!({"query": "beta"}),
            },
        ],
    }
}

pub fn script() -> Script {
    Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .on_tool_result(Reply::Echo)
        .on_prompt("PLEASE-LOOKUP", two_lookups())
        .on_prompt("PLEASE-SLOW", Reply::text("slow ".repeat(200)))
        .when(Match::Any, Reply::Echo)
}

/// A script whose model, for each `(prompt, command, description)`, calls Bash with that
/// command when the user's message holds the prompt, and otherwise echoes (tool results too).
pub fn bash_calls(calls: &[(&str, &str, &str)]) -> Script {
    let mut script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .on_tool_result(Reply::Echo);
    for (prompt, command, description) in calls {
        let input = json!({"command": command, "description": description});
        script = script.on_prompt(prompt, Reply::tool("Bash", input));
    }
    script.when(Match::Any, Reply::Echo)
}

impl Gw {
    pub async fn start(configure: impl FnOnce(&mut GatewayOptions)) -> Gw {
        Gw::start_with(script(), configure).await
    }

    /// A gateway in front of a fake model that follows `script`.
    pub async fn start_with(script: Script, configure: impl FnOnce(&mut GatewayOptions)) -> Gw {
        let fake = FakeAnthropic::start(script).await;
        let home = OfflineHome::new();
        let mut gw = Gw {
            fake,
            home,
            server: None,
            http: reqwest::Client::new(),
        };
        gw.restart(configure).await;
        gw
    }

    pub async fn restart(&mut self, configure: impl FnOnce(&mut GatewayOptions)) {
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
        let mut options = GatewayOptions {
            claude: Some(claude_path()),
            cwd: Some(self.home.workdir()),
            env: self.home.env(&self.fake.base_url()),
            env_remove: inherited_to_remove(),
            sandbox_relay: Some(env!("CARGO_BIN_EXE_ccwire").into()),
            ..GatewayOptions::default()
        };
        configure(&mut options);
        let server = Server::start("127.0.0.1:0".parse().unwrap(), options)
            .await
            .expect("the gateway starts");
        self.server = Some(server);
    }

    pub fn server(&self) -> &Server {
        self.server.as_ref().unwrap()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server().addr())
    }

    pub async fn post(&self, path: &str, body: &Value, key: Option<&str>) -> reqwest::Response {
        let mut request = self.http.post(self.url(path)).json(body);
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        tokio::time::timeout(Duration::from_secs(60), request.send())
            .await
            .expect("an answer in time")
            .expect("the gateway answers")
    }

    /// A non-streaming request: status, `x-ccwire-session`, body.
    pub async fn call(&self, path: &str, body: &Value, key: Option<&str>) -> (u16, String, Value) {
        let response = self.post(path, body, key).await;
        let status = response.status().as_u16();
        let kind = session_header(&response);
        let body = response.json().await.expect("a JSON body");
        (status, kind, body)
    }

    /// A streaming request: status, `x-ccwire-session`, the SSE data payloads.
    pub async fn stream(&self, path: &str, body: &Value) -> (u16, String, Vec<String>) {
        let response = self.post(path, body, None).await;
        let status = response.status().as_u16();
        let kind = session_header(&response);
        let text = tokio::time::timeout(Duration::from_secs(60), response.text())
            .await
            .expect("the stream ends in time")
            .expect("a body");
        let data = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(str::to_owned)
            .collect();
        (status, kind, data)
    }

    /// The approvals waiting for `key`'s answer (`GET /v1/approvals`).
    pub async fn approvals(&self, key: &str) -> Vec<Value> {
        let request = self
            .http
            .get(self.url("/v1/approvals"))
            .header("x-api-key", key);
        let list: Value = request.send().await.unwrap().json().await.unwrap();
        list["data"].as_array().unwrap().clone()
    }

    /// The approvals waiting for `key`'s answer, once there is one (30 s at most).
    pub async fn approvals_once_asked(&self, key: &str) -> Vec<Value> {
        for _ in 0..150 {
            let waiting = self.approvals(key).await;
            if !waiting.is_empty() {
                return waiting;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Vec::new()
    }

    /// What `GET /health` says.
    pub async fn health(&self) -> Value {
        let response = self.http.get(self.url("/health")).send().await.unwrap();
        response.json().await.expect("a JSON body")
    }

    pub async fn stop(mut self) -> Vec<u32> {
        let server = self.server.take().unwrap();
        let pids = server.session_pids();
        server.shutdown().await;
        pids
    }
}

pub fn session_header(response: &reqwest::Response) -> String {
    header(response, "x-ccwire-session")
}

/// Whether a process runs (a zombie does not count: the test process may not reap it).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        }
        Err(_) => false,
    }
}

/// Waits up to 30 s for `check` to hold.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn text_of(body: &Value) -> String {
    body["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect()
}

pub fn anthropic(messages: Value) -> Value {
    json!({"model": MODEL, "max_tokens": 1024, "tools": [lookup_tool()], "messages": messages})
}

/// The tool_result blocks for the calls in an Anthropic response.
pub fn results_for(body: &Value) -> Vec<Value> {
    body["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| {
            let q = b["input"]["query"].as_str().unwrap();
            json!({"type": "tool_result", "tool_use_id": b["id"], "content": format!("record-{q}")})
        })
        .collect()
}

/// `ccwire serve` as a user starts it, with the pinned CLI and the fake model in its
/// environment; killed when dropped.
pub struct ServeProcess {
    pub child: tokio::process::Child,
    pub addr: String,
}

impl ServeProcess {
    pub async fn start(
        home: &ccwire_tests::cli::OfflineHome,
        fake: &ccwire_tests::FakeAnthropic,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> ServeProcess {
        ServeProcess::start_wrapped(&[], home, fake, args, env).await
    }

    /// [`start`](Self::start) with `ccwire` run by `wrapper` (a program and its arguments,
    /// `ccwire` and its own arguments after them).
    pub async fn start_wrapped(
        wrapper: &[String],
        home: &ccwire_tests::cli::OfflineHome,
        fake: &ccwire_tests::FakeAnthropic,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> ServeProcess {
        use tokio::io::AsyncBufReadExt;
        let mut command = match wrapper.split_first() {
            Some((program, wrapper_args)) => {
                let mut command = tokio::process::Command::new(program);
                command.args(wrapper_args).arg(env!("CARGO_BIN_EXE_ccwire"));
                command
            }
            None => tokio::process::Command::new(env!("CARGO_BIN_EXE_ccwire")),
        };
        for key in ccwire_tests::cli::inherited_to_remove() {
            command.env_remove(key);
        }
        command.env_remove("CCWIRE_API_KEYS");
        let mut child = command
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .envs(home.env(&fake.base_url()))
            .env("CCWIRE_CLAUDE", ccwire_tests::cli::claude_path())
            .envs(env.iter().copied())
            .current_dir(home.workdir())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(addr) = line.strip_prefix("ccwire serve: listening on http://") {
                    return addr.to_owned();
                }
            }
            panic!("ccwire serve ended before listening");
        })
        .await
        .expect("ccwire serve listens in time");
        // Keep draining its log so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        ServeProcess { child, addr }
    }

    /// The CLI processes it runs.
    pub fn cli_pids(&self) -> Vec<u32> {
        let pid = self.child.id().unwrap();
        let mut pids = Vec::new();
        for task in std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
        {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            pids.extend(
                children
                    .split_whitespace()
                    .map(|p| p.parse::<u32>().unwrap()),
            );
        }
        // Its watchdog is no CLI.
        pids.retain(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmdline.split(|b| *b == 0).nth(1) != Some(b"watchdog".as_slice())
        });
        pids
    }

    /// Sends `signal` to the `ccwire serve` process (itself, or the one its wrapper runs).
    pub fn signal_serve(&self, signal: nix::sys::signal::Signal) {
        let mut pids = vec![self.child.id().unwrap()];
        while let Some(pid) = pids.pop() {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() == "ccwire" {
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap();
                return;
            }
            for task in std::fs::read_dir(format!("/proc/{pid}/task"))
                .into_iter()
                .flatten()
                .flatten()
            {
                let children =
                    std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
                pids.extend(
                    children
                        .split_whitespace()
                        .map(|p| p.parse::<u32>().unwrap()),
                );
            }
        }
        panic!("no ccwire serve process");
    }

    /// Kills it with SIGKILL (it runs no code of its own to end) and waits for it.
    pub async fn kill(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id().unwrap() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        self.child.wait().await.unwrap();
    }

    pub async fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id().unwrap() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("ccwire serve ends on SIGTERM")
            .unwrap();
        assert!(status.success(), "{status}");
    }
}

/// Four user turns, two of which the model answers by calling the client's tool twice.
pub const TURNS: [&str; 4] = [
    "Hello, who are you?",
    "PLEASE-LOOKUP the first records",
    "And what do you make of them?",
    "PLEASE-LOOKUP the second records",
];

/// The model's messages of each call, tool ids made alike (the fake numbers them per call).
pub fn model_messages(fake: &FakeAnthropic, from: usize) -> Vec<String> {
    fake.model_calls()[from..]
        .iter()
        .map(|call| same_tool_ids(&call.body["messages"].to_string()))
        .collect()
}

/// `text` with every `toolu_fake_<n>_` made `toolu_fake_N_`.
pub fn same_tool_ids(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("toolu_fake_") {
        out.push_str(&rest[..at + "toolu_fake_".len()]);
        rest = &rest[at + "toolu_fake_".len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        out.push('N');
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

/// Runs one user turn of a conversation (and its tool round trips) against `url`, returning
/// the `x-ccwire-session` header and its reason of each request.
pub async fn turn(
    http: &reqwest::Client,
    url: &str,
    messages: &mut Vec<Value>,
    text: &str,
) -> Vec<(String, String)> {
    turn_as(http, url, None, messages, text).await
}

/// [`turn`] with an API key.
pub async fn turn_as(
    http: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    messages: &mut Vec<Value>,
    text: &str,
) -> Vec<(String, String)> {
    turn_via(http, &[url], key, messages, text)
        .await
        .into_iter()
        .map(|r| (r.session, r.reason))
        .collect()
}

/// How a request of a turn was served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reached {
    /// `x-ccwire-session`.
    pub session: String,
    /// `x-ccwire-session-reason`.
    pub reason: String,
    /// `x-ccwire-node`: the gateway of a cluster that served it.
    pub node: String,
}

/// [`turn_as`] with its requests sent to `urls` in turn: the first to `urls[0]`, the
/// results of the client tool calls it gets to `urls[1]`, and so on round.
pub async fn turn_via(
    http: &reqwest::Client,
    urls: &[&str],
    key: Option<&str>,
    messages: &mut Vec<Value>,
    text: &str,
) -> Vec<Reached> {
    messages.push(json!({"role": "user", "content": text}));
    let mut reached = Vec::new();
    loop {
        let url = urls[reached.len() % urls.len()];
        let body = json!({"model": MODEL, "max_tokens": 1024, "tools": [lookup_tool()], "messages": messages});
        let mut request = http.post(format!("{url}/v1/messages")).json(&body);
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        let response = tokio::time::timeout(Duration::from_secs(90), request.send())
            .await
            .expect("an answer in time")
            .expect("the gateway answers");
        reached.push(Reached {
            session: header(&response, "x-ccwire-session"),
            reason: header(&response, "x-ccwire-session-reason"),
            node: header(&response, "x-ccwire-node"),
        });
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap();
        assert_eq!(status, 200, "{answer}");
        let content = answer["content"].clone();
        messages.push(json!({"role": "assistant", "content": content}));
        let calls: Vec<&Value> = content
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .collect();
        if calls.is_empty() {
            return reached;
        }
        let results: Vec<Value> = calls
            .iter()
            .map(|c| json!({"type": "tool_result", "tool_use_id": c["id"], "content": format!("record-{}", c["input"]["query"].as_str().unwrap())}))
            .collect();
        messages.push(json!({"role": "user", "content": results}));
    }
}

/// A response header as text (empty when absent).
pub fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

/// Asserts that the model calls from `from` on carry the messages of `expected`, call for
/// call (tool ids made alike).
pub fn assert_same_calls(fake: &FakeAnthropic, from: usize, expected: &[String]) {
    let calls = model_messages(fake, from);
    assert_eq!(calls.len(), expected.len());
    for (i, (a, b)) in expected.iter().zip(&calls).enumerate() {
        assert_eq!(a, b, "the model's call {i}");
    }
}

/// Runs `command` with the Bash tool of `key`'s CLI and returns what it printed, as the model
/// got it.
pub async fn bash(gw: &Gw, key: &str, command: &str) -> String {
    gw.fake.set_script(
        Script::new()
            .when(Match::Probe, Reply::text("ok"))
            .on_tool_result(Reply::Echo)
            .on_prompt(
                "RUN",
                Reply::tool("Bash", json!({"command": command, "description": "Check"})),
            )
            .when(Match::Any, Reply::Echo),
    );
    let body = anthropic(json!([{"role": "user", "content": format!("RUN {command}")}]));
    let (status, _, answer) = gw.call("/v1/messages", &body, Some(key)).await;
    assert_eq!(status, 200, "{answer}");
    text_of(&answer)
}

/// Asks the model for its two lookups (`PLEASE-LOOKUP`): the user message and the answer that
/// calls the client's tool.
pub async fn ask_for_lookups(gw: &Gw) -> (Value, Value) {
    let user = json!({"role": "user", "content": "PLEASE-LOOKUP things"});
    let (status, _, answer) = gw
        .call("/v1/messages", &anthropic(json!([user])), None)
        .await;
    assert_eq!(
        (status, &answer["stop_reason"]),
        (200, &json!("tool_use")),
        "{answer}"
    );
    (user, answer)
}

/// Waits until the model has read the error a held call past its deadline gets.
pub async fn model_sees_the_held_call_timeout(gw: &Gw) {
    let text = ccwire_core::gateway::HELD_CALL_TIMEOUT_TEXT;
    eventually("the model sees the timeout", || {
        (gw.fake.model_calls().iter()).any(|c| c.body["messages"].to_string().contains(text))
    })
    .await;
}

//! A scripted fake of the Anthropic Messages API, for end-to-end tests with the real CLI.
//!
//! A [`Script`] is an ordered list of rules. Each request is matched against the rules in order
//! and answered by the first that fits; the decision looks at the conversation itself (is the
//! last user turn a tool result, which prompt was sent), so the CLI's retries and side calls do
//! not shift the script. Every request is recorded for assertions.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::oneshot;

/// Which requests a rule answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Match {
    /// Every request.
    Any,
    /// The text of the last user message contains this.
    LastUserContains {
        /// The text.
        text: String,
    },
    /// The last user message holds a tool result (for the named tool, when given).
    ToolResult {
        /// The tool name the result answers (`None`: any tool).
        #[serde(default)]
        tool: Option<String>,
    },
    /// Any message of the conversation contains this text.
    ConversationContains {
        /// The text.
        text: String,
    },
    /// The system prompt contains this text.
    SystemContains {
        /// The text.
        text: String,
    },
    /// The CLI's model probe: not streamed, `max_tokens: 1`.
    Probe,
}

/// One tool call in a reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool name.
    pub name: String,
    /// The input.
    pub input: Value,
}

/// What a rule answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    /// A text answer (`stop_reason: end_turn`).
    Text {
        /// The text.
        text: String,
    },
    /// Optional text, then one or more tool calls (`stop_reason: tool_use`).
    ToolUse {
        /// Text before the calls.
        #[serde(default)]
        text: Option<String>,
        /// The calls.
        calls: Vec<ToolCall>,
    },
    /// Thinking (with a signature), then text.
    Thinking {
        /// The thought.
        thinking: String,
        /// The answer.
        text: String,
    },
    /// An HTTP error in the API's error shape.
    Error {
        /// The HTTP status (400, 429, 500, 529, …).
        status: u16,
        /// The error type (`invalid_request_error`, `overloaded_error`, …).
        error_type: String,
        /// The message.
        message: String,
        /// A `retry-after` header, in seconds.
        #[serde(default)]
        retry_after: Option<u64>,
        /// An `x-should-retry` header.
        #[serde(default)]
        should_retry: Option<bool>,
    },
    /// Text that repeats the last user message (handy for checking what the model saw).
    Echo,
}

impl Reply {
    /// A text reply.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text { text: text.into() }
    }

    /// A reply with one tool call.
    pub fn tool(name: impl Into<String>, input: Value) -> Reply {
        Reply::ToolUse {
            text: None,
            calls: vec![ToolCall {
                name: name.into(),
                input,
            }],
        }
    }

    /// An error reply that tells the CLI not to retry.
    pub fn error(status: u16, error_type: impl Into<String>, message: impl Into<String>) -> Reply {
        Reply::Error {
            status,
            error_type: error_type.into(),
            message: message.into(),
            retry_after: None,
            should_retry: Some(false),
        }
    }
}

/// A rule: when the request matches, answer with the reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// Which requests.
    pub when: Match,
    /// The answer.
    pub reply: Reply,
    /// A pause before each streamed event, for slow streaming.
    #[serde(default)]
    pub event_delay_ms: u64,
    /// The tokens the reply reports (default: [`Usage::default`]).
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Response headers to add (the API's `anthropic-ratelimit-unified-*`, …).
    #[serde(default)]
    pub headers: Vec<(String, String)>,
}

/// The token counts a reply reports: the input ones in `message_start` (with an
/// `output_tokens` of 1), the output in `message_delta`; all of them in a non-streamed body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens outside the prompt cache.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input_tokens: 25,
            output_tokens: 12,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
        }
    }
}

impl Usage {
    fn start(&self) -> Value {
        json!({"input_tokens": self.input_tokens, "output_tokens": 1,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens})
    }

    fn full(&self) -> Value {
        json!({"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens})
    }
}

/// An ordered list of rules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// The rules, first match wins.
    pub rules: Vec<Rule>,
}

impl Script {
    /// An empty script (every request gets a short default text).
    pub fn new() -> Script {
        Script::default()
    }

    /// Adds a rule.
    pub fn when(mut self, when: Match, reply: Reply) -> Script {
        self.rules.push(Rule {
            when,
            reply,
            event_delay_ms: 0,
            usage: None,
            headers: Vec::new(),
        });
        self
    }

    /// Sets the tokens the last added rule's replies report.
    pub fn usage(mut self, usage: Usage) -> Script {
        if let Some(rule) = self.rules.last_mut() {
            rule.usage = Some(usage);
        }
        self
    }

    /// Adds a header to the last added rule's responses.
    pub fn header(mut self, name: &str, value: &str) -> Script {
        if let Some(rule) = self.rules.last_mut() {
            rule.headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    /// Adds a rule whose stream pauses before every event.
    pub fn when_slow(mut self, when: Match, reply: Reply, event_delay: Duration) -> Script {
        self.rules.push(Rule {
            when,
            reply,
            event_delay_ms: event_delay.as_millis() as u64,
            usage: None,
            headers: Vec::new(),
        });
        self
    }

    /// Answers the model probe with text, then a prompt containing `text` with `reply`.
    pub fn on_prompt(self, text: &str, reply: Reply) -> Script {
        self.when(
            Match::LastUserContains {
                text: text.to_owned(),
            },
            reply,
        )
    }

    /// Answers any tool result with `reply`.
    pub fn on_tool_result(self, reply: Reply) -> Script {
        self.when(Match::ToolResult { tool: None }, reply)
    }

    fn pick(&self, request: &Value) -> (Reply, u64, Usage, Vec<(String, String)>) {
        let probe = request.get("stream") != Some(&Value::Bool(true))
            && request.get("max_tokens").and_then(Value::as_u64) == Some(1);
        for rule in &self.rules {
            if matches(&rule.when, request, probe) {
                return (
                    rule.reply.clone(),
                    rule.event_delay_ms,
                    rule.usage.unwrap_or_default(),
                    rule.headers.clone(),
                );
            }
        }
        (
            Reply::text("(the fake model has no rule for this request)"),
            0,
            Usage::default(),
            Vec::new(),
        )
    }
}

fn matches(when: &Match, request: &Value, probe: bool) -> bool {
    let messages = request.get("messages").and_then(Value::as_array);
    let last_user = messages.and_then(|m| m.iter().rev().find(|m| m["role"] == "user"));
    match when {
        Match::Any => true,
        Match::Probe => probe,
        Match::LastUserContains { text } => {
            !probe && last_user.is_some_and(|m| user_text(m).contains(text.as_str()))
        }
        Match::ToolResult { tool } => {
            // The last user message: the CLI may put system turns after it.
            let Some(last) = last_user else {
                return false;
            };
            let results: Vec<&Value> = last["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|b| b["type"] == "tool_result")
                .collect();
            match tool {
                None => !results.is_empty(),
                Some(name) => results.iter().any(|r| {
                    tool_name_of(messages.expect("checked"), r["tool_use_id"].as_str())
                        == Some(name)
                }),
            }
        }
        Match::ConversationContains { text } => {
            !probe
                && messages.is_some_and(|m| m.iter().any(|m| m.to_string().contains(text.as_str())))
        }
        Match::SystemContains { text } => request
            .get("system")
            .is_some_and(|s| s.to_string().contains(text.as_str())),
    }
}

/// The plain text of a user message (system reminders the CLI adds included).
fn user_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .flat_map(|b| match (&b["text"], &b["content"]) {
                (Value::String(text), _) => vec![text.clone()],
                // A tool result's content: a string or text blocks.
                (_, Value::String(text)) => vec![text.clone()],
                (_, Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str().map(str::to_owned))
                    .collect(),
                _ => Vec::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn tool_name_of<'a>(messages: &'a [Value], tool_use_id: Option<&str>) -> Option<&'a String> {
    let id = tool_use_id?;
    messages.iter().rev().find_map(|m| {
        m["content"].as_array()?.iter().find_map(|b| {
            (b["type"] == "tool_use" && b["id"] == id)
                .then(|| match &b["name"] {
                    Value::String(name) => Some(name),
                    _ => None,
                })
                .flatten()
        })
    })
}

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The method.
    pub method: String,
    /// The path with query.
    pub path: String,
    /// The headers, lower-case names.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`null` when there was none or it was not JSON).
    pub body: Value,
}

impl Recorded {
    /// Whether this is a model call (`POST /v1/messages`, not `count_tokens`).
    pub fn is_model_call(&self) -> bool {
        self.method == "POST"
            && self.path.starts_with("/v1/messages")
            && !self.path.contains("count_tokens")
    }

    /// The text of the last user message of a model call.
    pub fn last_user_text(&self) -> String {
        self.body["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
            .map(user_text)
            .unwrap_or_default()
    }
}

struct Shared {
    script: Mutex<Script>,
    requests: Mutex<Vec<Recorded>>,
    counter: Mutex<u64>,
}

/// A running fake server on `127.0.0.1`. Stops when dropped.
pub struct FakeAnthropic {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
}

impl FakeAnthropic {
    /// Starts a server on a free loopback port.
    ///
    /// # Panics
    /// When no port can be bound.
    pub async fn start(script: Script) -> FakeAnthropic {
        FakeAnthropic::bind("127.0.0.1:0".parse().expect("an address"), script)
            .await
            .expect("a loopback port")
    }

    /// Starts a server on `addr`.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn bind(addr: SocketAddr, script: Script) -> std::io::Result<FakeAnthropic> {
        let shared = Arc::new(Shared {
            script: Mutex::new(script),
            requests: Mutex::new(Vec::new()),
            counter: Mutex::new(0),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        // As the real API's servers do: no small write waits for a delayed acknowledgement.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(FakeAnthropic {
            addr,
            shared,
            stop: Some(stop),
        })
    }

    /// `http://127.0.0.1:<port>`, for `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces the script.
    pub fn set_script(&self, script: Script) {
        *self.shared.script.lock().expect("not poisoned") = script;
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().expect("not poisoned").clone()
    }

    /// Forgets the requests received so far (a long run keeps its memory flat).
    pub fn clear_requests(&self) {
        self.shared.requests.lock().expect("not poisoned").clear();
    }

    /// The model calls received so far (no probes, no token counts).
    pub fn model_calls(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.is_model_call() && r.body["stream"] == true)
            .collect()
    }
}

impl Drop for FakeAnthropic {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let body_json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if uri.path().starts_with("/_fake/") {
        return control(&shared, &method, uri.path(), body_json);
    }
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    shared
        .requests
        .lock()
        .expect("not poisoned")
        .push(Recorded {
            method: method.to_string(),
            path: path.clone(),
            headers: headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        v.to_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect(),
            body: body_json.clone(),
        });
    let route = uri.path();
    if route == "/api/hello" {
        return StatusCode::OK.into_response();
    }
    if method == Method::POST && route == "/v1/messages/count_tokens" {
        let tokens = (body.len() / 4).max(1);
        return axum::Json(json!({"input_tokens": tokens})).into_response();
    }
    if method != Method::POST || route != "/v1/messages" {
        let error = json!({"type": "error", "error": {"type": "not_found_error", "message": format!("no route for {method} {route}")}});
        return (StatusCode::NOT_FOUND, axum::Json(error)).into_response();
    }
    let (reply, delay, usage, headers) =
        shared.script.lock().expect("not poisoned").pick(&body_json);
    let n = {
        let mut counter = shared.counter.lock().expect("not poisoned");
        *counter += 1;
        *counter
    };
    let mut response = respond(reply, delay, usage, n, &body_json);
    for (name, value) in headers {
        // A header the script names that HTTP cannot carry is the script's mistake.
        let name = axum::http::HeaderName::from_bytes(name.as_bytes()).expect("a header name");
        let value = axum::http::HeaderValue::from_str(&value).expect("a header value");
        response.headers_mut().insert(name, value);
    }
    response
}

/// The control API for tests in other languages: `PUT /_fake/script` replaces the script (a
/// [`Script`] as JSON); `GET /_fake/calls` lists the model calls so far as
/// `[{"body", "last_user_text"}]`.
fn control(shared: &Shared, method: &Method, route: &str, body: Value) -> Response {
    match (method.as_str(), route) {
        ("PUT" | "POST", "/_fake/script") => match serde_json::from_value::<Script>(body) {
            Ok(script) => {
                *shared.script.lock().expect("not poisoned") = script;
                StatusCode::NO_CONTENT.into_response()
            }
            Err(e) => (StatusCode::BAD_REQUEST, format!("not a script: {e}")).into_response(),
        },
        ("GET", "/_fake/calls") => {
            let calls: Vec<Value> = shared
                .requests
                .lock()
                .expect("not poisoned")
                .iter()
                .filter(|r| r.is_model_call() && r.body["stream"] == true)
                .map(|r| json!({"body": r.body, "last_user_text": r.last_user_text()}))
                .collect();
            axum::Json(calls).into_response()
        }
        _ => (
            StatusCode::NOT_FOUND,
            format!("no control route {method} {route}"),
        )
            .into_response(),
    }
}

fn respond(reply: Reply, delay_ms: u64, usage: Usage, n: u64, request: &Value) -> Response {
    let model = request["model"]
        .as_str()
        .unwrap_or("claude-fake")
        .to_owned();
    if let Reply::Error {
        status,
        error_type,
        message,
        retry_after,
        should_retry,
    } = &reply
    {
        let mut response = (
            StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            axum::Json(json!({"type": "error", "error": {"type": error_type, "message": message}})),
        )
            .into_response();
        let headers = response.headers_mut();
        if let Some(secs) = retry_after {
            headers.insert(
                "retry-after",
                secs.to_string().parse().expect("a header value"),
            );
        }
        if let Some(retry) = should_retry {
            headers.insert(
                "x-should-retry",
                retry.to_string().parse().expect("a header value"),
            );
        }
        return response;
    }
    let blocks = content_blocks(&reply, n, request);
    let stop_reason = if blocks.iter().any(|b| b["type"] == "tool_use") {
        "tool_use"
    } else {
        "end_turn"
    };
    let message_id = format!("msg_fake_{n:06}");
    if request["stream"] != true {
        return axum::Json(json!({
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop_reason, "stop_sequence": null, "usage": usage.full(),
        }))
        .into_response();
    }
    let events = sse_events(&message_id, &model, &blocks, stop_reason, &usage);
    let stream = futures::stream::unfold(events.into_iter(), move |mut events| async move {
        let event = events.next()?;
        if delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        }
        Some((Ok::<_, std::convert::Infallible>(event), events))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .header("request-id", format!("req_fake_{n:06}"))
        .body(Body::from_stream(stream))
        .expect("a valid response")
}

fn content_blocks(reply: &Reply, n: u64, request: &Value) -> Vec<Value> {
    match reply {
        Reply::Text { text } => vec![json!({"type": "text", "text": text})],
        Reply::Echo => {
            let text = request["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .map(user_text)
                .unwrap_or_default();
            vec![json!({"type": "text", "text": format!("You said: {text}")})]
        }
        Reply::Thinking { thinking, text } => vec![
            json!({"type": "thinking", "thinking": thinking, "signature": "ZmFrZS1zaWduYXR1cmU="}),
            json!({"type": "text", "text": text}),
        ],
        Reply::ToolUse { text, calls } => {
            let mut blocks = Vec::new();
            if let Some(text) = text {
                blocks.push(json!({"type": "text", "text": text}));
            }
            for (i, call) in calls.iter().enumerate() {
                blocks.push(json!({"type": "tool_use", "id": format!("toolu_fake_{n:04}_{i}"), "name": call.name, "input": call.input}));
            }
            blocks
        }
        Reply::Error { .. } => Vec::new(),
    }
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// The stream events of a message, as the real API sends them.
fn sse_events(
    message_id: &str,
    model: &str,
    blocks: &[Value],
    stop_reason: &str,
    usage: &Usage,
) -> Vec<String> {
    let mut events = vec![
        sse(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": null, "stop_sequence": null,
                "usage": usage.start(),
            }}),
        ),
        sse("ping", &json!({"type": "ping"})),
    ];
    for (index, block) in blocks.iter().enumerate() {
        let start = match block["type"].as_str() {
            Some("text") => json!({"type": "text", "text": ""}),
            Some("thinking") => json!({"type": "thinking", "thinking": "", "signature": ""}),
            _ => json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
        };
        events.push(sse(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        let deltas: Vec<Value> = match block["type"].as_str() {
            Some("text") => pieces(block["text"].as_str().unwrap_or_default(), 3)
                .into_iter()
                .map(|p| json!({"type": "text_delta", "text": p}))
                .collect(),
            Some("thinking") => {
                let mut d: Vec<Value> = pieces(block["thinking"].as_str().unwrap_or_default(), 2)
                    .into_iter()
                    .map(|p| json!({"type": "thinking_delta", "thinking": p}))
                    .collect();
                d.push(json!({"type": "signature_delta", "signature": block["signature"]}));
                d
            }
            _ => pieces(&block["input"].to_string(), 4)
                .into_iter()
                .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                .collect(),
        };
        for delta in deltas {
            events.push(sse(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push(sse(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push(sse(
        "message_delta",
        &json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": usage.output_tokens}}),
    ));
    events.push(sse("message_stop", &json!({"type": "message_stop"})));
    events
}

/// Splits text into about `n` pieces at character boundaries.
fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(n).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

//! Every conversion between JavaScript and the core, in one place.
//!
//! Values cross the boundary as JSON text: the JS wrapper (`js/session.js`) `JSON.stringify`s
//! arguments and `JSON.parse`s results. Chunks are serialized by the core's own serializer, whose
//! canonical JSON is what `JSON.stringify` writes, so what JavaScript gets re-serializes to the
//! native bytes exactly.

use ccwire_core::api::{ApiError, ApiRequest, ToolChoice};
use ccwire_core::{
    Chunk, Delivery, HookMatcher, Json, McpCallResult, McpServer, Output, PermissionDecision,
    SessionConfig, TimeoutReason, Timeouts, Timestamp, UserMessage,
};
use serde::Deserialize;
use serde_json::{Map, Value};
use wasm_bindgen::JsError;

/// A JS number of milliseconds as a [`Timestamp`].
pub fn timestamp(now_ms: f64) -> Result<Timestamp, JsError> {
    if now_ms.is_finite() && now_ms >= 0.0 && now_ms <= u64::MAX as f64 {
        Ok(now_ms as Timestamp)
    } else {
        Err(JsError::new(&format!(
            "nowMs must be a finite number of milliseconds >= 0, got {now_ms}"
        )))
    }
}

fn parse<'a, T: Deserialize<'a>>(what: &str, text: &'a str) -> Result<T, JsError> {
    serde_json::from_str(text).map_err(|err| JsError::new(&format!("{what}: {err}")))
}

/// Session options as the JS constructor takes them.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Options {
    line_limit: Option<usize>,
    seed: Option<u64>,
    #[serde(default)]
    timeouts: TimeoutOptions,
    #[serde(default)]
    mcp_servers: Vec<McpServer>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TimeoutOptions {
    permission_ms: Option<u64>,
    hook_ms: Option<u64>,
    mcp_call_ms: Option<u64>,
    request_ms: Option<u64>,
}

/// Reads the session options (`{lineLimit, seed, timeouts, mcpServers}`).
pub fn session_config(options: &str) -> Result<SessionConfig, JsError> {
    let options: Options = parse("session options", options)?;
    let mut config = SessionConfig::default();
    if let Some(limit) = options.line_limit {
        config.line_limit = limit;
    }
    config.seed = options.seed.unwrap_or(0);
    config.timeouts = Timeouts {
        permission_ms: options.timeouts.permission_ms,
        hook_ms: options.timeouts.hook_ms,
        mcp_call_ms: options.timeouts.mcp_call_ms,
        request_ms: options.timeouts.request_ms,
    };
    config.mcp_servers = options.mcp_servers;
    Ok(config)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InitializeOptions {
    #[serde(default)]
    hooks: Vec<HookOption>,
    #[serde(default)]
    extra: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HookOption {
    event: String,
    matcher: Option<String>,
    timeout_s: Option<u64>,
}

/// Reads `initialize` options (`{hooks: [{event, matcher, timeoutS}], extra}`).
pub fn initialize_options(text: &str) -> Result<(Vec<HookMatcher>, Map<String, Value>), JsError> {
    let options: InitializeOptions = parse("initialize options", text)?;
    let hooks = options
        .hooks
        .into_iter()
        .map(|h| HookMatcher {
            event: h.event,
            matcher: h.matcher,
            timeout_s: h.timeout_s,
        })
        .collect();
    Ok((hooks, options.extra))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MessageOption {
    content: Value,
    uuid: Option<String>,
    priority: Option<String>,
    #[serde(default)]
    extra: Map<String, Value>,
}

/// Reads a user message (`{content, uuid, priority, extra}`).
pub fn user_message(text: &str) -> Result<UserMessage, JsError> {
    let m: MessageOption = parse("user message", text)?;
    if !(m.content.is_string() || m.content.is_array()) {
        return Err(JsError::new(
            "user message: content must be a string or an array of content blocks",
        ));
    }
    Ok(UserMessage {
        content: m.content,
        uuid: m.uuid,
        priority: m.priority,
        extra: m.extra,
    })
}

#[derive(Deserialize)]
#[serde(tag = "behavior", rename_all = "camelCase", deny_unknown_fields)]
enum DecisionOption {
    #[serde(rename_all = "camelCase")]
    Allow {
        updated_input: Option<Value>,
        #[serde(default)]
        updated_permissions: Vec<Value>,
    },
    #[serde(rename_all = "camelCase")]
    Deny {
        message: String,
        #[serde(default)]
        interrupt: bool,
    },
}

/// Reads a permission decision (`{behavior:"allow", updatedInput?, updatedPermissions?}` or
/// `{behavior:"deny", message, interrupt?}`).
pub fn permission_decision(text: &str) -> Result<PermissionDecision, JsError> {
    Ok(match parse("permission decision", text)? {
        DecisionOption::Allow {
            updated_input,
            updated_permissions,
        } => PermissionDecision::Allow {
            updated_input,
            updated_permissions,
        },
        DecisionOption::Deny { message, interrupt } => {
            PermissionDecision::Deny { message, interrupt }
        }
    })
}

/// Reads a hook's JSON output.
pub fn hook_output(text: &str) -> Result<Value, JsError> {
    parse("hook output", text)
}

/// Reads an MCP tool result (`{content: [...], isError?}`).
pub fn mcp_result(text: &str) -> Result<McpCallResult, JsError> {
    parse("MCP tool result", text)
}

/// Reads the fields of a control request.
pub fn control_fields(text: &str) -> Result<Map<String, Value>, JsError> {
    parse("control request fields", text)
}

/// Builds the JSON object a session method returns: `{"chunks":[…],"stdin":[…]}` plus extra
/// members (already JSON).
pub struct Step {
    out: Vec<u8>,
    stdin: Vec<String>,
}

impl Step {
    /// Drains the outputs: chunks into the array, writes kept for `stdin`.
    pub fn drain(outputs: impl Iterator<Item = Output>) -> Step {
        let mut out = b"{\"chunks\":".to_vec();
        let mut stdin = Vec::new();
        let chunks = outputs.filter_map(|output| match output {
            Output::Chunk(chunk) => Some(chunk),
            Output::Write(bytes) => {
                stdin.push(String::from_utf8_lossy(&bytes).into_owned());
                None
            }
        });
        write_chunks(&mut out, chunks);
        Step { out, stdin }
    }

    /// Adds a member whose value is JSON text.
    pub fn with(mut self, key: &str, json: &str) -> Step {
        self.out.extend_from_slice(b",\"");
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out.extend_from_slice(json.as_bytes());
        self
    }

    /// The finished JSON object.
    pub fn finish(mut self) -> String {
        self.out.extend_from_slice(b",\"stdin\":");
        serde_json::to_writer(&mut self.out, &self.stdin).expect("strings serialize");
        self.out.push(b'}');
        String::from_utf8(self.out).expect("serde_json writes UTF-8")
    }
}

/// Writes chunks as a JSON array.
pub fn write_chunks(out: &mut Vec<u8>, chunks: impl Iterator<Item = Chunk>) {
    out.push(b'[');
    for (i, chunk) in chunks.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, &chunk).expect("chunks serialize");
    }
    out.push(b']');
}

/// A JSON string literal.
pub fn string(text: &str) -> String {
    serde_json::to_string(text).expect("strings serialize")
}

/// `"sent"` or `"dropped"`.
pub fn delivery(delivery: Delivery) -> &'static str {
    match delivery {
        Delivery::Sent => "\"sent\"",
        Delivery::Dropped => "\"dropped\"",
    }
}

/// The next deadline as `{"atMs":…,"reason":{…},"description":…}`, or `null`.
pub fn deadline(next: Option<(Timestamp, TimeoutReason)>) -> String {
    let Some((at, reason)) = next else {
        return "null".to_owned();
    };
    let description = reason.to_string();
    let reason = match reason {
        TimeoutReason::Permission { request_id } => {
            serde_json::json!({"kind": "permission", "requestId": request_id})
        }
        TimeoutReason::Hook { request_id } => {
            serde_json::json!({"kind": "hook", "requestId": request_id})
        }
        TimeoutReason::McpCall { request_id } => {
            serde_json::json!({"kind": "mcp_call", "requestId": request_id})
        }
        TimeoutReason::Request {
            request_id,
            subtype,
        } => serde_json::json!({"kind": "request", "requestId": request_id, "subtype": subtype}),
        _ => serde_json::json!({"kind": "other"}),
    };
    serde_json::json!({"atMs": at, "reason": reason, "description": description}).to_string()
}

/// A parsed API request in canonical form, with its history hash for `tenant`.
pub fn canonical_request(request: &ApiRequest, tenant: &str) -> String {
    let conversation = &request.conversation;
    let tool_choice = match &request.tool_choice {
        ToolChoice::Auto => serde_json::json!({"type": "auto"}),
        ToolChoice::Any => serde_json::json!({"type": "any"}),
        ToolChoice::None => serde_json::json!({"type": "none"}),
        ToolChoice::Tool(name) => serde_json::json!({"type": "tool", "name": name}),
    };
    let value = serde_json::json!({
        "api": api_name(request.api),
        "model": request.model,
        "stream": request.stream,
        "max_tokens": request.max_tokens,
        "include_usage": request.include_usage,
        "tool_choice": tool_choice,
        "system": conversation.system,
        "messages": conversation.messages,
        "tools": conversation.tools,
        "history_len": conversation.history_len(),
        "history_hash": conversation.history_hash(tenant),
        "tool_signature": conversation.tool_signature(),
        "ignored": request.ignored,
    });
    Json::from_value(&value).get().to_owned()
}

/// The name of an API as the JS functions take it.
pub fn api_name(api: ccwire_core::api::Api) -> &'static str {
    match api {
        ccwire_core::api::Api::Anthropic => "anthropic",
        ccwire_core::api::Api::OpenAi => "openai",
    }
}

/// An API error as a JS `Error` whose message carries the status and the API's error body.
pub fn api_error(err: &ApiError, api: ccwire_core::api::Api) -> JsError {
    JsError::new(&format!(
        "ccwire-api-error {} {}",
        err.status(),
        err.body(api)
    ))
}

//! Every conversion between JavaScript and the core, in one place.
//!
//! Values cross the boundary as JSON text: the JS wrappers (`js/api.js`, `js/conversation.js`)
//! `JSON.stringify` arguments and `JSON.parse` results. Chunks are serialized by the core's own
//! serializer, whose canonical JSON is what `JSON.stringify` writes, so what JavaScript gets
//! re-serializes to the native bytes exactly. Chunks handed back (to a response encoder) are
//! read by the chunks' own `Deserialize` (the core's `deserialize` feature).

use std::collections::BTreeMap;

use ccwire_core::api::response::{ClientToolCall, EncoderOptions, Outcome};
use ccwire_core::api::{
    anthropic, openai, responses, Api, ApiError, ApiErrorKind, ApiRequest, ToolChoice,
};
use ccwire_core::conversation::Message;

use ccwire_core::{
    AsciiFormatter, Chunk, Delivery, HookMatcher, Json, McpCallResult, McpServer, Output,
    PermissionDecision, SessionConfig, TimeoutReason, Timeouts, Timestamp, UserMessage,
};
use serde::Deserialize;
use serde_json::{Map, Value};
use wasm_bindgen::JsError;

mod gateway;
pub use gateway::*;

/// A JS number of milliseconds as a [`Timestamp`].
pub fn timestamp(now_ms: f64) -> Result<Timestamp, JsError> {
    if now_ms.is_finite() && now_ms >= 0.0 && now_ms <= u64::MAX as f64 {
        Ok(now_ms as Timestamp)
    } else {
        Err(JsError::new(&format!(
            "nowMs must be a finite number of milliseconds >= 0, got {}",
            number(now_ms)
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
    #[serde(default)]
    elicitations: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TimeoutOptions {
    permission_ms: Option<u64>,
    hook_ms: Option<u64>,
    mcp_call_ms: Option<u64>,
    request_ms: Option<u64>,
    elicitation_ms: Option<u64>,
    dialog_ms: Option<u64>,
}

/// Reads the session options (`{lineLimit, seed, timeouts, mcpServers, elicitations}`).
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
        elicitation_ms: options.timeouts.elicitation_ms,
        dialog_ms: options.timeouts.dialog_ms,
    };
    config.mcp_servers = options.mcp_servers;
    config.elicitations = options.elicitations;
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
    #[serde(default)]
    typed: bool,
}

/// Reads a user message (`{content, uuid, priority, extra, typed}`; `typed: true` lets the CLI
/// run a leading `/command` and read `@path` mentions, which it never does by default).
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
        typed: m.typed,
    })
}

/// Reads a permission decision (`{behavior:"allow", updatedInput?, updatedPermissions?}` or
/// `{behavior:"deny", message, interrupt?}`). Read by hand: serde's reader of a tagged enum
/// would cost the main module several KiB.
pub fn permission_decision(text: &str) -> Result<PermissionDecision, JsError> {
    let mut fields: Map<String, Value> = parse("permission decision", text)?;
    let bad = |why: &str| JsError::new(&format!("permission decision: {why}"));
    let decision = match fields.remove("behavior").as_ref().and_then(Value::as_str) {
        Some("allow") => PermissionDecision::Allow {
            updated_input: fields.remove("updatedInput").filter(|v| !v.is_null()),
            updated_permissions: match fields.remove("updatedPermissions") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(list)) => list,
                Some(_) => return Err(bad("`updatedPermissions` must be an array")),
            },
        },
        Some("deny") => PermissionDecision::Deny {
            message: match fields.remove("message") {
                Some(Value::String(message)) => message,
                _ => return Err(bad("a denial needs a string `message`")),
            },
            interrupt: match fields.remove("interrupt") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(interrupt)) => interrupt,
                Some(_) => return Err(bad("`interrupt` must be a boolean")),
            },
        },
        _ => return Err(bad("`behavior` must be \"allow\" or \"deny\"")),
    };
    match fields.keys().next() {
        Some(unknown) => Err(bad(&format!("unknown field `{unknown}`"))),
        None => Ok(decision),
    }
}

/// Reads a hook's JSON output.
pub fn hook_output(text: &str) -> Result<Value, JsError> {
    parse("hook output", text)
}

/// Reads an answer to an elicitation or a dialog (a JSON object).
pub fn request_answer(what: &str, text: &str) -> Result<Value, JsError> {
    let answer: Value = parse(what, text)?;
    if !answer.is_object() {
        return Err(JsError::new(&format!("{what}: expected a JSON object")));
    }
    Ok(answer)
}

/// Reads a host request (`{subtype, ...fields}`) of a subtype ccwire types. Its fields are
/// typed by the TypeScript declarations; checking them here would cost the module the size of
/// a deserializer per subtype.
pub fn host_request(text: &str) -> Result<(String, Map<String, Value>), JsError> {
    let mut fields: Map<String, Value> = parse("request", text)?;
    let subtype = match fields.remove("subtype") {
        Some(Value::String(subtype)) => subtype,
        _ => return Err(JsError::new("request: `subtype` must be a string")),
    };
    if !ccwire_core::HostRequest::SUBTYPES.contains(&subtype.as_str()) {
        return Err(JsError::new(&format!(
            "request: ccwire has no typed request {subtype:?} (sendControl sends any subtype)"
        )));
    }
    Ok((subtype, fields))
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

    /// Adds a member whose value is JSON text in ASCII (ids the core made, literals).
    pub fn with(mut self, key: &str, json: &str) -> Step {
        debug_assert!(json.is_ascii(), "{json}");
        self.out.extend_from_slice(b",\"");
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out.extend_from_slice(json.as_bytes());
        self
    }

    /// The finished JSON object, in ASCII (JavaScript reads it one byte a character).
    pub fn finish(mut self) -> Vec<u8> {
        self.out.extend_from_slice(b",\"stdin\":");
        write_ascii(&mut self.out, &self.stdin);
        self.out.push(b'}');
        self.out
    }
}

/// Writes chunks as a JSON array, in ASCII.
pub fn write_chunks(out: &mut Vec<u8>, chunks: impl Iterator<Item = Chunk>) {
    out.push(b'[');
    for (i, chunk) in chunks.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_ascii(out, &chunk);
    }
    out.push(b']');
}

/// Writes a value as JSON in ASCII (characters outside it escaped), which JavaScript reads one
/// byte a character.
pub fn write_ascii(out: &mut Vec<u8>, value: &impl serde::Serialize) {
    let mut serializer = serde_json::Serializer::with_formatter(out, AsciiFormatter);
    value.serialize(&mut serializer).expect("serializes");
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
        TimeoutReason::Elicitation { request_id } => {
            serde_json::json!({"kind": "elicitation", "requestId": request_id})
        }
        TimeoutReason::Dialog { request_id } => {
            serde_json::json!({"kind": "dialog", "requestId": request_id})
        }
        TimeoutReason::Request {
            request_id,
            subtype,
        } => serde_json::json!({"kind": "request", "requestId": request_id, "subtype": subtype}),
        _ => serde_json::json!({"kind": "other"}),
    };
    serde_json::json!({"atMs": at, "reason": reason, "description": description}).to_string()
}

/// Parses a request body of the API named `api` (`anthropic`, `openai` or `responses`).
///
/// # Errors
/// Another name. (The API's validation error is the inner result.)
pub fn parse_request(
    api: &str,
    body: &str,
) -> Result<(Api, Result<ApiRequest, ApiError>), JsError> {
    Ok(match api {
        "anthropic" => (Api::Anthropic, anthropic::parse_request(body.as_bytes())),
        "openai" => (Api::OpenAi, openai::parse_request(body.as_bytes())),
        "responses" => (Api::Responses, responses::parse_request(body.as_bytes())),
        other => {
            return Err(JsError::new(&format!(
                "api must be \"anthropic\", \"openai\" or \"responses\", got {other:?}"
            )))
        }
    })
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => serde_json::json!({"type": "auto"}),
        ToolChoice::Any => serde_json::json!({"type": "any"}),
        ToolChoice::None => serde_json::json!({"type": "none"}),
        ToolChoice::Tool(name) => serde_json::json!({"type": "tool", "name": name}),
    }
}

/// The fields of a parsed request besides its messages.
fn request_fields(request: &ApiRequest) -> Map<String, Value> {
    let conversation = &request.conversation;
    let value = serde_json::json!({
        "api": request.api.name(),
        "model": request.model,
        "stream": request.stream,
        "max_tokens": request.max_tokens,
        "include_usage": request.include_usage,
        "tool_choice": tool_choice(&request.tool_choice),
        "system": conversation.system,
        "tools": conversation.tools,
        "tool_signature": conversation.tool_signature(),
        "ignored": request.ignored,
        "previous_response_id": request.previous_response_id,
        "store": request.store,
        "show_thinking": request.show_thinking,
    });
    let Value::Object(map) = value else {
        unreachable!("an object literal")
    };
    map
}

/// A parsed API request in canonical form, with its history hash for `tenant`.
pub fn canonical_request(request: &ApiRequest, tenant: &str) -> String {
    let conversation = &request.conversation;
    let mut map = request_fields(request);
    map.insert(
        "messages".to_owned(),
        serde_json::to_value(&conversation.messages).expect("messages serialize"),
    );
    map.insert("history_len".to_owned(), conversation.history_len().into());
    map.insert(
        "history_hash".to_owned(),
        conversation.history_hash(tenant).into(),
    );
    Json::from_value(&Value::Object(map)).get().to_owned()
}

/// An API error as the JSON a call returns in its place, `{"apiError":{"status":…,"body":…}}`:
/// the JS wrapper throws it as an `ApiRequestError` with those fields.
pub fn api_error(err: &ApiError, api: Api) -> String {
    serde_json::json!({"apiError": {"status": err.status(), "body": err.body(api)}}).to_string()
}

/// Response encoder options as the JS constructor takes them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EncoderOptionsIn {
    api: ApiIn,
    stream: bool,
    model: String,
    id: Option<String>,
    #[serde(default)]
    created: u64,
    #[serde(default)]
    include_usage: bool,
    #[serde(default)]
    client_tools: BTreeMap<String, String>,
    client_tool_prefix: Option<String>,
    previous_response_id: Option<String>,
    #[serde(default)]
    store: bool,
    #[serde(default)]
    show_thinking: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ApiIn {
    Anthropic,
    OpenAi,
    Responses,
}

/// Reads response encoder options (`{api, stream, model, id, created, includeUsage,
/// clientTools, clientToolPrefix, previousResponseId, store, showThinking}`).
pub fn encoder_options(text: &str) -> Result<EncoderOptions, JsError> {
    let options: EncoderOptionsIn = parse("ResponseEncoder options", text)?;
    Ok(EncoderOptions {
        api: match options.api {
            ApiIn::Anthropic => Api::Anthropic,
            ApiIn::OpenAi => Api::OpenAi,
            ApiIn::Responses => Api::Responses,
        },
        stream: options.stream,
        model: options.model,
        id: options.id,
        created: options.created,
        include_usage: options.include_usage,
        client_tools: options.client_tools,
        client_tool_prefix: options.client_tool_prefix,
        previous_response_id: options.previous_response_id,
        store: options.store,
        show_thinking: options.show_thinking,
        structured: None,
        echo: Default::default(),
    })
}

/// The API and streaming of a `ccwire replay --format` name.
pub fn replay_format(format: &str) -> Result<(Api, bool), JsError> {
    match format {
        "anthropic-sse" => Ok((Api::Anthropic, true)),
        "openai-sse" => Ok((Api::OpenAi, true)),
        "anthropic-json" => Ok((Api::Anthropic, false)),
        "openai-json" => Ok((Api::OpenAi, false)),
        "responses-sse" => Ok((Api::Responses, true)),
        "responses-json" => Ok((Api::Responses, false)),
        other => Err(JsError::new(&format!(
            "format must be \"anthropic-sse\", \"openai-sse\", \"responses-sse\", \
             \"anthropic-json\", \"openai-json\" or \"responses-json\", got {other:?}"
        ))),
    }
}

/// An error to end a response with, from the JS `fail(message, status)`.
pub fn api_error_of(message: &str, status: f64) -> Result<ApiError, JsError> {
    let statuses = ApiErrorKind::ALL.map(|k| k.status().to_string()).join(", ");
    let kind = Some(status)
        .filter(|s| s.fract() == 0.0 && (0.0..=f64::from(u16::MAX)).contains(s))
        .and_then(|s| ApiErrorKind::from_status(s as u16))
        .ok_or_else(|| {
            let got = number(status);
            JsError::new(&format!("status must be one of {statuses}, got {got}"))
        })?;
    Ok(ApiError::new(kind, message))
}

/// Reads a chunk (its JSON, as the package handed it out, or written by hand with the fields
/// that may be empty left out) for a response encoder; `None` for a type it does not read.
///
/// # Errors
/// Text that is not a chunk, or a chunk of a type the encoder reads without a field it needs
/// or with a field of the wrong type.
#[cfg(feature = "conversation")]
pub fn encoder_chunk(text: &str) -> Result<Option<Chunk>, JsError> {
    #[derive(Deserialize)]
    struct Tag<'a> {
        #[serde(rename = "type", borrow)]
        kind: std::borrow::Cow<'a, str>,
    }
    let kind = parse::<Tag<'_>>("chunk", text)?.kind;
    if !ENCODER_CHUNK_TYPES.contains(&kind.as_ref()) {
        return Ok(None);
    }
    serde_json::from_str(text)
        .map(Some)
        .map_err(|err| JsError::new(&format!("chunk: a {kind} chunk: {err}")))
}

/// The chunk types a response encoder reads ([`ccwire_core::api::response::CHUNK_TYPES`]);
/// chunks of other types leave it unchanged, so the JS wrapper does not hand them over at all.
#[cfg(feature = "conversation")]
pub use ccwire_core::api::response::CHUNK_TYPES as ENCODER_CHUNK_TYPES;

/// Frames as a JSON array of strings.
pub fn frames(frames: &[String]) -> String {
    serde_json::to_string(frames).expect("strings serialize")
}

/// An encoder's outcome as `null`, `{"kind":"finished","stopReason":…}`,
/// `{"kind":"tool_calls"}` or `{"kind":"failed","error":{status,message,param,body}}`.
pub fn outcome(outcome: Option<&Outcome>, api: Api) -> String {
    let Some(outcome) = outcome else {
        return "null".to_owned();
    };
    let value = match outcome {
        Outcome::Finished(reason) => serde_json::json!({"kind": "finished", "stopReason": reason}),
        Outcome::ToolCalls => serde_json::json!({"kind": "tool_calls"}),
        Outcome::Failed(error) => serde_json::json!({"kind": "failed", "error": {
            "status": error.status(),
            "message": error.message,
            "param": error.param,
            "retryAfter": error.retry_after,
            "body": error.body(api),
        }}),
    };
    value.to_string()
}

/// Client tool calls as `[{"id","name","input"}]`.
pub fn tool_calls(calls: &[&ClientToolCall]) -> String {
    let calls: Vec<Value> = calls
        .iter()
        .map(|c| serde_json::json!({"id": c.id, "name": c.name, "input": c.input}))
        .collect();
    Json::from_value(&Value::Array(calls)).get().to_owned()
}

/// A message in canonical form.
pub fn message(message: &Message) -> String {
    let value = serde_json::to_value(message).expect("messages serialize");
    Json::from_value(&value).get().to_owned()
}

/// A number as JavaScript prints it: the canonical JSON of a finite one (without Rust's own
/// float formatting in the module).
fn number(value: f64) -> String {
    match serde_json::Number::from_f64(value) {
        Some(n) => Json::from_value(&Value::Number(n)).get().to_owned(),
        None if value.is_nan() => "NaN".to_owned(),
        None if value > 0.0 => "Infinity".to_owned(),
        None => "-Infinity".to_owned(),
    }
}

/// A JS number as a request or session id (a positive safe integer).
pub fn id(what: &str, value: f64) -> Result<u64, JsError> {
    if value.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&value) {
        Ok(value as u64)
    } else {
        Err(JsError::new(&format!(
            "{what} must be an integer id >= 0, got {}",
            number(value)
        )))
    }
}

/// An API by name.
///
/// # Errors
/// Another name.
pub fn api(name: &str) -> Result<Api, JsError> {
    Api::from_name(name).ok_or_else(|| {
        JsError::new(&format!(
            "api must be \"anthropic\", \"openai\" or \"responses\", got {name:?}"
        ))
    })
}

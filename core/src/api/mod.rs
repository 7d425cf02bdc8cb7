//! The three HTTP APIs the gateway speaks: request parsing and validation into a canonical
//! [`Conversation`], and errors in each API's own shape.

pub mod anthropic;
mod fields;
pub mod guard;
pub mod openai;
pub mod replay;
pub mod response;
pub mod responses;

use serde_json::{json, Value};

use crate::conversation::Conversation;

/// Which API a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/messages`.
    Anthropic,
    /// `POST /v1/chat/completions`.
    OpenAi,
    /// `POST /v1/responses`.
    Responses,
}

impl Api {
    /// Every API.
    pub const ALL: [Api; 3] = [Api::Anthropic, Api::OpenAi, Api::Responses];

    /// Its name: `anthropic`, `openai` or `responses`.
    pub fn name(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::OpenAi => "openai",
            Api::Responses => "responses",
        }
    }

    /// The API of a [name](Self::name).
    pub fn from_name(name: &str) -> Option<Api> {
        Api::ALL.into_iter().find(|api| api.name() == name)
    }
}

/// How the model may use tools.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must call some tool.
    Any,
    /// The model must not call tools.
    None,
    /// The model must call this tool.
    Tool(String),
}

/// Extended thinking, as a request asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// The model decides whether and how much to think (`{"type": "adaptive"}`).
    Adaptive,
    /// Thinking within a token budget (`{"type": "enabled", "budget_tokens": n}`).
    Budget(u64),
    /// No thinking (`{"type": "disabled"}`, OpenAI `reasoning_effort: "none"`).
    Disabled,
}

/// The JSON Schema of a structured-output format object, `field` naming it in errors:
/// `{"type": "text"}` asks for none; `{"type": "json_object"}` for any object;
/// `{"type": "json_schema", …}` for the schema in `json_schema.schema` (Chat Completions) or
/// `schema` (Responses, Anthropic), named by `name` and described by `description` there.
///
/// # Errors
/// 400 naming `field` for another type, or a schema whose root is not an object (the model
/// answers through a tool whose input is the object, as the APIs require).
pub(crate) fn output_format(field: &str, format: &Value) -> Result<Option<Value>, ApiError> {
    let Some(format) = format.as_object() else {
        return Err(ApiError::invalid(
            field,
            format!("{field}: must be an object"),
        ));
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "object"}))),
        Some("json_schema") => {
            // Chat Completions nests the schema and its name; the other APIs do not.
            let (inner, at) = match format.get("json_schema") {
                Some(Value::Object(inner)) => (inner, format!("{field}.json_schema")),
                _ => (format, field.to_owned()),
            };
            let schema = match inner.get("schema") {
                None | Some(Value::Null) => json!({"type": "object"}),
                Some(schema) => schema.clone(),
            };
            let text = |key: &str| {
                inner
                    .get(key)
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
            };
            object_schema(
                &format!("{at}.schema"),
                schema,
                text("name"),
                text("description"),
            )
            .map(Some)
        }
        _ => Err(ApiError::invalid(
            format!("{field}.type"),
            format!("{field}.type: must be text, json_object or json_schema"),
        )),
    }
}

/// A schema for an object, as a structured answer needs: an object whose `type` is `object`
/// (added when left out beside `properties`), titled and described when it is not already.
///
/// # Errors
/// 400 naming `field` when the schema is not an object schema.
pub(crate) fn object_schema(
    field: &str,
    schema: Value,
    title: Option<&str>,
    description: Option<&str>,
) -> Result<Value, ApiError> {
    let Value::Object(mut schema) = schema else {
        return Err(ApiError::invalid(
            field,
            format!("{field}: must be a JSON Schema object"),
        ));
    };
    match schema.get("type") {
        None if !schema.contains_key("$ref") => {
            schema.insert("type".into(), json!("object"));
        }
        Some(Value::String(t)) if t == "object" => {}
        _ => {
            return Err(ApiError::invalid(
                field,
                format!(
                    "{field}: the root of the schema must be {{\"type\": \"object\"}} (wrap \
                     another value in an object's property)"
                ),
            ))
        }
    }
    for (key, value) in [("title", title), ("description", description)] {
        if let (Some(value), false) = (value, schema.contains_key(key)) {
            schema.insert(key.into(), json!(value));
        }
    }
    Ok(Value::Object(schema))
}

/// An OpenAI `tool_choice` given as a word: `auto`, `required` or `none`.
///
/// # Errors
/// 400 naming `tool_choice` for another word.
pub(crate) fn openai_tool_choice_word(word: &str) -> Result<ToolChoice, ApiError> {
    match word {
        "auto" => Ok(ToolChoice::Auto),
        "required" => Ok(ToolChoice::Any),
        "none" => Ok(ToolChoice::None),
        _ => Err(openai_tool_choice_invalid()),
    }
}

/// The error of an OpenAI `tool_choice` of no known form.
pub(crate) fn openai_tool_choice_invalid() -> ApiError {
    ApiError::invalid(
        "tool_choice",
        "tool_choice: must be auto, required, none, a function or allowed_tools",
    )
}

/// Applies an `allowed_tools` choice (Chat Completions, Responses): only the tools it names
/// stay offered (`names`), and its `mode` makes the choice `auto` or `required`.
///
/// # Errors
/// 400 naming `tool_choice` when a name is not one of the request's tools, or the mode is
/// neither `auto` nor `required`.
pub(crate) fn allowed_tools(
    conversation: &mut Conversation,
    names: &[&str],
    mode: Option<&str>,
) -> Result<ToolChoice, ApiError> {
    if let Some(unknown) = names
        .iter()
        .find(|n| !conversation.tools.iter().any(|t| t.name == **n))
    {
        return Err(ApiError::invalid(
            "tool_choice",
            format!("tool_choice: allowed_tools names {unknown:?}, which is not in tools"),
        ));
    }
    conversation
        .tools
        .retain(|t| names.contains(&t.name.as_str()));
    match mode {
        None | Some("auto") => Ok(ToolChoice::Auto),
        Some("required") => Ok(ToolChoice::Any),
        Some(_) => Err(ApiError::invalid(
            "tool_choice",
            "tool_choice: allowed_tools mode must be auto or required",
        )),
    }
}

/// The CLI's effort levels (`--effort`).
pub const EFFORT_LEVELS: &[&str] = &["low", "medium", "high", "xhigh", "max"];

/// A validated request of any of the APIs.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiRequest {
    /// The API it came in.
    pub api: Api,
    /// The requested model.
    pub model: String,
    /// Whether to answer with server-sent events.
    pub stream: bool,
    /// The output token limit the client gave.
    pub max_tokens: Option<u64>,
    /// OpenAI `stream_options.include_usage`.
    pub include_usage: bool,
    /// How the model may use tools.
    pub tool_choice: ToolChoice,
    /// The JSON Schema the answer must match, when the request asks for structured output:
    /// OpenAI `response_format` (`json_schema`, or `json_object`: any object), Responses
    /// `text.format`, Anthropic `output_format` and `output_config.format`. Always an object
    /// schema (`"type": "object"`); the format's `name` and `description` are its `title` and
    /// `description` when it has none.
    pub json_schema: Option<Value>,
    /// The conversation, canonical.
    pub conversation: Conversation,
    /// Top-level fields that were accepted and ignored, known or not, sorted by name
    /// (the gateway names them in its `x-ccwire-ignored` response header).
    pub ignored: Vec<String>,
    /// Responses API: the stored response this request continues; its history goes in front
    /// of the conversation when the gateway holds it.
    pub previous_response_id: Option<String>,
    /// Responses API: whether to keep the response, so a later request can continue it by id.
    pub store: bool,
    /// Extended thinking asked for: Anthropic `thinking`; OpenAI `reasoning_effort: "none"`
    /// (Responses `reasoning.effort`) disables it.
    pub thinking: Option<Thinking>,
    /// The effort level asked for, one of [`EFFORT_LEVELS`]: Anthropic `output_config.effort`,
    /// OpenAI `reasoning_effort`, Responses `reasoning.effort` (`minimal` is `low`).
    pub effort: Option<&'static str>,
    /// Whether the response shows the model's thinking: when an Anthropic request enables
    /// thinking, a Chat Completions request gives a `reasoning_effort` (other than `none`), a
    /// Responses request asks for a reasoning `summary`.
    pub show_thinking: bool,
    /// Responses API: the `item_reference` input items that name output message items of
    /// stored responses, each standing in the conversation as its
    /// [`placeholder`](ItemReference::placeholder) text until the gateway puts the item's
    /// text there.
    pub references: Vec<ItemReference>,
    /// Responses API: the request's fields its response object repeats (`instructions`,
    /// `text`, `tool_choice`, `tools`, `max_output_tokens`, `temperature`, …), as the request
    /// gave them; empty for the other APIs.
    pub echo: serde_json::Map<String, Value>,
}

/// An `item_reference` input item (Responses API) naming an output message item of a stored
/// response (`msg_…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemReference {
    /// Where it is in the request (`input[1]`), for errors.
    pub at: String,
    /// The item's id.
    pub id: String,
}

impl ItemReference {
    /// The text that stands for the item in the conversation until it is resolved: its id
    /// between two Unicode noncharacters, which no client's text holds.
    pub fn placeholder(&self) -> String {
        format!("\u{FDD0}{}\u{FDD1}", self.id)
    }

    /// The id of the response whose item it names (`msg_<id>_<n>` is item `n` of
    /// `resp_<id>`).
    pub fn response_id(&self) -> Option<String> {
        let (response, n) = self.id.strip_prefix("msg_")?.rsplit_once('_')?;
        let ok = !response.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
        ok.then(|| format!("resp_{response}"))
    }
}

/// Kinds of API errors, with the HTTP status each maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiErrorKind {
    /// 400: the request is malformed or asks for something that cannot be done.
    InvalidRequest,
    /// 401: wrong or missing API key.
    Authentication,
    /// 402: the model API's account cannot pay for the request (no credit left, no usage
    /// allowance): trying again does not help.
    Billing,
    /// 403: refused whatever the key (a browser-borne request the gateway does not accept).
    Forbidden,
    /// 404: no such endpoint or model.
    NotFound,
    /// 405: the endpoint exists, not with this method.
    MethodNotAllowed,
    /// 408: the request did not arrive in time (its head or its body).
    Timeout,
    /// 413: the body is too large.
    RequestTooLarge,
    /// 415: the body is not `application/json`.
    UnsupportedMediaType,
    /// 422: the request was understood and served, but the model did not answer it as it
    /// asks (a structured answer it did not produce after the CLI's own retries): the
    /// official SDKs do not retry it, as another try rarely does better.
    Unprocessable,
    /// 429: over a limit.
    RateLimit,
    /// 500: the gateway or the CLI failed.
    Api,
    /// 503: the model's API is unavailable.
    Unavailable,
    /// 529: the model is overloaded.
    Overloaded,
}

impl ApiErrorKind {
    /// Every kind.
    pub const ALL: [ApiErrorKind; 14] = [
        ApiErrorKind::InvalidRequest,
        ApiErrorKind::Authentication,
        ApiErrorKind::Billing,
        ApiErrorKind::Forbidden,
        ApiErrorKind::NotFound,
        ApiErrorKind::MethodNotAllowed,
        ApiErrorKind::Timeout,
        ApiErrorKind::RequestTooLarge,
        ApiErrorKind::UnsupportedMediaType,
        ApiErrorKind::Unprocessable,
        ApiErrorKind::RateLimit,
        ApiErrorKind::Api,
        ApiErrorKind::Unavailable,
        ApiErrorKind::Overloaded,
    ];

    /// The kind of an HTTP status.
    pub fn from_status(status: u16) -> Option<ApiErrorKind> {
        ApiErrorKind::ALL.into_iter().find(|k| k.status() == status)
    }

    /// The HTTP status.
    pub fn status(self) -> u16 {
        match self {
            ApiErrorKind::InvalidRequest => 400,
            ApiErrorKind::Authentication => 401,
            ApiErrorKind::Billing => 402,
            ApiErrorKind::Forbidden => 403,
            ApiErrorKind::NotFound => 404,
            ApiErrorKind::MethodNotAllowed => 405,
            ApiErrorKind::Timeout => 408,
            ApiErrorKind::RequestTooLarge => 413,
            ApiErrorKind::UnsupportedMediaType => 415,
            ApiErrorKind::Unprocessable => 422,
            ApiErrorKind::RateLimit => 429,
            ApiErrorKind::Api => 500,
            ApiErrorKind::Unavailable => 503,
            ApiErrorKind::Overloaded => 529,
        }
    }

    fn anthropic_type(self) -> &'static str {
        match self {
            ApiErrorKind::InvalidRequest | ApiErrorKind::MethodNotAllowed => {
                "invalid_request_error"
            }
            ApiErrorKind::Authentication => "authentication_error",
            ApiErrorKind::Billing => "billing_error",
            ApiErrorKind::Forbidden => "permission_error",
            ApiErrorKind::NotFound => "not_found_error",
            ApiErrorKind::Timeout => "timeout_error",
            ApiErrorKind::RequestTooLarge => "request_too_large",
            ApiErrorKind::UnsupportedMediaType | ApiErrorKind::Unprocessable => {
                "invalid_request_error"
            }
            ApiErrorKind::RateLimit => "rate_limit_error",
            ApiErrorKind::Api | ApiErrorKind::Unavailable => "api_error",
            ApiErrorKind::Overloaded => "overloaded_error",
        }
    }

    fn openai_type(self) -> &'static str {
        match self {
            ApiErrorKind::InvalidRequest
            | ApiErrorKind::MethodNotAllowed
            | ApiErrorKind::Timeout
            | ApiErrorKind::RequestTooLarge
            | ApiErrorKind::UnsupportedMediaType
            | ApiErrorKind::Unprocessable => "invalid_request_error",
            ApiErrorKind::Forbidden => "permission_error",
            ApiErrorKind::Authentication => "authentication_error",
            ApiErrorKind::Billing => "insufficient_quota",
            ApiErrorKind::NotFound => "not_found_error",
            ApiErrorKind::RateLimit => "rate_limit_exceeded",
            ApiErrorKind::Api | ApiErrorKind::Unavailable | ApiErrorKind::Overloaded => {
                "server_error"
            }
        }
    }
}

/// An error to send to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// What kind.
    pub kind: ApiErrorKind,
    /// What went wrong, for the client.
    pub message: String,
    /// The request field at fault (OpenAI `param`).
    pub param: Option<String>,
    /// When to try again, in seconds (the `Retry-After` header), when known.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// A 400 about a field.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError {
            kind: ApiErrorKind::InvalidRequest,
            message: message.into(),
            param: Some(param.into()),
            retry_after: None,
        }
    }

    /// An error of a kind.
    pub fn new(kind: ApiErrorKind, message: impl Into<String>) -> ApiError {
        ApiError {
            kind,
            message: message.into(),
            param: None,
            retry_after: None,
        }
    }

    /// The same error, to be tried again after `seconds`.
    pub fn retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.kind.status()
    }

    /// The response body in the API's own error shape.
    pub fn body(&self, api: Api) -> Value {
        match api {
            Api::Anthropic => json!({
                "type": "error",
                "error": {"type": self.kind.anthropic_type(), "message": self.message},
            }),
            Api::OpenAi | Api::Responses => json!({
                "error": {
                    "message": self.message,
                    "type": self.kind.openai_type(),
                    "param": self.param,
                    // The code OpenAI's clients know as "do not retry, pay".
                    "code": (self.kind == ApiErrorKind::Billing).then_some("insufficient_quota"),
                },
            }),
        }
    }
}

/// Parses a request body as JSON object, or a 400.
/// A field's path in a request, for error messages: formatted only when an error names it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum At<'a> {
    /// A top-level field.
    Name(&'static str),
    /// `parent.field`
    Field(&'a At<'a>, &'static str),
    /// `parent.3` (the Anthropic API's style)
    Dot(&'a At<'a>, usize),
    /// `parent[3]` (the OpenAI API's style)
    Bracket(&'a At<'a>, usize),
}

impl std::fmt::Display for At<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::Name(name) => f.write_str(name),
            At::Field(parent, name) => write!(f, "{parent}.{name}"),
            At::Dot(parent, i) => write!(f, "{parent}.{i}"),
            At::Bracket(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

impl From<&At<'_>> for String {
    fn from(at: &At<'_>) -> String {
        at.to_string()
    }
}

pub(crate) fn parse_object(body: &[u8]) -> Result<serde_json::Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::new(
            ApiErrorKind::InvalidRequest,
            "the request body must be a JSON object",
        )),
        Err(err) => Err(ApiError::new(
            ApiErrorKind::InvalidRequest,
            format!("the request body is not valid JSON: {err}"),
        )),
    }
}

/// An image source of a URL (OpenAI `image_url.url`, or an Anthropic source with only a `url`):
/// a `data:` URL becomes a base64 source, checked; any other URL stays a URL.
pub(crate) fn url_image_source(at: &dyn std::fmt::Display, url: &str) -> Result<Value, ApiError> {
    let Some(rest) = url.strip_prefix("data:") else {
        return Ok(json!({"type": "url", "url": url}));
    };
    let Some((media_type, data)) = rest
        .split_once(',')
        .and_then(|(meta, data)| Some((meta.strip_suffix(";base64")?, data)))
    else {
        return Err(ApiError::invalid(
            at.to_string(),
            format!("{at}: a data URL must be data:<media type>;base64,<data>"),
        ));
    };
    check_base64(at, data)?;
    Ok(json!({"type": "base64", "media_type": media_type, "data": data}))
}

/// A 400 naming the field unless `data` is standard base64 (padding optional, no white space).
pub(crate) fn check_base64(at: &dyn std::fmt::Display, data: &str) -> Result<(), ApiError> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine;
    const ENGINE: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    // Decoded piece by piece into a small buffer: an image is checked without a copy of it.
    const PIECE: usize = 4096;
    let mut buf = [0u8; PIECE / 4 * 3];
    let invalid =
        |what: &str| ApiError::invalid(at.to_string(), format!("{at}: the image data is {what}"));
    if data.is_empty() {
        return Err(invalid("empty"));
    }
    let mut pieces = data.as_bytes().chunks(PIECE).peekable();
    while let Some(piece) = pieces.next() {
        // Padding ends the data: in any piece but the last it is out of place.
        if pieces.peek().is_some() && piece.contains(&b'=') {
            return Err(invalid("not valid base64 (padding before the end)"));
        }
        if let Err(err) = ENGINE.decode_slice(piece, &mut buf) {
            return Err(invalid(&format!("not valid base64 ({err})")));
        }
    }
    Ok(())
}

/// A 400 naming the tool unless its name is one the APIs accept: 1 to 64 letters, digits, `_`
/// or `-` (`^[a-zA-Z0-9_-]{1,64}$`, the rule of both the Anthropic and the OpenAI API).
pub(crate) fn check_tool_name(at: &dyn std::fmt::Display, name: &str) -> Result<(), ApiError> {
    let valid = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        return Ok(());
    }
    Err(ApiError::invalid(
        at.to_string(),
        format!(
            "{at}: {name:?} is not a valid tool name (1 to 64 letters, digits, '_' or '-': \
             ^[a-zA-Z0-9_-]{{1,64}}$)"
        ),
    ))
}

/// System text given inside the conversation (a `system` or `developer` message after the
/// first user or assistant message), as text of the user turn it stands in: the CLI's own
/// system prompt is fixed for its session, and this keeps the text to that turn.
pub(crate) fn system_turn_text(text: &str) -> String {
    format!("<system>\n{text}\n</system>\n\n")
}

/// Anthropic `thinking`: `{"type": "adaptive" | "enabled" (with `budget_tokens`) | "disabled"}`.
pub(crate) fn parse_thinking(value: Option<Value>) -> Result<Option<Thinking>, ApiError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    match value.get("type").and_then(Value::as_str) {
        Some("adaptive") => Ok(Some(Thinking::Adaptive)),
        // Without a budget the model decides, as with adaptive thinking.
        Some("enabled") => Ok(Some(match value.get("budget_tokens") {
            None | Some(Value::Null) => Thinking::Adaptive,
            Some(n) => match n.as_u64() {
                Some(n) if n > 0 => Thinking::Budget(n),
                _ => {
                    return Err(ApiError::invalid(
                        "thinking.budget_tokens",
                        "thinking.budget_tokens: must be a positive integer",
                    ))
                }
            },
        })),
        Some("disabled") => Ok(Some(Thinking::Disabled)),
        _ => Err(ApiError::invalid(
            "thinking.type",
            "thinking.type: must be \"enabled\", \"adaptive\" or \"disabled\"",
        )),
    }
}

/// An effort level of the Anthropic API (`output_config.effort`): one of [`EFFORT_LEVELS`].
pub(crate) fn parse_effort(param: &str, value: &Value) -> Result<&'static str, ApiError> {
    value
        .as_str()
        .and_then(|v| EFFORT_LEVELS.iter().find(|l| **l == v))
        .copied()
        .ok_or_else(|| {
            ApiError::invalid(
                param,
                format!("{param}: must be one of {}", EFFORT_LEVELS.join(", ")),
            )
        })
}

/// An OpenAI reasoning effort (`reasoning_effort`, `reasoning.effort`) as the CLI's effort and
/// thinking: `none` turns thinking off, `minimal` is `low`.
pub(crate) fn parse_openai_effort(
    param: &str,
    value: &Value,
) -> Result<(Option<&'static str>, Option<Thinking>), ApiError> {
    match value.as_str() {
        Some("none") => Ok((None, Some(Thinking::Disabled))),
        Some("minimal") => Ok((Some("low"), None)),
        _ => parse_effort(param, value).map(|effort| (Some(effort), None)),
    }
}

/// A client tool definition, read from where each API keeps its fields.
pub(crate) struct ToolFields<'a> {
    /// The tool's path (`tools.0`, `tools[0]`).
    pub at: &'a At<'a>,
    /// Where its fields sit under it: `""`, or `"function."` (Chat Completions).
    pub prefix: &'static str,
    /// The schema field's name (`input_schema`, `parameters`).
    pub schema_field: &'static str,
    /// Whether the schema is required; without it a tool takes an empty object.
    pub schema_required: bool,
    pub name: Option<&'a str>,
    pub description: Option<&'a str>,
    /// The schema, taken out of the request (not copied).
    pub schema: Option<Value>,
}

/// A request's tool definitions as they are read, with their names for the uniqueness check
/// (one lookup a tool: a request with many tools is read in linear time).
#[derive(Default)]
pub(crate) struct ToolSpecs {
    specs: Vec<crate::conversation::ToolSpec>,
    names: std::collections::BTreeSet<String>,
}

impl ToolSpecs {
    pub(crate) fn into_vec(self) -> Vec<crate::conversation::ToolSpec> {
        self.specs
    }
}

/// Checks a tool definition and adds it to `specs`: a name the APIs accept, unique among the
/// request's tools, and a JSON Schema object; a 400 names the field otherwise.
pub(crate) fn push_tool_spec(specs: &mut ToolSpecs, tool: ToolFields<'_>) -> Result<(), ApiError> {
    let ToolFields { at, prefix, .. } = tool;
    let Some(name) = tool.name.filter(|n| !n.is_empty()) else {
        return Err(ApiError::invalid(
            at,
            format!("{at}.{prefix}name: field required"),
        ));
    };
    check_tool_name(&format_args!("{at}.{prefix}name"), name)?;
    if specs.names.contains(name) {
        return Err(ApiError::invalid(
            at,
            format!("{at}.{prefix}name: tool names must be unique ({name})"),
        ));
    }
    let input_schema = match tool.schema {
        Some(schema @ Value::Object(_)) => schema,
        None | Some(Value::Null) if !tool.schema_required => {
            json!({"type": "object", "properties": {}})
        }
        _ => {
            return Err(ApiError::invalid(
                at,
                format!(
                    "{at}.{prefix}{}: a JSON Schema object is required",
                    tool.schema_field
                ),
            ))
        }
    };
    specs.names.insert(name.to_owned());
    specs.specs.push(crate::conversation::ToolSpec {
        name: name.to_owned(),
        description: tool.description.unwrap_or_default().to_owned(),
        input_schema,
    });
    Ok(())
}

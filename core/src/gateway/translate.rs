//! From API requests to what the CLI takes: a request's scope and history hashes, the prompt
//! a session starts or continues with, the CLI arguments and variables, and client tool
//! results as MCP results.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::api::response::StructuredAnswer;
use crate::api::{ApiError, ApiRequest, Thinking, ToolChoice};
use crate::conversation::{
    history_hash, mcp_tool_name, Block, Conversation, HistoryHasher, Message, Role,
};
use crate::mcp::McpCallResult;

/// Built-in CLI tools that run code or change files on the machine the CLI runs on.
pub const CODE_TOOLS: &[&str] = &[
    "Bash",
    "BashOutput",
    "KillShell",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
];

/// The prefix of the gateway's own variables (`CCWIRE_API_KEYS`, …), which no CLI inherits.
pub const OWN_ENV_PREFIX: &str = "CCWIRE_";

/// The variables of the gateway's own environment a CLI inherits: what a process needs to
/// run (`PATH`, the locale, the terminal), Claude Code's own settings (`ANTHROPIC_*`, the
/// model credential among them, `CLAUDE_CODE_*`, `DISABLE_*` and the named few), the proxy
/// and certificate settings of the gateway's network. Every other variable of the gateway
/// (`AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`, a database's password…) reaches no CLI and no
/// tool unless the operator passes it (`--pass-env`). A name ending in `*` is a prefix.
pub const PASSED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TMPDIR",
    "ANTHROPIC_*",
    "CLAUDE_CODE_*",
    "DISABLE_*",
    "MAX_THINKING_TOKENS",
    "MAX_MCP_OUTPUT_TOKENS",
    "MCP_TIMEOUT",
    "BASH_DEFAULT_TIMEOUT_MS",
    "BASH_MAX_TIMEOUT_MS",
    "BASH_MAX_OUTPUT_LENGTH",
    "API_TIMEOUT_MS",
    "USE_BUILTIN_RIPGREP",
    "ENABLE_TOOL_SEARCH",
    "CLOUD_ML_REGION",
    "VERTEX_REGION_*",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// Whether `name` is one of `names` (each a name, or a prefix ending in `*`).
fn named_in<S: AsRef<str>>(name: &str, names: &[S]) -> bool {
    names.iter().any(|n| match n.as_ref().strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == n.as_ref(),
    })
}

/// The variables no CLI may inherit, of the gateway's `inherited` ones: every `CCWIRE_*` one,
/// those the operator `named` (a name, or a prefix ending in `*`), and every one neither
/// [`PASSED_ENV`] nor `passed` (the operator's `--pass-env`) lists; the names given whole in
/// `named` are listed even when not inherited (a host may set them later).
pub fn env_to_remove<'a>(
    inherited: impl Iterator<Item = &'a str>,
    named: &[String],
    passed: &[String],
) -> Vec<String> {
    let matches = |name: &str| {
        name.starts_with(OWN_ENV_PREFIX)
            || named_in(name, named)
            || !(named_in(name, PASSED_ENV) || named_in(name, passed))
    };
    let mut removed: Vec<String> = named
        .iter()
        .filter(|n| !n.ends_with('*'))
        .cloned()
        .collect();
    for name in inherited {
        if matches(name) && !removed.iter().any(|r| r == name) {
            removed.push(name.to_owned());
        }
    }
    removed
}

/// The scope a history hash lives in: the tenant and what a live session cannot change.
fn conversation_scope(tenant: &str, conversation: &Conversation, model: &str) -> String {
    let system = conversation.system.as_deref().unwrap_or("");
    format!(
        "{tenant}\n{}\n{model}\n{}",
        conversation.tool_signature(),
        history_hash(
            "system",
            &[Message {
                role: Role::User,
                content: vec![Block::Text {
                    text: system.to_owned()
                }],
            }]
        )
    )
}

/// The scope a request's history is hashed in: the tenant, what a live session cannot change,
/// and the thinking and effort a live session keeps from its start.
pub fn request_scope(tenant: &str, request: &ApiRequest) -> String {
    format!(
        "{}\n{}",
        conversation_scope(tenant, &request.conversation, &request.model),
        settings_scope(request)
    )
}

/// A conversation's hashes: of its history (the messages up to its last assistant message)
/// in the tenant's scope and in the request's, and the hasher over all its messages, which the
/// response's message completes.
#[derive(Debug, Clone)]
pub struct Hashes {
    /// The history's hash in the request's scope ([`live_hash`]): the live session it
    /// continues has the same settings.
    pub live: String,
    /// The history's hash in the tenant's scope: the stored conversation it continues, under
    /// any settings.
    pub store: String,
    /// The hasher over all its messages, in the tenant's scope.
    pub hasher: HistoryHasher,
    /// The hashes in the tenant's scope of its shorter histories (each ending with an
    /// assistant message before the last), longest first, with their lengths in messages:
    /// where a history that matches nothing parted from a conversation. Made in the same pass
    /// as the others, ahead of the engine (a history can be tens of megabytes).
    pub prefixes: Vec<(usize, String)>,
}

/// A conversation's [`Hashes`] for `tenant`, in the request's `scope`.
pub fn history_hashes(tenant: &str, scope: &str, conversation: &Conversation) -> Hashes {
    let n = conversation.history_len();
    let mut hasher = HistoryHasher::new(tenant);
    let mut prefixes = Vec::new();
    for (i, message) in conversation.messages[..n].iter().enumerate() {
        hasher.extend(std::slice::from_ref(message));
        if message.role == Role::Assistant && i + 1 < n {
            prefixes.push((i + 1, hasher.finish()));
        }
    }
    prefixes.reverse();
    let store = hasher.finish();
    hasher.extend(&conversation.messages[n..]);
    Hashes {
        live: live_hash(scope, &store),
        store,
        hasher,
        prefixes,
    }
}

/// A history's hash in a request's `scope`, from its hash in the tenant's: what a live session
/// with that scope's settings is found by.
pub fn live_hash(scope: &str, store: &str) -> String {
    use sha2::Digest;
    let mut sha = sha2::Sha256::new();
    sha.update(b"ccwire-live-v1\0");
    sha.update(scope.as_bytes());
    sha.update(b"\0");
    sha.update(store.as_bytes());
    crate::conversation::hex(&sha.finalize())
}

/// The names the model sees for a request's client tools (`mcp__<server>__<name>`), each with
/// the client's own name: the map a response encoder needs to show the client its names.
pub fn client_tool_names(conversation: &Conversation, server: &str) -> BTreeMap<String, String> {
    conversation
        .tools
        .iter()
        .map(|t| (mcp_tool_name(server, &t.name), t.name.clone()))
        .collect()
}

/// A request's thinking, effort, tool choice and output schema in words. A live session keeps
/// the settings it was started with (its CLI's `--thinking`, `--max-thinking-tokens`,
/// `--effort`, the client tools it offers, its `jsonSchema`), so they are part of the scope a
/// request's history is found in: a request that changes them starts a session (`rebuilt`).
/// The tools are in the scope already, so the choice and the schema asked for settle the
/// structured-output mode ([`structured`]).
fn settings_scope(request: &ApiRequest) -> String {
    let thinking = match request.thinking {
        None => String::new(),
        Some(Thinking::Adaptive) => "--thinking adaptive".to_owned(),
        Some(Thinking::Disabled) => "--thinking disabled".to_owned(),
        Some(Thinking::Budget(n)) => format!("--max-thinking-tokens {n}"),
    };
    let effort = request.effort.map(|e| format!("--effort {e}"));
    let choice = (request.tool_choice != ToolChoice::Auto)
        .then(|| format!("tool_choice {:?}", request.tool_choice));
    let schema = request.json_schema.as_ref().map(|schema| {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(schema.to_string().as_bytes());
        format!("--json-schema {}", crate::conversation::hex(&digest))
    });
    [
        Some(thinking).filter(|t| !t.is_empty()),
        effort,
        choice,
        schema,
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" ")
}

/// The model to start the CLI with for a request's `model`: a Claude model or one of the CLI's
/// aliases (`sonnet`, `opus[1m]`, …) as asked; any other name (`gpt-4o` from an OpenAI client)
/// means `default` (`None`: the CLI's own default).
pub fn cli_model(requested: &str, default: Option<&str>) -> Option<String> {
    let lower = requested.to_ascii_lowercase();
    let claude = lower.starts_with("claude")
        || ["default", "sonnet", "opus", "haiku", "opusplan"]
            .iter()
            .any(|a| lower == *a || lower.starts_with(&format!("{a}[")));
    if claude {
        Some(requested.to_owned())
    } else {
        default.map(str::to_owned)
    }
}

/// The longest model name a request may give.
const MODEL_NAME_LIMIT: usize = 256;

/// The most tools a `tool_choice` of `any` / `required` chooses among: the model gets one
/// schema over all of them.
pub const MAX_CHOICE_TOOLS: usize = 256;

/// Refuses a request the CLI cannot honour: a model name longer than any model's (it goes on
/// the CLI's command line), or a `tool_choice` that names no tool of the request's, asks for a
/// call with no tools to call, or for a call of any of more than [`MAX_CHOICE_TOOLS`].
///
/// # Errors
/// A 400 naming `model` or `tool_choice`.
pub fn check_request(request: &ApiRequest) -> Result<(), ApiError> {
    // The model's name goes on the CLI's command line.
    if request.model.len() > MODEL_NAME_LIMIT {
        return Err(ApiError::invalid(
            "model",
            format!("model: a model name has at most {MODEL_NAME_LIMIT} bytes"),
        ));
    }
    let tools = &request.conversation.tools;
    match &request.tool_choice {
        ToolChoice::Auto | ToolChoice::None => Ok(()),
        ToolChoice::Any if tools.is_empty() => Err(ApiError::invalid(
            "tool_choice",
            "tool_choice: a tool call is required but the request has no tools",
        )),
        ToolChoice::Any if tools.len() > MAX_CHOICE_TOOLS => Err(ApiError::invalid(
            "tool_choice",
            format!(
                "tool_choice: a call of any of {} tools is more than the {MAX_CHOICE_TOOLS} this \
                 gateway chooses among; name the tool, or offer fewer",
                tools.len()
            ),
        )),
        ToolChoice::Any => Ok(()),
        ToolChoice::Tool(name) if tools.iter().any(|t| &t.name == name) => Ok(()),
        ToolChoice::Tool(name) => Err(ApiError::invalid(
            "tool_choice",
            format!("tool_choice: names the tool {name:?}, which is not in tools"),
        )),
    }
}

/// What a request asks the CLI's structured-output mode for: the schema the model's answer
/// must match (the CLI's `jsonSchema`) and how the object it produces is answered. A forced
/// tool call is an object against the tool's input schema; a call of any of several tools
/// is an object naming the tool and holding its input (`{"tool": …, "input": …}`).
#[derive(Debug, Clone, PartialEq)]
pub struct Structured {
    /// The object schema (its root is `"type": "object"`).
    pub schema: Value,
    /// How the object is answered.
    pub answer: StructuredAnswer,
}

/// The structured-output mode a request needs, if any: a forced tool call (`tool_choice` a
/// tool, or `any` / `required`), else its `json_schema`. A request with `tool_choice` `none`
/// offers no tools at all. Its schema is in draft-07's words, whatever draft the client wrote
/// ([`draft07`](super::draft07::draft07)).
pub fn structured(request: &ApiRequest) -> Option<Structured> {
    let Structured { schema, answer } = asked_structure(request)?;
    Some(Structured {
        schema: super::draft07::draft07(schema),
        answer,
    })
}

/// [`structured`], its schema as the client wrote it.
fn asked_structure(request: &ApiRequest) -> Option<Structured> {
    let tools = &request.conversation.tools;
    let forced = match &request.tool_choice {
        ToolChoice::Tool(name) => tools.iter().find(|t| &t.name == name),
        ToolChoice::Any if tools.len() == 1 => tools.first(),
        ToolChoice::Any if !tools.is_empty() => {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            // Each tool's definitions move to the root, where the references of a schema
            // nested in another resolve.
            let mut defs = serde_json::Map::new();
            let branches: Vec<Value> = tools
                .iter()
                .map(|t| {
                    let mut input = tool_schema(t);
                    hoist_definitions(&t.name, &mut input, &mut defs);
                    json!({
                        "properties": {
                            "tool": {"const": t.name},
                            "input": input,
                        },
                    })
                })
                .collect();
            let described: Vec<String> = tools
                .iter()
                .map(|t| format!("- {}: {}", t.name, t.description))
                .collect();
            let mut schema = json!({
                    "type": "object",
                    "description": format!(
                        "A call of one of these tools: `tool` is its name, `input` its input.\n{}",
                        described.join("\n")
                    ),
                    "properties": {
                        "tool": {"type": "string", "enum": names},
                        "input": {"type": "object"},
                    },
                    "required": ["tool", "input"],
                    "anyOf": branches,
            });
            if !defs.is_empty() {
                schema["$defs"] = Value::Object(defs);
            }
            return Some(Structured {
                schema,
                answer: StructuredAnswer::AnyTool,
            });
        }
        _ => None,
    };
    if let Some(tool) = forced {
        return Some(Structured {
            schema: tool_schema(tool),
            answer: StructuredAnswer::Tool(tool.name.clone()),
        });
    }
    request.json_schema.clone().map(|schema| Structured {
        schema,
        answer: StructuredAnswer::Json,
    })
}

/// Moves the definitions of a tool's schema (`$defs`, `definitions`) into `defs`, named
/// `<tool>.<name>`, and points the schema's references (`#/$defs/<name>`,
/// `#/definitions/<name>`) at them there.
fn hoist_definitions(tool: &str, schema: &mut Value, defs: &mut serde_json::Map<String, Value>) {
    fn repoint(tool: &str, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    match (key.as_str(), &*child) {
                        ("$ref", Value::String(target)) => {
                            let name = target
                                .strip_prefix("#/$defs/")
                                .or_else(|| target.strip_prefix("#/definitions/"));
                            if let Some(name) = name {
                                *child = json!(format!("#/$defs/{tool}.{name}"));
                            }
                        }
                        _ => repoint(tool, child),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| repoint(tool, i)),
            _ => {}
        }
    }
    let Value::Object(root) = schema else {
        return;
    };
    let mut own = Vec::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(found)) = root.remove(key) {
            own.extend(found);
        }
    }
    repoint(tool, schema);
    for (name, mut def) in own {
        repoint(tool, &mut def);
        defs.insert(format!("{tool}.{name}"), def);
    }
}

/// A tool's input schema as an object schema described by the tool's name and description.
fn tool_schema(tool: &crate::conversation::ToolSpec) -> Value {
    let mut schema = match &tool.input_schema {
        Value::Object(schema) => schema.clone(),
        _ => serde_json::Map::new(),
    };
    if !schema.contains_key("type") && !schema.contains_key("$ref") {
        schema.insert("type".into(), json!("object"));
    }
    if !schema.contains_key("description") {
        let about = if tool.description.is_empty() {
            format!("The input of a call of the tool `{}`.", tool.name)
        } else {
            format!(
                "The input of a call of the tool `{}`: {}",
                tool.name, tool.description
            )
        };
        schema.insert("description".into(), json!(about));
    }
    Value::Object(schema)
}

/// A route's prompt as the content of the user message to send the CLI: text and images as
/// they are, other blocks as the client sent them, and a stray tool block as its JSON text.
pub fn prompt_content(blocks: &[Block]) -> Vec<Value> {
    blocks
        .iter()
        .map(|b| match b {
            Block::Text { text } => json!({"type": "text", "text": text}),
            Block::Image { source } => json!({"type": "image", "source": source}),
            Block::Other { block } => block.clone(),
            Block::ToolUse { .. } | Block::ToolResult { .. } => {
                json!({"type": "text", "text": serde_json::to_string(b).unwrap_or_default()})
            }
        })
        .collect()
}

/// The tool results in messages, in order, as MCP results.
pub(crate) fn tool_results(messages: &[Message]) -> Vec<(String, McpCallResult)> {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => Some((tool_use_id.clone(), mcp_result(content, *is_error))),
            _ => None,
        })
        .collect()
}

/// A client's tool result as an MCP `tools/call` result.
pub fn mcp_result(content: &[Block], is_error: bool) -> McpCallResult {
    let blocks: Vec<Value> = content
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(json!({"type": "text", "text": text})),
            Block::Image { source } => match source.get("type").and_then(Value::as_str) {
                Some("base64") => Some(json!({
                    "type": "image",
                    "data": source.get("data").cloned().unwrap_or(Value::Null),
                    "mimeType": source.get("media_type").cloned().unwrap_or(Value::Null),
                })),
                _ => Some(json!({"type": "text", "text": format!("[image: {}]", source.get("url").and_then(Value::as_str).unwrap_or("?"))})),
            },
            _ => None,
        })
        .collect();
    McpCallResult {
        content: blocks,
        is_error,
    }
}

/// The content a request adds besides tool results, as user content blocks.
pub(crate) fn prompt_blocks(new: &[Message]) -> Vec<Block> {
    new.iter()
        .flat_map(|m| &m.content)
        .filter(|b| !matches!(b, Block::ToolResult { .. }))
        .cloned()
        .collect()
}

/// The first message of a rebuilt session: the earlier turns as a transcript, then what the
/// request adds.
pub fn rebuild_prompt(messages: &[Message]) -> Vec<Block> {
    let mut text = String::from(
        "This conversation continues from earlier turns that are reproduced below. Treat them \
         as what was said so far and answer the last user message.\n\n<conversation_history>\n",
    );
    let mut images = Vec::new();
    for message in messages {
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        text.push_str(&format!("<{role}>\n"));
        for block in &message.content {
            match block {
                Block::Text { text: t } => {
                    text.push_str(t);
                    text.push('\n');
                }
                Block::Image { source } => {
                    images.push(Block::Image {
                        source: source.clone(),
                    });
                    text.push_str(&format!("[image {}]\n", images.len()));
                }
                Block::ToolUse { id, name, input } => {
                    text.push_str(&format!(
                        "<tool_use id=\"{id}\" name=\"{name}\">{input}</tool_use>\n"
                    ));
                }
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    let body: String = content
                        .iter()
                        .filter_map(|b| match b {
                            Block::Text { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                        .join("\n");
                    text.push_str(&format!(
                        "<tool_result tool_use_id=\"{tool_use_id}\" is_error=\"{is_error}\">{body}</tool_result>\n"
                    ));
                }
                Block::Other { block } => {
                    text.push_str(&format!("{block}\n"));
                }
            }
        }
        text.push_str(&format!("</{role}>\n"));
    }
    text.push_str("</conversation_history>");
    let mut blocks = vec![Block::Text { text }];
    blocks.extend(images);
    blocks
}

//! Anthropic Messages API requests (`POST /v1/messages`).

use serde_json::{Map, Value};

use super::fields::*;
use super::{
    check_base64, parse_object, url_image_source, Api, ApiError, ApiErrorKind, ApiRequest, At,
    Thinking, ToolChoice, ToolSpecs,
};
use crate::conversation::{push_block, strip_volatile, Block, Conversation, Role, ToolSpec};

/// Request fields known to be accepted and ignored (the CLI decides them). Fields the gateway
/// does not know are ignored too; all of them are named in [`ApiRequest::ignored`].
pub const IGNORED_FIELDS: &[&str] = &[
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "metadata",
    "service_tier",
    "container",
    "mcp_servers",
    "context_management",
];

/// Parses and validates a Messages API request body.
///
/// # Errors
/// An [`ApiError`] (400) naming the field at fault.
pub fn parse_request(body: &[u8]) -> Result<ApiRequest, ApiError> {
    parse(body, false)
}

/// Parses and validates a token-count request body (`POST /v1/messages/count_tokens`): a
/// Messages request without `max_tokens` or `stream`, whose last message may be the
/// assistant's.
///
/// # Errors
/// An [`ApiError`] (400) naming the field at fault.
pub fn parse_count_tokens_request(body: &[u8]) -> Result<ApiRequest, ApiError> {
    parse(body, true)
}

/// A documented estimate of a request's input tokens, for when no upstream can count them:
/// a token per 4 bytes of text (system prompt, message text, tool inputs and results, tool
/// definitions with their schemas), 1,600 per image (the most a picture of up to 1.15
/// megapixels costs), and 4 per message for its framing. Real counts differ, by tokenizer
/// and language, often by 10–20%.
pub fn estimate_input_tokens(conversation: &Conversation) -> u64 {
    fn bytes(block: &Block, images: &mut u64) -> usize {
        match block {
            Block::Text { text } => text.len(),
            Block::Image { .. } => {
                *images += 1;
                0
            }
            Block::ToolUse { name, input, .. } => name.len() + input.to_string().len(),
            Block::ToolResult { content, .. } => {
                content.iter().map(|b| bytes(b, images)).sum::<usize>()
            }
            Block::Other { block } => block.to_string().len(),
        }
    }
    let mut images = 0;
    let mut text = conversation.system.as_ref().map_or(0, String::len);
    for message in &conversation.messages {
        text += message
            .content
            .iter()
            .map(|b| bytes(b, &mut images))
            .sum::<usize>();
    }
    for tool in &conversation.tools {
        text += tool.name.len() + tool.description.len() + tool.input_schema.to_string().len();
    }
    (text as u64).div_ceil(4) + images * 1600 + conversation.messages.len() as u64 * 4
}

fn parse(body: &[u8], count: bool) -> Result<ApiRequest, ApiError> {
    let mut map = parse_object(body)?;
    let model = take_model(&mut map, "model: a model name is required")?;
    let max_tokens = match map.remove("max_tokens") {
        None if count => None,
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n > 0) => n.as_u64(),
        Some(_) => {
            return Err(ApiError::invalid(
                "max_tokens",
                "max_tokens: must be a positive integer",
            ))
        }
        None => {
            return Err(ApiError::invalid(
                "max_tokens",
                "max_tokens: field required",
            ))
        }
    };
    let stream = take_bool(&mut map, "stream")?;
    let mut conversation = Conversation {
        system: system_text(map.remove("system"))?,
        ..Conversation::default()
    };
    let messages = take_messages(&mut map)?;
    for (i, message) in messages.into_iter().enumerate() {
        let thinking = signed_thinking(&message);
        let (role, mut blocks) = message_blocks(i, message)?;
        let after_text = conversation.messages.last().is_some_and(|m| {
            m.role == Role::User && matches!(m.content.last(), Some(Block::Text { .. }))
        });
        if role == SYSTEM && after_text {
            blocks.insert(
                0,
                Block::Text {
                    text: "\n\n".to_owned(),
                },
            );
        }
        conversation.push(role.0, blocks);
        if role.0 == Role::Assistant && !thinking.is_empty() {
            let at = conversation.messages.len() - 1;
            match conversation.thinking.last_mut() {
                Some((last, blocks)) if *last == at => blocks.extend(thinking),
                _ => conversation.thinking.push((at, thinking)),
            }
        }
    }
    if !count && conversation.messages.last().map(|m| m.role) != Some(Role::User) {
        return Err(ApiError::invalid(
            "messages",
            "messages: the last message must be a user message (assistant prefill is not supported)",
        ));
    }
    conversation.tools = tools(map.remove("tools"))?;
    let tool_choice = tool_choice(map.remove("tool_choice"))?;
    let thinking = super::parse_thinking(map.remove("thinking"))?;
    // Structured outputs: `output_format` (the beta's name) or `output_config.format`.
    let mut json_schema = match map.remove("output_format").filter(|f| !f.is_null()) {
        Some(format) => super::output_format("output_format", &format)?,
        None => None,
    };
    let effort = match map.remove("output_config") {
        None | Some(Value::Null) => None,
        Some(Value::Object(mut config)) => {
            if let Some(format) = config.remove("format").filter(|f| !f.is_null()) {
                json_schema = super::output_format("output_config.format", &format)?;
            }
            match config.remove("effort") {
                None | Some(Value::Null) => None,
                Some(effort) => Some(super::parse_effort("output_config.effort", &effort)?),
            }
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "output_config",
                "output_config: must be an object",
            ))
        }
    };
    // The API grows every month and current clients send what it grew: a field the gateway
    // does not know is ignored and named, never refused.
    let ignored = map.keys().cloned().collect();
    Ok(ApiRequest {
        api: Api::Anthropic,
        model,
        stream,
        max_tokens,
        include_usage: true,
        tool_choice,
        json_schema,
        conversation,
        ignored,
        previous_response_id: None,
        store: false,
        show_thinking: matches!(thinking, Some(Thinking::Adaptive | Thinking::Budget(_))),
        thinking,
        effort,
        references: Vec::new(),
        echo: serde_json::Map::new(),
    })
}

fn system_text(system: Option<Value>) -> Result<Option<String>, ApiError> {
    match system {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Array(blocks)) => {
            let mut text = Vec::new();
            for block in blocks {
                match block.get("text").and_then(Value::as_str) {
                    Some(t) if block["type"] == "text" => text.push(t.to_owned()),
                    _ => {
                        return Err(ApiError::invalid(
                            "system",
                            "system: only text blocks are supported",
                        ))
                    }
                }
            }
            Ok(Some(text.join("\n\n")))
        }
        Some(_) => Err(ApiError::invalid(
            "system",
            "system: must be a string or text blocks",
        )),
    }
}

const MESSAGES: At<'static> = At::Name("messages");
const TOOLS: At<'static> = At::Name("tools");

/// The role a message of the request takes in the conversation, and whether it was a
/// `system` message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RoleOf(Role, bool);

const SYSTEM: RoleOf = RoleOf(Role::User, true);

/// A message's role and canonical blocks. A `system` message (current clients send them inside
/// `messages`) becomes text of the user turn it stands in, as `<system>…</system>`: the CLI's
/// own system prompt is fixed for its session, and this keeps it to that turn.
/// The thinking blocks of an assistant message that carry what the API needs to take them
/// back (a `signature`, or a redacted block's `data`), as the API shapes them.
fn signed_thinking(message: &Value) -> Vec<Value> {
    if message.get("role").and_then(Value::as_str) != Some("assistant") {
        return Vec::new();
    }
    let Some(Value::Array(items)) = message.get("content") else {
        return Vec::new();
    };
    let text = |item: &Value, field: &str| {
        item.get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    items
        .iter()
        .filter_map(|item| match item.get("type").and_then(Value::as_str) {
            Some("thinking") => {
                let signature = text(item, "signature")?;
                let thinking = item.get("thinking").and_then(Value::as_str).unwrap_or("");
                Some(serde_json::json!({"type": "thinking", "thinking": thinking, "signature": signature}))
            }
            Some("redacted_thinking") => {
                let data = text(item, "data")?;
                Some(serde_json::json!({"type": "redacted_thinking", "data": data}))
            }
            _ => None,
        })
        .collect()
}

fn message_blocks(i: usize, message: Value) -> Result<(RoleOf, Vec<Block>), ApiError> {
    let at = At::Dot(&MESSAGES, i);
    let Value::Object(mut message) = message else {
        return Err(ApiError::invalid(&at, format!("{at}: must be an object")));
    };
    let role = match message.get("role").and_then(Value::as_str) {
        Some("user") => RoleOf(Role::User, false),
        Some("assistant") => RoleOf(Role::Assistant, false),
        Some("system") => {
            let content = message.remove("content").unwrap_or(Value::Null);
            let text = system_message_text(&At::Field(&at, "content"), content)?;
            let text = super::system_turn_text(&text);
            return Ok((SYSTEM, vec![Block::Text { text }]));
        }
        Some(other) => {
            return Err(ApiError::invalid(
                format!("{at}.role"),
                format!("{at}.role: must be \"user\", \"assistant\" or \"system\", not {other:?}"),
            ))
        }
        None => return Err(missing(&at, "role")),
    };
    let content = message.remove("content").unwrap_or(Value::Null);
    Ok((role, content_blocks(&At::Field(&at, "content"), content)?))
}

/// The text of a `system` message: a string or text blocks.
fn system_message_text(at: &At<'_>, content: Value) -> Result<String, ApiError> {
    text_only(at, content_blocks(at, content)?, "system")
}

/// Reads message content (a string or blocks) into canonical blocks.
fn content_blocks(at: &At<'_>, content: Value) -> Result<Vec<Block>, ApiError> {
    let mut blocks = Vec::new();
    match content {
        Value::String(text) => push_block(&mut blocks, Block::Text { text }),
        Value::Array(items) => {
            for (j, item) in items.into_iter().enumerate() {
                if let Some(block) = block(&At::Dot(at, j), item)? {
                    push_block(&mut blocks, block);
                }
            }
        }
        _ => {
            return Err(ApiError::invalid(
                at,
                format!("{at}: must be a string or an array of blocks"),
            ))
        }
    }
    Ok(blocks)
}

fn block(at: &At<'_>, item: Value) -> Result<Option<Block>, ApiError> {
    let Value::Object(mut item) = item else {
        return Err(ApiError::invalid(at, format!("{at}: must be an object")));
    };
    let ty = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let text_field = |item: &mut Map<String, Value>, field: &str| -> Result<String, ApiError> {
        match item.remove(field) {
            Some(Value::String(s)) => Ok(s),
            _ => Err(ApiError::invalid(
                at,
                format!("{at}.{field}: a string is required"),
            )),
        }
    };
    Ok(Some(match ty.as_str() {
        "text" => Block::Text {
            text: text_field(&mut item, "text")?,
        },
        "image" => {
            let source = match item.remove("source") {
                Some(Value::Object(source)) => source,
                _ => {
                    return Err(ApiError::invalid(
                        at,
                        format!("{at}.source: an image source is required"),
                    ))
                }
            };
            let source = match source.get("type").and_then(Value::as_str) {
                Some("base64") => {
                    let data = source
                        .get("data")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    check_base64(&At::Field(&At::Field(at, "source"), "data"), data)?;
                    Value::Object(source)
                }
                Some("url") => Value::Object(source),
                _ => {
                    let url = source
                        .get("url")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if url.is_empty() {
                        return Err(ApiError::invalid(
                            at,
                            format!("{at}.source: base64 or url required"),
                        ));
                    }
                    url_image_source(&At::Field(&At::Field(at, "source"), "url"), url)?
                }
            };
            Block::Image { source }
        }
        "tool_use" => Block::ToolUse {
            id: text_field(&mut item, "id")?,
            name: text_field(&mut item, "name")?,
            input: item
                .remove("input")
                .unwrap_or_else(|| Value::Object(Map::new())),
        },
        "tool_result" => {
            let tool_use_id = text_field(&mut item, "tool_use_id")?;
            let content = match item.remove("content") {
                None | Some(Value::Null) => Vec::new(),
                Some(content) => content_blocks(&At::Field(at, "content"), content)?,
            };
            let is_error = item
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            }
        }
        // Thinking is the model's; clients drop or rewrite it, and the CLI keeps its own copy.
        "thinking" | "redacted_thinking" => return Ok(None),
        "" => return Err(ApiError::invalid(at, format!("{at}.type: field required"))),
        _ => Block::Other {
            block: strip_volatile(Value::Object(item)),
        },
    }))
}

fn tools(tools: Option<Value>) -> Result<Vec<ToolSpec>, ApiError> {
    let items = array_items(tools, "tools")?;
    let mut specs = ToolSpecs::default();
    for (i, mut tool) in items.into_iter().enumerate() {
        let at = At::Dot(&TOOLS, i);
        if tool
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "custom")
        {
            return Err(ApiError::new(
                ApiErrorKind::InvalidRequest,
                format!(
                    "{at}: server tools ({}) are not supported by this gateway",
                    tool["type"]
                ),
            ));
        }
        push_flat_tool(&mut specs, &at, &mut tool, "input_schema", true)?;
    }
    Ok(specs.into_vec())
}

fn tool_choice(choice: Option<Value>) -> Result<ToolChoice, ApiError> {
    let Some(choice) = choice.filter(|c| !c.is_null()) else {
        return Ok(ToolChoice::Auto);
    };
    match choice.get("type").and_then(Value::as_str) {
        Some("auto") => Ok(ToolChoice::Auto),
        Some("any") => Ok(ToolChoice::Any),
        Some("none") => Ok(ToolChoice::None),
        Some("tool") => match choice.get("name").and_then(Value::as_str) {
            Some(name) => Ok(ToolChoice::Tool(name.to_owned())),
            None => Err(ApiError::invalid(
                "tool_choice",
                "tool_choice.name: field required",
            )),
        },
        _ => Err(ApiError::invalid(
            "tool_choice",
            "tool_choice.type: must be auto, any, tool or none",
        )),
    }
}

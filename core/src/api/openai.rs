//! OpenAI Chat Completions requests (`POST /v1/chat/completions`).

use serde_json::{json, Value};

use super::fields::*;
use super::{
    parse_object, push_tool_spec, url_image_source, Api, ApiError, ApiRequest, At, ToolFields,
    ToolSpecs,
};
use crate::conversation::{push_block, Block, Conversation, Role, ToolSpec};

/// Request fields known to be accepted and ignored (the CLI decides them). Fields the gateway
/// does not know are ignored too; all of them are named in [`ApiRequest::ignored`].
pub const IGNORED_FIELDS: &[&str] = &[
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "user",
    "seed",
    "stop",
    "parallel_tool_calls",
    "metadata",
    "store",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
];

const MESSAGES: At<'static> = At::Name("messages");
const TOOLS: At<'static> = At::Name("tools");

/// Parses and validates a Chat Completions request body.
///
/// # Errors
/// An [`ApiError`] (400) naming the field at fault.
pub fn parse_request(body: &[u8]) -> Result<ApiRequest, ApiError> {
    let mut map = parse_object(body)?;
    let model = take_model(&mut map, "you must provide a model parameter")?;
    if let Some(n) = map.remove("n").filter(|n| !n.is_null()) {
        if n.as_u64() != Some(1) {
            return Err(ApiError::invalid("n", "n: only n=1 is supported"));
        }
    }
    for unsupported in [
        "functions",
        "function_call",
        "audio",
        "modalities",
        "prediction",
        "web_search_options",
    ] {
        if map.get(unsupported).is_some_and(|v| !v.is_null()) {
            return Err(ApiError::invalid(
                unsupported,
                format!("{unsupported}: not supported by this gateway"),
            ));
        }
        map.remove(unsupported);
    }
    let json_schema = match map.remove("response_format").filter(|f| !f.is_null()) {
        Some(format) => super::output_format("response_format", &format)?,
        None => None,
    };
    let stream = take_bool(&mut map, "stream")?;
    let include_usage = match map.remove("stream_options") {
        None | Some(Value::Null) => false,
        Some(options) => options
            .get("include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    };
    let max_tokens = ["max_completion_tokens", "max_tokens"]
        .iter()
        .filter_map(|k| map.remove(*k))
        .find_map(|v| v.as_u64());
    let messages = take_messages(&mut map)?;
    let mut conversation = Conversation::default();
    let mut system: Vec<String> = Vec::new();
    for (i, message) in messages.into_iter().enumerate() {
        let at = At::Bracket(&MESSAGES, i);
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match role {
            // Before the conversation: the system prompt. Later: text of the user turn it
            // stands in, so the live session (whose system prompt is fixed) carries on.
            "system" | "developer" if conversation.messages.is_empty() => {
                system.push(text_of(&at, message.get("content"))?);
            }
            "system" | "developer" => {
                let text = text_of(&at, message.get("content"))?;
                let mut blocks = Vec::new();
                let after_text = conversation.messages.last().is_some_and(|m| {
                    m.role == Role::User && matches!(m.content.last(), Some(Block::Text { .. }))
                });
                if after_text {
                    blocks.push(Block::Text { text: "\n\n".to_owned() });
                }
                blocks.push(Block::Text { text: super::system_turn_text(&text) });
                conversation.push(Role::User, blocks);
            }
            "user" => conversation.push(Role::User, user_blocks(&at, message.get("content"))?),
            "assistant" => conversation.push(Role::Assistant, assistant_blocks(&at, &message)?),
            "tool" => {
                let Some(id) = message.get("tool_call_id").and_then(Value::as_str) else {
                    return Err(missing(&at, "tool_call_id"));
                };
                let mut content = Vec::new();
                push_block(&mut content, Block::Text { text: text_of(&at, message.get("content"))? });
                conversation.push(
                    Role::User,
                    vec![Block::ToolResult {
                        tool_use_id: id.to_owned(),
                        content,
                        is_error: false,
                    }],
                );
            }
            "" => return Err(missing(&at, "role")),
            other => {
                return Err(ApiError::invalid(
                    format!("{at}.role"),
                    format!("{at}.role: {other:?} is not supported (use system, developer, user, assistant or tool)"),
                ))
            }
        }
    }
    if conversation.messages.last().map(|m| m.role) != Some(Role::User) {
        return Err(ApiError::invalid(
            "messages",
            "messages: the last message must be a user or tool message",
        ));
    }
    if !system.is_empty() {
        conversation.system = Some(system.join("\n\n"));
    }
    conversation.tools = tools(map.remove("tools"))?;
    let tool_choice = openai_tool_choice(
        map.remove("tool_choice"),
        &mut conversation,
        &ChoiceShape {
            function_name: "/function/name",
            untyped_is_function: true,
            allowed: ("/allowed_tools/tools", "/allowed_tools/mode"),
        },
    )?;
    let (effort, thinking) = match map.remove("reasoning_effort") {
        None | Some(Value::Null) => (None, None),
        Some(effort) => super::parse_openai_effort("reasoning_effort", &effort)?,
    };
    // Fields the gateway does not know are ignored and named, never refused.
    let ignored = map.keys().cloned().collect();
    Ok(ApiRequest {
        api: Api::OpenAi,
        model,
        stream,
        max_tokens,
        include_usage,
        tool_choice,
        json_schema,
        conversation,
        ignored,
        previous_response_id: None,
        store: false,
        show_thinking: effort.is_some(),
        thinking,
        effort,
        references: Vec::new(),
        echo: serde_json::Map::new(),
    })
}

/// The text of a content field: a string or text parts.
fn text_of(at: &At<'_>, content: Option<&Value>) -> Result<String, ApiError> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts {
                match part.get("text").and_then(Value::as_str) {
                    Some(t) if part["type"] == "text" => text.push_str(t),
                    _ => {
                        return Err(ApiError::invalid(
                            format!("{at}.content"),
                            format!("{at}.content: only text parts are allowed here"),
                        ))
                    }
                }
            }
            Ok(text)
        }
        Some(_) => Err(ApiError::invalid(
            format!("{at}.content"),
            format!("{at}.content: must be a string or an array of parts"),
        )),
    }
}

fn user_blocks(at: &At<'_>, content: Option<&Value>) -> Result<Vec<Block>, ApiError> {
    let mut blocks = Vec::new();
    match content {
        Some(Value::Array(parts)) => {
            for (j, part) in parts.iter().enumerate() {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => push_block(
                        &mut blocks,
                        Block::Text {
                            text: part
                                .get("text")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                        },
                    ),
                    Some("image_url") => {
                        let url = part
                            .get("image_url")
                            .and_then(|i| i.get("url").or(Some(i)))
                            .and_then(Value::as_str)
                            .ok_or_else(|| {
                                ApiError::invalid(
                                    format!("{at}.content[{j}]"),
                                    format!("{at}.content[{j}].image_url.url: field required"),
                                )
                            })?;
                        let source = url_image_source(
                            &format_args!("{at}.content[{j}].image_url.url"),
                            url,
                        )?;
                        blocks.push(Block::Image { source });
                    }
                    other => {
                        return Err(ApiError::invalid(
                            format!("{at}.content[{j}]"),
                            format!(
                            "{at}.content[{j}].type: {other:?} is not supported (text, image_url)"
                        ),
                        ))
                    }
                }
            }
        }
        other => push_block(
            &mut blocks,
            Block::Text {
                text: text_of(at, other)?,
            },
        ),
    }
    Ok(blocks)
}

fn assistant_blocks(at: &At<'_>, message: &Value) -> Result<Vec<Block>, ApiError> {
    let mut blocks = Vec::new();
    push_block(
        &mut blocks,
        Block::Text {
            text: text_of(at, message.get("content"))?,
        },
    );
    for (j, call) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let calls = At::Field(at, "tool_calls");
        let at = At::Bracket(&calls, j);
        let id = call.get("id").and_then(Value::as_str);
        let name = call.pointer("/function/name").and_then(Value::as_str);
        let (Some(id), Some(name)) = (id, name) else {
            return Err(ApiError::invalid(
                &at,
                format!("{at}: id and function.name are required"),
            ));
        };
        // `arguments` is a JSON string; an object sent as-is means the same.
        let input = match call.pointer("/function/arguments") {
            Some(Value::String(s)) if s.trim().is_empty() => json!({}),
            Some(Value::String(s)) => {
                serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
            }
            Some(v @ Value::Object(_)) => v.clone(),
            _ => json!({}),
        };
        blocks.push(Block::ToolUse {
            id: id.to_owned(),
            name: name.to_owned(),
            input,
        });
    }
    Ok(blocks)
}

fn tools(tools: Option<Value>) -> Result<Vec<ToolSpec>, ApiError> {
    let items = array_items(tools, "tools")?;
    let mut specs = ToolSpecs::default();
    for (i, mut tool) in items.into_iter().enumerate() {
        let at = At::Bracket(&TOOLS, i);
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            return Err(ApiError::invalid(
                &at,
                format!("{at}.type: only \"function\" tools are supported"),
            ));
        }
        let schema = tool.pointer_mut("/function/parameters").map(Value::take);
        push_tool_spec(
            &mut specs,
            ToolFields {
                at: &at,
                prefix: "function.",
                schema_field: "parameters",
                schema_required: false,
                name: tool.pointer("/function/name").and_then(Value::as_str),
                description: tool
                    .pointer("/function/description")
                    .and_then(Value::as_str),
                schema,
            },
        )?;
    }
    Ok(specs.into_vec())
}

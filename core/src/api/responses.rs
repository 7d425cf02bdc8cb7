//! OpenAI Responses requests (`POST /v1/responses`).
//!
//! `input` is a string (one user message) or a list of items: `message` items (`user`,
//! `assistant`, `system`, `developer`; a bare `{role, content}` is one too), `function_call`
//! and `function_call_output` items, and `reasoning` items. They map onto the same canonical
//! [`Conversation`] as the other two APIs, so one conversation hashes alike in all three:
//! a `function_call` is a tool call of the assistant message it follows, its `arguments` string
//! the object it encodes; a `function_call_output` is a tool result of the next user message;
//! reasoning items are the model's, and, like thinking blocks, not part of the history.
//!
//! `instructions`, and `system`/`developer` messages before the first user or assistant item,
//! are the system prompt; a later one is text of the user turn it stands in, as
//! `<system>…</system>`, so the live session (whose system prompt is fixed) carries on.
//!
//! With `previous_response_id` the input continues a stored response: the gateway puts the
//! stored history in front of it ([`ApiRequest::previous_response_id`]).

use serde_json::{json, Map, Value};

use super::fields::*;
use super::{parse_object, url_image_source, Api, ApiError, ApiRequest, At, ToolSpecs};
use crate::conversation::{push_block, Block, Conversation, Role, ToolSpec};

/// Request fields known to be accepted and ignored (the CLI decides them, or they ask for
/// nothing the gateway could do differently). Fields the gateway does not know are ignored
/// too; all of them are named in [`ApiRequest::ignored`], with the tools that are not
/// functions (`tools[2] (web_search)`).
pub const IGNORED_FIELDS: &[&str] = &[
    "temperature",
    "top_p",
    "top_logprobs",
    "parallel_tool_calls",
    "max_tool_calls",
    "metadata",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "service_tier",
    "include",
    "truncation",
    "stream_options",
    "client_metadata",
];

/// The request fields a response object repeats.
const ECHOED: &[&str] = &[
    "instructions",
    "max_output_tokens",
    "metadata",
    "parallel_tool_calls",
    "reasoning",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "truncation",
    "user",
];

const INPUT: At<'static> = At::Name("input");
const TOOLS: At<'static> = At::Name("tools");

/// Parses and validates a Responses request body.
///
/// # Errors
/// An [`ApiError`] (400) naming the field at fault.
pub fn parse_request(body: &[u8]) -> Result<ApiRequest, ApiError> {
    let mut map = parse_object(body)?;
    // What the response object repeats of the request, as it came.
    let echo: serde_json::Map<String, Value> = ECHOED
        .iter()
        .filter_map(|k| Some((k.to_string(), map.get(*k).filter(|v| !v.is_null())?.clone())))
        .collect();
    let model = take_model(&mut map, "model: a model name is required")?;
    if map.remove("background").is_some_and(|b| b == true) {
        return Err(ApiError::invalid(
            "background",
            "background: background responses are not supported by this gateway",
        ));
    }
    for unsupported in ["conversation", "prompt"] {
        if map.remove(unsupported).is_some_and(|v| !v.is_null()) {
            return Err(ApiError::invalid(
                unsupported,
                format!(
                    "{unsupported}: not supported by this gateway (send the input, or \
                     previous_response_id)"
                ),
            ));
        }
    }
    // `text.verbosity` is ignored: the model's length is its own.
    let json_schema = match map.remove("text").filter(|t| !t.is_null()) {
        Some(text) => match text.get("format").filter(|f| !f.is_null()) {
            Some(format) => super::output_format("text.format", format)?,
            None => None,
        },
        None => None,
    };
    let stream = take_bool(&mut map, "stream")?;
    // `store` defaults to true in this API.
    let store = match map.remove("store") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => b,
        Some(_) => return Err(ApiError::invalid("store", "store: must be a boolean")),
    };
    let previous_response_id = match map.remove("previous_response_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if !id.is_empty() => Some(id),
        Some(_) => {
            return Err(ApiError::invalid(
                "previous_response_id",
                "previous_response_id: must be a response id",
            ))
        }
    };
    let max_tokens = match map.remove("max_output_tokens") {
        None | Some(Value::Null) => None,
        Some(n) => match n.as_u64() {
            Some(n) if n > 0 => Some(n),
            _ => {
                return Err(ApiError::invalid(
                    "max_output_tokens",
                    "max_output_tokens: must be a positive integer",
                ))
            }
        },
    };
    let mut conversation = Conversation::default();
    let mut system: Vec<String> = Vec::new();
    let mut references = Vec::new();
    if let Some(instructions) = map.remove("instructions") {
        match instructions {
            Value::Null => {}
            Value::String(s) => system.push(s),
            _ => {
                return Err(ApiError::invalid(
                    "instructions",
                    "instructions: must be a string",
                ))
            }
        }
    }
    match map.remove("input") {
        Some(Value::String(text)) => conversation.push(Role::User, vec![Block::Text { text }]),
        Some(Value::Array(items)) => {
            for (i, item) in items.into_iter().enumerate() {
                push_item(
                    (&mut conversation, &mut system, &mut references),
                    &At::Bracket(&INPUT, i),
                    item,
                )?;
            }
        }
        None | Some(Value::Null) => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "input",
                "input: must be a string or an array of items",
            ))
        }
    }
    if conversation.messages.last().map(|m| m.role) != Some(Role::User) {
        return Err(ApiError::invalid(
            "input",
            "input: must end with a user message or function_call_output items (an assistant \
             message to continue is not supported)",
        ));
    }
    if !system.is_empty() {
        conversation.system = Some(system.join("\n\n"));
    }
    let mut ignored: Vec<String> = Vec::new();
    conversation.tools = tools(map.remove("tools"), &mut ignored)?;
    let tool_choice = openai_tool_choice(
        map.remove("tool_choice"),
        &mut conversation,
        &ChoiceShape {
            function_name: "/name",
            untyped_is_function: false,
            allowed: ("/tools", "/mode"),
        },
    )?;
    let (mut effort, mut thinking, mut show_thinking) = (None, None, false);
    if let Some(reasoning) = map.remove("reasoning").filter(|r| !r.is_null()) {
        if let Some(value) = reasoning.get("effort").filter(|e| !e.is_null()) {
            (effort, thinking) = super::parse_openai_effort("reasoning.effort", value)?;
        }
        // `generate_summary` is the older name of `summary`.
        let summary = ["summary", "generate_summary"]
            .iter()
            .find_map(|k| reasoning.get(*k).and_then(Value::as_str));
        show_thinking = summary.is_some() && thinking != Some(super::Thinking::Disabled);
    }
    // Fields the gateway does not know are ignored and named, never refused.
    ignored.extend(map.keys().cloned());
    ignored.sort();
    Ok(ApiRequest {
        api: Api::Responses,
        model,
        stream,
        max_tokens,
        include_usage: true,
        tool_choice,
        json_schema,
        conversation,
        ignored,
        previous_response_id,
        store,
        thinking,
        effort,
        show_thinking,
        references,
        echo,
    })
}

/// Adds one input item to the conversation.
fn push_item(
    (conversation, system, references): (
        &mut Conversation,
        &mut Vec<String>,
        &mut Vec<super::ItemReference>,
    ),
    at: &At<'_>,
    item: Value,
) -> Result<(), ApiError> {
    let Value::Object(mut item) = item else {
        return Err(ApiError::invalid(at, format!("{at}: must be an object")));
    };
    let ty = match item.get("type") {
        None | Some(Value::Null) if item.contains_key("role") => "message".to_owned(),
        Some(Value::String(t)) => t.clone(),
        _ => return Err(ApiError::invalid(at, format!("{at}.type: field required"))),
    };
    let string = |item: &mut Map<String, Value>, field: &str| match item.remove(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(ApiError::invalid(
            format!("{at}.{field}"),
            format!("{at}.{field}: a string is required"),
        )),
    };
    match ty.as_str() {
        "message" => {
            let content = item.remove("content").unwrap_or(Value::Null);
            let content_at = At::Field(at, "content");
            match item.get("role").and_then(Value::as_str) {
                Some("user") => conversation.push(Role::User, parts(&content_at, content)?),
                Some("assistant") => {
                    conversation.push(Role::Assistant, parts(&content_at, content)?);
                }
                Some("system" | "developer") => {
                    let text = instructions_text(&content_at, content)?;
                    if conversation.messages.is_empty() {
                        system.push(text);
                    } else {
                        let mut blocks = Vec::new();
                        let after_text = conversation.messages.last().is_some_and(|m| {
                            m.role == Role::User
                                && matches!(m.content.last(), Some(Block::Text { .. }))
                        });
                        if after_text {
                            blocks.push(Block::Text {
                                text: "\n\n".to_owned(),
                            });
                        }
                        blocks.push(Block::Text {
                            text: super::system_turn_text(&text),
                        });
                        conversation.push(Role::User, blocks);
                    }
                }
                Some(other) => {
                    return Err(ApiError::invalid(
                        format!("{at}.role"),
                        format!(
                            "{at}.role: {other:?} is not supported (use user, assistant, system \
                             or developer)"
                        ),
                    ))
                }
                None => return Err(missing(&at, "role")),
            }
        }
        "function_call" => {
            let id = string(&mut item, "call_id")?;
            let mut name = string(&mut item, "name")?;
            // A function of a `namespace` tool, by the name the model knows it by.
            if let Some(Value::String(namespace)) = item.remove("namespace") {
                name = namespaced_name(&namespace, &name);
            }
            // `arguments` is a JSON string; an object sent as-is means the same.
            let input = match item.remove("arguments") {
                Some(Value::String(s)) if s.trim().is_empty() => json!({}),
                Some(Value::String(s)) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
                Some(v @ Value::Object(_)) => v,
                _ => json!({}),
            };
            conversation.push(Role::Assistant, vec![Block::ToolUse { id, name, input }]);
        }
        "function_call_output" => {
            let tool_use_id = string(&mut item, "call_id")?;
            let output_at = At::Field(at, "output");
            let content = match item.remove("output") {
                Some(Value::String(text)) => {
                    let mut content = Vec::new();
                    push_block(&mut content, Block::Text { text });
                    content
                }
                Some(output @ Value::Array(_)) => parts(&output_at, output)?,
                _ => {
                    return Err(ApiError::invalid(
                        &output_at,
                        format!("{output_at}: a string or an array of parts is required"),
                    ))
                }
            };
            conversation.push(
                Role::User,
                vec![Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error: false,
                }],
            );
        }
        // The model's reasoning: clients send it back (encrypted or summarised); the CLI
        // keeps its own copy, and it is not part of the history.
        "reasoning" => {}
        // An output item of a stored response, by its id: the gateway's own message items
        // (`msg_…`, resolved to their text once the engine has the tenant's stored responses)
        // and reasoning items (`rs_…`, not part of the history).
        "item_reference" => {
            let id = string(&mut item, "id")?;
            if id.starts_with("rs_") {
                return Ok(());
            }
            if !id.starts_with("msg_") {
                return Err(ApiError::invalid(
                    format!("{at}.id"),
                    format!(
                        "{at}.id: {id:?} is not a message or reasoning item of this gateway's \
                         responses (send the item itself)"
                    ),
                ));
            }
            let reference = super::ItemReference {
                at: at.to_string(),
                id,
            };
            conversation.push(
                Role::Assistant,
                vec![Block::Text {
                    text: reference.placeholder(),
                }],
            );
            references.push(reference);
        }
        // Remote compaction: the conversation's Claude Code session compacts its own context.
        kind @ ("compaction_trigger" | "compaction") => {
            return Err(ApiError::invalid(
                format!("{at}.type"),
                format!(
                    "{at}.type: {kind:?} items are not supported: remote compaction is not \
                     offered (each conversation's Claude Code session compacts its own \
                     context); compact on the client's side"
                ),
            ))
        }
        other => {
            return Err(ApiError::invalid(
                format!("{at}.type"),
                format!(
                    "{at}.type: {other:?} items are not supported (message, function_call, \
                     function_call_output, reasoning, item_reference)"
                ),
            ))
        }
    }
    Ok(())
}

/// Message content (a string or parts) as canonical blocks: `input_text`, `output_text` and
/// `text` parts, `input_image` with an image URL (`data:` URLs included), and a `refusal`
/// as its text.
fn parts(at: &At<'_>, content: Value) -> Result<Vec<Block>, ApiError> {
    let mut blocks = Vec::new();
    let items = match content {
        Value::String(text) => {
            push_block(&mut blocks, Block::Text { text });
            return Ok(blocks);
        }
        Value::Array(items) => items,
        _ => {
            return Err(ApiError::invalid(
                at,
                format!("{at}: must be a string or an array of parts"),
            ))
        }
    };
    for (j, part) in items.into_iter().enumerate() {
        let at = At::Bracket(at, j);
        let field = |name: &str| part.get(name).and_then(Value::as_str);
        match field("type") {
            Some("input_text" | "output_text" | "text") => {
                let Some(text) = field("text") else {
                    return Err(ApiError::invalid(
                        format!("{at}.text"),
                        format!("{at}.text: a string is required"),
                    ));
                };
                push_block(
                    &mut blocks,
                    Block::Text {
                        text: text.to_owned(),
                    },
                );
            }
            Some("refusal") => push_block(
                &mut blocks,
                Block::Text {
                    text: field("refusal").unwrap_or_default().to_owned(),
                },
            ),
            Some("input_image") => {
                let url_at = At::Field(&at, "image_url");
                let Some(url) = field("image_url").filter(|u| !u.is_empty()) else {
                    return Err(ApiError::invalid(
                        &url_at,
                        format!(
                            "{url_at}: an image URL is required (file ids are not supported by \
                             this gateway)"
                        ),
                    ));
                };
                let source = url_image_source(&url_at, url)?;
                blocks.push(Block::Image { source });
            }
            other => {
                return Err(ApiError::invalid(
                    format!("{at}.type"),
                    format!(
                        "{at}.type: {other:?} parts are not supported (input_text, output_text, \
                         input_image)"
                    ),
                ))
            }
        }
    }
    Ok(blocks)
}

/// The text of a system or developer message.
fn instructions_text(at: &At<'_>, content: Value) -> Result<String, ApiError> {
    text_only(at, parts(at, content)?, "system or developer")
}

/// The function tools; tools of other types (hosted tools such as `web_search`, which the
/// gateway cannot offer) are left out and named in `ignored`.
fn tools(tools: Option<Value>, ignored: &mut Vec<String>) -> Result<Vec<ToolSpec>, ApiError> {
    let items = array_items(tools, "tools")?;
    let mut specs = ToolSpecs::default();
    for (i, mut tool) in items.into_iter().enumerate() {
        let at = At::Bracket(&TOOLS, i);
        match tool.get("type").and_then(Value::as_str) {
            Some("function") => {}
            // A group of function tools (Codex's `multi_agent_v1`): each is offered by the
            // name `<namespace>__<name>`, and its calls name the namespace.
            Some("namespace") => {
                let namespace = tool.get("name").and_then(Value::as_str).unwrap_or_default();
                if namespace.is_empty() {
                    return Err(ApiError::invalid(&at, format!("{at}.name: field required")));
                }
                let namespace = namespace.to_owned();
                let inner_at = At::Field(&at, "tools");
                let inner = array_items(tool.get_mut("tools").map(Value::take), "tools")?;
                for (j, mut function) in inner.into_iter().enumerate() {
                    let at = At::Bracket(&inner_at, j);
                    if function.get("type").and_then(Value::as_str) != Some("function") {
                        ignored.push(format!("{at}"));
                        continue;
                    }
                    if let Some(Value::String(name)) = function.get_mut("name") {
                        *name = namespaced_name(&namespace, name);
                    }
                    push_flat_tool(&mut specs, &at, &mut function, "parameters", false)?;
                }
                continue;
            }
            Some(other) => {
                ignored.push(format!("{at} ({other})"));
                continue;
            }
            None => return Err(ApiError::invalid(&at, format!("{at}.type: field required"))),
        }
        push_flat_tool(&mut specs, &at, &mut tool, "parameters", false)?;
    }
    Ok(specs.into_vec())
}

/// The name a function of a `namespace` tool is offered by: `<namespace>__<name>` (tool names
/// are letters, digits, `_` and `-`).
pub fn namespaced_name(namespace: &str, name: &str) -> String {
    format!("{namespace}__{name}")
}

/// The namespace and name of a function the request's `tools` (as a response object repeats
/// them) offer in a `namespace` tool, by the name it is offered by.
pub fn namespace_of<'a>(tools: Option<&'a Value>, offered: &str) -> Option<(&'a str, &'a str)> {
    tools?.as_array()?.iter().find_map(|tool| {
        if tool.get("type").and_then(Value::as_str) != Some("namespace") {
            return None;
        }
        let namespace = tool.get("name")?.as_str()?;
        let name = offered.strip_prefix(namespace)?.strip_prefix("__")?;
        tool.get("tools")?
            .as_array()?
            .iter()
            .find_map(|f| f.get("name")?.as_str().filter(|n| *n == name))
            .map(|name| (namespace, name))
    })
}

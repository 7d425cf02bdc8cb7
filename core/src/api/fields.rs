//! What the three request parsers read alike: the required model and messages, booleans and
//! arrays, a missing field's error, and the OpenAI APIs' `tool_choice`.

use serde_json::{Map, Value};

use super::{
    allowed_tools, openai_tool_choice_invalid, openai_tool_choice_word, push_tool_spec, At,
    ToolChoice, ToolFields, ToolSpecs,
};
use super::{ApiError, Conversation};
use crate::conversation::Block;

/// The required `model`: a non-empty string (`message`: the error, in the API's words).
pub(crate) fn take_model(map: &mut Map<String, Value>, message: &str) -> Result<String, ApiError> {
    match map.remove("model") {
        Some(Value::String(m)) if !m.is_empty() => Ok(m),
        _ => Err(ApiError::invalid("model", message)),
    }
}

/// The required `messages`: an array of at least one.
pub(crate) fn take_messages(map: &mut Map<String, Value>) -> Result<Vec<Value>, ApiError> {
    let Some(Value::Array(messages)) = map.remove("messages") else {
        return Err(ApiError::invalid(
            "messages",
            "messages: an array of messages is required",
        ));
    };
    if messages.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "messages: at least one message is required",
        ));
    }
    Ok(messages)
}

/// A boolean field; absent or `null` is `false`.
pub(crate) fn take_bool(map: &mut Map<String, Value>, name: &str) -> Result<bool, ApiError> {
    match map.remove(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(b),
        Some(_) => Err(ApiError::invalid(
            name,
            format!("{name}: must be a boolean"),
        )),
    }
}

/// An array field's items (none when it is absent or `null`).
pub(crate) fn array_items(value: Option<Value>, name: &str) -> Result<Vec<Value>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(ApiError::invalid(name, format!("{name}: must be an array"))),
    }
}

/// The error of a required field `field` of `at` that is missing.
pub(crate) fn missing(at: &dyn std::fmt::Display, field: &str) -> ApiError {
    ApiError::invalid(
        format!("{at}.{field}"),
        format!("{at}.{field}: field required"),
    )
}

/// Where an OpenAI API's `tool_choice` object names its tools.
pub(crate) struct ChoiceShape {
    /// The pointer to a function choice's name (`/function/name`, `/name`).
    pub(crate) function_name: &'static str,
    /// A choice without a `type` is a function's.
    pub(crate) untyped_is_function: bool,
    /// The pointers to `allowed_tools`' list and mode.
    pub(crate) allowed: (&'static str, &'static str),
}

/// `tool_choice` of Chat Completions and Responses: `auto`, `required`, `none`, a function,
/// or `allowed_tools` (which leaves only the tools it names in `conversation`).
pub(crate) fn openai_tool_choice(
    choice: Option<Value>,
    conversation: &mut Conversation,
    shape: &ChoiceShape,
) -> Result<ToolChoice, ApiError> {
    let choice = match choice {
        None | Some(Value::Null) => return Ok(ToolChoice::Auto),
        Some(Value::String(s)) => return openai_tool_choice_word(&s),
        Some(choice) => choice,
    };
    match choice.get("type").and_then(Value::as_str) {
        Some("allowed_tools") => {
            let names: Vec<&str> = (choice.pointer(shape.allowed.0))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|t| {
                    (t.pointer("/function/name").or_else(|| t.get("name"))).and_then(Value::as_str)
                })
                .collect();
            let mode = choice.pointer(shape.allowed.1).and_then(Value::as_str);
            allowed_tools(conversation, &names, mode)
        }
        Some("function") => function_choice(&choice, shape),
        None if shape.untyped_is_function => function_choice(&choice, shape),
        _ => Err(openai_tool_choice_invalid()),
    }
}

/// A function `tool_choice`: the named tool.
fn function_choice(choice: &Value, shape: &ChoiceShape) -> Result<ToolChoice, ApiError> {
    match choice.pointer(shape.function_name).and_then(Value::as_str) {
        Some(name) => Ok(ToolChoice::Tool(name.to_owned())),
        None => Err(ApiError::invalid(
            "tool_choice",
            format!(
                "tool_choice{}: field required",
                shape.function_name.replace('/', ".")
            ),
        )),
    }
}

/// A tool whose `name`, `description` and schema (`schema_field`) are its own fields
/// (Messages, Responses), added to `specs`.
pub(crate) fn push_flat_tool(
    specs: &mut ToolSpecs,
    at: &At<'_>,
    tool: &mut Value,
    schema_field: &'static str,
    schema_required: bool,
) -> Result<(), ApiError> {
    let schema = tool.get_mut(schema_field).map(Value::take);
    push_tool_spec(
        specs,
        ToolFields {
            at,
            prefix: "",
            schema_field,
            schema_required,
            name: tool.get("name").and_then(Value::as_str),
            description: tool.get("description").and_then(Value::as_str),
            schema,
        },
    )
}

/// The text of a message that holds text only (`what`: which, for the error), from its blocks.
pub(crate) fn text_only(at: &At<'_>, blocks: Vec<Block>, what: &str) -> Result<String, ApiError> {
    let mut text = String::new();
    for block in blocks {
        let Block::Text { text: t } = block else {
            return Err(ApiError::invalid(
                at,
                format!("{at}: a {what} message holds text only"),
            ));
        };
        text.push_str(&t);
    }
    Ok(text)
}

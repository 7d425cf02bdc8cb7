//! What a prompt is: a [`UserMessage`] as the host gives it, the line it becomes, and a
//! prompt serialized ahead ([`ReadyPrompt`]).

use serde_json::{json, Map, Value};

use crate::json::Json;

/// A prompt for [`Session::send_user_message`](super::Session::send_user_message).
#[derive(Debug, Clone, PartialEq)]
pub struct UserMessage {
    /// A string or a list of content blocks (text, image, …).
    pub content: Value,
    /// A client uuid, echoed by the CLI on the turn's frames.
    pub uuid: Option<String>,
    /// `now`, `next` or `later`.
    pub priority: Option<String>,
    /// More top-level fields (`shouldQuery`, `client_composed`, …).
    pub extra: Map<String, Value>,
    /// Whether the CLI may take the text as typed at its prompt: a leading `/command` runs
    /// (`/config …` rewrites settings), `@path` mentions read files into the model's request.
    /// Off by default: the line carries `"text_not_typed": true` and the model gets the text as
    /// it is — the only safe choice for text an app did not write itself.
    pub typed: bool,
}

impl UserMessage {
    /// A plain-text prompt.
    pub fn text(text: impl Into<String>) -> UserMessage {
        UserMessage {
            content: Value::String(text.into()),
            uuid: None,
            priority: None,
            extra: Map::new(),
            typed: false,
        }
    }

    /// A prompt of content blocks.
    pub fn blocks(blocks: Vec<Value>) -> UserMessage {
        UserMessage {
            content: Value::Array(blocks),
            uuid: None,
            priority: None,
            extra: Map::new(),
            typed: false,
        }
    }

    /// This prompt, taken as typed at the CLI's prompt ([`typed`](Self::typed)): for text the
    /// app's own user typed and may mean as a command.
    pub fn as_typed(mut self) -> UserMessage {
        self.typed = true;
        self
    }
}

/// The line of a user message.
pub(super) fn user_frame(message: UserMessage) -> Value {
    let mut frame = Map::new();
    frame.insert("type".into(), json!("user"));
    frame.insert(
        "message".into(),
        json!({"role": "user", "content": message.content}),
    );
    frame.insert("parent_tool_use_id".into(), Value::Null);
    frame.insert("session_id".into(), json!(""));
    if let Some(uuid) = message.uuid {
        frame.insert("uuid".into(), json!(uuid));
    }
    if let Some(priority) = message.priority {
        frame.insert("priority".into(), json!(priority));
    }
    if !message.typed {
        frame.insert("text_not_typed".into(), Value::Bool(true));
    }
    frame.extend(message.extra);
    Value::Object(frame)
}

/// A prompt's content serialized ahead of [`Session::send_ready_prompt`](super::Session::send_ready_prompt): the work linear in
/// its size, done where it holds nothing up.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReadyPrompt {
    /// The content as `serde_json` writes it (as it goes into the line).
    pub(super) text: String,
    /// Its canonical form (as the session reports the prompt).
    pub(super) content: Json,
}

impl ReadyPrompt {
    /// The content (a string or content blocks) of a prompt, serialized.
    pub(crate) fn new(content: &Value) -> ReadyPrompt {
        ReadyPrompt {
            text: content.to_string(),
            content: Json::from_value(content),
        }
    }
}

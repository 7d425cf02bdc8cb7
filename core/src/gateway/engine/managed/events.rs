//! A session's event log, typed: each [`Event`] with what it says ([`EventBody`]), as the
//! API shows it; the events of the agent's tool calls and their results.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::tools::{Permission, ToolName};

/// An event of a session's log.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Event {
    pub(super) id: String,
    /// When the gateway took it (`null` for a user's message until its turn takes it).
    pub(super) processed_at: Option<String>,
    #[serde(flatten)]
    pub(super) body: EventBody,
}

/// What an [`Event`] says, by its `type`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub(super) enum EventBody {
    #[serde(rename = "user.message")]
    UserMessage { content: Vec<Value> },
    #[serde(rename = "user.interrupt")]
    UserInterrupt {},
    #[serde(rename = "user.custom_tool_result")]
    UserCustomToolResult {
        custom_tool_use_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
    },
    #[serde(rename = "user.tool_confirmation")]
    UserToolConfirmation {
        tool_use_id: String,
        result: Confirmation,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deny_message: Option<String>,
    },
    #[serde(rename = "agent.message")]
    AgentMessage { content: Vec<Value> },
    #[serde(rename = "agent.thinking")]
    AgentThinking {},
    #[serde(rename = "agent.tool_use")]
    AgentToolUse {
        name: String,
        input: Value,
        evaluated_permission: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evaluation: Option<Value>,
    },
    #[serde(rename = "agent.mcp_tool_use")]
    AgentMcpToolUse {
        name: String,
        mcp_server_name: String,
        input: Value,
        evaluated_permission: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evaluation: Option<Value>,
    },
    #[serde(rename = "agent.tool_result")]
    AgentToolResult {
        tool_use_id: String,
        content: Value,
        is_error: bool,
    },
    #[serde(rename = "agent.mcp_tool_result")]
    AgentMcpToolResult {
        mcp_tool_use_id: String,
        content: Value,
        is_error: bool,
    },
    #[serde(rename = "agent.custom_tool_use")]
    AgentCustomToolUse { name: Value, input: Value },
    #[serde(rename = "span.model_request_start")]
    ModelRequestStart {},
    #[serde(rename = "span.model_request_end")]
    ModelRequestEnd {
        model_request_start_id: String,
        is_error: bool,
        model_usage: ModelUsage,
    },
    #[serde(rename = "session.status_idle")]
    Idle {
        stop_reason: StopReason,
        stop_details: Option<Value>,
    },
    #[serde(rename = "session.status_running")]
    Running {},
    #[serde(rename = "session.status_terminated")]
    Terminated {},
    #[serde(rename = "session.error")]
    Error { error: SessionError },
    /// The last word of a deleted session's streams (not logged: the log goes with it).
    #[serde(rename = "session.deleted")]
    Deleted {},
}

impl EventBody {
    /// The event's `type`.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            EventBody::UserMessage { .. } => "user.message",
            EventBody::UserInterrupt {} => "user.interrupt",
            EventBody::UserCustomToolResult { .. } => "user.custom_tool_result",
            EventBody::UserToolConfirmation { .. } => "user.tool_confirmation",
            EventBody::AgentMessage { .. } => "agent.message",
            EventBody::AgentThinking {} => "agent.thinking",
            EventBody::AgentToolUse { .. } => "agent.tool_use",
            EventBody::AgentMcpToolUse { .. } => "agent.mcp_tool_use",
            EventBody::AgentToolResult { .. } => "agent.tool_result",
            EventBody::AgentMcpToolResult { .. } => "agent.mcp_tool_result",
            EventBody::AgentCustomToolUse { .. } => "agent.custom_tool_use",
            EventBody::ModelRequestStart {} => "span.model_request_start",
            EventBody::ModelRequestEnd { .. } => "span.model_request_end",
            EventBody::Idle { .. } => "session.status_idle",
            EventBody::Running {} => "session.status_running",
            EventBody::Terminated {} => "session.status_terminated",
            EventBody::Error { .. } => "session.error",
            EventBody::Deleted {} => "session.deleted",
        }
    }

    /// The event of a call with `input`, decided `permission`.
    pub(super) fn tool_use(tool: &ToolName, input: Value, permission: Permission) -> EventBody {
        let input = match input {
            Value::Object(_) => input,
            _ => json!({}),
        };
        let evaluated_permission = permission.evaluated().to_owned();
        let evaluation = Some(permission.evaluation()).filter(|e| !e.is_null());
        match tool {
            ToolName::BuiltIn(name) => EventBody::AgentToolUse {
                name: name.clone(),
                input,
                evaluated_permission,
                evaluation,
            },
            ToolName::Mcp { server, tool } => EventBody::AgentMcpToolUse {
                name: tool.clone(),
                mcp_server_name: server.clone(),
                input,
                evaluated_permission,
                evaluation,
            },
        }
    }

    /// The event of the result of the call whose event is `use_id`.
    pub(super) fn tool_result(
        tool: &ToolName,
        use_id: &str,
        content: &Value,
        is_error: bool,
    ) -> EventBody {
        let content = result_content(content);
        match tool {
            ToolName::BuiltIn(_) => EventBody::AgentToolResult {
                tool_use_id: use_id.to_owned(),
                content,
                is_error,
            },
            ToolName::Mcp { .. } => EventBody::AgentMcpToolResult {
                mcp_tool_use_id: use_id.to_owned(),
                content,
                is_error,
            },
        }
    }

    /// A `session.error` of `kind` (`unknown_error`, `model_overloaded_error`,
    /// `model_request_failed_error`) saying `message`; the gateway does not try again.
    pub(super) fn error(kind: &str, message: String) -> EventBody {
        EventBody::Error {
            error: SessionError {
                kind: kind.to_owned(),
                message,
                retry_status: json!({"type": "exhausted"}),
            },
        }
    }

    /// The event that says a session is idle for `reason`.
    pub(super) fn idle(reason: StopReason) -> EventBody {
        EventBody::Idle {
            stop_reason: reason,
            stop_details: None,
        }
    }
}

/// A user's answer to a tool call waiting for confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Confirmation {
    Allow,
    Deny,
}

/// Why a session went idle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum StopReason {
    /// The turn ended (or was interrupted).
    EndTurn,
    /// Calls wait for the user: results of custom tools, or confirmations.
    RequiresAction { event_ids: Vec<String> },
    /// The turn failed.
    RetriesExhausted,
}

/// The tokens one model request used.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(super) struct ModelUsage {
    pub(super) input_tokens: u64,
    pub(super) output_tokens: u64,
    pub(super) cache_creation_input_tokens: u64,
    pub(super) cache_read_input_tokens: u64,
}

impl ModelUsage {
    /// The counts of a Messages API `usage` object (missing ones 0).
    pub(super) fn of(usage: &Map<String, Value>) -> ModelUsage {
        let count = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
        ModelUsage {
            input_tokens: count("input_tokens"),
            output_tokens: count("output_tokens"),
            cache_creation_input_tokens: count("cache_creation_input_tokens"),
            cache_read_input_tokens: count("cache_read_input_tokens"),
        }
    }
}

/// A `session.error`'s error.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SessionError {
    /// `unknown_error`, `model_overloaded_error`, `model_request_failed_error`.
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) message: String,
    /// Always `{"type": "exhausted"}`: the gateway does not try again.
    pub(super) retry_status: Value,
}

/// A tool result's content as the API's blocks: text and images as they are, anything else
/// as its JSON text.
fn result_content(content: &Value) -> Value {
    match content {
        Value::Null => json!([]),
        Value::String(text) => json!([{"type": "text", "text": text}]),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b["type"].as_str() {
                Some("text") => json!({"type": "text", "text": b["text"]}),
                Some("image") => json!({"type": "image", "source": b["source"]}),
                _ => json!({"type": "text", "text": b.to_string()}),
            })
            .collect(),
        other => json!([{"type": "text", "text": other.to_string()}]),
    }
}

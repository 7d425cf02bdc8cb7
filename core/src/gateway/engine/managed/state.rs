//! A session's state, typed: the resource as the API shows it ([`SessionView`]), its event
//! log ([`Event`]), the conversation its turns carry, and the running turn's progress. What
//! the session store keeps is the [`AgentSession`] itself, serialized (its JSON is the stored
//! record's `data`); what it does not keep is marked so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::agents::AgentSnapshot;
use super::events::Event;
use super::tools::{SessionTools, ToolName};
use crate::gateway::engine::RequestId;
use crate::gateway::SessionId;
use crate::Timestamp;

/// Every session, by id.
#[derive(Debug, Default)]
pub(in crate::gateway::engine) struct AgentSessions {
    pub(super) by_id: BTreeMap<String, AgentSession>,
    /// Each turn in flight: its session.
    pub(super) turns: BTreeMap<RequestId, String>,
    pub(super) next_turn: u64,
    pub(super) next: u64,
}

/// A session: what the session store keeps of it (serialized as it is here), and what lasts
/// only while this gateway runs it.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct AgentSession {
    /// Its tenant (the store keeps it in the record's key).
    #[serde(skip)]
    pub(super) tenant: String,
    /// The order it was made in, among its tenant's (kept beside the record's data).
    #[serde(skip)]
    pub(super) order: u64,
    /// The session as the API shows it.
    #[serde(rename = "session")]
    pub(super) view: SessionView,
    /// What its turns ask the model, besides the conversation.
    pub(super) request: TurnRequest,
    /// Its event log.
    pub(super) events: Vec<Event>,
    /// The conversation so far.
    pub(super) history: Vec<Message>,
    /// User content sent while a turn runs, for the next one (Messages API blocks).
    #[serde(default)]
    pub(super) queued: Vec<Value>,
    /// Custom tool calls waiting for results, and the results so far.
    #[serde(default)]
    pub(super) waiting: Vec<CustomCall>,
    #[serde(default)]
    pub(super) results: Vec<Value>,
    /// Whether a turn runs (one the gateway's end cut short is given up when read back).
    #[serde(default)]
    pub(super) running: bool,
    /// When a turn its CLI was not ready for is tried again.
    #[serde(skip)]
    pub(super) retry_at: Option<Timestamp>,
    /// The agent's tools its CLI runs (from the agent's snapshot and the gateway's settings).
    #[serde(skip)]
    pub(super) tools: SessionTools,
    /// The running turn as its CLI streams it.
    #[serde(skip)]
    pub(super) progress: Progress,
}

/// A session as the API shows it (its fields in the order the API's JSON has them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SessionView {
    /// The agent's snapshot, as the agents' API shows an agent (less its times and metadata).
    pub(super) agent: AgentSnapshot,
    pub(super) archived_at: Option<String>,
    /// Always `null`: budgets are not supported here.
    pub(super) budget: Option<Value>,
    pub(super) created_at: String,
    pub(super) environment_id: String,
    pub(super) id: String,
    pub(super) metadata: Map<String, Value>,
    /// Always empty here.
    pub(super) outcome_evaluations: Vec<Value>,
    pub(super) resources: Vec<Value>,
    pub(super) stats: Map<String, Value>,
    pub(super) status: Status,
    pub(super) title: Option<String>,
    /// Always `session`.
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) updated_at: String,
    pub(super) usage: Usage,
    pub(super) vault_ids: Vec<Value>,
}

/// A session's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Status {
    Idle,
    Running,
    Terminated,
}

impl Status {
    /// As the API writes it.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::Running => "running",
            Status::Terminated => "terminated",
        }
    }
}

/// The tokens a session's turns used, summed.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(super) struct Usage {
    #[serde(default)]
    pub(super) cache_read_input_tokens: u64,
    #[serde(default)]
    pub(super) input_tokens: u64,
    #[serde(default)]
    pub(super) output_tokens: u64,
}

/// What a session's turns ask the model, besides the conversation: the agent's model, system
/// prompt and custom tools (as Messages API tools).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct TurnRequest {
    pub(super) model: String,
    pub(super) max_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) system: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) tools: Vec<Value>,
}

/// A message of a session's conversation, as the Messages API takes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Message {
    pub(super) role: Role,
    pub(super) content: Vec<Value>,
}

/// A user's message of a session's conversation.
pub(super) fn user_message(content: Vec<Value>) -> Message {
    Message {
        role: Role::User,
        content,
    }
}

/// Who said a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Role {
    User,
    Assistant,
}

/// A custom tool call waiting for the user's `user.custom_tool_result` (kept as the pair
/// `[event, tool_use_id]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct CustomCall(
    /// The call's `agent.custom_tool_use` event.
    pub(super) String,
    /// The model's `tool_use` id.
    pub(super) String,
);

/// The previews of events being produced that a stream opted into (`event_deltas`): they go
/// to that stream only, never into the session's log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(in crate::gateway::engine) struct Previews {
    /// `agent.message`: an `event_start`, then the text as `event_delta`s.
    pub(super) message: bool,
    /// `agent.thinking`: an `event_start` when thinking begins.
    pub(super) thinking: bool,
}

impl Previews {
    /// The previews a stream's query asks for: `event_deltas` (repeated, `[]`-suffixed or
    /// comma-separated); types it does not know are left out (previews are best-effort).
    pub(super) fn of(params: &[(String, String)]) -> Previews {
        let mut previews = Previews::default();
        let asked = (params.iter())
            .filter(|(k, _)| k == "event_deltas")
            .flat_map(|(_, v)| v.split(','));
        for kind in asked {
            match kind.trim() {
                "agent.message" => previews.message = true,
                "agent.thinking" => previews.thinking = true,
                _ => {}
            }
        }
        previews
    }
}

/// A turn's progress as its CLI streams it (not kept in the store: a turn the gateway's end
/// cuts short is not continued).
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// Text of the model message streaming, not logged yet.
    pub(super) said: String,
    /// The id the `agent.message` of that text will carry, once it has a preview.
    pub(super) said_id: Option<String>,
    /// Whether the message streaming has its `agent.thinking` logged.
    pub(super) thought: bool,
    /// The agent's tool calls: the CLI's tool_use id → the event's id and the tool.
    pub(super) calls: BTreeMap<String, (String, ToolName)>,
    /// Calls waiting for the user's `user.tool_confirmation`.
    pub(super) confirming: Vec<Confirming>,
    /// The model request whose `span.model_request_start` is logged and its end not yet.
    pub(super) span: Option<Span>,
}

/// A model request of a turn: its `span.model_request_start` event, its message (once it
/// streams) and the usage reported so far.
#[derive(Debug)]
pub(super) struct Span {
    pub(super) start: String,
    pub(super) message: Option<String>,
    pub(super) usage: Map<String, Value>,
}

/// A call of the agent's tools waiting for the user's confirmation: the CLI's permission
/// request.
#[derive(Debug)]
pub(super) struct Confirming {
    /// The call's event (`agent.tool_use` or `agent.mcp_tool_use`).
    pub(super) event: String,
    /// The CLI and its control request.
    pub(super) cli: SessionId,
    pub(super) request_id: String,
    /// When it is denied for want of an answer.
    pub(super) deadline: Timestamp,
}

impl AgentSessions {
    /// The earliest time a session's turn is due again, or a confirmation it waits for is
    /// given up.
    pub(in crate::gateway::engine) fn next_retry(&self) -> Option<Timestamp> {
        let confirms =
            (self.by_id.values()).flat_map(|s| s.progress.confirming.iter().map(|c| c.deadline));
        (self.by_id.values().filter_map(|s| s.retry_at))
            .chain(confirms)
            .min()
    }

    /// Whether a session waits for its user to confirm a call of the CLI `cli`.
    pub(in crate::gateway::engine) fn confirming(&self, cli: SessionId) -> bool {
        (self.by_id.values()).any(|s| s.progress.confirming.iter().any(|c| c.cli == cli))
    }

    /// Whether `request` is a session's turn (the gateway's own request).
    pub(in crate::gateway::engine) fn is_turn(&self, request: RequestId) -> bool {
        self.turns.contains_key(&request)
    }
}

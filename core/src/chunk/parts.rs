//! The types chunks are made of: tool statuses, wait states, elicitation details, a frame's
//! fields.

use serde::Serialize;

use crate::json::Json;

/// What an [`Chunk::ElicitationRequest`](crate::Chunk::ElicitationRequest) asks for and how to
/// show it.
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(feature = "deserialize", derive(serde::Deserialize))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ElicitationDetails {
    /// `form` (answer with content matching `requested_schema`) or `url` (the user opens
    /// `url`).
    #[cfg_attr(test, ts(type = r#""form" | "url" | (string & {}) | null"#))]
    pub mode: Option<String>,
    /// The URL to open (`url` mode).
    pub url: Option<String>,
    /// The server's id for the elicitation.
    pub elicitation_id: Option<String>,
    /// The JSON Schema of the content asked for (`form` mode).
    #[cfg_attr(
        feature = "deserialize",
        serde(default, deserialize_with = "crate::json::buffered")
    )]
    pub requested_schema: Json,
    /// A title to show, from the server's permission display.
    pub title: Option<String>,
    /// A short server or tool label to show.
    pub display_name: Option<String>,
    /// A description to show.
    pub description: Option<String>,
}

/// A tool call's status.
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(feature = "deserialize", derive(serde::Deserialize))]
#[cfg_attr(test, ts(rename = "ToolStatusName"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The call is known; it has not started.
    Pending,
    /// The CLI asks the host for permission.
    AwaitingApproval,
    /// The tool runs.
    Running,
    /// Final: the tool returned a result.
    Success,
    /// Final: the tool failed or was refused.
    Error,
    /// Final: the call ended without a result (turn ended, process exited).
    Cancelled,
}

impl ToolStatus {
    /// Whether no further change can happen.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            ToolStatus::Success | ToolStatus::Error | ToolStatus::Cancelled
        )
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Pending => "pending",
            ToolStatus::AwaitingApproval => "awaiting_approval",
            ToolStatus::Running => "running",
            ToolStatus::Success => "success",
            ToolStatus::Error => "error",
            ToolStatus::Cancelled => "cancelled",
        }
    }
}

/// Why a tool's status changed.
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(feature = "deserialize", derive(serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusReason {
    /// A permission was denied.
    Denied,
    /// The CLI cancelled the permission request.
    Cancelled,
    /// A permission request timed out.
    Timeout,
    /// The turn was interrupted.
    Interrupted,
    /// The turn ended before the tool had a result.
    TurnEnded,
    /// The CLI process ended before the tool had a result.
    ProcessExit,
}

/// The outcome of a permission request.
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(feature = "deserialize", derive(serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Behavior {
    /// The tool may run.
    Allow,
    /// The tool may not run.
    Deny,
}

/// Who settled a permission request.
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(feature = "deserialize", derive(serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolveReason {
    /// The host answered.
    Host,
    /// The deadline passed.
    Timeout,
    /// The CLI withdrew the request, or the tool got its result first.
    Cancelled,
    /// No handler was registered, and the session answered as the official SDKs do.
    Default,
}

/// Kinds of [`Chunk::Error`](crate::Chunk::Error).
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(feature = "deserialize", derive(serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// A line that is not JSON, or a JSON value without a usable `type`.
    MalformedLine,
    /// A message of a known type whose fields have the wrong shape.
    InvalidMessage,
    /// A line over the size limit; it was skipped.
    LineTooLong,
    /// A transcript line that is not in the transcript format.
    MalformedTranscriptLine,
    /// The process ended while a turn was running.
    ProcessExit,
    /// A streamed tool input that does not join into JSON.
    MalformedToolInput,
}

/// Is the CLI waiting for the embedder to deliver something a tool needs?
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(feature = "deserialize", derive(serde::Deserialize))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolWait {
    /// Whether the CLI is waiting for a tool.
    pub waiting: bool,
    /// The outstanding tools of the current turn: complete, without a result.
    pub tool_use_ids: Vec<String>,
    /// The pending requests the embedder must answer for an outstanding tool.
    pub blocked_on: Vec<BlockedOn>,
}

/// A pending request that holds up an outstanding tool.
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(feature = "deserialize", derive(serde::Deserialize))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockedOn {
    /// The control request id to answer.
    pub request_id: String,
    /// What kind of request it is.
    pub kind: BlockedKind,
    /// The tool it holds up.
    pub tool_use_id: String,
}

/// Kinds of [`BlockedOn`] requests.
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(feature = "deserialize", derive(serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockedKind {
    /// A `can_use_tool` permission request.
    Permission,
    /// An in-process MCP `tools/call`.
    McpToolCall,
    /// A pre-execution hook callback.
    Hook,
    /// An MCP server's elicitation, during its tool's call.
    Elicitation,
    /// A dialog for a tool call.
    Dialog,
}

/// The fields of a frame, in wire order, each in canonical form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields(pub Vec<(String, Json)>);

impl Fields {
    /// The value of a field.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// Reads a [`Json`] with [`crate::json::buffered`].
#[cfg(feature = "deserialize")]
struct BufferedJson;

#[cfg(feature = "deserialize")]
impl<'de> serde::de::DeserializeSeed<'de> for BufferedJson {
    type Value = Json;
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Json, D::Error> {
        crate::json::buffered(deserializer)
    }
}

#[cfg(feature = "deserialize")]
impl<'de> serde::Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the fields of a frame")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Fields, A::Error> {
                let mut fields = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value = map.next_value_seed(BufferedJson)?;
                    fields.push((key, value));
                }
                Ok(Fields(fields))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

impl Serialize for Fields {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

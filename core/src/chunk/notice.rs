//! Notices the CLI sends beside the conversation, each a chunk of its own: the session's title,
//! oversized instructions, missing attachments, slow permission checks, the asks a worker
//! inherited, a plugin's UI pushes, a prompt's lifecycle and the engine's own events.
//!
//! The wire frames use the chunks' field names; the session reads them field by field
//! (`session/notices.rs`), other fields stay in the line.

#[cfg(feature = "deserialize")]
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use super::Fields;
use crate::json::Json;

/// The session's name changed (`system/session_title_changed`).
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TitleChanged {
    /// The name now, cleaned by the CLI (one line, at most 200 code points).
    pub title: String,
    /// Who named it: `user` (a rename) or `other` (the CLI or a host), when said.
    #[cfg_attr(test, ts(type = r#""user" | "other" | (string & {}) | null"#))]
    pub given_by: Option<String>,
}

/// The instruction files in the session's prompt (CLAUDE.md files, rules and their imports)
/// are longer than the model's recommended limit (`system/instruction_size_warning`).
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstructionSizeWarning {
    /// Their combined length, in characters.
    #[cfg_attr(test, ts(type = "number"))]
    pub total_chars: u64,
    /// The recommended limit for that length on the turn's model.
    #[cfg_attr(test, ts(type = "number"))]
    pub total_limit_chars: u64,
    /// How many files.
    #[cfg_attr(test, ts(type = "number"))]
    pub file_count: u64,
    /// The longest file's length, when said.
    #[cfg_attr(test, ts(type = "number | null"))]
    pub largest_chars: Option<u64>,
}

/// Files a prompt's `file_attachments` named that the CLI could not attach
/// (`system/file_attachments_missing`).
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileAttachmentsMissing {
    /// The `uuid` of the prompt that named them.
    pub message_uuid: String,
    /// How many well-formed entries the prompt's `file_attachments` had.
    #[cfg_attr(test, ts(type = "number"))]
    pub sent_count: u64,
    /// The files missing, one entry per file.
    pub missing: Vec<MissingFile>,
}

/// One file of [`FileAttachmentsMissing`].
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MissingFile {
    /// The entry's `file_uuid`.
    pub file_uuid: String,
    /// Why it is missing (`no_space`, …).
    pub reason: String,
}

/// A tool call's permission check has been running for a while (`checking`, after about four
/// seconds) or is over (`done`) (`system/permission_check_status`).
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PermissionCheck {
    /// The tool call being checked.
    pub tool_use_id: String,
    /// The subagent that made the call, when one did.
    pub agent_id: Option<String>,
    /// `checking` or `done`.
    #[cfg_attr(test, ts(type = r#""checking" | "done" | (string & {})"#))]
    pub status: String,
}

/// A cloud worker taking over a session reports which of its predecessor's requests it keeps
/// answerable (`system/inherited_asks_settled`); any other request pending from before is void.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InheritedAsksSettled {
    /// The control request ids still open.
    pub kept_request_ids: Vec<String>,
}

/// A plugin's push to the host's UI (`system/ui_*`: a log line, a toast, a status line, a
/// notification, a redraw, …). Plain text from a plugin is data: show it as text, never as
/// markup.
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(feature = "deserialize", derive(Deserialize))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginUi {
    /// Which push: the frame's subtype without `ui_`.
    #[cfg_attr(
        test,
        ts(
            type = r#""log" | "toast" | "status" | "notify" | "notify_cancel" | "invalidate" | "panes" | "placed" | "scroll" | "focus""#
        )
    )]
    pub kind: String,
    /// The plugin's registry name, when the push names one.
    pub plugin: Option<String>,
    /// The plugin's text (`log`, `toast`, `status`, `notify`), when there is one.
    pub text: Option<String>,
    /// The frame's other fields (`timeout_ms`, `title`, `key`, `rows`, …), `uuid` and
    /// `session_id` among them.
    #[cfg_attr(test, ts(type = "Record<string, unknown>"))]
    pub fields: Fields,
}

/// Where a prompt sent with a `uuid` is (`command_lifecycle`).
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandLifecycle {
    /// The prompt's `uuid`.
    pub command_uuid: String,
    /// `queued`, `started`, `completed`, `cancelled`, `discarded` or `refused`.
    #[cfg_attr(
        test,
        ts(
            type = r#""queued" | "started" | "completed" | "cancelled" | "discarded" | "refused" | (string & {})"#
        )
    )]
    pub state: String,
    /// On `started` of a scheduled prompt: `loop_wakeup` or `schedule_wakeup`.
    pub wakeup_source: Option<String>,
    /// Beside `loop_wakeup`: the time the wakeup was set for (Unix milliseconds).
    #[serde(serialize_with = "crate::json::serialize_js_number_opt")]
    pub scheduled_for: Option<f64>,
}

/// One of the CLI engine's own events that ccwire names but does not model (`active_goal`,
/// `autocompact_state`, `tombstone`, …: [`CLI_EVENTS`](crate::wire::CLI_EVENTS)); the whole message.
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(feature = "deserialize", derive(Deserialize))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CliEvent {
    /// The message's `type`.
    pub event: String,
    /// The whole message.
    #[cfg_attr(
        feature = "deserialize",
        serde(default, deserialize_with = "crate::json::buffered")
    )]
    pub message: Json,
}

/// A frame's fields, read one at a time into a typed notice: one reader for every notice, on
/// `serde_json::Value` (no decoder per type in the engine's code, which the wasm module's size
/// pays for).
pub(crate) struct NoticeFields(pub(crate) Fields);

impl NoticeFields {
    /// A field's value, taken out; `None` when absent or `null`.
    pub(crate) fn take(&mut self, key: &str) -> Option<Value> {
        let at = (self.0).0.iter().position(|(k, _)| k == key)?;
        Some((self.0).0.remove(at).1.to_value()).filter(|v| !v.is_null())
    }

    fn str(&mut self, key: &str) -> Result<Option<String>, String> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("`{key}` must be a string")),
        }
    }

    fn u64(&mut self, key: &str) -> Result<Option<u64>, String> {
        match self.take(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("`{key}` must be a count")),
        }
    }

    fn f64(&mut self, key: &str) -> Result<Option<f64>, String> {
        match self.take(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| format!("`{key}` must be a number")),
        }
    }

    fn strings(&mut self, key: &str) -> Result<Option<Vec<String>>, String> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(format!("`{key}` must hold strings")),
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(_) => Err(format!("`{key}` must be a list")),
        }
    }

    /// A field the notice needs, read with `read` (`NoticeFields::str`, …).
    fn need<T>(
        &mut self,
        read: fn(&mut NoticeFields, &str) -> Result<Option<T>, String>,
        key: &str,
    ) -> Result<T, String> {
        read(self, key)?.ok_or_else(|| format!("missing field `{key}`"))
    }

    /// A string (or `null`) field, taken out; a value of another kind stays among the fields.
    pub(crate) fn take_str(&mut self, key: &str) -> Option<String> {
        let fields = &mut (self.0).0;
        let at = fields.iter().position(|(k, _)| k == key)?;
        match fields[at].1.to_value() {
            Value::String(s) => {
                fields.remove(at);
                Some(s)
            }
            Value::Null => {
                fields.remove(at);
                None
            }
            _ => None,
        }
    }
}

impl TitleChanged {
    /// Reads the notice from a frame's fields (or the chunk's).
    pub(crate) fn read(f: &mut NoticeFields) -> Result<TitleChanged, String> {
        Ok(TitleChanged {
            title: f.need(NoticeFields::str, "title")?,
            given_by: f.str("given_by")?,
        })
    }
}

impl InstructionSizeWarning {
    /// Reads the notice from a frame's fields (or the chunk's).
    pub(crate) fn read(f: &mut NoticeFields) -> Result<InstructionSizeWarning, String> {
        Ok(InstructionSizeWarning {
            total_chars: f.need(NoticeFields::u64, "total_chars")?,
            total_limit_chars: f.need(NoticeFields::u64, "total_limit_chars")?,
            file_count: f.need(NoticeFields::u64, "file_count")?,
            largest_chars: f.u64("largest_chars")?,
        })
    }
}

impl FileAttachmentsMissing {
    /// Reads the notice from a frame's fields (or the chunk's).
    pub(crate) fn read(f: &mut NoticeFields) -> Result<FileAttachmentsMissing, String> {
        let message_uuid = f.need(NoticeFields::str, "message_uuid")?;
        let sent_count = f.need(NoticeFields::u64, "sent_count")?;
        let Some(Value::Array(entries)) = f.take("missing") else {
            return Err("`missing` must be a list".to_owned());
        };
        let field = |entry: &Value, key: &str| match entry.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(format!("each of `missing` needs a string `{key}`")),
        };
        let missing = entries
            .iter()
            .map(|entry| {
                Ok(MissingFile {
                    file_uuid: field(entry, "file_uuid")?,
                    reason: field(entry, "reason")?,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(FileAttachmentsMissing {
            message_uuid,
            sent_count,
            missing,
        })
    }
}

impl PermissionCheck {
    /// Reads the notice from a frame's fields (or the chunk's).
    pub(crate) fn read(f: &mut NoticeFields) -> Result<PermissionCheck, String> {
        Ok(PermissionCheck {
            tool_use_id: f.need(NoticeFields::str, "tool_use_id")?,
            agent_id: f.str("agent_id")?,
            status: f.need(NoticeFields::str, "status")?,
        })
    }
}

impl InheritedAsksSettled {
    /// Reads the notice from a frame's fields (or the chunk's).
    pub(crate) fn read(f: &mut NoticeFields) -> Result<InheritedAsksSettled, String> {
        Ok(InheritedAsksSettled {
            kept_request_ids: f.need(NoticeFields::strings, "kept_request_ids")?,
        })
    }
}

impl CommandLifecycle {
    /// Reads the notice from a frame's fields (or the chunk's).
    pub(crate) fn read(f: &mut NoticeFields) -> Result<CommandLifecycle, String> {
        Ok(CommandLifecycle {
            command_uuid: f.need(NoticeFields::str, "command_uuid")?,
            state: f.need(NoticeFields::str, "state")?,
            wakeup_source: f.str("wakeup_source")?,
            scheduled_for: f.f64("scheduled_for")?,
        })
    }
}

/// Chunks read back go through the same readers as the wire: no decoder per type (the wasm
/// module's size pays for each).
#[cfg(feature = "deserialize")]
macro_rules! read_back {
    ($($name:ident),*) => {$(
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let fields = Fields::deserialize(deserializer)?;
                $name::read(&mut NoticeFields(fields)).map_err(serde::de::Error::custom)
            }
        }
    )*};
}

#[cfg(feature = "deserialize")]
read_back!(
    TitleChanged,
    InstructionSizeWarning,
    FileAttachmentsMissing,
    PermissionCheck,
    InheritedAsksSettled,
    CommandLifecycle
);

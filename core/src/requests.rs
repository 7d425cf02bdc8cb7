//! The control requests a host sends the CLI, typed: one variant per subtype of the Agent SDK's
//! control union that goes host → CLI (`initialize` has its own command,
//! [`Session::initialize`](crate::Session::initialize)). Send one with
//! [`Session::request`](crate::Session::request); the CLI's answer is a `control_result` chunk
//! with the same request id. [`Session::send_control`](crate::Session::send_control) still sends
//! any subtype, typed or not, for releases newer than this list.
//!
//! The fields are the wire's own (snake_case, or camelCase where the wire has it); optional
//! fields left `None` are not sent.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A control request from the host to the CLI. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "subtype", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum HostRequest {
    /// Interrupts the running turn.
    Interrupt {
        /// Also drop the prompts queued behind it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cancel_queued: Option<bool>,
    },
    /// Switches the permission mode (`default`, `acceptEdits`, `plan`, `bypassPermissions`, …).
    SetPermissionMode {
        /// The mode.
        mode: String,
    },
    /// Switches the model (`None`: the session's default).
    SetModel {
        /// The model.
        model: Option<String>,
    },
    /// Sets the thinking budget (`None`: the default).
    SetMaxThinkingTokens {
        /// The budget in tokens.
        max_thinking_tokens: Option<u64>,
        /// How thinking is shown: `summarized`, `omitted` or `highlights`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking_display: Option<String>,
    },
    /// Renames the session.
    RenameSession {
        /// The new title.
        title: String,
        /// Who renamed it: `remote` or `host`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
        /// The session to rename (this one by default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
    },
    /// Sets the session's color.
    SetColor {
        /// The color.
        color: String,
    },
    /// The MCP servers and their state.
    McpStatus {
        /// Ask the servers now rather than answer from what is known.
        #[serde(rename = "liveReply", default, skip_serializing_if = "Option::is_none")]
        live_reply: Option<bool>,
    },
    /// What fills the context window.
    GetContextUsage {
        /// `summary` or `full`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// The session's cost, as `/cost` prints it.
    GetSessionCost {},
    /// The models the CLI offers.
    ListModels {},
    /// The account's usage.
    GetUsage {
        /// Leave out the behavioural breakdown.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skip_behaviors: Option<bool>,
    },
    /// The CLI's version.
    GetBinaryVersion {},
    /// Calls an MCP tool directly, outside the model's turn.
    McpCall {
        /// The tool (`mcp__<server>__<tool>`).
        tool: String,
        /// Its arguments.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<Map<String, Value>>,
        /// When the call is no longer wanted (ISO 8601).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_at: Option<String>,
        /// How long to wait for the tool (ms).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        /// Keep the result out of the model's context.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result_not_for_model: Option<bool>,
        /// Apply the permission rules to the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        check_permissions: Option<bool>,
        /// Files handed to the tool (`[{name, lane_path}]`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input_files: Option<Value>,
        /// Files the tool writes (`[{name, lane_path, if_match?}]`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_files: Option<Value>,
        /// A tool result with `isError` comes back as a success carrying the result (its
        /// `content`, `isError`, `structuredContent`), not as an error with its text (the CLI
        /// says it can in `initialize`'s capabilities: `mcp_call_soft_error_result_v1`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        soft_error_result: Option<bool>,
    },
    /// File paths matching a query, as `@` completion offers them.
    FileSuggestions {
        /// The query.
        query: String,
    },
    /// Restores the files as they were before a user message.
    RewindFiles {
        /// The user message's uuid.
        user_message_id: String,
        /// Only say what would change.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dry_run: Option<bool>,
    },
    /// Withdraws a queued prompt.
    CancelAsyncMessage {
        /// The prompt's uuid.
        message_uuid: String,
    },
    /// Reads a file through the CLI.
    ReadFile {
        /// The path.
        path: String,
        /// Read at most this many bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_bytes: Option<u64>,
        /// `utf-8` or `base64`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encoding: Option<String>,
    },
    /// Tells the CLI a file was read (and when it changed), so edits need no fresh read.
    SeedReadState {
        /// The path.
        path: String,
        /// Its modification time (ms).
        mtime: f64,
    },
    /// Replaces the dynamically added MCP servers.
    McpSetServers {
        /// The servers by name (`{"type":"stdio","command":…}`, `http`, `sse`).
        servers: Map<String, Value>,
    },
    /// Adds a repository root.
    RegisterRepoRoot {
        /// The directory.
        directory: String,
        /// Reload its CLAUDE.md.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reload_claude_md: Option<bool>,
        /// Reload the plugins.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reload_plugins: Option<bool>,
        /// Reload the skills.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reload_skills: Option<bool>,
    },
    /// Reloads the plugins.
    ReloadPlugins {
        /// Wait rather than reload in a way that invalidates the prompt cache.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold_on_cache_impact: Option<bool>,
        /// Plugins to add (`[{type:"local", path}]`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        add_plugins: Option<Vec<Value>>,
        /// Refuse while a turn runs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refuse_if_busy: Option<bool>,
    },
    /// Reloads the skills.
    ReloadSkills {},
    /// Tells the CLI the user is typing a prompt (it may get ready for the next turn);
    /// answered with an empty success.
    PromptDraftActivity {},
    /// Reloads the output styles.
    ReloadOutputStyles {},
    /// Reconnects an MCP server.
    McpReconnect {
        /// The server.
        #[serde(rename = "serverName")]
        server_name: String,
    },
    /// Enables or disables an MCP server.
    McpToggle {
        /// The server.
        #[serde(rename = "serverName")]
        server_name: String,
        /// On or off.
        enabled: bool,
    },
    /// Says whether anyone watches the session's output.
    SetHasSubscribers {
        /// Whether anyone does.
        has_subscribers: Option<bool>,
    },
    /// Stops a background task.
    StopTask {
        /// The task.
        task_id: String,
    },
    /// The background tasks.
    BackgroundTasks {
        /// Only those of this tool call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_use_id: Option<String>,
    },
    /// A background task's output.
    GetTaskOutput {
        /// The task.
        task_id: String,
    },
    /// Applies settings for this session, as `--settings` would.
    ApplyFlagSettings {
        /// The settings.
        settings: Map<String, Value>,
    },
    /// The settings in effect and where each came from.
    GetSettings {},
    /// The hooks configured.
    GetHooksListing {},
    /// Writes settings to a settings file.
    UpdateSettings {
        /// `localSettings` or `userSettings`.
        source: String,
        /// The settings.
        settings: Map<String, Value>,
    },
    /// The permission rules in effect.
    ListPermissionRules {},
    /// Reads an MCP server's resource.
    McpReadResource {
        /// The server.
        #[serde(rename = "serverName")]
        server_name: String,
        /// The resource URI.
        uri: String,
    },
}

impl HostRequest {
    /// Every subtype this type models, in the order of its variants.
    pub const SUBTYPES: &'static [&'static str] = &[
        "interrupt",
        "set_permission_mode",
        "set_model",
        "set_max_thinking_tokens",
        "rename_session",
        "set_color",
        "mcp_status",
        "get_context_usage",
        "get_session_cost",
        "list_models",
        "get_usage",
        "get_binary_version",
        "mcp_call",
        "file_suggestions",
        "rewind_files",
        "cancel_async_message",
        "read_file",
        "seed_read_state",
        "mcp_set_servers",
        "register_repo_root",
        "reload_plugins",
        "reload_skills",
        "reload_output_styles",
        "mcp_reconnect",
        "mcp_toggle",
        "set_has_subscribers",
        "stop_task",
        "background_tasks",
        "get_task_output",
        "apply_flag_settings",
        "get_settings",
        "get_hooks_listing",
        "update_settings",
        "list_permission_rules",
        "mcp_read_resource",
        "prompt_draft_activity",
    ];

    /// The subtype and the other fields, as they go on the wire.
    pub fn into_parts(self) -> (String, Map<String, Value>) {
        let Value::Object(mut fields) = serde_json::to_value(self).expect("requests serialize")
        else {
            unreachable!("a tagged enum serializes to an object")
        };
        let subtype = match fields.remove("subtype") {
            Some(Value::String(subtype)) => subtype,
            _ => unreachable!("the tag is a string"),
        };
        (subtype, fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_subtype_is_listed_and_round_trips() {
        let samples = [
            json!({"subtype": "interrupt"}),
            json!({"subtype": "set_model", "model": null}),
            json!({"subtype": "mcp_toggle", "serverName": "notes", "enabled": false}),
            json!({"subtype": "get_context_usage"}),
            json!({"subtype": "read_file", "path": "/a", "max_bytes": 10}),
            json!({"subtype": "mcp_call", "tool": "mcp__notes__add", "soft_error_result": true}),
            json!({"subtype": "prompt_draft_activity"}),
        ];
        for sample in samples {
            let request: HostRequest = serde_json::from_value(sample.clone()).unwrap();
            assert_eq!(serde_json::to_value(&request).unwrap(), sample);
            let (subtype, _) = request.into_parts();
            assert!(HostRequest::SUBTYPES.contains(&subtype.as_str()));
        }
        let unknown = serde_json::from_value::<HostRequest>(json!({"subtype": "nope"}));
        assert!(unknown.is_err());
        let extra = serde_json::from_value::<HostRequest>(json!({"subtype": "mcp_status", "x": 1}));
        assert!(
            extra.is_err(),
            "a field the subtype does not have is refused"
        );
    }
}

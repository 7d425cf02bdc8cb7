//! A history the gateway writes as the session transcript a new CLI resumes: the client's
//! messages as the CLI's own entries (text, images, tool calls named as the CLI offers the
//! client's tools, their results, signed thinking), the context the CLI records on a first
//! turn, and the system prompt the conversation goes on with.

use serde_json::{json, Value};

use crate::conversation::{mcp_tool_name, Block, Message, Role};

/// What a session transcript the gateway writes needs besides the messages
/// ([`transcript_lines`]).
#[derive(Debug, Clone, Copy)]
pub struct TranscriptContext<'a> {
    /// The CLI session's id (a UUID).
    pub session_id: &'a str,
    /// The CLI's working directory.
    pub cwd: &'a str,
    /// The model named on assistant messages.
    pub model: &'a str,
    /// When the messages were written (Unix ms).
    pub wall_ms: u64,
    /// The MCP server the client's tools are offered by: a tool call of the history is the
    /// call of that server's tool of the same name.
    pub server: &'a str,
    /// The context attachments to record after the first message, with their ids.
    pub first_turn: &'a [(String, Value)],
}

/// A history the gateway writes as the transcript a new CLI resumes
/// ([`ResumeSpec::written`](crate::gateway::ResumeSpec::written)): the messages and what the
/// transcript's entries say of them, taken while the engine decides; its lines are made where
/// nothing waits for them ([`lines`](Self::lines)).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WrittenHistory {
    /// The messages, as the request gave them.
    pub messages: Vec<Message>,
    /// The signed thinking the client sent back, by message index.
    pub thinking: Vec<(usize, Vec<Value>)>,
    /// The CLI session's id.
    pub session_id: String,
    /// The CLI's working directory.
    pub cwd: String,
    /// The model named on assistant messages.
    pub model: String,
    /// When the messages were written (Unix ms).
    pub wall_ms: u64,
    /// The MCP server the client's tools are offered by.
    pub server: String,
    /// Each entry's id: the messages' by index, then the context attachments', then the
    /// system prompt's.
    pub uuids: Vec<String>,
    /// The context a CLI records after a conversation's first message — its environment,
    /// model, tool, agent and skill listings, date — as a CLI of the same key and model
    /// recorded it: written there, the resuming CLI shows it to the model where a CLI that
    /// ran the conversation from its start did, instead of after the last message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<Value>,
    /// The system prompt the conversation goes on with, recorded after the messages as the
    /// CLI records its own (`None`: Claude Code's own, nothing recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
}

impl Eq for WrittenHistory {}

impl WrittenHistory {
    /// The transcript's lines.
    pub fn lines(&self) -> Vec<crate::Json> {
        let n = self.messages.len();
        let first_turn: Vec<(String, Value)> = (self.context.iter().enumerate())
            .filter_map(|(i, a)| Some((self.uuids.get(n + i)?.clone(), a.clone())))
            .collect();
        let context = TranscriptContext {
            session_id: &self.session_id,
            cwd: &self.cwd,
            model: &self.model,
            wall_ms: self.wall_ms,
            server: &self.server,
            first_turn: &first_turn,
        };
        let mut lines = transcript_lines(&self.messages, &self.thinking, &context, |i| {
            self.uuids[i].clone()
        });
        // A CLI resumes with the system prompt its transcript recorded last.
        let last = match n {
            1 => first_turn.last().map(|(id, _)| id).or(self.uuids.first()),
            _ => n.checked_sub(1).and_then(|i| self.uuids.get(i)),
        };
        if let (Some(system), Some(uuid)) =
            (&self.system_prompt, self.uuids.get(n + first_turn.len()))
        {
            let snapshot = json!({"type": "prompt_snapshot", "systemPrompt": [system]});
            let at = self.wall_ms.saturating_add(n as u64);
            lines.push(attachment_line(&context, uuid, last.cloned(), snapshot, at));
        }
        lines
    }
}

/// An entry of the transcript as a line: its `kind` (`user`, `assistant`, `attachment`) with
/// its body under `field`, chained to `parent`.
fn entry_line(
    context: &TranscriptContext<'_>,
    (kind, field, body): (&str, &str, Value),
    uuid: &str,
    parent: Option<String>,
    at_ms: u64,
) -> crate::Json {
    // Built by moving each part in (`json!` would copy it): a history can be tens of
    // megabytes.
    let entry = object([
        ("parentUuid", parent.map_or(Value::Null, Value::String)),
        ("isSidechain", false.into()),
        ("type", kind.into()),
        (field, body),
        ("uuid", uuid.into()),
        ("timestamp", iso_time(at_ms).into()),
        ("userType", "external".into()),
        ("entrypoint", "sdk-cli".into()),
        ("cwd", context.cwd.into()),
        ("sessionId", context.session_id.into()),
        ("version", crate::args::TESTED_CLI_VERSION.into()),
    ]);
    let raw = serde_json::value::to_raw_value(&entry).expect("a Value always serializes");
    crate::Json::canonical(&raw)
}

/// An `attachment` entry of the transcript, as a line.
fn attachment_line(
    context: &TranscriptContext<'_>,
    uuid: &str,
    parent: Option<String>,
    attachment: Value,
    at_ms: u64,
) -> crate::Json {
    let body = ("attachment", "attachment", attachment);
    entry_line(context, body, uuid, parent, at_ms)
}

/// A history written as the session transcript the CLI keeps (one JSON object per line, each
/// message an entry chained to the one before by `parentUuid`), so a CLI started with
/// `--resume` goes on from it and the model sees the messages as they were: text, images, tool
/// calls (named as the CLI offers the client's tools), their results, and the model's signed
/// thinking the client sent back (`thinking`, by message index: it opens its message). `uuid`
/// gives each entry's id from its index.
pub fn transcript_lines(
    messages: &[Message],
    thinking: &[(usize, Vec<Value>)],
    context: &TranscriptContext<'_>,
    uuid: impl Fn(usize) -> String,
) -> Vec<crate::Json> {
    let mut lines = Vec::with_capacity(messages.len());
    let mut parent: Option<String> = None;
    for (i, message) in messages.iter().enumerate() {
        let prompt = i == 0 && message.role == Role::User;
        let thought = thinking
            .iter()
            .filter(|(at, _)| *at == i && message.role == Role::Assistant)
            .flat_map(|(_, blocks)| blocks.iter().cloned());
        let content: Vec<Value> = thought
            .chain(
                message
                    .content
                    .iter()
                    .map(|block| transcript_block(block, context.server)),
            )
            .collect();
        let id = uuid(i);
        let (kind, message) = match message.role {
            Role::User => (
                "user",
                object([("role", "user".into()), ("content", Value::Array(content))]),
            ),
            Role::Assistant => {
                let calls = content.iter().any(|b| b["type"] == "tool_use");
                let message = object([
                    ("id", format!("msg_{}", id.replace('-', "")).into()),
                    ("type", "message".into()),
                    ("role", "assistant".into()),
                    ("model", context.model.into()),
                    ("content", Value::Array(content)),
                    (
                        "stop_reason",
                        if calls { "tool_use" } else { "end_turn" }.into(),
                    ),
                    ("stop_sequence", Value::Null),
                    ("usage", json!({"input_tokens": 0, "output_tokens": 0})),
                ]);
                ("assistant", message)
            }
        };
        let at = context.wall_ms.saturating_add(i as u64);
        let body = (kind, "message", message);
        lines.push(entry_line(context, body, &id, parent.take(), at));
        parent = Some(id);
        // What the CLI records of its context after the first prompt.
        if prompt {
            for (id, attachment) in context.first_turn {
                let at = context.wall_ms;
                lines.push(attachment_line(
                    context,
                    id,
                    parent.take(),
                    attachment.clone(),
                    at,
                ));
                parent = Some(id.clone());
            }
        }
    }
    lines
}

/// A JSON object of `fields`, each value moved in.
fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// A block as a transcript holds it.
fn transcript_block(block: &Block, server: &str) -> Value {
    match block {
        Block::Text { text } => json!({"type": "text", "text": text}),
        Block::Image { source } => json!({"type": "image", "source": source}),
        Block::ToolUse { id, name, input } => json!({
            "type": "tool_use", "id": id, "name": mcp_tool_name(server, name), "input": input,
        }),
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let content: Vec<Value> = content
                .iter()
                .map(|b| transcript_block(b, server))
                .collect();
            let mut result =
                json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content});
            if *is_error {
                result["is_error"] = json!(true);
            }
            result
        }
        Block::Other { block } => block.clone(),
    }
}

/// Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ` (RFC 3339, UTC).
pub(crate) fn iso_time(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod transcript_tests {
    use super::*;

    #[test]
    fn times_are_iso_8601() {
        assert_eq!(iso_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_time(1_795_636_274_864), "2026-11-25T19:51:14.864Z");
        assert_eq!(iso_time(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn a_history_becomes_chained_entries_with_the_client_s_tools_named_as_the_cli_offers_them() {
        let messages = vec![
            Message {
                role: Role::User,
                content: vec![Block::Text { text: "Hi".into() }],
            },
            Message {
                role: Role::Assistant,
                content: vec![Block::ToolUse {
                    id: "toolu_1".into(),
                    name: "read file".into(),
                    input: json!({"path": "a"}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    tool_use_id: "toolu_1".into(),
                    content: vec![Block::Text { text: "x".into() }],
                    is_error: true,
                }],
            },
        ];
        let context = TranscriptContext {
            session_id: "s",
            cwd: "/w",
            model: "m",
            wall_ms: 0,
            server: "client",
            first_turn: &[],
        };
        let thinking = vec![(
            1,
            vec![json!({"type": "thinking", "thinking": "Hm.", "signature": "sig"})],
        )];
        let lines = transcript_lines(&messages, &thinking, &context, |i| format!("u{i}"));
        let entries: Vec<Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l.get()).unwrap())
            .collect();
        assert_eq!(entries[0]["parentUuid"], Value::Null);
        assert_eq!(entries[1]["parentUuid"], "u0");
        assert_eq!(entries[2]["parentUuid"], "u1");
        assert_eq!(entries[1]["type"], "assistant");
        assert_eq!(entries[1]["message"]["stop_reason"], "tool_use");
        assert_eq!(
            entries[1]["message"]["content"][0],
            json!({"type": "thinking", "thinking": "Hm.", "signature": "sig"}),
            "the signed thinking opens its message"
        );
        assert_eq!(
            entries[1]["message"]["content"][1]["name"],
            mcp_tool_name("client", "read file")
        );
        assert_eq!(
            entries[2]["message"]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
                   "content": [{"type": "text", "text": "x"}]})
        );
        assert_eq!(entries[2]["sessionId"], "s");
    }
}

#[cfg(test)]
mod context_tests {
    use super::*;

    /// The context learned from a CLI's first turn goes after the first prompt, chained, and
    /// the system prompt's entry after the last message.
    #[test]
    fn the_context_follows_the_first_prompt_and_the_system_prompt_the_last_message() {
        let text = |t: &str| vec![Block::Text { text: t.into() }];
        let written = WrittenHistory {
            messages: vec![
                Message {
                    role: Role::User,
                    content: text("one"),
                },
                Message {
                    role: Role::Assistant,
                    content: text("two"),
                },
                Message {
                    role: Role::User,
                    content: text("three"),
                },
            ],
            thinking: Vec::new(),
            session_id: "s".into(),
            cwd: "/w".into(),
            model: "m".into(),
            wall_ms: 0,
            server: "client".into(),
            uuids: (0..6).map(|i| format!("u{i}")).collect(),
            system_prompt: Some("Be brief.".into()),
            context: vec![
                json!({"type": "environment"}),
                json!({"type": "date", "date": "d"}),
            ],
        };
        let entries: Vec<Value> = (written.lines().iter())
            .map(|l| serde_json::from_str(l.get()).unwrap())
            .collect();
        let chain: Vec<(&str, &str, &Value)> = (entries.iter())
            .map(|e| {
                (
                    e["type"].as_str().unwrap(),
                    e["uuid"].as_str().unwrap(),
                    &e["parentUuid"],
                )
            })
            .collect();
        assert_eq!(
            chain,
            [
                ("user", "u0", &Value::Null),
                ("attachment", "u3", &json!("u0")),
                ("attachment", "u4", &json!("u3")),
                ("assistant", "u1", &json!("u4")),
                ("user", "u2", &json!("u1")),
                ("attachment", "u5", &json!("u2")),
            ]
        );
        assert_eq!(entries[2]["attachment"]["date"], "d");
        assert_eq!(entries[5]["attachment"]["type"], "prompt_snapshot");
    }
}

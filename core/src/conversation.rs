//! The canonical form of a conversation, its history hash, and the tool bookkeeping the gateway
//! needs (docs/GATEWAY.md).
//!
//! Clients send the whole history with every request and no session id. The gateway finds the
//! live CLI session a request continues by hashing the history up to the last assistant message.
//! For that to work the hash must not change when a client rewrites what it got back: string
//! content is one text block, adjacent text blocks are one, empty text blocks, `cache_control`,
//! `citations` and thinking blocks (with their signatures) are gone, object key order does not
//! matter (objects are hashed with their keys sorted), and OpenAI's `arguments` string is the
//! same as the object it encodes. The OpenAI and Anthropic shapes of one conversation have one
//! canonical form.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The client.
    User,
    /// The model.
    Assistant,
}

/// A content block in canonical form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// `{"type":"base64","media_type","data"}` or `{"type":"url","url"}`.
        #[serde(serialize_with = "crate::json::serialize_sorted")]
        source: Value,
    },
    /// A tool call by the model.
    ToolUse {
        /// The tool_use id.
        id: String,
        /// The tool name as the client knows it.
        name: String,
        /// The input object.
        #[serde(serialize_with = "crate::json::serialize_sorted")]
        input: Value,
    },
    /// The client's result for a tool call.
    ToolResult {
        /// The tool_use id it answers.
        tool_use_id: String,
        /// Text and image blocks.
        content: Vec<Block>,
        /// Whether the tool failed.
        is_error: bool,
    },
    /// Any other block, kept as sent (minus `cache_control` and `citations`).
    Other {
        /// The block.
        #[serde(serialize_with = "crate::json::serialize_sorted")]
        block: Value,
    },
}

/// A message in canonical form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its blocks.
    pub content: Vec<Block>,
}

/// A tool the client defines.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its input JSON Schema.
    #[serde(serialize_with = "crate::json::serialize_sorted")]
    pub input_schema: Value,
}

/// A request's conversation in canonical form.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conversation {
    /// The system prompt, when one was given.
    pub system: Option<String>,
    /// The messages, adjacent messages of one role merged.
    pub messages: Vec<Message>,
    /// The tools the client defines.
    pub tools: Vec<ToolSpec>,
    /// The model's thinking blocks the client sent back with their signatures (`thinking`,
    /// `redacted_thinking`), by the index of the assistant message they open. Not part of the
    /// canonical form (clients drop or rewrite them; the hash ignores them): kept to write the
    /// history as a transcript the model reads them in again.
    pub thinking: Vec<(usize, Vec<Value>)>,
}

impl Conversation {
    /// Appends blocks as a message of `role`, merging with a previous message of the same role
    /// and adjacent text blocks.
    pub fn push(&mut self, role: Role, blocks: Vec<Block>) {
        if self.messages.last().is_none_or(|m| m.role != role) {
            self.messages.push(Message {
                role,
                content: Vec::new(),
            });
        }
        let content = &mut self.messages.last_mut().expect("pushed above").content;
        for block in blocks {
            push_block(content, block);
        }
    }

    /// The index after the last assistant message: `messages[..n]` is the history a previous
    /// response produced, `messages[n..]` is what this request adds.
    pub fn history_len(&self) -> usize {
        self.messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
            .map_or(0, |i| i + 1)
    }

    /// The messages this request adds after the last assistant message.
    pub fn new_messages(&self) -> &[Message] {
        &self.messages[self.history_len()..]
    }

    /// The hash of the history (up to the last assistant message), namespaced by tenant.
    /// `None` when there is no assistant message yet.
    pub fn history_hash(&self, tenant: &str) -> Option<String> {
        let n = self.history_len();
        (n > 0).then(|| history_hash(tenant, &self.messages[..n]))
    }

    /// The signature of the tool set: equal for the same tools in any order.
    pub fn tool_signature(&self) -> String {
        let mut tools: Vec<&ToolSpec> = self.tools.iter().collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let mut sha = Sha256::new();
        serde_json::to_writer(ShaWriter(&mut sha), &tools).expect("tools serialize");
        hex(&sha.finalize())
    }
}

/// Hashes what is written into it (a large value is hashed as it is serialized, never held
/// whole).
pub(crate) struct ShaWriter<'a>(pub(crate) &'a mut Sha256);

impl std::io::Write for ShaWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        sha2::Digest::update(self.0, bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Adds a block in canonical form: empty text dropped, adjacent text joined.
pub fn push_block(content: &mut Vec<Block>, block: Block) {
    if let Block::Text { text } = &block {
        if text.is_empty() {
            return;
        }
        if let Some(Block::Text { text: prev }) = content.last_mut() {
            prev.push_str(text);
            return;
        }
    }
    content.push(block);
}

/// SHA-256 (hex) of the canonical JSON of `messages`, namespaced by `tenant`.
pub fn history_hash(tenant: &str, messages: &[Message]) -> String {
    let mut hasher = HistoryHasher::new(tenant);
    hasher.extend(messages);
    hasher.finish()
}

/// [`history_hash`] computed a message at a time: the hash of a history and of that history
/// with one more message share the work of the common part.
#[derive(Debug, Clone)]
pub struct HistoryHasher {
    sha: Sha256,
    empty: bool,
}

impl HistoryHasher {
    /// An empty history of `tenant`.
    pub fn new(tenant: &str) -> HistoryHasher {
        let mut sha = Sha256::new();
        sha.update(b"ccwire-history-v1\0");
        sha.update(tenant.as_bytes());
        sha.update(b"\0");
        HistoryHasher { sha, empty: true }
    }

    /// Adds messages at the end of the history.
    pub fn extend(&mut self, messages: &[Message]) {
        // The bytes of `serde_json::to_vec(messages)`, written a message at a time. serde_json
        // maps are ordered by key, so equal values serialize to equal bytes; they go straight
        // into the hash, with no copy of the history.
        for message in messages {
            self.sha.update(if self.empty { b"[" } else { b"," });
            self.empty = false;
            serde_json::to_writer(HashWriter(&mut self.sha), message).expect("messages serialize");
        }
    }

    /// The hash of the history so far.
    pub fn finish(&self) -> String {
        let mut sha = self.sha.clone();
        sha.update(if self.empty { &b"[]"[..] } else { &b"]"[..] });
        hex(&sha.finalize())
    }
}

/// Feeds what is written into a hash.
struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// SHA-256 of `key` and then of each of `parts`, each after its length: the ids ccwire derives
/// from a host's key.
pub(crate) fn keyed_hash(key: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let mut sha = Sha256::new();
    sha.update(key);
    for part in parts {
        sha.update((part.len() as u64).to_le_bytes());
        sha.update(part);
    }
    sha.finalize().into()
}

/// A UUID made of [`keyed_hash`]: version 4, variant 1, the form the CLI takes for
/// `--session-id`.
pub(crate) fn keyed_uuid(key: &[u8; 32], parts: &[&[u8]]) -> String {
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&keyed_hash(key, parts)[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = hex(&bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Removes the fields clients add or drop on the way back (`cache_control`, `citations`).
pub(crate) fn strip_volatile(mut block: Value) -> Value {
    if let Some(map) = block.as_object_mut() {
        map.remove("cache_control");
        map.remove("citations");
    }
    block
}

/// The name the CLI shows the model for a client tool: `mcp__<server>__<name>`, with characters
/// outside `[A-Za-z0-9_-]` replaced by `_` (docs/HOLD.md, "Names, schemas and permissions").
pub fn mcp_tool_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("mcp__{}__{}", clean(server), clean(tool))
}

/// Whether a tool runs inside the CLI or at the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    /// A built-in CLI tool the operator enabled: the CLI runs it.
    Internal,
    /// A tool the client defines and runs: held open until the client's result arrives.
    External,
}

/// Classifies a requested tool: built-in tools the operator enabled run in the CLI, everything
/// else is the client's.
pub fn classify_tool(name: &str, enabled_builtins: &[String]) -> ToolClass {
    if enabled_builtins.iter().any(|b| b == name) {
        ToolClass::Internal
    } else {
        ToolClass::External
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_names_replace_characters_outside_the_allowed_set() {
        assert_eq!(
            mcp_tool_name("client", "get.weather-v2"),
            "mcp__client__get_weather-v2"
        );
        assert_eq!(mcp_tool_name("client", "lookup"), "mcp__client__lookup");
    }

    #[test]
    fn adjacent_text_merges_and_empty_text_drops() {
        let mut c = Conversation::default();
        c.push(Role::User, vec![Block::Text { text: "a".into() }]);
        c.push(
            Role::User,
            vec![
                Block::Text {
                    text: String::new(),
                },
                Block::Text { text: "b".into() },
            ],
        );
        assert_eq!(c.messages.len(), 1);
        assert_eq!(
            c.messages[0].content,
            vec![Block::Text { text: "ab".into() }]
        );
    }

    #[test]
    fn tenants_namespace_the_hash() {
        let mut c = Conversation::default();
        c.push(Role::User, vec![Block::Text { text: "hi".into() }]);
        c.push(
            Role::Assistant,
            vec![Block::Text {
                text: "hello".into(),
            }],
        );
        assert_ne!(c.history_hash("key-a"), c.history_hash("key-b"));
        assert_eq!(c.history_hash("key-a"), c.history_hash("key-a"));
    }

    #[test]
    fn the_hash_is_sha256_of_the_canonical_json_however_it_is_fed() {
        let messages = vec![
            Message {
                role: Role::User,
                content: vec![Block::Text { text: "hi".into() }],
            },
            Message {
                role: Role::Assistant,
                content: vec![Block::ToolUse {
                    id: "a".into(),
                    name: "lookup".into(),
                    input: serde_json::json!({"q": "x", "b": [1, 2]}),
                }],
            },
        ];
        let direct = |messages: &[Message]| {
            let mut sha = Sha256::new();
            sha.update(b"ccwire-history-v1\0t\0");
            sha.update(serde_json::to_vec(messages).unwrap());
            hex(&sha.finalize())
        };
        assert_eq!(history_hash("t", &messages), direct(&messages));
        assert_eq!(history_hash("t", &[]), direct(&[]));
        let mut hasher = HistoryHasher::new("t");
        hasher.extend(&messages[..1]);
        assert_eq!(hasher.finish(), direct(&messages[..1]));
        hasher.extend(&messages[1..]);
        assert_eq!(hasher.finish(), direct(&messages));
    }

    #[test]
    fn no_assistant_message_means_no_history() {
        let mut c = Conversation::default();
        c.push(Role::User, vec![Block::Text { text: "hi".into() }]);
        assert_eq!(c.history_hash("t"), None);
        assert_eq!(c.new_messages().len(), 1);
    }
}

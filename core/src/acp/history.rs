//! A session's history as the editor is shown it again on `session/load`: the CLI's own
//! transcript of the session (`<config dir>/projects/<work directory>/<session id>.jsonl`, what
//! `--resume` reads) as the `session/update`s the editor saw while it ran; and what
//! `session/list` shows of a transcript.

use std::collections::BTreeMap;

use serde_json::Value;

use super::schema::v1::{ContentBlock, ContentChunk, ImageContent, SessionUpdate};
use super::tools;

/// The updates that show the conversation of a CLI transcript: the user's prompts, the
/// answers and thoughts, each tool call with its result and the plan. Entries the CLI keeps for
/// itself (meta messages, a subagent's side chain, compaction summaries, the output of local
/// commands, interruption markers) are not shown; lines that are not JSON (a line the CLI was
/// writing when it stopped) are passed over.
pub(super) fn replay(transcript: &[u8]) -> Vec<SessionUpdate> {
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut updates = Vec::new();
    for line in transcript.split(|b| *b == b'\n') {
        let Ok(entry) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let flag = |key: &str| entry.get(key).and_then(Value::as_bool) == Some(true);
        if flag("isMeta") || flag("isSidechain") || flag("isCompactSummary") {
            continue;
        }
        let content = entry.pointer("/message/content").unwrap_or(&Value::Null);
        let blocks: Vec<Value> = match content {
            Value::String(text) => vec![serde_json::json!({"type": "text", "text": text})],
            Value::Array(blocks) => blocks.clone(),
            _ => continue,
        };
        match entry.get("type").and_then(Value::as_str) {
            Some("user") => {
                for block in &blocks {
                    user_block(block, &names, &mut updates);
                }
            }
            Some("assistant") => {
                for block in &blocks {
                    assistant_block(block, &mut names, &mut updates);
                }
            }
            _ => {}
        }
    }
    updates
}

fn user_block(block: &Value, names: &BTreeMap<String, String>, updates: &mut Vec<SessionUpdate>) {
    let text = |key: &str| block.get(key).and_then(Value::as_str);
    match text("type") {
        Some("text") => {
            if let Some(said) = text("text").and_then(prompt_text) {
                updates.push(SessionUpdate::UserMessageChunk(ContentChunk::new(
                    ContentBlock::from(said),
                )));
            }
        }
        Some("image") => {
            let source = |key: &str| block.pointer(&format!("/source/{key}"))?.as_str();
            if let (Some(data), Some(mime)) = (source("data"), source("media_type")) {
                updates.push(SessionUpdate::UserMessageChunk(ContentChunk::new(
                    ContentBlock::Image(ImageContent::new(data, mime)),
                )));
            }
        }
        Some("tool_result") => {
            let id = text("tool_use_id").unwrap_or_default();
            let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
            let content = block.get("content").unwrap_or(&Value::Null);
            if let Some(name) = names.get(id) {
                // A command that ran in the editor's terminal: the terminal is gone, its output
                // is shown as text.
                let name = if name == "mcp__acp__Bash" {
                    "Bash"
                } else {
                    name
                };
                updates.extend(tools::result(id, name, content, is_error));
            }
        }
        _ => {}
    }
}

fn assistant_block(
    block: &Value,
    names: &mut BTreeMap<String, String>,
    updates: &mut Vec<SessionUpdate>,
) {
    let text = |key: &str| block.get(key).and_then(Value::as_str);
    match text("type") {
        Some("text") => {
            if let Some(said) = text("text").filter(|t| !t.is_empty()) {
                updates.push(SessionUpdate::AgentMessageChunk(ContentChunk::new(
                    ContentBlock::from(said.to_owned()),
                )));
            }
        }
        Some("thinking") => {
            if let Some(thought) = text("thinking").filter(|t| !t.is_empty()) {
                updates.push(SessionUpdate::AgentThoughtChunk(ContentChunk::new(
                    ContentBlock::from(thought.to_owned()),
                )));
            }
        }
        Some("tool_use") => {
            let (Some(id), Some(name)) = (text("id"), text("name")) else {
                return;
            };
            let input = block.get("input").unwrap_or(&Value::Null);
            names.insert(id.to_owned(), name.to_owned());
            updates.extend(tools::call(id, name, input));
        }
        _ => {}
    }
}

/// What a session list shows of a transcript, from its first lines (`head`): the work
/// directory the CLI recorded, and the first prompt as the title (at most 100 characters).
/// `None` where the lines name no work directory.
pub(super) fn about(head: &[u8]) -> Option<(String, Option<String>)> {
    let mut cwd = None;
    let mut title = None;
    for line in head.split(|b| *b == b'\n') {
        let Ok(entry) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if cwd.is_none() {
            cwd = entry.get("cwd").and_then(Value::as_str).map(str::to_owned);
        }
        let flag = |key: &str| entry.get(key).and_then(Value::as_bool) == Some(true);
        if title.is_none()
            && entry.get("type").and_then(Value::as_str) == Some("user")
            && !flag("isMeta")
            && !flag("isSidechain")
        {
            let content = entry.pointer("/message/content");
            let first = match content {
                Some(Value::String(text)) => prompt_text(text),
                Some(Value::Array(blocks)) => (blocks.iter())
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .find_map(|b| prompt_text(b.get("text")?.as_str()?)),
                _ => None,
            };
            title = first.map(|t| {
                let line = t.split_whitespace().collect::<Vec<_>>().join(" ");
                match line.char_indices().nth(100) {
                    Some((cut, _)) => format!("{}…", &line[..cut]),
                    None => line,
                }
            });
        }
        if cwd.is_some() && title.is_some() {
            break;
        }
    }
    Some((cwd?, title))
}

/// What the user typed, of a text the CLI recorded as the user's: a slash command as typed
/// (`/name args`); `None` for what the CLI adds itself (a command's output, its caveat, a
/// reminder, an interruption marker).
fn prompt_text(text: &str) -> Option<String> {
    let tag = |name: &str| -> Option<&str> {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find(&format!("</{name}>"))? + start;
        Some(text[start..end].trim())
    };
    if let Some(command) = tag("command-name") {
        let args = tag("command-args").unwrap_or_default();
        let typed = if args.is_empty() {
            command.to_owned()
        } else {
            format!("{command} {args}")
        };
        return Some(typed);
    }
    let internal = [
        "<local-command-",
        "<system-reminder>",
        "[Request interrupted by user",
    ];
    if text.is_empty() || internal.iter().any(|p| text.starts_with(p)) {
        return None;
    }
    Some(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(lines: &[Value]) -> Vec<Value> {
        let transcript: Vec<u8> = lines
            .iter()
            .flat_map(|l| format!("{l}\n").into_bytes())
            .collect();
        replay(&transcript)
            .into_iter()
            .map(|u| serde_json::to_value(u).unwrap())
            .collect()
    }

    #[test]
    fn prompts_answers_and_a_tool_call_with_its_result() {
        let updates = shown(&[
            json!({"type": "queue-operation", "operation": "enqueue"}),
            json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "run it"}]}}),
            json!({"type": "attachment", "attachment": {}}),
            json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "thinking", "thinking": "Hmm."}]}}),
            json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Running it."}]}}),
            json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "echo hi"}}]}}),
            json!({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "hi"}]}, "toolUseResult": {}}),
            json!({"type": "user", "isMeta": true, "message": {"role": "user", "content": "<local-command-caveat>x</local-command-caveat>"}}),
            json!({"type": "user", "message": {"role": "user", "content": "<command-name>/compact</command-name>\n<command-args>keep the plan</command-args>"}}),
            json!({"type": "user", "message": {"role": "user", "content": "<local-command-stdout>Compacted</local-command-stdout>"}}),
            json!({"type": "assistant", "isSidechain": true, "message": {"role": "assistant", "content": [{"type": "text", "text": "a subagent"}]}}),
        ]);
        let kinds: Vec<&str> = updates
            .iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "user_message_chunk",
                "agent_thought_chunk",
                "agent_message_chunk",
                "tool_call",
                "tool_call_update",
                "user_message_chunk",
            ]
        );
        assert_eq!(updates[0]["content"]["text"], "run it");
        assert_eq!(updates[3]["title"], "`echo hi`");
        assert_eq!(updates[3]["kind"], "execute");
        assert_eq!(updates[4]["toolCallId"], "t1");
        assert_eq!(updates[4]["status"], "completed");
        assert_eq!(updates[5]["content"]["text"], "/compact keep the plan");
    }

    #[test]
    fn a_session_is_listed_with_its_directory_and_first_prompt() {
        let head = format!(
            "{}\n{}\n{}\n{{\"type\":\"user\",\"cw",
            json!({"type": "queue-operation", "operation": "enqueue", "sessionId": "s"}),
            json!({"type": "user", "isMeta": true, "cwd": "/w/p", "message": {"content": "<local-command-caveat>x</local-command-caveat>"}}),
            json!({"type": "user", "cwd": "/w/p", "message": {"content": [{"type": "text", "text": "Fix the\n  failing test"}]}}),
        );
        assert_eq!(
            about(head.as_bytes()),
            Some(("/w/p".to_owned(), Some("Fix the failing test".to_owned())))
        );
        let long = json!({"type": "user", "cwd": "/w", "message": {"content": "é".repeat(120)}});
        let (_, title) = about(format!("{long}\n").as_bytes()).unwrap();
        assert_eq!(title.unwrap().chars().count(), 101);
        assert_eq!(about(b"{\"type\":\"summary\"}\n"), None);
    }

    #[test]
    fn a_todo_list_is_the_plan_and_a_torn_last_line_is_passed_over() {
        let todos = json!({"todos": [{"content": "a", "status": "pending", "activeForm": "A"}]});
        let mut transcript = format!(
            "{}\n{}\n",
            json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "t", "name": "TodoWrite", "input": todos}]}}),
            json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok", "is_error": false}]}}),
        )
        .into_bytes();
        transcript.extend_from_slice(b"{\"type\":\"assistant\",\"mess");
        let updates: Vec<Value> = replay(&transcript)
            .into_iter()
            .map(|u| serde_json::to_value(u).unwrap())
            .collect();
        assert_eq!(updates.len(), 1, "{updates:?}");
        assert_eq!(updates[0]["sessionUpdate"], "plan");
        assert_eq!(updates[0]["entries"][0]["content"], "a");
    }
}

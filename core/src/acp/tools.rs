//! What an editor shows of a Claude Code tool call: a title, a kind, the files it touches and,
//! for edits, the diff.

use agent_client_protocol_schema::v1::{
    ContentBlock, Diff, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate,
    ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;

/// The title, kind, locations and content of a call of `name` with `input` (`Value::Null`
/// while its input streams).
pub(super) fn describe(name: &str, input: &Value) -> ToolCallUpdateFields {
    // The editor's own tools look as the CLI's do.
    let name = name.strip_prefix(super::editor::PREFIX).unwrap_or(name);
    let text = |key: &str| input.get(key).and_then(Value::as_str);
    let path = text("file_path").or_else(|| text("notebook_path"));
    let located = |path: Option<&str>| -> Vec<ToolCallLocation> {
        path.map(|p| {
            let line = input.get("offset").and_then(Value::as_u64);
            ToolCallLocation::new(p).line(line.and_then(|l| u32::try_from(l).ok()))
        })
        .into_iter()
        .collect()
    };
    let (kind, title, content): (ToolKind, String, Vec<ToolCallContent>) = match name {
        "Bash" => (
            ToolKind::Execute,
            text("command").map_or_else(|| "Terminal".to_owned(), |c| format!("`{c}`")),
            text("description").map(block).into_iter().collect(),
        ),
        "BashOutput" | "KillShell" | "KillBash" => (ToolKind::Execute, name.to_owned(), vec![]),
        "Read" => (
            ToolKind::Read,
            path.map_or_else(|| "Read".to_owned(), |p| format!("Read {p}")),
            vec![],
        ),
        "Write" => (
            ToolKind::Edit,
            path.map_or_else(|| "Write".to_owned(), |p| format!("Write {p}")),
            diff(path, None, text("content")),
        ),
        "Edit" => (
            ToolKind::Edit,
            path.map_or_else(|| "Edit".to_owned(), |p| format!("Edit {p}")),
            diff(path, text("old_string"), text("new_string")),
        ),
        "MultiEdit" => (
            ToolKind::Edit,
            path.map_or_else(|| "Edit".to_owned(), |p| format!("Edit {p}")),
            input
                .get("edits")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .flat_map(|e| {
                    let s = |k: &str| e.get(k).and_then(Value::as_str);
                    diff(path, s("old_string"), s("new_string"))
                })
                .collect(),
        ),
        "NotebookEdit" => (
            ToolKind::Edit,
            path.map_or_else(|| "Edit notebook".to_owned(), |p| format!("Edit {p}")),
            text("new_source").map(block).into_iter().collect(),
        ),
        "Glob" => (
            ToolKind::Search,
            match (text("pattern"), text("path")) {
                (Some(p), Some(dir)) => format!("Find `{p}` in {dir}"),
                (Some(p), None) => format!("Find `{p}`"),
                _ => "Find".to_owned(),
            },
            vec![],
        ),
        "Grep" => (
            ToolKind::Search,
            match (text("pattern"), text("path")) {
                (Some(p), Some(dir)) => format!("grep \"{p}\" {dir}"),
                (Some(p), None) => format!("grep \"{p}\""),
                _ => "grep".to_owned(),
            },
            vec![],
        ),
        "WebFetch" => (
            ToolKind::Fetch,
            text("url").map_or_else(|| "Fetch".to_owned(), |u| format!("Fetch {u}")),
            text("prompt").map(block).into_iter().collect(),
        ),
        "WebSearch" => (
            ToolKind::Fetch,
            text("query").map_or_else(|| "Web search".to_owned(), |q| format!("\"{q}\"")),
            vec![],
        ),
        "Task" | "Agent" => (
            ToolKind::Think,
            text("description").unwrap_or("Task").to_owned(),
            text("prompt").map(block).into_iter().collect(),
        ),
        "ExitPlanMode" => (
            ToolKind::SwitchMode,
            "Ready to code?".to_owned(),
            text("plan").map(block).into_iter().collect(),
        ),
        "TodoWrite" => (ToolKind::Think, "Update the plan".to_owned(), vec![]),
        _ => (ToolKind::Other, title_of(name), vec![]),
    };
    let mut fields = ToolCallUpdateFields::new()
        .kind(kind)
        .title(title)
        .locations(located(path));
    if !content.is_empty() {
        fields = fields.content(content);
    }
    if !input.is_null() {
        fields = fields.raw_input(input.clone());
    }
    fields
}

/// Whether the editor sees the call's diff rather than its result text when it completes.
fn shows_diff(name: &str) -> bool {
    matches!(name, "Write" | "Edit" | "MultiEdit")
}

/// An MCP tool (`mcp__server__tool`) as `tool (server)`; any other name as it is.
fn title_of(name: &str) -> String {
    match name
        .strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
    {
        Some((server, tool)) => format!("{tool} ({server})"),
        None => name.to_owned(),
    }
}

fn block(text: &str) -> ToolCallContent {
    ToolCallContent::from(ContentBlock::from(text.to_owned()))
}

fn diff(path: Option<&str>, old: Option<&str>, new: Option<&str>) -> Vec<ToolCallContent> {
    match (path, new) {
        (Some(path), Some(new)) => vec![ToolCallContent::Diff(
            Diff::new(path, new).old_text(old.map(str::to_owned)),
        )],
        _ => vec![],
    }
}

/// A `TodoWrite` input as the plan it sets; `None` when it holds no list.
pub(super) fn plan(input: &Value) -> Option<Vec<PlanEntry>> {
    let todos = input.get("todos")?.as_array()?;
    Some(
        todos
            .iter()
            .map(|todo| {
                let status = match todo.get("status").and_then(Value::as_str) {
                    Some("completed") => PlanEntryStatus::Completed,
                    Some("in_progress") => PlanEntryStatus::InProgress,
                    _ => PlanEntryStatus::Pending,
                };
                let content = todo.get("content").and_then(Value::as_str).unwrap_or("");
                PlanEntry::new(content, PlanEntryPriority::Medium, status)
            })
            .collect(),
    )
}

/// The update that shows a new call `id` of `name` (a `TodoWrite` with its list is the plan).
pub(super) fn call(id: &str, name: &str, input: &Value) -> Option<SessionUpdate> {
    if name == "TodoWrite" {
        return plan(input).map(|entries| SessionUpdate::Plan(Plan::new(entries)));
    }
    let mut call = ToolCall::new(id.to_owned(), String::new()).status(ToolCallStatus::Pending);
    call.update(describe(name, input));
    Some(SessionUpdate::ToolCall(call))
}

/// The update that ends call `id` of `name` with its result: its status, the raw result and,
/// unless the call showed a diff, what the result says (`None` for a `TodoWrite`: the plan
/// shows it).
pub(super) fn result(
    id: &str,
    name: &str,
    content: &Value,
    is_error: bool,
) -> Option<SessionUpdate> {
    if name == "TodoWrite" {
        return None;
    }
    let status = if is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let mut fields = ToolCallUpdateFields::new()
        .status(status)
        .raw_output(content.clone());
    // An edit shows its diff; a command run in the editor's terminal shows the terminal (or,
    // where none could be made, why).
    let tool = name.strip_prefix(super::editor::PREFIX);
    let shown = if tool == Some("Bash") {
        true
    } else {
        !is_error && shows_diff(tool.unwrap_or(name))
    };
    if !shown && name == "Bash" {
        fields = fields.content(console(content).into_iter().collect::<Vec<_>>());
    } else if !shown {
        fields = fields.content(result_content(content));
    }
    Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        id.to_owned(),
        fields,
    )))
}

/// A command's output as a console block (`None`: it printed nothing).
fn console(content: &Value) -> Option<ToolCallContent> {
    let output: String = match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => (blocks.iter())
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    let output = output.trim_end();
    if output.is_empty() {
        return None;
    }
    // A fence longer than any run of backticks in the output.
    let longest = (output.split(|c| c != '`').map(str::len).max()).unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    Some(block(&format!("{fence}console\n{output}\n{fence}")))
}

/// A tool result's content (a string, or text and image blocks) as the editor shows it.
fn result_content(content: &Value) -> Vec<ToolCallContent> {
    match content {
        Value::String(text) if text.is_empty() => vec![],
        Value::String(text) => vec![block(text)],
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b.get("text").and_then(Value::as_str).map(block),
                Some("image") => {
                    let source = b.get("source")?;
                    let data = source.get("data")?.as_str()?;
                    let mime = source.get("media_type")?.as_str()?;
                    Some(ToolCallContent::from(ContentBlock::Image(
                        agent_client_protocol_schema::v1::ImageContent::new(data, mime),
                    )))
                }
                _ => None,
            })
            .collect(),
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(name: &str, input: Value) -> Value {
        serde_json::to_value(describe(name, &input)).unwrap()
    }

    #[test]
    fn an_edit_is_a_diff_at_its_file() {
        let shown = shown(
            "Edit",
            json!({"file_path": "/w/a.rs", "old_string": "a", "new_string": "b"}),
        );
        assert_eq!(shown["kind"], "edit");
        assert_eq!(shown["title"], "Edit /w/a.rs");
        assert_eq!(shown["locations"], json!([{"path": "/w/a.rs"}]));
        assert_eq!(
            shown["content"],
            json!([{"type": "diff", "path": "/w/a.rs", "oldText": "a", "newText": "b"}])
        );
    }

    #[test]
    fn commands_searches_reads_and_mcp_tools() {
        let bash = shown("Bash", json!({"command": "ls -l", "description": "List"}));
        assert_eq!(
            (&bash["kind"], &bash["title"]),
            (&json!("execute"), &json!("`ls -l`"))
        );
        let read = shown("Read", json!({"file_path": "/w/x", "offset": 10}));
        assert_eq!(read["locations"], json!([{"path": "/w/x", "line": 10}]));
        assert_eq!(shown("Grep", json!({"pattern": "fn"}))["kind"], "search");
        let mcp = shown("mcp__files__stat", json!({}));
        assert_eq!(
            (&mcp["kind"], &mcp["title"]),
            (&json!("other"), &json!("stat (files)"))
        );
        // While the input streams: the name is all there is.
        assert_eq!(shown("Write", Value::Null)["title"], "Write");
    }

    #[test]
    fn a_commands_output_is_a_console_block() {
        let shown = |content: Value| {
            let update = result("t", "Bash", &content, false).unwrap();
            serde_json::to_value(update).unwrap()["content"].clone()
        };
        assert_eq!(
            shown(json!("hi\n")),
            json!([{"type": "content", "content": {"type": "text", "text": "```console\nhi\n```"}}])
        );
        assert_eq!(
            shown(json!("a ```b``` c")),
            json!([{"type": "content", "content": {"type": "text", "text": "````console\na ```b``` c\n````"}}])
        );
        assert_eq!(shown(json!("")), json!([]));
    }

    #[test]
    fn a_todo_list_is_a_plan() {
        let entries = plan(&json!({"todos": [
            {"content": "a", "status": "completed", "activeForm": "A-ing"},
            {"content": "b", "status": "in_progress", "activeForm": "B-ing"},
            {"content": "c", "status": "pending", "activeForm": "C-ing"},
        ]}))
        .unwrap();
        assert_eq!(
            serde_json::to_value(entries).unwrap(),
            json!([
                {"content": "a", "priority": "medium", "status": "completed"},
                {"content": "b", "priority": "medium", "status": "in_progress"},
                {"content": "c", "priority": "medium", "status": "pending"},
            ])
        );
    }
}

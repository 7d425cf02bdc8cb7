//! The editor's files and terminals as the CLI's tools. When the editor offers them
//! (`fs.readTextFile` and `fs.writeTextFile`; `terminal`), each session's CLI gets an in-process
//! MCP server, `acp`, in place of its own Read, Write and Edit (and Bash): a read goes through
//! `fs/read_text_file` (the editor's buffer, unsaved changes included), a write or an edit
//! through `fs/write_text_file` (the editor sees and can review it), a command runs in a
//! terminal of the editor (`terminal/create`, shown in the tool call, then `wait_for_exit`,
//! `output`, `release`).

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use super::schema::v1::{
    CreateTerminalRequest, CreateTerminalResponse, Error, KillTerminalRequest, ReadTextFileRequest,
    ReadTextFileResponse, ReleaseTerminalRequest, SessionNotification, SessionUpdate, Terminal,
    TerminalExitStatus, TerminalOutputRequest, TerminalOutputResponse, ToolCallContent,
    ToolCallUpdate, ToolCallUpdateFields, WaitForTerminalExitRequest, WaitForTerminalExitResponse,
    WriteTextFileRequest, CLIENT_METHOD_NAMES,
};
use super::{rpc, Agent, Ask};
use crate::mcp::{McpCallResult, McpServer, McpTool};
use crate::session::PermissionDecision;

/// The in-process server's name: its tools are `mcp__acp__Read`, … to the model.
pub(super) const SERVER: &str = "acp";

/// The prefix of the server's tools as the model calls them.
pub(super) const PREFIX: &str = "mcp__acp__";

/// The most output of a command the model is given, in bytes (the editor keeps the end).
const OUTPUT_LIMIT: u64 = 30_000;

/// The most lines a Read without a limit gives, as the CLI's own Read.
const READ_LINES: u32 = 2000;

/// What the editor carries out for the CLI, from its `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Offers {
    /// Reads and writes text files (both `fs` capabilities).
    pub(super) fs: bool,
    /// Runs commands in terminals.
    pub(super) terminal: bool,
}

impl Offers {
    /// The CLI's own tools the `acp` server's take the place of.
    pub(super) fn replaced(self) -> Vec<String> {
        let mut tools: Vec<String> = Vec::new();
        if self.fs {
            tools.extend(["Read", "Write", "Edit"].map(String::from));
        }
        if self.terminal {
            tools.push("Bash".into());
        }
        tools
    }

    /// The session's `acp` server (`None`: the editor offers neither).
    pub(super) fn server(self) -> Option<McpServer> {
        if !self.fs && !self.terminal {
            return None;
        }
        let path = json!({"type": "string", "description": "The absolute path of the file"});
        let schema = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
        let mut server = McpServer::new(SERVER);
        if self.fs {
            let mut read = McpTool::new(
                "Read",
                "Reads a text file as the user's editor has it, unsaved changes included. The \
                 lines come numbered from the first line read (`     1\\t…`), at most 2000 \
                 unless limit says more. Give an absolute path; give offset (the first line, \
                 from 1) and limit (how many lines) only for a file too long to read at once.",
                schema(
                    json!({
                        "file_path": path,
                        "offset": {"type": "integer", "minimum": 1, "description": "The first line to read, from 1"},
                        "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read"},
                    }),
                    &["file_path"],
                ),
            );
            read.annotations = Some(json!({"readOnlyHint": true}));
            server = server.with_tool(read).with_tool(McpTool::new(
                "Write",
                "Writes a whole text file through the user's editor, which shows the change. \
                 Prefer Edit to change a file that exists; read a file before replacing it.",
                schema(
                    json!({"file_path": path, "content": {"type": "string", "description": "The whole new content"}}),
                    &["file_path", "content"],
                ),
            ));
            server = server.with_tool(McpTool::new(
                "Edit",
                "Replaces text in a file through the user's editor, which shows the change. \
                 old_string must occur exactly once in the file as the editor has it, with its \
                 exact whitespace (or set replace_all to replace every occurrence); read the \
                 file first.",
                schema(
                    json!({
                        "file_path": path,
                        "old_string": {"type": "string", "description": "The text to replace"},
                        "new_string": {"type": "string", "description": "The text to put in its place"},
                        "replace_all": {"type": "boolean", "default": false, "description": "Replace every occurrence"},
                    }),
                    &["file_path", "old_string", "new_string"],
                ),
            ));
        }
        if self.terminal {
            server = server.with_tool(McpTool::new(
                "Bash",
                "Runs a command with bash in a terminal of the user's editor, in the session's \
                 working directory, and returns its output (the end of it, past 30000 bytes) \
                 and its exit status. The user sees it run and can stop it.",
                schema(
                    json!({
                        "command": {"type": "string", "description": "The command"},
                        "description": {"type": "string", "description": "What it does, in a few words"},
                    }),
                    &["command"],
                ),
            ));
        }
        Some(server)
    }
}

/// A tool call of the `acp` server the editor is carrying out, at its step.
#[derive(Debug)]
pub(super) struct Job {
    session: String,
    /// The CLI's `mcp_message` request to answer.
    request_id: String,
    tool_use_id: Option<String>,
    step: Step,
}

#[derive(Debug)]
enum Step {
    /// `fs/read_text_file` of a Read, from line `first`.
    Read { path: String, first: u32 },
    /// `fs/read_text_file` of an Edit.
    EditRead {
        path: String,
        old: String,
        new: String,
        all: bool,
    },
    /// `fs/write_text_file`; `done` is what the model is told.
    Write { path: String, done: String },
    /// `terminal/create`.
    Create,
    /// `terminal/wait_for_exit`.
    Wait { terminal: String },
    /// `terminal/output`.
    Output {
        terminal: String,
        exit: Option<TerminalExitStatus>,
    },
    /// `terminal/release`, then the call's result.
    Release { result: McpCallResult },
}

impl Agent {
    /// The CLI called tool `tool` of the session's `acp` server: the editor's first step.
    pub(super) fn editor_call(
        &mut self,
        session_id: &str,
        request_id: String,
        tool: &str,
        args: &Value,
        tool_use_id: Option<String>,
    ) {
        let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
        let number = |key: &str| {
            (args.get(key).and_then(Value::as_u64))
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0)
        };
        let job = |step| Job {
            session: session_id.to_owned(),
            request_id: request_id.clone(),
            tool_use_id: tool_use_id.clone(),
            step,
        };
        let cwd = (self.sessions.get(session_id)).map(|live| live.cwd.clone());
        match (tool, text("file_path")) {
            ("Read", Some(path)) => {
                let (line, limit) = (number("offset"), number("limit").or(Some(READ_LINES)));
                let params = ReadTextFileRequest::new(session_id.to_owned(), path.clone())
                    .line(line)
                    .limit(limit);
                let first = line.unwrap_or(1);
                let job = job(Step::Read { path, first });
                self.ask_editor(CLIENT_METHOD_NAMES.fs_read_text_file, params, job);
            }
            ("Write", Some(path)) if text("content").is_some() => {
                let content = text("content").unwrap_or_default();
                let params =
                    WriteTextFileRequest::new(session_id.to_owned(), path.clone(), content);
                let done = format!("The file {path} has been written.");
                let job = job(Step::Write { path, done });
                self.ask_editor(CLIENT_METHOD_NAMES.fs_write_text_file, params, job);
            }
            ("Edit", Some(path))
                if text("old_string").is_some() && text("new_string").is_some() =>
            {
                let params = ReadTextFileRequest::new(session_id.to_owned(), path.clone());
                let all = args.get("replace_all").and_then(Value::as_bool) == Some(true);
                let (old, new) = (text("old_string").unwrap_or_default(), text("new_string"));
                let step = Step::EditRead {
                    path,
                    old,
                    new: new.unwrap_or_default(),
                    all,
                };
                self.ask_editor(CLIENT_METHOD_NAMES.fs_read_text_file, params, job(step));
            }
            ("Bash", _) if text("command").is_some() => {
                let command = text("command").unwrap_or_default();
                let params = CreateTerminalRequest::new(session_id.to_owned(), "bash")
                    .args(vec!["-c".to_owned(), command])
                    .cwd(cwd.map(Into::into))
                    .output_byte_limit(Some(OUTPUT_LIMIT));
                self.ask_editor(
                    CLIENT_METHOD_NAMES.terminal_create,
                    params,
                    job(Step::Create),
                );
            }
            _ => {
                let why = format!("{tool}: the arguments are missing or not of the tool's schema");
                self.finish(session_id, &request_id, McpCallResult::error(why));
            }
        }
    }

    /// The editor answered a step of a tool call: the next step, or the call's result.
    pub(super) fn editor_answered(&mut self, job: Job, result: Result<Value, Error>) {
        let Job {
            session,
            request_id,
            tool_use_id,
            step,
        } = job;
        let next = |step| Job {
            session: session.clone(),
            request_id: request_id.clone(),
            tool_use_id: tool_use_id.clone(),
            step,
        };
        let id = session.clone();
        let outcome = match step {
            Step::Read { path, first } => match parse::<ReadTextFileResponse>(result) {
                Ok(read) => McpCallResult::text(numbered(&read.content, first)),
                Err(why) => {
                    McpCallResult::error(format!("The editor could not read {path}: {why}"))
                }
            },
            Step::EditRead {
                path,
                old,
                new,
                all,
            } => {
                let edited = parse::<ReadTextFileResponse>(result)
                    .map_err(|why| format!("The editor could not read {path}: {why}"))
                    .and_then(|read| edit(&read.content, &old, &new, all));
                match edited {
                    Ok(content) => {
                        let params = WriteTextFileRequest::new(id, path.clone(), content);
                        let done = format!("The file {path} has been updated.");
                        let job = next(Step::Write { path, done });
                        return self.ask_editor(
                            CLIENT_METHOD_NAMES.fs_write_text_file,
                            params,
                            job,
                        );
                    }
                    Err(why) => McpCallResult::error(why),
                }
            }
            Step::Write { path, done } => match result {
                Ok(_) => McpCallResult::text(done),
                Err(error) => McpCallResult::error(format!(
                    "The editor could not write {path}: {}",
                    message(&error)
                )),
            },
            Step::Create => match parse::<CreateTerminalResponse>(result) {
                Ok(created) => {
                    let terminal = created.terminal_id.0.to_string();
                    if let Some(call) = &tool_use_id {
                        let shown = ToolCallContent::Terminal(Terminal::new(terminal.clone()));
                        let fields = ToolCallUpdateFields::new().content(vec![shown]);
                        let update = ToolCallUpdate::new(call.clone(), fields);
                        self.show(&id, SessionUpdate::ToolCallUpdate(update));
                    }
                    let params = WaitForTerminalExitRequest::new(id, terminal.clone());
                    let job = next(Step::Wait { terminal });
                    return self.ask_editor(
                        CLIENT_METHOD_NAMES.terminal_wait_for_exit,
                        params,
                        job,
                    );
                }
                Err(why) => {
                    let why = format!("The editor could not run it: {why}");
                    if let Some(call) = &tool_use_id {
                        let shown = ToolCallContent::from(why.clone());
                        let fields = ToolCallUpdateFields::new().content(vec![shown]);
                        let update = ToolCallUpdate::new(call.clone(), fields);
                        self.show(&id, SessionUpdate::ToolCallUpdate(update));
                    }
                    McpCallResult::error(why)
                }
            },
            Step::Wait { terminal } => {
                let exit = parse::<WaitForTerminalExitResponse>(result)
                    .ok()
                    .map(|r| r.exit_status);
                let params = TerminalOutputRequest::new(id, terminal.clone());
                let job = next(Step::Output { terminal, exit });
                return self.ask_editor(CLIENT_METHOD_NAMES.terminal_output, params, job);
            }
            Step::Output { terminal, exit } => {
                let output = parse::<TerminalOutputResponse>(result).ok();
                let result = command_result(output, exit);
                let params = ReleaseTerminalRequest::new(id, terminal);
                let job = next(Step::Release { result });
                return self.ask_editor(CLIENT_METHOD_NAMES.terminal_release, params, job);
            }
            Step::Release { result } => result,
        };
        self.finish(&session, &request_id, outcome);
    }

    /// Stops the commands a session's tool calls run in the editor's terminals (the turn was
    /// cancelled, or the CLI gave up the call `only`).
    pub(super) fn kill_terminals(&mut self, session_id: &str, only: Option<&str>) {
        let running: Vec<String> = (self.asks.values())
            .filter_map(|ask| match ask {
                Ask::Tool(Job {
                    session,
                    request_id,
                    step: Step::Wait { terminal },
                    ..
                }) if session == session_id && only.is_none_or(|r| r == request_id) => {
                    Some(terminal.clone())
                }
                _ => None,
            })
            .collect();
        for terminal in running {
            let params = KillTerminalRequest::new(session_id.to_owned(), terminal);
            self.ask_editor(CLIENT_METHOD_NAMES.terminal_kill, params, Ask::Nothing);
        }
    }

    fn ask_editor<T: Serialize>(&mut self, method: &str, params: T, ask: impl Into<Ask>) {
        self.next_id += 1;
        let n = i64::try_from(self.next_id).expect("fewer than 2^63 requests");
        self.asks.insert(n, ask.into());
        self.send(rpc::request(n, method, params));
    }

    fn show(&mut self, session_id: &str, update: SessionUpdate) {
        let update = SessionNotification::new(session_id.to_owned(), update);
        self.send(rpc::notification(
            CLIENT_METHOD_NAMES.session_update,
            update,
        ));
    }

    /// Answers the CLI's tool call.
    fn finish(&mut self, session_id: &str, request_id: &str, result: McpCallResult) {
        if let Some(live) = self.sessions.get_mut(session_id) {
            // (A call the CLI gave up is not answered: nothing waits for it.)
            let _ = live.session.respond_mcp(self.now, request_id, result);
        }
        self.pump(session_id);
    }
}

impl From<Job> for Ask {
    fn from(job: Job) -> Ask {
        Ask::Tool(job)
    }
}

/// Whether a call of the `acp` server's `tool` is allowed without asking the editor's user in
/// permission mode `mode` (`None`: ask): reads inside the session's directory always, edits
/// there in `acceptEdits`, as the CLI decides for its own tools; no edit in `plan`.
pub(super) fn decide(
    tool: &str,
    input: &Value,
    mode: &str,
    cwd: &str,
) -> Option<PermissionDecision> {
    let inside = (input.get("file_path").and_then(Value::as_str)).is_some_and(|p| within(cwd, p));
    match (tool, mode) {
        ("Read", _) if inside => Some(PermissionDecision::allow()),
        ("Write" | "Edit", "plan") => Some(PermissionDecision::deny(
            "Plan mode: no file is changed until the user accepts the plan (ExitPlanMode).",
        )),
        ("Write" | "Edit", "acceptEdits") if inside => Some(PermissionDecision::allow()),
        _ => None,
    }
}

/// Whether absolute `path` names `dir` or something in it, as written (a `..` anywhere is not).
fn within(dir: &str, path: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    path.starts_with('/')
        && !path.split('/').any(|part| part == "..")
        && (path == dir
            || path
                .strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/')))
}

/// A file's lines numbered as the CLI's Read numbers them, from line `first`.
fn numbered(content: &str, first: u32) -> String {
    if content.is_empty() {
        return "(the file is empty)".to_owned();
    }
    content
        .lines()
        .zip(first..)
        .map(|(line, n)| format!("{n:>6}\t{line}\n"))
        .collect()
}

/// `content` with `old` replaced by `new`: once, where it occurs once, or everywhere (`all`).
fn edit(content: &str, old: &str, new: &str, all: bool) -> Result<String, String> {
    if old == new {
        return Err("No change: old_string and new_string are the same.".into());
    }
    if old.is_empty() {
        return Err("old_string is empty: to write a whole file, use Write.".into());
    }
    match content.matches(old).count() {
        0 => Err(format!("old_string was not found in the file:\n{old}")),
        1 => Ok(content.replacen(old, new, 1)),
        _ if all => Ok(content.replace(old, new)),
        n => Err(format!(
            "old_string occurs {n} times in the file: give more of the text around it to name \
             one, or set replace_all to replace every occurrence."
        )),
    }
}

/// What the model is told of a command that ran in the editor's terminal.
fn command_result(
    output: Option<TerminalOutputResponse>,
    exit: Option<TerminalExitStatus>,
) -> McpCallResult {
    let mut text = String::new();
    let exit = exit.or_else(|| output.as_ref().and_then(|o| o.exit_status.clone()));
    match &output {
        Some(o) if o.truncated => {
            text.push_str("(the output's start was cut)\n");
            text.push_str(&o.output);
        }
        Some(o) => text.push_str(&o.output),
        None => text.push_str("(the editor did not give the output)"),
    }
    let mut failed = false;
    if let Some(exit) = &exit {
        if let Some(code) = exit.exit_code.filter(|c| *c != 0) {
            failed = true;
            text.push_str(&format!("\nExit code {code}"));
        }
        if let Some(signal) = &exit.signal {
            failed = true;
            text.push_str(&format!("\nStopped by signal {signal}"));
        }
    }
    if text.trim().is_empty() {
        text = "(the command printed nothing)".into();
    }
    McpCallResult {
        content: vec![json!({"type": "text", "text": text})],
        is_error: failed,
    }
}

fn parse<T: DeserializeOwned>(result: Result<Value, Error>) -> Result<T, String> {
    let value = result.map_err(|error| message(&error))?;
    serde_json::from_value(value).map_err(|e| format!("an answer not of the protocol: {e}"))
}

fn message(error: &Error) -> String {
    match &error.data {
        Some(Value::String(data)) => format!("{} ({data})", error.message),
        Some(data) => format!("{} ({data})", error.message),
        None => error.message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_replaces_one_occurrence_or_says_why_not() {
        assert_eq!(edit("a b a", "b", "c", false), Ok("a c a".into()));
        assert_eq!(edit("a b a", "a", "c", true), Ok("c b c".into()));
        assert!(edit("a b a", "a", "c", false)
            .unwrap_err()
            .contains("2 times"));
        assert!(edit("a b", "x", "c", false)
            .unwrap_err()
            .contains("not found"));
        assert!(edit("a b", "a", "a", false).is_err());
    }

    #[test]
    fn lines_are_numbered_from_the_first_read() {
        assert_eq!(numbered("x\ny\n", 1), "     1\tx\n     2\ty\n");
        assert_eq!(numbered("z", 41), "    41\tz\n");
    }

    #[test]
    fn reads_inside_the_session_run_without_asking_edits_only_when_accepted() {
        let inside = json!({"file_path": "/w/p/src/a.rs"});
        let outside = json!({"file_path": "/w/p/../secret"});
        assert!(decide("Read", &inside, "default", "/w/p").is_some());
        assert!(decide("Read", &outside, "default", "/w/p").is_none());
        assert!(decide("Read", &json!({"file_path": "/w/px/a"}), "default", "/w/p").is_none());
        assert!(decide("Edit", &inside, "default", "/w/p").is_none());
        assert!(decide("Edit", &inside, "acceptEdits", "/w/p/").is_some());
        assert!(decide("Edit", &outside, "acceptEdits", "/w/p").is_none());
        assert!(matches!(
            decide("Write", &inside, "plan", "/w/p"),
            Some(PermissionDecision::Deny { .. })
        ));
        assert!(decide("Bash", &json!({"command": "ls"}), "plan", "/w/p").is_none());
        assert!(decide("Bash", &json!({"command": "ls"}), "default", "/w/p").is_none());
    }
}

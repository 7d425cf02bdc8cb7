//! [`Player`]: a recorded transcript playing the CLI's part, sans-IO.
//!
//! A host (an app on an official SDK, ccwire's own `Client`, the gateway) spawns `ccwire play
//! TAPE` as its `claude` executable. The player reads what the host writes to its stdin and
//! writes the recorded CLI output back: each recorded `out` line once every `in` line recorded
//! before it has arrived (and, after the recorder's "closing CLI stdin" note, once the host has
//! closed stdin), paced as recorded or at once.
//!
//! The host's lines are matched to the recorded ones by what they are — a control request by
//! its subtype, an answer by the request it answers, a prompt as a prompt — not by position,
//! so a host may send them in another order. What the host chooses itself is mapped, so the
//! tape stays consistent: the ids of its control requests (the CLI's answers carry the host's
//! id) and of its hook callbacks. With `verify`, each host line must also mean what the
//! recorded one meant (its fields without ids, session ids, uuids and times); the first that
//! does not is a [`PlayOutput::Diverged`].
//!
//! [`Player::inject`] adds failures ([`Fault`]: garbage, an oversized line, a duplicate, a
//! kill, a stall, …) to what it writes, the same for every host.
//!
//! Run loop: [`handle_stdin`](Player::handle_stdin) /
//! [`handle_stdin_eof`](Player::handle_stdin_eof) / [`handle_timeout`](Player::handle_timeout),
//! then drain [`poll_output`](Player::poll_output), then sleep until
//! [`poll_timeout`](Player::poll_timeout).

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Map, Value};

use crate::framing::{Frame, LineFramer, DEFAULT_LINE_LIMIT};
use crate::Timestamp;

mod faults;

pub use faults::{Fault, FAULTS, OVERSIZE_BYTES, UNKNOWN_ID};

/// What the player does next; drain with [`Player::poll_output`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PlayOutput {
    /// Write this line (with its newline) to stdout. `index` counts the recorded lines
    /// written, from 1.
    Write {
        /// The line number among the recorded lines written, from 1; 0 for a line a
        /// [`Fault`] made up.
        index: usize,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Write `bytes` bytes of `x` and a newline: the oversized line of a [`Fault::Oversize`].
    Filler {
        /// How many bytes before the newline.
        bytes: usize,
    },
    /// Kill the process with SIGKILL, as a crashing CLI ([`Fault::Kill`]), after flushing
    /// what was written.
    Kill,
    /// A [`Fault::Stall`] began: nothing more comes, stdin closing included; the process must
    /// stay up until its host ends it.
    Stalled,
    /// A host line did not mean what the recorded one did (`verify`): report it and stop.
    Diverged(Divergence),
    /// The tape is over: exit with this status.
    Exit(i32),
}

/// Where a host left the tape.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// The transcript line (from 1) the host line was matched with, when one was.
    pub line: Option<usize>,
    /// What the tape has there, without ids and times.
    pub expected: Option<Value>,
    /// What the host wrote, without ids and times.
    pub got: Value,
    /// In words.
    pub reason: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.reason)?;
        if let Some(line) = self.line {
            write!(f, " (transcript line {line})")?;
        }
        if let Some(expected) = &self.expected {
            write!(f, "\n  expected: {expected}")?;
        }
        write!(f, "\n  got:      {}", self.got)
    }
}

/// Why a transcript cannot be played.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TapeError {
    /// A line that is not a transcript line.
    #[error("transcript line {line}: {message}")]
    BadLine {
        /// The line (from 1).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Nothing the CLI wrote.
    #[error("the transcript has no line the CLI wrote")]
    Empty,
}

#[derive(Debug)]
enum Step {
    /// A line the host wrote.
    In { msg: Value, line: usize },
    /// A line the CLI wrote: its text as recorded, and the message when it is one.
    Out {
        text: String,
        msg: Option<Value>,
        t_ms: u64,
    },
    /// The host closed stdin here.
    Eof { t_ms: u64 },
}

/// A recorded transcript playing the CLI's part. See the [module docs](self).
#[derive(Debug)]
pub struct Player {
    steps: Vec<Step>,
    /// Whether each `In` step was matched by a host line.
    matched: Vec<bool>,
    /// The next step to play.
    next: usize,
    /// The recorded exit status.
    exit: i32,
    verify: bool,
    /// Milliseconds of the tape per millisecond of the clock; `None` plays at once.
    speed: Option<f64>,
    /// When the tape was last released (the clock, and the tape's time then).
    anchor: (Timestamp, u64),
    framer: LineFramer,
    eof: bool,
    done: bool,
    written: usize,
    /// Recorded control request ids of the host → the host's own.
    request_ids: BTreeMap<String, String>,
    /// Recorded hook callback ids → the host's own.
    callback_ids: BTreeMap<String, String>,
    outputs: VecDeque<PlayOutput>,
    /// The faults to inject ([`Player::inject`]).
    faults: Vec<Fault>,
    /// The outputs as the faults made them.
    injected: VecDeque<PlayOutput>,
    /// A fault stalled the player.
    stalled: bool,
    /// A fault ended the player (killed, or exited mid-line).
    ended: bool,
}

impl Player {
    /// A player of `transcript` (what `ccwire record` writes: `{"dir","t_ms","msg"}` lines;
    /// notes `closing CLI stdin` and `CLI exit code N` are honoured). `speed`: `None` plays
    /// at once, `Some(x)` x times as fast as recorded.
    ///
    /// # Errors
    /// A line that is not a transcript line, or a transcript with no CLI output.
    pub fn new(transcript: &[u8], verify: bool, speed: Option<f64>) -> Result<Player, TapeError> {
        let mut steps = Vec::new();
        let mut exit = 0;
        for (n, raw) in transcript.split(|b| *b == b'\n').enumerate() {
            let line = n + 1;
            let text = String::from_utf8_lossy(raw);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            let entry: Value = serde_json::from_str(text).map_err(|e| TapeError::BadLine {
                line,
                message: e.to_string(),
            })?;
            let t_ms = entry.get("t_ms").and_then(Value::as_u64).unwrap_or(0);
            match entry.get("dir").and_then(Value::as_str) {
                Some("in") => steps.push(Step::In {
                    msg: entry.get("msg").cloned().unwrap_or(Value::Null),
                    line,
                }),
                Some("out") => {
                    let msg = entry.get("msg").cloned();
                    let text = msg.as_ref().map_or_else(String::new, Value::to_string);
                    steps.push(Step::Out { text, msg, t_ms });
                }
                Some("note") => {
                    let note = entry.get("note").and_then(Value::as_str).unwrap_or("");
                    if note.contains("closing CLI stdin") {
                        steps.push(Step::Eof { t_ms });
                    } else if let Some(code) = note.strip_prefix("CLI exit code ") {
                        exit = code.trim().parse().unwrap_or(0);
                    } else if let Some(raw) = note.strip_prefix("out: ") {
                        // A line the CLI printed that was not JSON: played as printed.
                        steps.push(Step::Out {
                            text: raw.to_owned(),
                            msg: None,
                            t_ms,
                        });
                    }
                }
                // A bare stream-json line (a capture of the CLI's stdout alone).
                _ if entry.get("type").is_some() => steps.push(Step::Out {
                    text: text.to_owned(),
                    msg: Some(entry.clone()),
                    t_ms,
                }),
                _ => {
                    return Err(TapeError::BadLine {
                        line,
                        message: "neither a transcript line nor a stream-json message".into(),
                    })
                }
            }
        }
        if !steps.iter().any(|s| matches!(s, Step::Out { .. })) {
            return Err(TapeError::Empty);
        }
        let matched = vec![false; steps.len()];
        let mut player = Player {
            steps,
            matched,
            next: 0,
            exit,
            verify,
            speed,
            anchor: (0, 0),
            framer: LineFramer::new(DEFAULT_LINE_LIMIT),
            eof: false,
            done: false,
            written: 0,
            request_ids: BTreeMap::new(),
            callback_ids: BTreeMap::new(),
            outputs: VecDeque::new(),
            faults: Vec::new(),
            injected: VecDeque::new(),
            stalled: false,
            ended: false,
        };
        player.advance(0);
        Ok(player)
    }

    /// The recorded exit status (the `CLI exit code` note; 0 without one).
    pub fn exit_code(&self) -> i32 {
        self.exit
    }

    /// What the host wrote to stdin, split anywhere.
    pub fn handle_stdin(&mut self, now: Timestamp, bytes: &[u8]) {
        let mut lines = Vec::new();
        self.framer.push(bytes, |frame| {
            if let Frame::Line(line) = frame {
                lines.push(line.to_vec());
            }
        });
        for line in lines {
            self.take(now, &line);
        }
        self.advance(now);
    }

    /// The host closed stdin (ignored once a [`Fault::Stall`] stalled the player).
    pub fn handle_stdin_eof(&mut self, now: Timestamp) {
        if self.stalled {
            return;
        }
        let mut last = None;
        self.framer.finish(|frame| {
            if let Frame::Line(line) = frame {
                last = Some(line.to_vec());
            }
        });
        if let Some(line) = last {
            self.take(now, &line);
        }
        self.eof = true;
        self.advance(now);
    }

    /// The paced tape's next line is due.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.advance(now);
    }

    /// The next thing to do.
    pub fn poll_output(&mut self) -> Option<PlayOutput> {
        loop {
            if let Some(output) = self.injected.pop_front() {
                return Some(output);
            }
            let output = self.outputs.pop_front()?;
            if self.faults.is_empty() {
                return Some(output);
            }
            self.faulted(output);
        }
    }

    /// When the next recorded line is due (paced play only).
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let speed = self.speed?;
        match self.steps.get(self.next)? {
            Step::Out { t_ms, .. } if self.released(self.next) => Some(self.due(*t_ms, speed)),
            _ => None,
        }
    }

    fn due(&self, t_ms: u64, speed: f64) -> Timestamp {
        let (at, tape) = self.anchor;
        at + (t_ms.saturating_sub(tape) as f64 / speed) as u64
    }

    /// Whether every host line recorded before step `k` has come.
    fn released(&self, k: usize) -> bool {
        self.steps[..k].iter().enumerate().all(|(i, s)| match s {
            Step::In { .. } => self.matched[i],
            Step::Eof { .. } => self.eof,
            Step::Out { .. } => true,
        })
    }

    /// Plays every line that may come now.
    fn advance(&mut self, now: Timestamp) {
        if self.done {
            return;
        }
        while self.next < self.steps.len() {
            match &self.steps[self.next] {
                Step::In { .. } => {
                    if !self.matched[self.next] {
                        return;
                    }
                }
                Step::Eof { t_ms } => {
                    if !self.eof {
                        return;
                    }
                    self.anchor = (now, *t_ms);
                }
                Step::Out { t_ms, .. } => {
                    if let Some(speed) = self.speed {
                        if self.due(*t_ms, speed) > now {
                            return;
                        }
                    }
                    let line = self.render(self.next);
                    self.written += 1;
                    self.outputs.push_back(PlayOutput::Write {
                        index: self.written,
                        bytes: line,
                    });
                }
            }
            if let Step::In { .. } = self.steps[self.next] {
                // The tape's clock restarts from the host's line.
                self.anchor = (now, self.tape_time(self.next));
            }
            self.next += 1;
        }
        // The tape is over; the CLI exits once the host has closed its stdin.
        if self.eof {
            self.done = true;
            self.outputs.push_back(PlayOutput::Exit(self.exit));
        }
    }

    /// The tape's time at step `k`: that of the nearest line before it that has one.
    fn tape_time(&self, k: usize) -> u64 {
        self.steps[..=k]
            .iter()
            .rev()
            .find_map(|s| match s {
                Step::Out { t_ms, .. } | Step::Eof { t_ms } => Some(*t_ms),
                Step::In { .. } => None,
            })
            .unwrap_or(0)
    }

    /// A recorded CLI line with the host's own ids put back.
    fn render(&self, k: usize) -> Vec<u8> {
        let Step::Out { text, msg, .. } = &self.steps[k] else {
            return Vec::new();
        };
        let mut line = match msg {
            Some(msg) if !self.request_ids.is_empty() || !self.callback_ids.is_empty() => {
                let mut msg = msg.clone();
                self.map_ids(&mut msg);
                msg.to_string()
            }
            _ => text.clone(),
        };
        line.push('\n');
        line.into_bytes()
    }

    fn map_ids(&self, msg: &mut Value) {
        let map = |field: Option<&mut Value>, ids: &BTreeMap<String, String>| {
            if let Some(field) = field {
                if let Some(id) = field.as_str().and_then(|id| ids.get(id)) {
                    *field = Value::String(id.clone());
                }
            }
        };
        if msg["type"] == "control_response" {
            map(msg["response"].get_mut("request_id"), &self.request_ids);
        }
        if msg["type"] == "control_request" && msg["request"]["subtype"] == "hook_callback" {
            map(msg["request"].get_mut("callback_id"), &self.callback_ids);
        }
    }

    /// Matches a host line with the recorded line it stands for.
    fn take(&mut self, _now: Timestamp, line: &[u8]) {
        let Ok(got) = serde_json::from_slice::<Value>(line) else {
            let got = Value::String(String::from_utf8_lossy(line).into_owned());
            if self.verify {
                self.diverge(None, None, got, "the host wrote a line that is not JSON");
            }
            return;
        };
        let wanted = key(&got);
        let found = (0..self.steps.len()).find(|&i| {
            !self.matched[i] && matches!(&self.steps[i], Step::In { msg, .. } if key(msg) == wanted)
        });
        let Some(i) = found else {
            if self.verify {
                let reason = format!("the host wrote a {wanted} the recording has no more of");
                self.diverge(None, None, meaning(&got), &reason);
            }
            return;
        };
        self.matched[i] = true;
        let Step::In { msg, line } = &self.steps[i] else {
            return;
        };
        let (recorded, line) = (msg.clone(), *line);
        self.learn_ids(&recorded, &got);
        if self.verify && meaning(&recorded) != meaning(&got) {
            let reason = format!("the host's {wanted} differs from the recording");
            self.diverge(Some(line), Some(meaning(&recorded)), meaning(&got), &reason);
        }
    }

    fn diverge(&mut self, line: Option<usize>, expected: Option<Value>, got: Value, reason: &str) {
        if self.done {
            return;
        }
        self.done = true;
        self.outputs.push_back(PlayOutput::Diverged(Divergence {
            line,
            expected,
            got,
            reason: reason.to_owned(),
        }));
    }

    /// Ids the host chose where the recorded host chose others.
    fn learn_ids(&mut self, recorded: &Value, got: &Value) {
        if recorded["type"] != "control_request" {
            return;
        }
        if let (Some(r), Some(g)) = (recorded["request_id"].as_str(), got["request_id"].as_str()) {
            if r != g {
                self.request_ids.insert(r.to_owned(), g.to_owned());
            }
        }
        let ids = |msg: &Value| -> Vec<String> {
            let mut ids = Vec::new();
            if let Some(events) = msg["request"]["hooks"].as_object() {
                for matchers in events.values() {
                    for matcher in matchers.as_array().into_iter().flatten() {
                        for id in matcher["hookCallbackIds"].as_array().into_iter().flatten() {
                            ids.extend(id.as_str().map(str::to_owned));
                        }
                    }
                }
            }
            ids
        };
        for (r, g) in ids(recorded).into_iter().zip(ids(got)) {
            if r != g {
                self.callback_ids.insert(r, g);
            }
        }
    }
}

/// What a host line is, for matching: its type, a control request's subtype, an answer's
/// request id (the CLI chose it, so it is the same in the recording).
fn key(msg: &Value) -> String {
    let kind = msg["type"].as_str().unwrap_or("?");
    match kind {
        "control_request" => {
            format!(
                "control_request {}",
                msg["request"]["subtype"].as_str().unwrap_or("?")
            )
        }
        "control_response" => format!(
            "control_response {}",
            msg["response"]["request_id"].as_str().unwrap_or("?")
        ),
        "control_cancel_request" => {
            format!(
                "control_cancel_request {}",
                msg["request_id"].as_str().unwrap_or("?")
            )
        }
        other => other.to_owned(),
    }
}

/// What a host line means, for `verify`: a prompt's text and tool results, a control
/// request's subtype (and an `initialize`'s hook events and matchers), a permission answer's
/// behaviour and message, an MCP answer's result, a hook's output — without the ids, session
/// ids, uuids and times hosts choose differently.
fn meaning(msg: &Value) -> Value {
    match msg["type"].as_str() {
        Some("user") => {
            let content = match &msg["message"]["content"] {
                Value::String(text) => json!([{"type": "text", "text": text}]),
                other => strip(other),
            };
            json!({"type": "user", "content": content})
        }
        Some("control_request") => {
            let request = &msg["request"];
            let mut meant = json!({"type": "control_request", "subtype": request["subtype"]});
            if request["subtype"] == "initialize" {
                let mut hooks = Map::new();
                if let Some(events) = request["hooks"].as_object() {
                    for (event, matchers) in events {
                        let matchers: Vec<Value> = matchers
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|m| m["matcher"].clone())
                            .collect();
                        hooks.insert(event.clone(), Value::Array(matchers));
                    }
                }
                meant["hooks"] = Value::Object(hooks);
            } else if let Some(fields) = request.as_object() {
                for (k, v) in fields {
                    meant[k] = strip(v);
                }
            }
            meant
        }
        Some("control_response") => {
            let response = &msg["response"];
            let answer = &response["response"];
            let meant = if answer.get("behavior").is_some() {
                json!({"behavior": answer["behavior"], "message": answer.get("message")})
            } else if let Some(mcp) = answer.get("mcp_response") {
                json!({"mcp": {"result": strip(&mcp["result"]), "error": strip(&mcp["error"])}})
            } else {
                strip(answer)
            };
            json!({"type": "control_response", "subtype": response["subtype"],
                   "error": response.get("error"), "response": meant})
        }
        _ => strip(msg),
    }
}

/// A value without what hosts choose differently: ids, session ids, uuids, times.
fn strip(value: &Value) -> Value {
    const IGNORED: [&str; 6] = [
        "request_id",
        "session_id",
        "uuid",
        "timestamp",
        "hookCallbackIds",
        "parent_tool_use_id",
    ];
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !IGNORED.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
        other => other.clone(),
    }
}

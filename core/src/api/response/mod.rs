//! Responses of the three APIs built from chunks: the Anthropic `Message` and its SSE event
//! sequence, the OpenAI `chat.completion` and its `chat.completion.chunk` sequence, and the
//! OpenAI Responses `response` object and its event sequence (`response.created`, an
//! `output_item.added` … `output_item.done` bracket per output item with its deltas,
//! `response.completed` / `response.incomplete` / `response.failed`).
//!
//! A [`ResponseEncoder`] takes the chunks of a running CLI turn, one at a time, and says when the
//! response is complete: when a model message that calls a client tool has ended (the client
//! must run the tools), or when the turn ended. Several model messages of one turn (the CLI
//! running its own tools in between) make one response; the CLI's own tool calls and their
//! results, thinking, and sub-agent output are not part of it.
//!
//! Streaming responses come out as SSE frames (`event: …\ndata: …\n\n`, or `data: …\n\n` for
//! OpenAI) as the chunks arrive; the JSON body is built from the same state at the end.
//!
//! The encoder decides what the response holds and when each part opens, grows and closes,
//! once for all three APIs; how each API writes that is its own module (`anthropic`, `openai`,
//! `responses`), chosen when the encoder is made.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

mod anthropic;
mod errors;
mod openai;
mod responses;
mod structured;
mod types;

use errors::{turn_error, Failure};
pub use openai::finish_reason;
use types::OutBlock;
pub use types::{ClientToolCall, EncoderOptions, Outcome, StructuredAnswer, Usage};

use super::{Api, ApiError, ApiErrorKind};
use crate::conversation::{self, Block, Message, Role};
use crate::Chunk;

/// One API's side of a response: its frames and its JSON body, from the response as built so
/// far ([`Draft`]). The encoder decides what happens; a `Wire` says how its API writes it.
trait Wire: std::fmt::Debug + Send {
    /// The response id in the API's form, from the id of its first model message.
    fn response_id(&self, base: &str) -> String;
    /// The frames that open the response.
    fn start(&mut self, r: &Draft, out: &mut Vec<String>);
    /// The frames that open output block `block` (just added to `r.blocks`).
    fn block_start(&mut self, r: &Draft, block: usize, out: &mut Vec<String>);
    /// The frames that close output block `block`.
    fn block_stop(&mut self, r: &Draft, block: usize, out: &mut Vec<String>);
    /// The frame of one streamed piece of `block`, `piece` as a JSON string literal; written
    /// straight out (one per token: no `Value`), byte for byte as the other frames are
    /// serialized (keys in order).
    fn delta(&mut self, r: &Draft, block: usize, kind: Delta, piece: &str, out: &mut Vec<String>);
    /// The frames that end a response that finished with `stop` (an Anthropic stop reason).
    fn finish(&mut self, r: &Draft, stop: &str, out: &mut Vec<String>);
    /// The frames that end a started stream that failed.
    fn fail(&mut self, r: &Draft, error: &ApiError, out: &mut Vec<String>);
    /// A keep-alive frame.
    fn ping(&mut self, r: &Draft) -> String;
    /// The non-streaming body of a response that finished with `stop`.
    fn body(&self, r: &Draft, stop: &str) -> Value;
}

/// The response as built so far, which every API writes from.
#[derive(Debug)]
struct Draft {
    options: EncoderOptions,
    /// The id of the first model message (or the one given).
    id: Option<String>,
    started: bool,
    blocks: Vec<OutBlock>,
    /// The usage of each top-level model message of the response, as reported so far.
    message_usage: Vec<(String, Usage)>,
    outcome: Option<Outcome>,
}

impl Draft {
    /// The id the response's ids derive from.
    fn base_id(&self) -> String {
        self.id.clone().unwrap_or_else(|| "msg_ccwire".to_owned())
    }

    /// The tokens so far (see [`ResponseEncoder::usage`]).
    fn usage(&self) -> Usage {
        let mut total = Usage::default();
        for (_, counts) in &self.message_usage {
            total.add(counts);
        }
        total
    }

    /// The client tool calls, in order.
    fn tool_calls(&self) -> Vec<&ClientToolCall> {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                OutBlock::Tool { call, .. } => Some(call),
                _ => None,
            })
            .collect()
    }
}

/// Builds one response from the chunks of a turn. See the [module docs](self).
#[derive(Debug)]
pub struct ResponseEncoder {
    draft: Draft,
    wire: Box<dyn Wire>,
    /// The output block open for streaming, if any.
    open: Option<usize>,
    /// (message id, CLI block index) → output block.
    index_map: BTreeMap<(String, u32), usize>,
    /// Tool_use id → output block.
    tool_map: BTreeMap<String, usize>,
    /// The current top-level model message.
    message: Option<String>,
    message_has_client_tool: bool,
    stop_reason: Option<String>,
    /// Content of messages not announced by a `message_start`, held back.
    pending: Vec<Chunk>,
    /// The CLI's last wait before retrying the model (`api_retry`), in milliseconds: what the
    /// upstream asked for, for the `Retry-After` of a turn that failed anyway.
    retry_delay_ms: Option<u64>,
    /// The id of the model's last call of the CLI's structured-output tool: the id of the
    /// forced call it answers as.
    structured_call: Option<String>,
    /// A structured-output turn whose CLI offers the model no structured-output tool: the CLI
    /// refused the schema (its `system/init` lists the tools it offers).
    schema_refused: bool,
    /// A streamed structured answer: the model's first object, sent as it is written.
    structured_stream: Option<structured::StructuredStream>,
    /// What the CLI said of the turn's last failed model request.
    failure: Option<Failure>,
}

/// The tool through which the CLI's structured-output mode takes the model's object.
pub const STRUCTURED_OUTPUT_TOOL: &str = "StructuredOutput";

/// The chunk types a [`ResponseEncoder`] reads: a chunk of any other type leaves it unchanged,
/// so a host that hands chunks over (the npm package's encoder) may skip the others.
pub const CHUNK_TYPES: [&str; 15] = [
    "session_init",
    "message_start",
    "status",
    "text_delta",
    "thinking_delta",
    "thinking_redacted",
    "tool_use",
    "tool_input_delta",
    "message_delta",
    "message_stop",
    "tool_result",
    "user_text",
    "api_error",
    "turn_complete",
    "process_exit",
];

impl ResponseEncoder {
    /// A new encoder for one response.
    pub fn new(options: EncoderOptions) -> ResponseEncoder {
        let wire: Box<dyn Wire> = match options.api {
            Api::Anthropic => Box::new(anthropic::Anthropic),
            Api::OpenAi => Box::new(openai::OpenAi),
            Api::Responses => Box::<responses::Responses>::default(),
        };
        ResponseEncoder {
            draft: Draft {
                id: options.id.clone(),
                options,
                started: false,
                blocks: Vec::new(),
                message_usage: Vec::new(),
                outcome: None,
            },
            wire,
            open: None,
            index_map: BTreeMap::new(),
            tool_map: BTreeMap::new(),
            message: None,
            message_has_client_tool: false,
            stop_reason: None,
            pending: Vec::new(),
            retry_delay_ms: None,
            structured_call: None,
            schema_refused: false,
            structured_stream: None,
            failure: None,
        }
    }

    /// Takes the next chunk of the turn; returns the SSE frames it produces (none when not
    /// streaming). Chunks after the response is complete are ignored.
    pub fn push(&mut self, chunk: &Chunk) -> Vec<String> {
        let mut out = Vec::new();
        if self.draft.outcome.is_some() {
            return out;
        }
        // Content of a message that was not announced by a `message_start` (no partial
        // messages, or the CLI's own API-error message) waits until it is known to be real.
        let unannounced = match chunk {
            Chunk::TextDelta {
                message_id,
                parent_tool_use_id: None,
                ..
            }
            | Chunk::ToolUse {
                message_id,
                parent_tool_use_id: None,
                ..
            }
            | Chunk::ThinkingDelta {
                message_id,
                parent_tool_use_id: None,
                ..
            }
            | Chunk::ThinkingRedacted {
                message_id,
                parent_tool_use_id: None,
                ..
            } => self.message.as_deref() != Some(message_id.as_str()),
            _ => false,
        };
        if unannounced {
            self.pending.push(chunk.clone());
            return out;
        }
        match chunk {
            Chunk::SessionInit { tools, .. } if self.draft.options.structured.is_some() => {
                let offered: Vec<&str> = serde_json::from_str(tools.get()).unwrap_or_default();
                self.schema_refused = !offered.contains(&STRUCTURED_OUTPUT_TOOL);
            }
            Chunk::TurnComplete { is_error: true, .. } => self.pending.clear(),
            Chunk::MessageStart { .. }
            | Chunk::TurnComplete { .. }
            | Chunk::ToolResult { .. }
            | Chunk::UserText { .. }
            | Chunk::ProcessExit { .. } => self.flush_pending(&mut out),
            _ => {}
        }
        if self.draft.outcome.is_none() {
            self.handle(chunk, &mut out);
        }
        out
    }

    /// Plays the held content of unannounced messages as if each had been announced.
    fn flush_pending(&mut self, out: &mut Vec<String>) {
        let pending = std::mem::take(&mut self.pending);
        let mut iter = pending.into_iter().peekable();
        while let Some(chunk) = iter.next() {
            let Some(id) = content_message(&chunk).map(str::to_owned) else {
                continue;
            };
            if self.message.as_deref() != Some(id.as_str()) {
                self.message = Some(id.clone());
                self.message_has_client_tool = false;
            }
            self.handle(&chunk, out);
            let last_of_message = iter
                .peek()
                .and_then(content_message)
                .is_none_or(|next| next != id);
            if last_of_message {
                self.handle(
                    &Chunk::MessageStop {
                        message_id: id,
                        abandoned_from_index: None,
                    },
                    out,
                );
            }
            if self.draft.outcome.is_some() {
                return;
            }
        }
    }

    fn handle(&mut self, chunk: &Chunk, out: &mut Vec<String>) {
        match chunk {
            Chunk::MessageStart {
                message_id,
                parent_tool_use_id: None,
                usage,
                ..
            } => {
                let mut counts = Usage::default();
                counts.update(&usage.to_value());
                self.draft.message_usage.push((message_id.clone(), counts));
                self.message = Some(message_id.clone());
                self.message_has_client_tool = false;
                self.start(out);
            }
            Chunk::TextDelta {
                message_id,
                index,
                text,
                parent_tool_use_id: None,
            } => {
                // A structured answer is its object alone.
                if text.is_empty() || self.draft.options.structured.is_some() {
                    return;
                }
                self.start(out);
                let block =
                    self.block_for(message_id, *index, out, |_| OutBlock::Text(String::new()));
                if let OutBlock::Text(t) = &mut self.draft.blocks[block] {
                    t.push_str(text);
                }
                self.delta_text(block, text, out);
            }
            Chunk::ThinkingDelta {
                message_id,
                index,
                thinking,
                parent_tool_use_id: None,
            } if self.draft.options.show_thinking => {
                if thinking.is_empty() {
                    return;
                }
                self.start(out);
                let block = self.block_for(message_id, *index, out, |_| {
                    OutBlock::Thinking(String::new())
                });
                if let OutBlock::Thinking(t) = &mut self.draft.blocks[block] {
                    t.push_str(thinking);
                }
                self.delta_thinking(block, thinking, out);
            }
            Chunk::ThinkingRedacted {
                message_id,
                index,
                parent_tool_use_id: None,
            } if self.draft.options.show_thinking => {
                self.start(out);
                self.block_for(message_id, *index, out, |_| OutBlock::Redacted);
            }
            Chunk::ToolUse {
                id,
                name,
                message_id,
                index,
                parent_tool_use_id: None,
                complete,
                input,
                server: false,
            } => {
                if name == STRUCTURED_OUTPUT_TOOL {
                    self.structured_call = Some(id.clone());
                    self.stream_structured(id, (message_id, *index), (*complete, input), out);
                    return;
                }
                let Some(client_name) = self.client_name(name) else {
                    return;
                };
                self.start(out);
                self.message_has_client_tool = true;
                let call_index = self.tool_map.len();
                let block = self.block_for(message_id, *index, out, |_| OutBlock::Tool {
                    call: ClientToolCall {
                        id: id.clone(),
                        name: client_name.clone(),
                        input: Value::Object(Map::new()),
                    },
                    partial: String::new(),
                    complete: false,
                    call_index,
                });
                self.tool_map.insert(id.clone(), block);
                if *complete {
                    let value = input.to_value();
                    if let OutBlock::Tool {
                        call,
                        partial,
                        complete,
                        ..
                    } = &mut self.draft.blocks[block]
                    {
                        // Without streamed deltas, the whole input goes out as one delta.
                        let missing = if partial.is_empty() {
                            let text = value.to_string();
                            (text != "{}").then_some(text)
                        } else {
                            None
                        };
                        call.input = value;
                        *complete = true;
                        if let Some(text) = missing {
                            partial.push_str(&text);
                            self.delta_json(block, &text, out);
                        }
                    }
                    self.close_open(out);
                }
            }
            Chunk::ToolInputDelta { id, partial_json } => {
                if self.structured_input(id, partial_json, out) {
                    return;
                }
                let Some(&block) = self.tool_map.get(id) else {
                    return;
                };
                if partial_json.is_empty() {
                    return;
                }
                if let OutBlock::Tool {
                    partial, complete, ..
                } = &mut self.draft.blocks[block]
                {
                    if *complete {
                        return;
                    }
                    partial.push_str(partial_json);
                }
                self.delta_json(block, partial_json, out);
            }
            Chunk::MessageDelta {
                message_id,
                stop_reason,
                usage,
            } if self.message.as_deref() == Some(message_id) => {
                if let Some(reason) = stop_reason {
                    self.stop_reason = Some(reason.clone());
                }
                if let Some((_, counts)) = self
                    .draft
                    .message_usage
                    .iter_mut()
                    .find(|(id, _)| id == message_id)
                {
                    counts.update(&usage.to_value());
                }
            }
            Chunk::MessageStop { message_id, .. }
                if self.message.as_deref() == Some(message_id) =>
            {
                self.message = None;
                if self.message_has_client_tool {
                    self.finish(Outcome::ToolCalls, out);
                }
            }
            Chunk::TurnComplete {
                is_error,
                result,
                stop_reason,
                subtype,
                terminal_reason,
                api_error_status,
                api_error_type,
                errors,
                structured_output,
                ..
            } => {
                if self.message_has_client_tool {
                    // The message ended without a message_stop (no partial messages).
                    self.finish(Outcome::ToolCalls, out);
                } else if *is_error {
                    let error = turn_error(
                        result.as_deref(),
                        (subtype.as_deref(), terminal_reason.as_deref()),
                        (*api_error_status, api_error_type.as_deref()),
                        errors,
                        self.failure.as_ref(),
                        self.retry_delay_ms,
                    );
                    self.finish(Outcome::Failed(error), out);
                } else if let Some(answer) = self.draft.options.structured.clone() {
                    self.answer_structured(&answer, structured_output.as_ref(), out);
                } else {
                    let reason = self
                        .stop_reason
                        .clone()
                        .or_else(|| stop_reason.clone())
                        .filter(|r| r != "tool_use")
                        .unwrap_or_else(|| "end_turn".to_owned());
                    self.finish(Outcome::Finished(reason), out);
                }
            }
            Chunk::ApiError {
                error,
                parent_tool_use_id: None,
                ..
            } => {
                self.failure = Some(Failure {
                    error: error.clone(),
                });
            }
            Chunk::Status { subtype, fields } if subtype == "api_retry" => {
                self.retry_delay_ms = fields
                    .get("retry_delay_ms")
                    .and_then(|v| v.get().parse::<f64>().ok())
                    .filter(|ms| ms.is_finite() && *ms >= 0.0)
                    .map(|ms| ms as u64);
            }
            Chunk::ProcessExit { code, signal } => {
                let error = ApiError::new(
                    ApiErrorKind::Api,
                    format!(
                        "the Claude Code process ended during the turn (exit code {}, signal {})",
                        code.map_or("none".to_owned(), |c| c.to_string()),
                        signal.map_or("none".to_owned(), |s| s.to_string()),
                    ),
                );
                self.finish(Outcome::Failed(error), out);
            }
            _ => {}
        }
    }

    /// Ends the response with an error from outside the turn (a held call that can no longer be
    /// answered, the gateway shutting down, …). Returns the SSE `error` frames when streaming.
    pub fn fail(&mut self, error: ApiError) -> Vec<String> {
        let mut out = Vec::new();
        if self.draft.outcome.is_none() {
            self.finish(Outcome::Failed(error), &mut out);
        }
        out
    }

    /// The frames that end a started stream with `error`, whatever its outcome: a host that
    /// holds back the frames of a finished response, until something outside the turn
    /// confirms it, sends these instead when that fails.
    pub fn failure(&mut self, error: &ApiError) -> Vec<String> {
        let mut out = Vec::new();
        self.wire.fail(&self.draft, error, &mut out);
        out
    }

    /// The tokens of the response so far: the sum over its model messages of what each
    /// reported at its start (input, cache) and in its `message_delta` (output). Only
    /// streamed messages report usage (the CLI's `--include-partial-messages`, which the
    /// gateway always sets); a turn's total in its `result` is not the response's when the
    /// turn spans several responses, so it is not used.
    pub fn usage(&self) -> Usage {
        self.draft.usage()
    }

    /// A keep-alive frame: Anthropic's `ping` event, an SSE comment for Chat Completions, and
    /// for the Responses API a `response.in_progress` event once the response has started (a
    /// comment before): clients such as Codex reset their idle timeout on events only.
    pub fn ping(&mut self) -> String {
        self.wire.ping(&self.draft)
    }

    /// Whether any SSE frame has been produced: after that, errors go into the stream instead
    /// of an HTTP status.
    pub fn started(&self) -> bool {
        self.draft.started
    }

    /// How the response ended, once it has.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.draft.outcome.as_ref()
    }

    /// The structured-output mode of the turn, if any.
    pub fn structured(&self) -> Option<&StructuredAnswer> {
        self.draft.options.structured.as_ref()
    }

    /// The client tool calls in the response, in order.
    pub fn tool_calls(&self) -> Vec<&ClientToolCall> {
        self.draft.tool_calls()
    }

    /// The output message items of a Responses API response: each one's id (`msg_…`) and
    /// text, as a later request's `item_reference` names them. None for the other APIs.
    pub fn output_texts(&self) -> Vec<(String, String)> {
        if self.draft.options.api != Api::Responses {
            return Vec::new();
        }
        let id = self.wire.response_id(&self.draft.base_id());
        (self.draft.blocks.iter().enumerate())
            .filter_map(|(b, block)| match block {
                OutBlock::Text(text) => Some((responses::message_item_id(&id, b), text.clone())),
                _ => None,
            })
            .collect()
    }

    /// The response as an assistant message in canonical form, for the history hash.
    pub fn message(&self) -> Message {
        let mut content = Vec::new();
        for block in &self.draft.blocks {
            let block = match block {
                OutBlock::Text(text) => Block::Text { text: text.clone() },
                OutBlock::Tool { call, .. } => Block::ToolUse {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                },
                // Thinking is not part of the history (clients drop or rewrite it).
                OutBlock::Thinking(_) | OutBlock::Redacted => continue,
            };
            conversation::push_block(&mut content, block);
        }
        Message {
            role: Role::Assistant,
            content,
        }
    }

    /// The non-streaming response body, once the response is complete and did not fail.
    pub fn body(&self) -> Option<Value> {
        let stop = match self.draft.outcome.as_ref()? {
            Outcome::Failed(_) => return None,
            Outcome::ToolCalls => "tool_use".to_owned(),
            Outcome::Finished(reason) => reason.clone(),
        };
        Some(self.wire.body(&self.draft, &stop))
    }

    // ---- internals ----------------------------------------------------------------------

    fn client_name(&self, name: &str) -> Option<String> {
        if let Some(client) = self.draft.options.client_tools.get(name) {
            return Some(client.clone());
        }
        let prefix = self.draft.options.client_tool_prefix.as_deref()?;
        name.strip_prefix(prefix)
            .filter(|rest| !rest.is_empty())
            .map(str::to_owned)
    }

    /// Opens the response (its first frames) once.
    fn start(&mut self, out: &mut Vec<String>) {
        if self.draft.started {
            return;
        }
        self.draft.started = true;
        if self.draft.id.is_none() {
            self.draft.id = self.message.clone();
        }
        if self.draft.options.stream {
            self.wire.start(&self.draft, out);
        }
    }

    /// The output block for a CLI block, opened (and the previous one closed) on first sight.
    fn block_for(
        &mut self,
        message_id: &str,
        index: u32,
        out: &mut Vec<String>,
        make: impl FnOnce(usize) -> OutBlock,
    ) -> usize {
        let key = (message_id.to_owned(), index);
        if let Some(&block) = self.index_map.get(&key) {
            return block;
        }
        self.close_open(out);
        let block = self.draft.blocks.len();
        self.draft.blocks.push(make(block));
        self.index_map.insert(key, block);
        self.open = Some(block);
        if self.draft.options.stream {
            self.wire.block_start(&self.draft, block, out);
        }
        block
    }

    fn close_open(&mut self, out: &mut Vec<String>) {
        let Some(block) = self.open.take() else {
            return;
        };
        if self.draft.options.stream {
            self.wire.block_stop(&self.draft, block, out);
        }
    }

    fn delta_text(&mut self, block: usize, text: &str, out: &mut Vec<String>) {
        self.delta(block, Delta::Text, text, out);
    }

    fn delta_thinking(&mut self, block: usize, thinking: &str, out: &mut Vec<String>) {
        self.delta(block, Delta::Thinking, thinking, out);
    }

    fn delta_json(&mut self, block: usize, partial: &str, out: &mut Vec<String>) {
        self.delta(block, Delta::Json, partial, out);
    }

    fn delta(&mut self, block: usize, kind: Delta, piece: &str, out: &mut Vec<String>) {
        if self.draft.options.stream {
            self.wire
                .delta(&self.draft, block, kind, &json_string(piece), out);
        }
    }

    fn finish(&mut self, outcome: Outcome, out: &mut Vec<String>) {
        let stream = self.draft.options.stream;
        match &outcome {
            Outcome::Failed(error) => {
                if stream && self.draft.started {
                    self.close_open(out);
                    self.wire.fail(&self.draft, error, out);
                }
            }
            Outcome::ToolCalls | Outcome::Finished(_) => {
                let stop = match &outcome {
                    Outcome::Finished(reason) => reason.clone(),
                    _ => "tool_use".to_owned(),
                };
                // A response with no content at all still has a start.
                self.start(out);
                if stream {
                    self.close_open(out);
                    self.wire.finish(&self.draft, &stop, out);
                }
            }
        }
        self.open = None;
        self.draft.outcome = Some(outcome);
    }
}

/// A streamed piece's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delta {
    Text,
    Thinking,
    Json,
}

/// A JSON string literal.
fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("strings serialize")
}

fn sse_event(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

fn sse_data(data: &Value) -> String {
    format!("data: {data}\n\n")
}

/// The model message a content chunk of the top-level conversation belongs to.
fn content_message(chunk: &Chunk) -> Option<&str> {
    match chunk {
        Chunk::TextDelta { message_id, .. }
        | Chunk::ToolUse { message_id, .. }
        | Chunk::ThinkingDelta { message_id, .. }
        | Chunk::ThinkingRedacted { message_id, .. } => Some(message_id),
        _ => None,
    }
}

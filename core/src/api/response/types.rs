//! What an encoder is told and what it tells: its options, the response's outcome, the
//! client tool calls and structured answer it holds, and the tokens it used.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::{Api, ApiError};

/// What the encoder needs to know about the request.
#[derive(Debug, Clone)]
pub struct EncoderOptions {
    /// The API to answer in.
    pub api: Api,
    /// Whether to produce SSE frames.
    pub stream: bool,
    /// The model name to report (the one the client asked for).
    pub model: String,
    /// The response id; `None` derives one from the first model message id.
    pub id: Option<String>,
    /// Unix seconds for OpenAI's `created`.
    pub created: u64,
    /// OpenAI `stream_options.include_usage`: a final usage chunk.
    pub include_usage: bool,
    /// Client tools: the name the model calls them by (`mcp__client__lookup`) → the client's
    /// own name (`lookup`). Calls of other tools run inside the CLI and are not shown.
    pub client_tools: BTreeMap<String, String>,
    /// Also treat any tool whose name starts with this prefix as a client tool, named by the
    /// rest (for transcripts, where the client's tool list is not known).
    pub client_tool_prefix: Option<String>,
    /// Responses API: the `previous_response_id` the request continued, echoed in the response.
    pub previous_response_id: Option<String>,
    /// Responses API: whether the response is stored, echoed in the response.
    pub store: bool,
    /// Show the model's thinking ([`ApiRequest::show_thinking`](super::super::ApiRequest)):
    /// Anthropic `thinking` / `redacted_thinking` blocks, Chat Completions `reasoning_content`,
    /// Responses `reasoning` items with the thinking as their summary. Without it, thinking is
    /// left out, as the APIs do when it was not asked for.
    pub show_thinking: bool,
    /// A turn in structured-output mode: the answer comes from the turn's object.
    pub structured: Option<StructuredAnswer>,
    /// Responses API: the request's fields the response object repeats
    /// ([`ApiRequest::echo`](super::super::ApiRequest::echo)); the API's defaults where it
    /// gave none.
    pub echo: serde_json::Map<String, Value>,
}

/// How a turn in the CLI's structured-output mode is answered: from the object the model
/// produced (the turn's `structured_output`), not from its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StructuredAnswer {
    /// As the object's JSON text: a text block, Chat Completions `content`, Responses
    /// `output_text`. The model's other text in the turn is left out.
    Json,
    /// As a call of this client tool, the object its input (a forced `tool_choice`).
    Tool(String),
    /// As a call of the client tool the object names, `{"tool": name, "input": {…}}`
    /// (`tool_choice` `any` / `required`).
    AnyTool,
}

impl StructuredAnswer {
    /// Whether the answer is a client tool call (a forced `tool_choice`): its CLI offers no
    /// client tools, and its turn ends with the call instead of holding it.
    pub fn is_call(&self) -> bool {
        !matches!(self, StructuredAnswer::Json)
    }
}

/// A client tool call in the response.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientToolCall {
    /// The tool_use id (the id the CLI's `tools/call` carries).
    pub id: String,
    /// The client's name of the tool.
    pub name: String,
    /// The input, once complete.
    pub input: Value,
}

/// How a response ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The model finished: `stop_reason` in the Anthropic spelling (`end_turn`, `max_tokens`, …).
    Finished(String),
    /// The model called client tools; the response carries them and the turn waits.
    ToolCalls,
    /// The turn failed.
    Failed(ApiError),
}

/// A block of the response being built.
#[derive(Debug)]
pub(super) enum OutBlock {
    Text(String),
    /// The model's thinking (shown when asked for).
    Thinking(String),
    /// A redacted thinking block (its content is encrypted, and not known here).
    Redacted,
    Tool {
        call: ClientToolCall,
        /// The input JSON text as it streamed.
        partial: String,
        complete: bool,
        /// OpenAI `tool_calls` index.
        call_index: usize,
    },
}

/// The tokens of a response, in the Anthropic API's terms: `input_tokens` counts the input
/// that was neither written to nor read from the prompt cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens outside the prompt cache.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_input_tokens: u64,
}

impl Usage {
    /// Sets the counts a usage object of the Messages API (`message_start`, `message_delta`, a
    /// turn's `result`) carries; the ones it leaves out stay. Its counts are cumulative for
    /// the message, so they replace, not add.
    pub(super) fn update(&mut self, usage: &Value) {
        let field = |name: &str, into: &mut u64| {
            if let Some(n) = usage.get(name).and_then(Value::as_u64) {
                *into = n;
            }
        };
        field("input_tokens", &mut self.input_tokens);
        field("output_tokens", &mut self.output_tokens);
        field(
            "cache_creation_input_tokens",
            &mut self.cache_creation_input_tokens,
        );
        field("cache_read_input_tokens", &mut self.cache_read_input_tokens);
    }

    /// All the input, cached or not (OpenAI's `prompt_tokens`).
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
    }

    pub(super) fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
    }
}

//! The responses an HTTP client of the gateway would get for the turns of a transcript, one
//! after another: the text `ccwire replay --format` prints and the npm package's
//! `encodeTranscript` returns.
//!
//! Every turn is answered by a fresh [`ResponseEncoder`] as if a client had asked for it with the
//! model `claude-code`, `created` 0, usage included, and the tools named `mcp__client__*` as its
//! own tools. A response that ends goes out whole: its SSE frames, or its JSON body on one line.
//! A failure goes out the way the gateway reports it: in the stream once frames were sent,
//! otherwise as the API's error body (an `error` event, or one line).

use super::response::{EncoderOptions, Outcome, ResponseEncoder};
use super::Api;
use crate::Chunk;

/// The model name the responses report.
const REPLAY_MODEL: &str = "claude-code";

/// The tool-name prefix of the client's tools in a transcript.
const REPLAY_CLIENT_TOOL_PREFIX: &str = "mcp__client__";

/// Turns the chunks of a transcript into API responses, one after another. See the
/// [module docs](self).
#[derive(Debug)]
pub struct ReplayResponses {
    api: Api,
    stream: bool,
    encoder: ResponseEncoder,
}

impl ReplayResponses {
    /// Responses in `api`: SSE frames when `stream`, otherwise one JSON body per line.
    pub fn new(api: Api, stream: bool) -> ReplayResponses {
        ReplayResponses {
            api,
            stream,
            encoder: encoder(api, stream),
        }
    }

    /// Takes the next chunk of the transcript; appends the text it produces to `out`.
    pub fn push(&mut self, chunk: &Chunk, out: &mut String) {
        for frame in self.encoder.push(chunk) {
            out.push_str(&frame);
        }
        let Some(outcome) = self.encoder.outcome() else {
            return;
        };
        match (outcome, self.stream) {
            (Outcome::Failed(error), _) if !self.encoder.started() || !self.stream => {
                let body = error.body(self.api);
                match (self.api, self.stream) {
                    (Api::Anthropic | Api::Responses, true) => {
                        push_line(out, "event: error\ndata: ", &body, "\n\n");
                    }
                    (Api::OpenAi, true) => push_line(out, "data: ", &body, "\n\n"),
                    (_, false) => push_line(out, "", &body, "\n"),
                }
            }
            (_, false) => {
                if let Some(body) = self.encoder.body() {
                    push_line(out, "", &body, "\n");
                }
            }
            (_, true) => {}
        }
        self.encoder = encoder(self.api, self.stream);
    }
}

fn encoder(api: Api, stream: bool) -> ResponseEncoder {
    ResponseEncoder::new(EncoderOptions {
        api,
        stream,
        model: REPLAY_MODEL.to_owned(),
        id: None,
        created: 0,
        include_usage: true,
        client_tools: Default::default(),
        client_tool_prefix: Some(REPLAY_CLIENT_TOOL_PREFIX.to_owned()),
        previous_response_id: None,
        store: false,
        show_thinking: false,
        structured: None,
        echo: Default::default(),
    })
}

fn push_line(out: &mut String, before: &str, value: &serde_json::Value, after: &str) {
    out.push_str(before);
    out.push_str(&value.to_string());
    out.push_str(after);
}

//! A turn in the CLI's structured-output mode answered from the model's object: as its JSON
//! text or the client tool call it stands for, streamed as the model writes it.

use serde_json::{Map, Value};

use super::types::{ClientToolCall, OutBlock, Outcome, StructuredAnswer};
use super::ResponseEncoder;
use crate::api::{ApiError, ApiErrorKind};

/// The model's first structured-output call, streamed as the answer while it is written: its
/// tool_use id, the output block, what was sent, and whether the CLI asked the model again
/// (a later call: what was sent is not the answer).
#[derive(Debug)]
pub(super) struct StructuredStream {
    id: String,
    block: usize,
    sent: String,
    superseded: bool,
}

impl ResponseEncoder {
    /// Answers a structured-output turn with the object the model produced: as its JSON text,
    /// or as the client tool call it stands for.
    pub(super) fn answer_structured(
        &mut self,
        answer: &StructuredAnswer,
        object: Option<&crate::Json>,
        out: &mut Vec<String>,
    ) {
        let failed = |why: &str| {
            Outcome::Failed(ApiError::new(
                ApiErrorKind::Unprocessable,
                format!(
                    "the model did not produce the structured output the request asks for: {why}"
                ),
            ))
        };
        if let (Some(stream), Some(object)) = (self.structured_stream.take(), object) {
            return self.end_structured_stream(answer, stream, object, out);
        }
        let Some(object) = object else {
            let outcome = if self.schema_refused {
                Outcome::Failed(ApiError::new(
                    ApiErrorKind::InvalidRequest,
                    "the CLI did not take the request's JSON Schema (it is not one a draft-07 \
                     validator compiles: a `type` that is no type, a `$ref` to nothing, a \
                     pattern that is no regular expression, …), so the model could not give \
                     the structured answer",
                ))
            } else {
                failed("it answered in text")
            };
            return self.finish(outcome, out);
        };
        // The structured answer's own block, after whatever else the response shows.
        let key = ("", u32::MAX);
        let (name, input) = match answer {
            StructuredAnswer::Json => {
                let text = object.get().to_owned();
                self.start(out);
                let block = self.block_for(key.0, key.1, out, |_| OutBlock::Text(text.clone()));
                self.delta_text(block, &text, out);
                return self.finish(Outcome::Finished("end_turn".to_owned()), out);
            }
            StructuredAnswer::Tool(name) => (name.clone(), object.to_value()),
            StructuredAnswer::AnyTool => {
                let mut value = object.to_value();
                let name = value.get("tool").and_then(Value::as_str).map(str::to_owned);
                match (name, value.get_mut("input").map(Value::take)) {
                    (Some(name), Some(input)) => (name, input),
                    _ => return self.finish(failed("no tool name and input"), out),
                }
            }
        };
        if !input.is_object() {
            return self.finish(failed("the tool input is not an object"), out);
        }
        let id = self
            .structured_call
            .clone()
            .unwrap_or_else(|| format!("toolu_{}", self.draft.base_id()));
        let text = input.to_string();
        self.start(out);
        let call_index = self.tool_map.len();
        let block = self.block_for(key.0, key.1, out, |_| OutBlock::Tool {
            call: ClientToolCall {
                id: id.clone(),
                name,
                input,
            },
            partial: text.clone(),
            complete: true,
            call_index,
        });
        self.tool_map.insert(id, block);
        self.delta_json(block, &text, out);
        self.finish(Outcome::Finished("tool_use".to_owned()), out);
    }

    /// The model calls the CLI's structured-output tool: when streaming an answer that is the
    /// object's JSON text or a forced tool's call, its first call's input goes out as it is
    /// written, as the answer's text or the call's input (a call of several tools' envelope
    /// waits for the whole object: its tool is known at the end). A later call means the CLI
    /// asked the model again.
    pub(super) fn stream_structured(
        &mut self,
        id: &str,
        (message_id, index): (&str, u32),
        (complete, input): (bool, &crate::Json),
        out: &mut Vec<String>,
    ) {
        if let Some(stream) = &mut self.structured_stream {
            stream.superseded |= stream.id != id;
            return;
        }
        let name = match &self.draft.options.structured {
            Some(StructuredAnswer::Json) => None,
            Some(StructuredAnswer::Tool(name)) => Some(name.clone()),
            _ => return,
        };
        if !self.draft.options.stream {
            return;
        }
        self.start(out);
        let call_index = self.tool_map.len();
        let block = self.block_for(message_id, index, out, |_| match name {
            None => OutBlock::Text(String::new()),
            Some(name) => OutBlock::Tool {
                call: ClientToolCall {
                    id: id.to_owned(),
                    name,
                    input: Value::Object(Map::new()),
                },
                partial: String::new(),
                complete: false,
                call_index,
            },
        });
        self.structured_stream = Some(StructuredStream {
            id: id.to_owned(),
            block,
            sent: String::new(),
            superseded: false,
        });
        if complete {
            // Without streamed deltas, the whole input at once.
            let text = input.get().to_owned();
            if let Some(stream) = &mut self.structured_stream {
                stream.sent.push_str(&text);
            }
            self.structured_delta(block, &text, out);
        }
    }

    /// A piece of a tool call's input: whether it was the streamed structured answer's (and
    /// went out as its piece).
    pub(super) fn structured_input(
        &mut self,
        id: &str,
        piece: &str,
        out: &mut Vec<String>,
    ) -> bool {
        let Some(stream) = self.structured_stream.as_mut().filter(|s| s.id == id) else {
            return false;
        };
        stream.sent.push_str(piece);
        let block = stream.block;
        self.structured_delta(block, piece, out);
        true
    }

    /// A piece of the streamed structured answer, into its block and out.
    fn structured_delta(&mut self, block: usize, piece: &str, out: &mut Vec<String>) {
        if piece.is_empty() {
            return;
        }
        match &mut self.draft.blocks[block] {
            OutBlock::Text(text) => {
                text.push_str(piece);
                self.delta_text(block, piece, out);
            }
            OutBlock::Tool { partial, .. } => {
                partial.push_str(piece);
                self.delta_json(block, piece, out);
            }
            _ => {}
        }
    }

    /// Ends a streamed structured answer: what was sent is the answer when it is the object
    /// the turn ended with (the model's first call was taken); when the CLI asked the model
    /// again, what was sent is not, and the stream ends with the 422 error that says so.
    fn end_structured_stream(
        &mut self,
        answer: &StructuredAnswer,
        stream: StructuredStream,
        object: &crate::Json,
        out: &mut Vec<String>,
    ) {
        let sent = serde_json::from_str::<Value>(&stream.sent).ok();
        let object = object.to_value();
        if stream.superseded || sent.as_ref() != Some(&object) {
            let error = ApiError::new(
                ApiErrorKind::Unprocessable,
                "the model's first structured output was streamed as it was written, and the                  CLI did not take it (it did not match the schema) and asked the model again:                  what was streamed is not the answer; send the request again (without                  streaming, the answer is the object the CLI takes)",
            );
            return self.finish(Outcome::Failed(error), out);
        }
        match (answer, &mut self.draft.blocks[stream.block]) {
            (StructuredAnswer::Tool(_), OutBlock::Tool { call, complete, .. }) => {
                call.input = object;
                *complete = true;
                self.tool_map.insert(stream.id, stream.block);
                self.finish(Outcome::Finished("tool_use".to_owned()), out);
            }
            _ => self.finish(Outcome::Finished("end_turn".to_owned()), out),
        }
    }
}

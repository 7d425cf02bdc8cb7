//! The Anthropic Messages API's side of a response: the `Message` and its SSE event sequence
//! (`message_start`, a `content_block_start` … `content_block_stop` bracket per block with its
//! deltas, `message_delta`, `message_stop`).

use serde_json::{json, Value};

use super::{sse_event, Delta, Draft, OutBlock, Usage, Wire};
use crate::api::{Api, ApiError};

/// The Messages API's frames and body.
#[derive(Debug, Default)]
pub(super) struct Anthropic;

/// The Anthropic `usage` object.
fn usage(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": usage.output_tokens,
    })
}

impl Wire for Anthropic {
    fn response_id(&self, base: &str) -> String {
        base.to_owned()
    }

    fn start(&mut self, r: &Draft, out: &mut Vec<String>) {
        out.push(sse_event(
            "message_start",
            &json!({
                "type": "message_start",
                "message": {
                    "id": self.response_id(&r.base_id()),
                    "type": "message",
                    "role": "assistant",
                    "model": r.options.model,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                    "usage": usage(&r.usage()),
                },
            }),
        ));
    }

    fn block_start(&mut self, r: &Draft, block: usize, out: &mut Vec<String>) {
        let content_block = match &r.blocks[block] {
            OutBlock::Text(_) => json!({"type": "text", "text": ""}),
            OutBlock::Tool { call, .. } => json!({
                "type": "tool_use", "id": call.id, "name": call.name, "input": {},
            }),
            OutBlock::Thinking(_) => json!({"type": "thinking", "thinking": "", "signature": ""}),
            OutBlock::Redacted => json!({"type": "redacted_thinking", "data": ""}),
        };
        out.push(sse_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": block, "content_block": content_block}),
        ));
    }

    fn block_stop(&mut self, _: &Draft, block: usize, out: &mut Vec<String>) {
        out.push(sse_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": block}),
        ));
    }

    fn delta(&mut self, _: &Draft, block: usize, kind: Delta, piece: &str, out: &mut Vec<String>) {
        let (field, ty) = match kind {
            Delta::Text => ("text", "text_delta"),
            Delta::Thinking => ("thinking", "thinking_delta"),
            Delta::Json => ("partial_json", "input_json_delta"),
        };
        out.push(format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{block},\
             \"delta\":{{\"type\":\"{ty}\",\"{field}\":{piece}}}}}\n\n"
        ));
    }

    fn finish(&mut self, r: &Draft, stop: &str, out: &mut Vec<String>) {
        out.push(sse_event(
            "message_delta",
            &json!({
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": usage(&r.usage()),
            }),
        ));
        out.push(sse_event("message_stop", &json!({"type": "message_stop"})));
    }

    fn fail(&mut self, _: &Draft, error: &ApiError, out: &mut Vec<String>) {
        out.push(sse_event("error", &error.body(Api::Anthropic)));
    }

    fn ping(&mut self, _: &Draft) -> String {
        sse_event("ping", &json!({"type": "ping"}))
    }

    fn body(&self, r: &Draft, stop: &str) -> Value {
        let content: Vec<Value> = r
            .blocks
            .iter()
            .map(|b| match b {
                OutBlock::Text(text) => json!({"type": "text", "text": text}),
                OutBlock::Thinking(thinking) => {
                    json!({"type": "thinking", "thinking": thinking, "signature": ""})
                }
                OutBlock::Redacted => json!({"type": "redacted_thinking", "data": ""}),
                OutBlock::Tool { call, .. } => json!({
                    "type": "tool_use", "id": call.id, "name": call.name, "input": call.input,
                }),
            })
            .collect();
        json!({
            "id": self.response_id(&r.base_id()),
            "type": "message",
            "role": "assistant",
            "model": r.options.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": null,
            "usage": usage(&r.usage()),
        })
    }
}

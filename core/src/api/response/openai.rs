//! The OpenAI Chat Completions API's side of a response: the `chat.completion` and its
//! `chat.completion.chunk` sequence (a role chunk, content, reasoning and tool-call deltas, a
//! chunk with the `finish_reason`, the usage chunk when asked for, `[DONE]`).

use serde_json::{json, Value};

use super::{json_string, sse_data, Delta, Draft, OutBlock, Usage, Wire};
use crate::api::{Api, ApiError};

/// The Chat Completions API's frames and body.
#[derive(Debug, Default)]
pub(super) struct OpenAi;

/// The Chat Completions `usage` object.
fn usage(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.prompt_tokens(),
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.prompt_tokens() + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_input_tokens},
    })
}

/// OpenAI's `finish_reason` for an Anthropic stop reason.
pub fn finish_reason(stop_reason: &str) -> &'static str {
    match stop_reason {
        "tool_use" => "tool_calls",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "refusal" => "content_filter",
        _ => "stop",
    }
}

impl OpenAi {
    /// A `chat.completion.chunk` with this delta.
    fn chunk(&self, r: &Draft, delta: Value, finish: Option<&str>) -> Value {
        let mut chunk = json!({
            "id": self.response_id(&r.base_id()),
            "object": "chat.completion.chunk",
            "created": r.options.created,
            "model": r.options.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if r.options.include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    }
}

impl Wire for OpenAi {
    fn response_id(&self, base: &str) -> String {
        if base.starts_with("chatcmpl-") {
            base.to_owned()
        } else {
            format!("chatcmpl-{base}")
        }
    }

    fn start(&mut self, r: &Draft, out: &mut Vec<String>) {
        let chunk = self.chunk(r, json!({"role": "assistant", "content": ""}), None);
        out.push(sse_data(&chunk));
    }

    fn block_start(&mut self, r: &Draft, block: usize, out: &mut Vec<String>) {
        // Text and reasoning need no opening; a tool call opens with its id and name.
        if let OutBlock::Tool {
            call, call_index, ..
        } = &r.blocks[block]
        {
            let delta = json!({"tool_calls": [{
                "index": call_index, "id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]});
            let chunk = self.chunk(r, delta, None);
            out.push(sse_data(&chunk));
        }
    }

    fn block_stop(&mut self, _: &Draft, _: usize, _: &mut Vec<String>) {}

    fn delta(&mut self, r: &Draft, block: usize, kind: Delta, piece: &str, out: &mut Vec<String>) {
        use std::fmt::Write;
        let mut f = String::with_capacity(piece.len() + 200);
        let _ = write!(
            f,
            "data: {{\"id\":{},\"object\":\"chat.completion.chunk\",\"created\":{},\"model\":{},\
             \"choices\":[{{\"index\":0,\"delta\":",
            json_string(&self.response_id(&r.base_id())),
            r.options.created,
            json_string(&r.options.model),
        );
        // `write!` into a String cannot fail.
        let _ = match (kind, &r.blocks[block]) {
            (Delta::Text, _) => write!(f, "{{\"content\":{piece}}}"),
            (Delta::Thinking, _) => write!(f, "{{\"reasoning_content\":{piece}}}"),
            (Delta::Json, OutBlock::Tool { call_index, .. }) => write!(
                f,
                "{{\"tool_calls\":[{{\"index\":{call_index},\"function\":{{\"arguments\":{piece}}}}}]}}"
            ),
            (Delta::Json, _) => return,
        };
        let usage = if r.options.include_usage {
            ",\"usage\":null"
        } else {
            ""
        };
        let _ = write!(
            f,
            ",\"logprobs\":null,\"finish_reason\":null}}]{usage}}}\n\n"
        );
        out.push(f);
    }

    fn finish(&mut self, r: &Draft, stop: &str, out: &mut Vec<String>) {
        let chunk = self.chunk(r, json!({}), Some(finish_reason(stop)));
        out.push(sse_data(&chunk));
        if r.options.include_usage {
            let mut last = self.chunk(r, json!({}), None);
            last["choices"] = json!([]);
            last["usage"] = usage(&r.usage());
            out.push(sse_data(&last));
        }
        out.push("data: [DONE]\n\n".to_owned());
    }

    fn fail(&mut self, _: &Draft, error: &ApiError, out: &mut Vec<String>) {
        out.push(sse_data(&error.body(Api::OpenAi)));
        out.push("data: [DONE]\n\n".to_owned());
    }

    fn ping(&mut self, _: &Draft) -> String {
        ": ping\n\n".to_owned()
    }

    fn body(&self, r: &Draft, stop: &str) -> Value {
        let text: String = r
            .blocks
            .iter()
            .filter_map(|b| match b {
                OutBlock::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        let reasoning: String = r
            .blocks
            .iter()
            .filter_map(|b| match b {
                OutBlock::Thinking(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        let calls: Vec<Value> = r
            .tool_calls()
            .into_iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.input.to_string()},
                })
            })
            .collect();
        let mut message = json!({
            "role": "assistant",
            "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text) },
            "refusal": null,
        });
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        if !reasoning.is_empty() {
            message["reasoning_content"] = Value::String(reasoning);
        }
        json!({
            "id": self.response_id(&r.base_id()),
            "object": "chat.completion",
            "created": r.options.created,
            "model": r.options.model,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": finish_reason(stop),
            }],
            "usage": usage(&r.usage()),
        })
    }
}

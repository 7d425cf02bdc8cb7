//! The OpenAI Responses API's side of a response: the `response` object and its event sequence
//! (`response.created`, `response.in_progress`, an `output_item.added` … `output_item.done`
//! bracket per output item with its deltas, `response.completed` / `response.incomplete` /
//! `response.failed`), every event numbered.

use serde_json::{json, Value};

use super::{sse_event, Delta, Draft, OutBlock, Usage, Wire};
use crate::api::{ApiError, ApiErrorKind};

/// The Responses API's frames and body; it numbers its events.
#[derive(Debug, Default)]
pub(super) struct Responses {
    /// The next event's `sequence_number`.
    sequence: u64,
}

/// The Responses `usage` object.
fn usage(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.prompt_tokens(),
        "input_tokens_details": {"cached_tokens": usage.cache_read_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt_tokens() + usage.output_tokens,
    })
}

/// An `output_text` content part.
fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// The `error.code` of a failed response.
fn error_code(error: &ApiError) -> &'static str {
    match error.kind {
        ApiErrorKind::RateLimit => "rate_limit_exceeded",
        ApiErrorKind::Billing => "insufficient_quota",
        ApiErrorKind::InvalidRequest => "invalid_prompt",
        _ => "server_error",
    }
}

/// The id of the output message item of block `block` of response `response_id`
/// (`msg_<response>_<block>`): what a later request's `item_reference` names.
pub(super) fn message_item_id(response_id: &str, block: usize) -> String {
    let id = response_id.strip_prefix("resp_").unwrap_or(response_id);
    format!("msg_{id}_{block}")
}

impl Responses {
    /// An SSE event with its `type` and `sequence_number`.
    /// An event: `type` and `sequence_number` first, as the API writes them, then `data`'s
    /// fields.
    fn event(&mut self, ty: &str, data: Value) -> String {
        let mut event = serde_json::Map::new();
        event.insert("type".into(), json!(ty));
        event.insert("sequence_number".into(), json!(self.sequence));
        self.sequence += 1;
        if let Value::Object(fields) = data {
            event.extend(fields);
        }
        sse_event(ty, &Value::Object(event))
    }

    /// The id of an output item.
    fn item_id(&self, r: &Draft, block: usize) -> String {
        match &r.blocks[block] {
            OutBlock::Text(_) => message_item_id(&self.response_id(&r.base_id()), block),
            OutBlock::Tool { call, .. } => format!("fc_{}", call.id),
            OutBlock::Thinking(_) | OutBlock::Redacted => {
                let id = self.response_id(&r.base_id());
                format!("rs_{}_{block}", id.strip_prefix("resp_").unwrap_or(&id))
            }
        }
    }

    /// An output item, as it is when opened or when done.
    fn item(&self, r: &Draft, block: usize, done: bool) -> Value {
        let status = if done { "completed" } else { "in_progress" };
        match &r.blocks[block] {
            OutBlock::Text(text) => json!({
                "id": self.item_id(r, block),
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": if done { json!([output_text(text)]) } else { json!([]) },
            }),
            OutBlock::Thinking(text) => json!({
                "id": self.item_id(r, block),
                "type": "reasoning",
                "status": status,
                "summary": if done { json!([{"type": "summary_text", "text": text}]) } else { json!([]) },
            }),
            OutBlock::Redacted => json!({
                "id": self.item_id(r, block),
                "type": "reasoning",
                "status": status,
                "summary": [],
            }),
            OutBlock::Tool { call, partial, .. } => {
                let mut item = json!({
                    "id": self.item_id(r, block),
                    "type": "function_call",
                    "status": status,
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": if !done {
                        String::new()
                    } else if partial.is_empty() {
                        call.input.to_string()
                    } else {
                        partial.clone()
                    },
                });
                // A function of one of the request's `namespace` tools, by its own name.
                let tools = r.options.echo.get("tools");
                if let Some((namespace, name)) =
                    crate::api::responses::namespace_of(tools, &call.name)
                {
                    item["name"] = json!(name);
                    item["namespace"] = json!(namespace);
                }
                item
            }
        }
    }

    /// The `response` object. `stop` is the stop reason once the response ended (`None`
    /// while in progress); `error` makes it a failed one.
    fn object(&self, r: &Draft, stop: Option<&str>, error: Option<&ApiError>) -> Value {
        let (status, incomplete) = match (stop, error) {
            (_, Some(_)) => ("failed", Value::Null),
            (None, None) => ("in_progress", Value::Null),
            (Some("max_tokens" | "model_context_window_exceeded"), None) => {
                ("incomplete", json!({"reason": "max_output_tokens"}))
            }
            (Some("refusal"), None) => ("incomplete", json!({"reason": "content_filter"})),
            (Some(_), None) => ("completed", Value::Null),
        };
        let output: Vec<Value> = if stop.is_some() || error.is_some() {
            (0..r.blocks.len()).map(|b| self.item(r, b, true)).collect()
        } else {
            Vec::new()
        };
        let mut object = json!({
            "id": self.response_id(&r.base_id()),
            "object": "response",
            "created_at": r.options.created,
            "status": status,
            "background": false,
            "error": error.map(|e| json!({"code": error_code(e), "message": e.message})),
            "incomplete_details": incomplete,
            "instructions": null,
            "max_output_tokens": null,
            "model": r.options.model,
            "output": output,
            "parallel_tool_calls": true,
            "previous_response_id": r.options.previous_response_id,
            "reasoning": {"effort": null, "summary": null},
            "store": r.options.store,
            "temperature": 1,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1,
            "truncation": "disabled",
            "usage": if stop.is_some() { usage(&r.usage()) } else { Value::Null },
            "user": null,
            "metadata": {},
        });
        // What the request said of these, as it said it.
        if let Value::Object(fields) = &mut object {
            for (key, value) in &r.options.echo {
                fields.insert(key.clone(), value.clone());
            }
        }
        object
    }
}

impl Wire for Responses {
    fn response_id(&self, base: &str) -> String {
        if base.starts_with("resp_") {
            base.to_owned()
        } else {
            format!("resp_{}", base.strip_prefix("msg_").unwrap_or(base))
        }
    }

    fn start(&mut self, r: &Draft, out: &mut Vec<String>) {
        let response = self.object(r, None, None);
        let created = self.event("response.created", json!({"response": response}));
        out.push(created);
        let response = self.object(r, None, None);
        let progress = self.event("response.in_progress", json!({"response": response}));
        out.push(progress);
    }

    fn block_start(&mut self, r: &Draft, block: usize, out: &mut Vec<String>) {
        let is_text = matches!(r.blocks[block], OutBlock::Text(_));
        let is_thinking = matches!(r.blocks[block], OutBlock::Thinking(_));
        let item = self.item(r, block, false);
        let added = self.event(
            "response.output_item.added",
            json!({"output_index": block, "item": item}),
        );
        out.push(added);
        if is_text {
            let item_id = self.item_id(r, block);
            let part = self.event(
                "response.content_part.added",
                json!({
                    "item_id": item_id, "output_index": block, "content_index": 0,
                    "part": output_text(""),
                }),
            );
            out.push(part);
        }
        if is_thinking {
            let item_id = self.item_id(r, block);
            let part = self.event(
                "response.reasoning_summary_part.added",
                json!({
                    "item_id": item_id, "output_index": block, "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""},
                }),
            );
            out.push(part);
        }
    }

    fn block_stop(&mut self, r: &Draft, block: usize, out: &mut Vec<String>) {
        let item_id = self.item_id(r, block);
        let item = self.item(r, block, true);
        match &r.blocks[block] {
            OutBlock::Text(text) => {
                let done = self.event(
                    "response.output_text.done",
                    json!({
                        "item_id": item_id, "output_index": block, "content_index": 0,
                        "text": text, "logprobs": [],
                    }),
                );
                out.push(done);
                let part = self.event(
                    "response.content_part.done",
                    json!({
                        "item_id": item_id, "output_index": block, "content_index": 0,
                        "part": output_text(text),
                    }),
                );
                out.push(part);
            }
            OutBlock::Tool { .. } => {
                let data = json!({
                    "item_id": item_id, "output_index": block,
                    "name": item["name"], "arguments": item["arguments"],
                });
                let done = self.event("response.function_call_arguments.done", data);
                out.push(done);
            }
            OutBlock::Thinking(text) => {
                let done = self.event(
                    "response.reasoning_summary_text.done",
                    json!({
                        "item_id": item_id, "output_index": block, "summary_index": 0,
                        "text": text,
                    }),
                );
                out.push(done);
                let part = self.event(
                    "response.reasoning_summary_part.done",
                    json!({
                        "item_id": item_id, "output_index": block, "summary_index": 0,
                        "part": {"type": "summary_text", "text": text},
                    }),
                );
                out.push(part);
            }
            OutBlock::Redacted => {}
        }
        let done = self.event(
            "response.output_item.done",
            json!({"output_index": block, "item": item}),
        );
        out.push(done);
    }

    fn delta(&mut self, r: &Draft, block: usize, kind: Delta, piece: &str, out: &mut Vec<String>) {
        let item = super::json_string(&self.item_id(r, block));
        let sequence = self.sequence;
        self.sequence += 1;
        // The fields in the order of the API's own events.
        let (ty, index, after) = match kind {
            Delta::Text => (
                "response.output_text.delta",
                ",\"content_index\":0",
                ",\"logprobs\":[]",
            ),
            Delta::Thinking => (
                "response.reasoning_summary_text.delta",
                ",\"summary_index\":0",
                "",
            ),
            Delta::Json => ("response.function_call_arguments.delta", "", ""),
        };
        out.push(format!(
            "event: {ty}\ndata: {{\"type\":\"{ty}\",\"sequence_number\":{sequence},\"item_id\":{item},\
             \"output_index\":{block}{index},\"delta\":{piece}{after}}}\n\n"
        ));
    }

    fn finish(&mut self, r: &Draft, stop: &str, out: &mut Vec<String>) {
        let response = self.object(r, Some(stop), None);
        let event = match response["status"].as_str() {
            Some("incomplete") => "response.incomplete",
            _ => "response.completed",
        };
        let done = self.event(event, json!({"response": response}));
        out.push(done);
    }

    fn fail(&mut self, r: &Draft, error: &ApiError, out: &mut Vec<String>) {
        let response = self.object(r, None, Some(error));
        let failed = self.event("response.failed", json!({"response": response}));
        out.push(failed);
    }

    /// A `response.in_progress` event once the response has started (a comment before):
    /// clients such as Codex reset their idle timeout on events only.
    fn ping(&mut self, r: &Draft) -> String {
        if r.started && r.outcome.is_none() {
            let response = self.object(r, None, None);
            self.event("response.in_progress", json!({"response": response}))
        } else {
            ": ping\n\n".to_owned()
        }
    }

    fn body(&self, r: &Draft, stop: &str) -> Value {
        self.object(r, Some(stop), None)
    }
}

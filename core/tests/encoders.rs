//! The API response encoders over every corpus transcript: the SSE sequences follow each API's
//! grammar, and what a client accumulates from the stream equals the non-streaming body.

mod common;

use ccwire_core::api::response::{EncoderOptions, Outcome, ResponseEncoder, StructuredAnswer};
use ccwire_core::api::{Api, ApiErrorKind};
use ccwire_core::Chunk;
use serde_json::{json, Value};

fn options(api: Api, stream: bool) -> EncoderOptions {
    options_showing(api, stream, false)
}

fn options_showing(api: Api, stream: bool, show_thinking: bool) -> EncoderOptions {
    EncoderOptions {
        api,
        stream,
        model: "test-model".into(),
        id: None,
        created: 1_700_000_000,
        include_usage: true,
        client_tools: Default::default(),
        client_tool_prefix: Some("mcp__client__".into()),
        previous_response_id: None,
        store: false,
        show_thinking,
        structured: None,
        echo: Default::default(),
    }
}

/// One response as both encoders saw it.
#[derive(Debug)]
struct Response {
    frames: Vec<String>,
    body: Option<Value>,
    outcome: Outcome,
    started: bool,
}

/// Replays a transcript and cuts its chunks into responses, like `ccwire replay --format`.
fn responses(chunks: &[Chunk], api: Api) -> Vec<Response> {
    responses_showing(chunks, api, false)
}

/// [`responses`], showing the model's thinking or not.
fn responses_showing(chunks: &[Chunk], api: Api, show: bool) -> Vec<Response> {
    let options = |stream| options_showing(api, stream, show);
    let mut out = Vec::new();
    let mut stream = ResponseEncoder::new(options(true));
    let mut plain = ResponseEncoder::new(options(false));
    let mut frames = Vec::new();
    for chunk in chunks {
        frames.extend(stream.push(chunk));
        assert!(
            plain.push(chunk).is_empty(),
            "a non-streaming encoder wrote frames"
        );
        assert_eq!(
            stream.outcome().is_some(),
            plain.outcome().is_some(),
            "streaming and non-streaming encoders end at different chunks"
        );
        if let Some(outcome) = stream.outcome() {
            assert_eq!(Some(outcome), plain.outcome());
            out.push(Response {
                frames: std::mem::take(&mut frames),
                body: plain.body(),
                outcome: outcome.clone(),
                started: stream.started(),
            });
            stream = ResponseEncoder::new(options(true));
            plain = ResponseEncoder::new(options(false));
        }
    }
    out
}

/// A host may hand an encoder only the chunk types it reads (`CHUNK_TYPES`, as the npm package
/// does): on every transcript, every API, thinking shown or not, it answers the same.
#[test]
fn the_chunk_types_an_encoder_reads_are_all_it_needs() {
    use ccwire_core::api::response::CHUNK_TYPES;
    for (name, bytes) in common::corpus() {
        let chunks = ccwire_core::replay(&bytes);
        let read: Vec<Chunk> = chunks
            .iter()
            .filter(|c| CHUNK_TYPES.contains(&c.kind()))
            .cloned()
            .collect();
        for api in [Api::Anthropic, Api::OpenAi, Api::Responses] {
            for show in [false, true] {
                let all = responses_showing(&chunks, api, show);
                let some = responses_showing(&read, api, show);
                assert_eq!(all.len(), some.len(), "{name} {api:?}");
                for (a, b) in all.iter().zip(&some) {
                    assert_eq!(a.frames, b.frames, "{name} {api:?} show_thinking={show}");
                    assert_eq!(a.body, b.body, "{name} {api:?} show_thinking={show}");
                    assert_eq!(a.outcome, b.outcome, "{name} {api:?} show_thinking={show}");
                }
            }
        }
    }
}

fn parse_sse(frames: &[String]) -> Vec<(Option<String>, String)> {
    frames
        .iter()
        .map(|frame| {
            assert!(
                frame.ends_with("\n\n"),
                "an SSE frame ends with a blank line: {frame:?}"
            );
            let mut event = None;
            let mut data = None;
            for line in frame.trim_end().lines() {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = Some(e.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    assert!(data.is_none(), "one data line per frame");
                    data = Some(d.to_owned());
                } else {
                    panic!("unexpected SSE line {line:?}");
                }
            }
            (event, data.expect("every frame has data"))
        })
        .collect()
}

/// Accumulates an Anthropic stream as the SDK does, checking the event grammar.
fn accumulate_anthropic(frames: &[String]) -> Result<Value, Value> {
    let mut message: Option<Value> = None;
    let mut open: Option<usize> = None;
    let mut partial = String::new();
    let mut stopped = false;
    for (event, data) in parse_sse(frames) {
        let data: Value = serde_json::from_str(&data).expect("data is JSON");
        let event = event.expect("anthropic frames name their event");
        assert_eq!(data["type"], event.as_str(), "event name equals data.type");
        assert!(!stopped, "nothing follows message_stop");
        match event.as_str() {
            "message_start" => {
                assert!(message.is_none(), "one message_start");
                message = Some(data["message"].clone());
            }
            "content_block_start" => {
                assert!(open.is_none(), "a block starts while another is open");
                let m = message.as_mut().expect("message_start first");
                let content = m["content"].as_array_mut().unwrap();
                assert_eq!(
                    data["index"],
                    content.len(),
                    "block indices count up from 0"
                );
                content.push(data["content_block"].clone());
                open = Some(content.len() - 1);
                partial.clear();
            }
            "content_block_delta" => {
                let i = open.expect("a delta inside an open block");
                assert_eq!(data["index"], i);
                let block = &mut message.as_mut().unwrap()["content"][i];
                match data["delta"]["type"].as_str().unwrap() {
                    "text_delta" => {
                        let text = block["text"].as_str().unwrap().to_owned()
                            + data["delta"]["text"].as_str().unwrap();
                        block["text"] = json!(text);
                    }
                    "input_json_delta" => {
                        partial.push_str(data["delta"]["partial_json"].as_str().unwrap())
                    }
                    "thinking_delta" => {
                        let thinking = block["thinking"].as_str().unwrap().to_owned()
                            + data["delta"]["thinking"].as_str().unwrap();
                        block["thinking"] = json!(thinking);
                    }
                    other => panic!("unexpected delta {other}"),
                }
            }
            "content_block_stop" => {
                let i = open.take().expect("a stop closes an open block");
                assert_eq!(data["index"], i);
                let block = &mut message.as_mut().unwrap()["content"][i];
                if block["type"] == "tool_use" && !partial.is_empty() {
                    block["input"] = serde_json::from_str(&partial).expect("input JSON joins");
                }
            }
            "message_delta" => {
                assert!(open.is_none(), "blocks are closed before message_delta");
                let m = message.as_mut().expect("message_start first");
                m["stop_reason"] = data["delta"]["stop_reason"].clone();
                m["usage"] = data["usage"].clone();
            }
            "message_stop" => stopped = true,
            "error" => return Err(data),
            other => panic!("unexpected event {other}"),
        }
    }
    assert!(stopped, "the stream ends with message_stop");
    Ok(message.expect("a message"))
}

/// Accumulates an OpenAI stream, checking the chunk grammar.
fn accumulate_openai(frames: &[String]) -> Result<Value, Value> {
    let frames = parse_sse(frames);
    let (last, frames) = frames.split_last().expect("frames");
    assert_eq!(last.1, "[DONE]", "the stream ends with [DONE]");
    let mut role = None;
    let mut content = String::new();
    let mut reasoning = String::new();
    let mut calls: Vec<Value> = Vec::new();
    let mut finish = None;
    let mut usage = None;
    let mut id = None;
    for (event, data) in frames {
        assert!(event.is_none(), "openai frames are data-only");
        let chunk: Value = serde_json::from_str(data).expect("data is JSON");
        if chunk.get("error").is_some() {
            return Err(chunk);
        }
        assert_eq!(chunk["object"], "chat.completion.chunk");
        let this_id = chunk["id"].as_str().unwrap().to_owned();
        assert_eq!(id.get_or_insert(this_id.clone()), &this_id, "one id");
        assert!(
            finish.is_none() || chunk["choices"] == json!([]),
            "only usage after finish"
        );
        if chunk["choices"] == json!([]) {
            usage = Some(chunk["usage"].clone());
            continue;
        }
        let choice = &chunk["choices"][0];
        let delta = &choice["delta"];
        if let Some(r) = delta.get("role") {
            assert!(role.is_none(), "the role comes once");
            role = Some(r.clone());
        }
        assert!(role.is_some(), "the first chunk carries the role");
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            content.push_str(text);
        }
        if let Some(text) = delta.get("reasoning_content").and_then(Value::as_str) {
            reasoning.push_str(text);
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = call["index"].as_u64().unwrap() as usize;
            if index == calls.len() {
                assert!(call["id"].is_string(), "a new tool call carries its id");
                calls.push(json!({"id": call["id"], "type": "function", "function": {
                    "name": call["function"]["name"], "arguments": ""}}));
            }
            let args = calls[index]["function"]["arguments"]
                .as_str()
                .unwrap()
                .to_owned()
                + call["function"]["arguments"].as_str().unwrap_or("");
            calls[index]["function"]["arguments"] = json!(args);
        }
        if !choice["finish_reason"].is_null() {
            finish = Some(choice["finish_reason"].clone());
        }
    }
    let mut message = json!({
        "role": role.expect("a role"),
        "content": if content.is_empty() && !calls.is_empty() { Value::Null } else { json!(content) },
        "refusal": null,
    });
    if !calls.is_empty() {
        message["tool_calls"] = json!(calls);
    }
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
    }
    Ok(
        json!({"message": message, "finish_reason": finish.expect("a finish reason"), "usage": usage.expect("a usage chunk")}),
    )
}

/// What a Responses API client builds from the stream, checking the event grammar on the way:
/// sequence numbers count from 0, `response.created` then `response.in_progress` open it,
/// each output item is opened at the next index, carries deltas only while open, and is done
/// with exactly the content its deltas built; the last event is `response.completed` /
/// `response.incomplete` (`Ok`, its response) or `response.failed` (`Err`, its response).
/// The response `frames` of `api` make, put together as the API's SDKs do.
fn accumulate(api: Api, frames: &[String]) -> Result<Value, Value> {
    match api {
        Api::Anthropic => accumulate_anthropic(frames),
        Api::OpenAi => accumulate_openai(frames),
        Api::Responses => accumulate_responses(frames),
    }
}

fn accumulate_responses(frames: &[String]) -> Result<Value, Value> {
    let mut items: Vec<Value> = Vec::new();
    let mut open: Option<usize> = None;
    let mut text = String::new();
    let mut arguments = String::new();
    let events: Vec<(String, Value)> = parse_sse(frames)
        .into_iter()
        .map(|(event, data)| {
            let event = event.expect("every frame names its event");
            let data: Value = serde_json::from_str(&data).expect("data is JSON");
            assert_eq!(
                data["type"],
                event.as_str(),
                "the event name is the data's type"
            );
            (event, data)
        })
        .collect();
    for (n, (event, data)) in events.iter().enumerate() {
        assert_eq!(
            data["sequence_number"], n,
            "sequence numbers count up from 0"
        );
        match (n, event.as_str()) {
            (0, "response.created") | (1, "response.in_progress") => {
                assert_eq!(data["response"]["status"], "in_progress");
                assert_eq!(data["response"]["output"], json!([]));
                continue;
            }
            (0 | 1, other) => panic!("the stream opens with created, in_progress: {other}"),
            _ => {}
        }
        let index = data["output_index"].as_u64().map(|i| i as usize);
        let item_id = data["item_id"].as_str();
        let open_id = open.map(|i| items[i]["id"].as_str().unwrap().to_owned());
        match event.as_str() {
            "response.output_item.added" => {
                assert_eq!(open, None, "an item opens after the last one is done");
                assert_eq!(index, Some(items.len()), "items open in order");
                assert_eq!(data["item"]["status"], "in_progress");
                items.push(data["item"].clone());
                open = index;
                text.clear();
                arguments.clear();
            }
            "response.content_part.added" | "response.content_part.done" => {
                assert_eq!(item_id, open_id.as_deref(), "{event} of the open item");
                assert_eq!(items[open.unwrap()]["type"], "message");
            }
            "response.reasoning_summary_part.added" | "response.reasoning_summary_part.done" => {
                assert_eq!(item_id, open_id.as_deref(), "{event} of the open item");
                assert_eq!(items[open.unwrap()]["type"], "reasoning");
            }
            "response.reasoning_summary_text.delta" => {
                assert_eq!(item_id, open_id.as_deref(), "{event} of the open item");
                text.push_str(data["delta"].as_str().unwrap());
            }
            "response.reasoning_summary_text.done" => {
                assert_eq!(item_id, open_id.as_deref());
                assert_eq!(
                    data["text"],
                    text.as_str(),
                    "the done summary is the deltas'"
                );
            }
            "response.output_text.delta" => {
                assert_eq!(item_id, open_id.as_deref(), "{event} of the open item");
                text.push_str(data["delta"].as_str().unwrap());
            }
            "response.output_text.done" => {
                assert_eq!(item_id, open_id.as_deref());
                assert_eq!(data["text"], text.as_str(), "the done text is the deltas'");
            }
            "response.function_call_arguments.delta" => {
                assert_eq!(item_id, open_id.as_deref(), "{event} of the open item");
                arguments.push_str(data["delta"].as_str().unwrap());
            }
            "response.function_call_arguments.done" => {
                assert_eq!(item_id, open_id.as_deref());
                let done = data["arguments"].as_str().unwrap();
                if !arguments.is_empty() {
                    assert_eq!(done, arguments, "the done arguments are the deltas'");
                }
                assert_eq!(data["name"], items[open.unwrap()]["name"]);
            }
            "response.output_item.done" => {
                assert_eq!(index, open, "the open item is done");
                let item = &data["item"];
                assert_eq!(item["status"], "completed");
                assert_eq!(item["id"], items[index.unwrap()]["id"]);
                if item["type"] == "message" {
                    assert_eq!(item["content"][0]["text"], text.as_str());
                }
                if item["type"] == "reasoning" && !text.is_empty() {
                    assert_eq!(item["summary"][0]["text"], text.as_str());
                }
                items[index.unwrap()] = item.clone();
                open = None;
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                assert_eq!(n, events.len() - 1, "{event} ends the stream");
                let response = data["response"].clone();
                if event == "response.failed" {
                    assert_eq!(response["status"], "failed");
                    return Err(response);
                }
                assert_eq!(open, None, "every item is done before the end");
                assert_eq!(
                    response["output"],
                    json!(items),
                    "the final output is the items"
                );
                return Ok(response);
            }
            other => panic!("unexpected event {other}"),
        }
    }
    panic!("the stream did not end");
}

/// Tool arguments as objects, so key order inside the JSON text does not matter.
fn normalize_openai(mut message: Value) -> Value {
    if let Some(calls) = message["tool_calls"].as_array_mut() {
        for call in calls {
            let args: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            call["function"]["arguments"] = args;
        }
    }
    message
}

#[test]
fn streams_follow_the_grammar_and_accumulate_to_the_body() {
    for (name, bytes) in common::corpus() {
        let chunks = ccwire_core::replay(&bytes);
        for (api, show) in [Api::Anthropic, Api::OpenAi, Api::Responses]
            .into_iter()
            .flat_map(|api| [(api, false), (api, true)])
        {
            for (i, response) in responses_showing(&chunks, api, show)
                .into_iter()
                .enumerate()
            {
                let ctx = format!("{name} {api:?} thinking shown {show}, response {i}");
                match (&response.outcome, api) {
                    (Outcome::Failed(_), _) if !response.started => {
                        assert!(response.frames.is_empty(), "{ctx}: frames before an error");
                        assert!(response.body.is_none(), "{ctx}");
                    }
                    (Outcome::Failed(_), Api::Anthropic) => {
                        let err = accumulate_anthropic(&response.frames).expect_err(&ctx);
                        assert_eq!(err["type"], "error", "{ctx}");
                    }
                    (Outcome::Failed(_), Api::OpenAi) => {
                        accumulate_openai(&response.frames).expect_err(&ctx);
                    }
                    (Outcome::Failed(error), Api::Responses) => {
                        let failed = accumulate_responses(&response.frames).expect_err(&ctx);
                        assert_eq!(failed["error"]["message"], error.message.as_str(), "{ctx}");
                    }
                    (outcome, Api::Responses) => {
                        let streamed = accumulate_responses(&response.frames)
                            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                        let body = response.body.clone().expect("a body");
                        assert_eq!(
                            streamed, body,
                            "{ctx}: the final event's response is the body"
                        );
                        let calls = body["output"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .filter(|item| item["type"] == "function_call")
                            .count();
                        assert_eq!(
                            *outcome == Outcome::ToolCalls,
                            calls > 0,
                            "{ctx}: function calls exactly when the response waits for them"
                        );
                    }
                    (_, Api::Anthropic) => {
                        let streamed = accumulate_anthropic(&response.frames)
                            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                        let body = response.body.clone().expect("a body");
                        assert_eq!(streamed["content"], body["content"], "{ctx}");
                        assert_eq!(streamed["stop_reason"], body["stop_reason"], "{ctx}");
                        assert_eq!(streamed["id"], body["id"], "{ctx}");
                        assert_eq!(
                            streamed["usage"]["output_tokens"], body["usage"]["output_tokens"],
                            "{ctx}"
                        );
                        let tool_uses = body["content"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .filter(|b| b["type"] == "tool_use")
                            .count();
                        assert_eq!(
                            body["stop_reason"] == "tool_use",
                            tool_uses > 0,
                            "{ctx}: stop_reason tool_use exactly when tools are called"
                        );
                    }
                    (_, Api::OpenAi) => {
                        let streamed = accumulate_openai(&response.frames)
                            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                        let body = response.body.clone().expect("a body");
                        let choice = &body["choices"][0];
                        assert_eq!(
                            normalize_openai(streamed["message"].clone()),
                            normalize_openai(choice["message"].clone()),
                            "{ctx}"
                        );
                        assert_eq!(streamed["finish_reason"], choice["finish_reason"], "{ctx}");
                        assert_eq!(streamed["usage"], body["usage"], "{ctx}");
                    }
                }
            }
        }
    }
}

#[test]
fn parallel_client_calls_come_back_together_then_the_answer() {
    let chunks = ccwire_core::replay(&common::transcript("w_parallel_readonly"));
    let responses = responses(&chunks, Api::Anthropic);
    assert_eq!(responses.len(), 2, "{responses:#?}");
    let first = responses[0].body.as_ref().unwrap();
    assert_eq!(first["stop_reason"], "tool_use");
    let calls: Vec<(&str, &Value)> = first["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["name"].as_str().unwrap(), &b["input"]))
        .collect();
    assert_eq!(
        calls,
        [
            ("lookup", &json!({"query": "alpha"})),
            ("lookup", &json!({"query": "beta"}))
        ]
    );
    let second = responses[1].body.as_ref().unwrap();
    assert_eq!(second["stop_reason"], "end_turn");
    assert!(second["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("lookup(alpha) = result-alpha"));

    let openai = self::responses(&chunks, Api::OpenAi);
    let choice = &openai[0].body.as_ref().unwrap()["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    assert_eq!(
        choice["message"]["tool_calls"][1]["function"]["arguments"],
        r#"{"query":"beta"}"#
    );
}

#[test]
fn the_cli_s_own_api_error_message_becomes_an_error_with_the_upstream_status() {
    for (name, status) in [("f_api_error_400", 400), ("f_api_error_500_retries", 500)] {
        let chunks = ccwire_core::replay(&common::transcript(name));
        let responses = responses(&chunks, Api::Anthropic);
        assert_eq!(responses.len(), 1, "{name}");
        let Outcome::Failed(error) = &responses[0].outcome else {
            panic!("{name}: {:?}", responses[0].outcome);
        };
        assert!(
            !responses[0].started,
            "{name}: the synthetic error text was streamed"
        );
        assert_eq!(error.status(), status, "{name}");
        assert!(
            error.message.contains("API Error"),
            "{name}: {}",
            error.message
        );
        if status == 400 {
            assert_eq!(error.kind, ApiErrorKind::InvalidRequest);
        }
        // A server error is no limit: no wait to suggest, whatever the CLI's backoff was.
        assert_eq!(error.retry_after, None, "{name}");
    }
}

#[test]
fn the_cli_s_own_tools_stay_inside_one_response() {
    // A Read tool call between two model messages: one response with both texts.
    let chunks = ccwire_core::replay(&common::transcript("e_partial_messages"));
    let responses = responses(&chunks, Api::Anthropic);
    assert_eq!(responses.len(), 1);
    let body = responses[0].body.as_ref().unwrap();
    assert_eq!(body["stop_reason"], "end_turn");
    let types: Vec<&str> = body["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["text", "text"]);
}

#[test]
fn sse_snapshots() {
    for name in ["w_parallel_readonly", "e_partial_messages"] {
        let chunks = ccwire_core::replay(&common::transcript(name));
        for (api, label) in [
            (Api::Anthropic, "anthropic"),
            (Api::OpenAi, "openai"),
            (Api::Responses, "responses"),
        ] {
            let text: String = responses(&chunks, api)
                .into_iter()
                .flat_map(|r| r.frames)
                .collect();
            insta::assert_snapshot!(format!("{name}-{label}-sse"), text);
        }
    }
}

/// The CLI's stream of one model message answering with text, with the usage a model reports
/// (prompt cache included), then the turn's result.
fn message_with_usage(id: &str, start_usage: Value, delta_usage: Value) -> Vec<String> {
    let event = |event: Value| {
        json!({"type": "stream_event", "event": event, "session_id": "s", "parent_tool_use_id": null, "api_message_id": id})
            .to_string()
    };
    vec![
        event(
            json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "usage": start_usage}}),
        ),
        event(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi."}}),
        ),
        event(json!({"type": "content_block_stop", "index": 0})),
        event(
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": delta_usage}),
        ),
        event(json!({"type": "message_stop"})),
    ]
}

#[test]
fn usage_is_what_the_model_reported_in_each_api_s_fields() {
    let mut lines = message_with_usage(
        "msg_1",
        json!({"input_tokens": 12, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 4000, "output_tokens": 1}),
        json!({"output_tokens": 42}),
    );
    lines.push(
        json!({"type": "result", "subtype": "success", "is_error": false, "result": "Hi.",
            "usage": {"input_tokens": 999, "output_tokens": 999}})
        .to_string(),
    );
    let chunks = ccwire_core::replay((lines.join("\n") + "\n").as_bytes());
    let start = chunks
        .iter()
        .find(|c| matches!(c, Chunk::MessageStart { .. }))
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&start.to_json()).unwrap()["usage"]
            ["cache_read_input_tokens"],
        4000,
        "the message_start chunk carries the model's usage"
    );

    let anthropic = responses(&chunks, Api::Anthropic);
    let [response] = anthropic.as_slice() else {
        panic!("{anthropic:?}")
    };
    let full = json!({"input_tokens": 12, "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 4000, "output_tokens": 42});
    assert_eq!(response.body.as_ref().unwrap()["usage"], full);
    let events: Vec<Value> = parse_sse(&response.frames)
        .into_iter()
        .map(|(_, data)| serde_json::from_str(&data).unwrap())
        .collect();
    assert_eq!(
        events[0]["message"]["usage"],
        json!({"input_tokens": 12, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 4000, "output_tokens": 1}),
        "message_start: the input as the model reported it at the start"
    );
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["usage"], full);

    let openai = responses(&chunks, Api::OpenAi);
    let expected = json!({"prompt_tokens": 4312, "completion_tokens": 42, "total_tokens": 4354,
        "prompt_tokens_details": {"cached_tokens": 4000}});
    assert_eq!(openai[0].body.as_ref().unwrap()["usage"], expected);
    let frames = parse_sse(&openai[0].frames);
    let usage_chunk: Value = serde_json::from_str(&frames[frames.len() - 2].1).unwrap();
    assert_eq!(usage_chunk["usage"], expected, "the include_usage chunk");

    let responses_api = responses(&chunks, Api::Responses);
    let expected = json!({"input_tokens": 4312, "input_tokens_details": {"cached_tokens": 4000},
        "output_tokens": 42, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 4354});
    assert_eq!(responses_api[0].body.as_ref().unwrap()["usage"], expected);
    let completed = accumulate_responses(&responses_api[0].frames).unwrap();
    assert_eq!(completed["usage"], expected, "response.completed");
}

#[test]
fn a_response_cut_at_max_tokens_is_incomplete() {
    let mut lines = message_with_usage(
        "msg_1",
        json!({"input_tokens": 5, "output_tokens": 1}),
        json!({"output_tokens": 9}),
    );
    lines[4] = lines[4].replace("end_turn", "max_tokens");
    lines.push(
        json!({"type": "result", "subtype": "success", "is_error": false, "result": "Hi."})
            .to_string(),
    );
    let chunks = ccwire_core::replay((lines.join("\n") + "\n").as_bytes());
    let [response] = responses(&chunks, Api::Responses).try_into().unwrap();
    let body = response.body.unwrap();
    assert_eq!(body["status"], "incomplete");
    assert_eq!(
        body["incomplete_details"],
        json!({"reason": "max_output_tokens"})
    );
    let events = parse_sse(&response.frames);
    assert_eq!(
        events.last().unwrap().0.as_deref(),
        Some("response.incomplete")
    );
    assert_eq!(accumulate_responses(&response.frames).unwrap(), body);
    let openai = responses(&chunks, Api::OpenAi);
    assert_eq!(
        openai[0].body.as_ref().unwrap()["choices"][0]["finish_reason"],
        "length"
    );
}

#[test]
fn usage_of_a_response_sums_its_model_messages() {
    // The CLI's own tool ran between two model messages of one response.
    let mut lines = message_with_usage(
        "msg_1",
        json!({"input_tokens": 10, "cache_read_input_tokens": 100, "output_tokens": 1}),
        json!({"output_tokens": 5}),
    );
    lines.extend(message_with_usage(
        "msg_2",
        json!({"input_tokens": 20, "cache_read_input_tokens": 110, "output_tokens": 1}),
        json!({"output_tokens": 7}),
    ));
    lines.push(
        json!({"type": "result", "subtype": "success", "is_error": false, "result": "Hi."})
            .to_string(),
    );
    let chunks = ccwire_core::replay((lines.join("\n") + "\n").as_bytes());
    let anthropic = responses(&chunks, Api::Anthropic);
    assert_eq!(anthropic.len(), 1);
    assert_eq!(
        anthropic[0].body.as_ref().unwrap()["usage"],
        json!({"input_tokens": 30, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 210, "output_tokens": 12})
    );
}

#[test]
fn thinking_is_shown_in_each_api_s_shape_when_asked_for() {
    let chunks = ccwire_core::replay(&common::transcript("x_thinking"));
    let thought: String = chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::ThinkingDelta {
                thinking,
                parent_tool_use_id: None,
                ..
            } => Some(thinking.as_str()),
            _ => None,
        })
        .collect();
    assert!(!thought.is_empty(), "the transcript has thinking");

    let hidden = responses(&chunks, Api::Anthropic);
    let body = hidden[0].body.as_ref().unwrap();
    assert!(
        body["content"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["type"] != "thinking"),
        "not asked for: {body}"
    );
    let shown = responses_showing(&chunks, Api::Anthropic, true);
    let body = shown[0].body.as_ref().unwrap();
    assert_eq!(body["content"][0]["type"], "thinking", "{body}");
    let blocks: String = body["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["thinking"].as_str())
        .collect();
    assert_eq!(blocks, thought, "a thinking block per model message");

    let shown = responses_showing(&chunks, Api::OpenAi, true);
    let message = &shown[0].body.as_ref().unwrap()["choices"][0]["message"];
    assert_eq!(message["reasoning_content"], thought.as_str());

    let shown = responses_showing(&chunks, Api::Responses, true);
    let output = &shown[0].body.as_ref().unwrap()["output"];
    assert_eq!(output[0]["type"], "reasoning", "{output}");
    assert_eq!(output[1]["type"], "message");
    let summaries: String = output
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "reasoning")
        .map(|item| item["summary"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(summaries, thought, "a reasoning item per model message");

    // The history a response leaves has no thinking, shown or not: the next request's hash
    // is the same.
    let mut plain = ResponseEncoder::new(options(Api::Anthropic, false));
    let mut showing = ResponseEncoder::new(options_showing(Api::Anthropic, false, true));
    for chunk in &chunks {
        plain.push(chunk);
        showing.push(chunk);
    }
    assert_eq!(plain.message(), showing.message());
}

/// The CLI's lines of a turn in structured-output mode: the model says a few words, then calls
/// the structured-output tool with `input` (streamed), the CLI takes the call and the turn ends
/// with `structured_output` (absent when the model never produced a valid object).
fn structured_turn(input: Value, structured_output: Option<Value>) -> Vec<Chunk> {
    let lines = structured_lines(("msg_so", "toolu_so"), input, structured_output);
    ccwire_core::replay((lines.join("\n") + "\n").as_bytes())
}

/// The lines of [`structured_turn`], its message and tool_use ids given.
fn structured_lines(
    (id, call): (&str, &str),
    input: Value,
    structured_output: Option<Value>,
) -> Vec<String> {
    let event = |event: Value| {
        json!({"type": "stream_event", "event": event, "session_id": "s", "parent_tool_use_id": null, "api_message_id": id})
            .to_string()
    };
    let input_text = input.to_string();
    let (head, tail) = input_text.split_at(input_text.len() / 2);
    let mut lines = vec![
        event(
            json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        ),
        event(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
        event(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Here it is."}})),
        event(json!({"type": "content_block_stop", "index": 0})),
        event(json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_so", "name": "StructuredOutput", "input": {}}})),
        event(json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": head}})),
        event(json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": tail}})),
        event(json!({"type": "content_block_stop", "index": 1})),
        event(json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 20}})),
        event(json!({"type": "message_stop"})),
        json!({"type": "assistant", "message": {"id": id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Here it is."}, {"type": "tool_use", "id": "toolu_so", "name": "StructuredOutput", "input": input}],
            "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 1}}, "parent_tool_use_id": null, "session_id": "s", "uuid": "u1"})
        .to_string(),
        json!({"type": "user", "message": {"role": "user", "content": [{"tool_use_id": "toolu_so", "type": "tool_result",
            "content": "Structured output provided successfully"}]}, "parent_tool_use_id": null, "session_id": "s", "uuid": "u2"})
        .to_string(),
    ];
    let mut result = json!({"type": "result", "subtype": "success", "is_error": false, "num_turns": 2,
        "result": "Here it is.", "stop_reason": "tool_use", "session_id": "s"});
    if let Some(object) = structured_output {
        result["structured_output"] = object;
    }
    lines.push(result.to_string());
    lines
        .into_iter()
        .map(|l| l.replace("toolu_so", call))
        .collect()
}

/// One response of a structured-output turn in `api`, streamed and not: (SSE frames, body).
fn structured_response(
    chunks: &[Chunk],
    api: Api,
    answer: StructuredAnswer,
) -> (Vec<String>, Option<Value>, Outcome) {
    let options = |stream| EncoderOptions {
        structured: Some(answer.clone()),
        client_tool_prefix: None,
        ..options(api, stream)
    };
    let mut stream = ResponseEncoder::new(options(true));
    let mut plain = ResponseEncoder::new(options(false));
    let mut frames = Vec::new();
    for chunk in chunks {
        frames.extend(stream.push(chunk));
        plain.push(chunk);
    }
    let outcome = plain.outcome().cloned().expect("the turn ended");
    assert_eq!(stream.outcome(), Some(&outcome));
    (frames, plain.body(), outcome)
}

/// A structured answer is the model's object alone — its other words and the CLI's own tool
/// left out — as JSON text in each API's shape, streamed and not alike.
#[test]
fn a_structured_answer_is_the_object_as_json_text() {
    let object = json!({"name": "Ada", "age": 36});
    let chunks = structured_turn(object.clone(), Some(object.clone()));
    let text_of = |api: Api, body: &Value| -> String {
        match api {
            Api::Anthropic => {
                let content = body["content"].as_array().unwrap();
                assert_eq!(content.len(), 1, "{body}");
                content[0]["text"].as_str().unwrap().to_owned()
            }
            Api::OpenAi => body["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_owned(),
            Api::Responses => {
                let output = body["output"].as_array().unwrap();
                assert_eq!(output.len(), 1, "{body}");
                output[0]["content"][0]["text"].as_str().unwrap().to_owned()
            }
        }
    };
    for api in Api::ALL {
        let (frames, body, outcome) = structured_response(&chunks, api, StructuredAnswer::Json);
        assert_eq!(outcome, Outcome::Finished("end_turn".into()), "{api:?}");
        let body = body.unwrap();
        let text = text_of(api, &body);
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            object,
            "{api:?}"
        );
        let streamed = accumulate(api, &frames).unwrap();
        let joined = frames.concat();
        assert!(!joined.contains("Here it is"), "{api:?}: {joined}");
        assert!(!joined.contains("StructuredOutput"), "{api:?}: {joined}");
        if api == Api::OpenAi {
            assert_eq!(body["choices"][0]["finish_reason"], "stop");
            assert_eq!(streamed["message"]["content"].as_str(), Some(text.as_str()));
        } else {
            assert_eq!(text_of(api, &streamed), text, "{api:?}");
        }
    }
}

/// A forced tool call is answered as a call of the client's tool with the object as its input;
/// a call of any tool as the tool the object names.
#[test]
fn a_forced_tool_call_is_the_object_as_the_tool_s_input() {
    let input = json!({"city": "Paris"});
    let cases = [
        (StructuredAnswer::Tool("get_weather".into()), input.clone()),
        (
            StructuredAnswer::AnyTool,
            json!({"tool": "get_weather", "input": input}),
        ),
    ];
    for (answer, object) in cases {
        let chunks = structured_turn(object.clone(), Some(object));
        for api in Api::ALL {
            let (frames, body, outcome) = structured_response(&chunks, api, answer.clone());
            assert_eq!(outcome, Outcome::Finished("tool_use".into()), "{api:?}");
            let body = body.unwrap();
            let (name, args) = match api {
                Api::Anthropic => {
                    assert_eq!(body["stop_reason"], "tool_use");
                    let call = &body["content"][0];
                    assert_eq!(call["id"], "toolu_so");
                    (call["name"].clone(), call["input"].clone())
                }
                Api::OpenAi => {
                    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
                    let call = &body["choices"][0]["message"]["tool_calls"][0];
                    let args: Value =
                        serde_json::from_str(call["function"]["arguments"].as_str().unwrap())
                            .unwrap();
                    (call["function"]["name"].clone(), args)
                }
                Api::Responses => {
                    let call = &body["output"][0];
                    assert_eq!(call["type"], "function_call");
                    let args: Value =
                        serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
                    (call["name"].clone(), args)
                }
            };
            assert_eq!(
                (name, args),
                (json!("get_weather"), input.clone()),
                "{api:?}"
            );
            let streamed = accumulate(api, &frames);
            assert!(streamed.is_ok(), "{api:?}: {streamed:?}");
            assert!(!frames.concat().contains("StructuredOutput"), "{api:?}");
        }
    }
}

/// A schema the CLI refused (it offers the model no structured-output tool, as its
/// `system/init` says) is the request's fault: a 400 that says so, not "the model failed".
#[test]
fn a_schema_the_cli_refused_is_a_400() {
    let init = |tools: Value| {
        json!({"type": "system", "subtype": "init", "session_id": "s", "model": "claude-sonnet-4-5",
            "cwd": "/w", "tools": tools, "mcp_servers": [], "permissionMode": "default"})
        .to_string()
    };
    let answer = json!({"type": "result", "subtype": "success", "is_error": false, "num_turns": 1,
        "session_id": "s", "result": "In text."})
    .to_string();
    for (tools, status) in [
        (json!(["Bash", "StructuredOutput"]), 422),
        (json!(["Bash"]), 400),
    ] {
        let lines = [init(tools), answer.clone()];
        let chunks = ccwire_core::replay((lines.join("\n") + "\n").as_bytes());
        let (_, _, outcome) = structured_response(&chunks, Api::OpenAi, StructuredAnswer::Json);
        let Outcome::Failed(error) = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(error.kind.status(), status, "{}", error.message);
        if status == 400 {
            assert!(error
                .message
                .contains("did not take the request's JSON Schema"));
        }
    }
}

/// A turn that ends without the object — the model kept answering in text, or its object never
/// matched the schema — is an error, never the free text: a 422, which the SDKs do not retry.
#[test]
fn no_object_is_an_error_not_free_text() {
    let chunks = structured_turn(json!({"name": "Ada"}), None);
    for api in Api::ALL {
        let (frames, body, outcome) = structured_response(&chunks, api, StructuredAnswer::Json);
        let Outcome::Failed(error) = outcome else {
            panic!("{api:?}: {outcome:?}")
        };
        assert_eq!(error.kind, ApiErrorKind::Unprocessable);
        assert_eq!(error.kind.status(), 422);
        assert!(
            error.message.contains("structured output"),
            "{}",
            error.message
        );
        assert!(body.is_none());
        assert!(!frames.concat().contains("Here it is"), "{api:?}");
    }
    let lines = [json!({"type": "result", "subtype": "error_max_structured_output_retries", "is_error": true,
        "num_turns": 6, "session_id": "s", "errors": ["Failed to provide valid structured output after 5 attempts"]})
    .to_string()];
    let chunks = ccwire_core::replay((lines.join("\n") + "\n").as_bytes());
    let (_, _, outcome) = structured_response(&chunks, Api::OpenAi, StructuredAnswer::Json);
    let Outcome::Failed(error) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(error.kind.status(), 422);
    assert!(
        error.message.contains("after 5 attempts"),
        "{}",
        error.message
    );
}

/// A failed turn whose `result` names the API error's type but no status is that kind of error.
#[test]
fn an_api_error_type_without_a_status_keeps_its_kind() {
    for (error_type, status) in [
        ("rate_limit_error", 429),
        ("overloaded_error", 529),
        ("billing_error", 402),
        ("invalid_request_error", 400),
        ("something_new", 500),
    ] {
        let line = json!({"type": "result", "subtype": "success", "is_error": true, "num_turns": 1,
            "result": "API Error", "api_error_type": error_type, "session_id": "s"});
        let chunks = ccwire_core::replay(format!("{line}\n").as_bytes());
        let [response] = responses(&chunks, Api::Anthropic).try_into().unwrap();
        let Outcome::Failed(error) = response.outcome else {
            panic!("{:?}", response.outcome)
        };
        assert_eq!(error.kind.status(), status, "{error_type}");
    }
}

/// A streamed structured answer goes out as the model writes its object — the JSON text, or
/// the forced call's input — piece by piece, before the turn ends; the whole is the object.
#[test]
fn a_streamed_structured_answer_goes_out_as_the_model_writes_it() {
    let object = json!({"name": "Ada", "age": 36});
    let text = object.to_string();
    let head = &text[..text.len() / 2];
    let chunks = structured_turn(object.clone(), Some(object.clone()));
    for answer in [
        StructuredAnswer::Json,
        StructuredAnswer::Tool("person".into()),
    ] {
        for api in Api::ALL {
            let mut encoder = ResponseEncoder::new(EncoderOptions {
                structured: Some(answer.clone()),
                client_tool_prefix: None,
                ..options(api, true)
            });
            let mut before_end = Vec::new();
            let mut frames = Vec::new();
            for chunk in &chunks {
                let out = encoder.push(chunk);
                if !matches!(chunk, Chunk::TurnComplete { .. }) {
                    before_end.extend(out.iter().cloned());
                }
                frames.extend(out);
            }
            let escaped = serde_json::to_string(head).unwrap();
            let escaped = &escaped[1..escaped.len() - 1];
            assert!(
                before_end.concat().contains(escaped),
                "{api:?} {answer:?}: the first half of the object before the turn ended: {before_end:?}"
            );
            let streamed = accumulate(api, &frames).unwrap();
            let joined = frames.concat();
            assert!(!joined.contains("StructuredOutput"), "{api:?}: {joined}");
            assert!(!joined.contains("Here it is"), "{api:?}: {joined}");
            let got = match (&answer, api) {
                (StructuredAnswer::Json, Api::Anthropic) => streamed["content"][0]["text"].clone(),
                (StructuredAnswer::Json, Api::OpenAi) => streamed["message"]["content"].clone(),
                (StructuredAnswer::Json, Api::Responses) => {
                    streamed["output"][0]["content"][0]["text"].clone()
                }
                (_, Api::Anthropic) => {
                    assert_eq!(streamed["content"][0]["name"], "person", "{streamed}");
                    Value::String(streamed["content"][0]["input"].to_string())
                }
                (_, Api::OpenAi) => {
                    let call = &streamed["message"]["tool_calls"][0]["function"];
                    assert_eq!(call["name"], "person", "{streamed}");
                    call["arguments"].clone()
                }
                (_, Api::Responses) => {
                    assert_eq!(streamed["output"][0]["name"], "person", "{streamed}");
                    streamed["output"][0]["arguments"].clone()
                }
            };
            let got: Value = serde_json::from_str(got.as_str().unwrap()).unwrap();
            assert_eq!(got, object, "{api:?} {answer:?}");
            let finished = match answer {
                StructuredAnswer::Json => "end_turn",
                _ => "tool_use",
            };
            assert_eq!(encoder.outcome(), Some(&Outcome::Finished(finished.into())));
            // The next request's history holds what the client put together.
            let message = encoder.message();
            assert_eq!(message.content.len(), 1, "{api:?} {answer:?}");
        }
    }
}

/// When the CLI did not take the model's first object and asked again, what was streamed is
/// not the answer: the stream ends with a 422 that says so; a response not streamed is the
/// object the CLI took.
#[test]
fn a_streamed_structured_answer_the_cli_asked_again_for_ends_with_a_422() {
    let mut lines = structured_lines(("msg_so", "toolu_so"), json!({"name": "Ada"}), None);
    lines.pop(); // no result: the CLI asks again
                 // The second attempt, in a message of its own, is the one the CLI takes.
    let object = json!({"name": "Ada", "age": 36});
    lines.extend(structured_lines(
        ("msg_so2", "toolu_so2"),
        object.clone(),
        Some(object),
    ));
    let chunks = ccwire_core::replay((lines.join("\n") + "\n").as_bytes());
    for api in Api::ALL {
        let answer = StructuredAnswer::Json;
        let opts = |stream| EncoderOptions {
            structured: Some(answer.clone()),
            client_tool_prefix: None,
            ..options(api, stream)
        };
        let (mut streamed, mut plain) = (
            ResponseEncoder::new(opts(true)),
            ResponseEncoder::new(opts(false)),
        );
        let mut frames = Vec::new();
        for chunk in &chunks {
            frames.extend(streamed.push(chunk));
            plain.push(chunk);
        }
        let Some(Outcome::Failed(error)) = streamed.outcome() else {
            panic!("{api:?}: {:?}", streamed.outcome())
        };
        assert_eq!(error.kind.status(), 422);
        assert!(
            error.message.contains("asked the model again"),
            "{}",
            error.message
        );
        assert!(frames.concat().contains("asked the model again"), "{api:?}");
        assert_eq!(plain.outcome(), Some(&Outcome::Finished("end_turn".into())));
        let body = plain.body().unwrap().to_string();
        assert!(body.contains("36"), "{api:?}: {body}");
    }
}

/// A Responses response object repeats what the request said of its instructions, text
/// format, tools and tool choice (and the other fields the API echoes), in every event that
/// carries it and in the body; the API's defaults where the request said nothing.
#[test]
fn a_responses_object_echoes_the_request_s_settings() {
    let tools = json!([{"type": "function", "name": "lookup", "description": "Looks up.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}, "strict": false}]);
    let request = json!({"model": "gpt-5", "input": "Hi", "instructions": "Be brief.",
        "tools": tools, "tool_choice": "required", "temperature": 0.2, "max_output_tokens": 500,
        "text": {"format": {"type": "json_object"}}, "metadata": {"run": "7"}});
    let parsed =
        ccwire_core::api::responses::parse_request(request.to_string().as_bytes()).unwrap();
    let chunks = ccwire_core::replay(include_bytes!("../../tests/corpus/a_text.jsonl"));
    for stream in [false, true] {
        let mut encoder = ResponseEncoder::new(EncoderOptions {
            echo: parsed.echo.clone(),
            ..options(Api::Responses, stream)
        });
        let frames: Vec<String> = chunks.iter().flat_map(|c| encoder.push(c)).collect();
        let objects: Vec<Value> = if stream {
            frames
                .iter()
                .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("data: ")))
                .filter_map(|d| serde_json::from_str::<Value>(d).ok())
                .filter_map(|e| e.get("response").cloned())
                .collect()
        } else {
            vec![encoder.body().unwrap()]
        };
        assert!(!objects.is_empty());
        for object in objects {
            for key in [
                "instructions",
                "tools",
                "tool_choice",
                "temperature",
                "max_output_tokens",
                "text",
                "metadata",
            ] {
                assert_eq!(object[key], request[key], "{key}: {object}");
            }
            assert_eq!(
                object["top_p"], 1,
                "a default where the request said nothing"
            );
        }
    }
    // A request that says nothing of them gets the API's defaults.
    let plain =
        ccwire_core::api::responses::parse_request(br#"{"model":"m","input":"Hi"}"#).unwrap();
    assert!(plain.echo.is_empty());
}

/// A `namespace` tool's functions (Codex's `multi_agent_v1`) are offered by the name
/// `<namespace>__<name>`; the model's call of one is a `function_call` naming the namespace and
/// the function's own name, and comes back in the next request's input as the same call.
#[test]
fn a_namespace_tool_s_functions_are_offered_and_called_by_their_namespace() {
    let request = json!({"model": "gpt-5", "input": "Hi", "tools": [
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
        {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": [
            {"type": "function", "name": "close_agent", "description": "Closes one.",
             "parameters": {"type": "object", "properties": {"target": {"type": "string"}}}},
        ]},
    ]});
    let parsed =
        ccwire_core::api::responses::parse_request(request.to_string().as_bytes()).unwrap();
    let names: Vec<&str> = parsed
        .conversation
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["exec_command", "multi_agent_v1__close_agent"]);
    assert_eq!(parsed.conversation.tools[1].description, "Closes one.");

    // The model calls it.
    let id = "msg_ns";
    let event = |event: Value| {
        json!({"type": "stream_event", "event": event, "session_id": "s", "parent_tool_use_id": null, "api_message_id": id})
            .to_string()
    };
    let lines = [
        event(
            json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
            "model": "m", "content": [], "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ),
        event(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_ns",
            "name": "mcp__client__multi_agent_v1__close_agent", "input": {}}}),
        ),
        event(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"target\":\"a1\"}"}}),
        ),
        event(json!({"type": "content_block_stop", "index": 0})),
        event(
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 3}}),
        ),
        event(json!({"type": "message_stop"})),
    ];
    let chunks = ccwire_core::replay((lines.join("\n") + "\n").as_bytes());
    for stream in [false, true] {
        let mut encoder = ResponseEncoder::new(EncoderOptions {
            echo: parsed.echo.clone(),
            client_tool_prefix: Some("mcp__client__".into()),
            ..options(Api::Responses, stream)
        });
        let frames: Vec<String> = chunks.iter().flat_map(|c| encoder.push(c)).collect();
        let body = if stream {
            accumulate_responses(&frames).unwrap()
        } else {
            encoder.body().unwrap()
        };
        let call = &body["output"][0];
        assert_eq!(call["type"], "function_call", "{body}");
        assert_eq!(
            (&call["namespace"], &call["name"]),
            (&json!("multi_agent_v1"), &json!("close_agent")),
            "{body}"
        );
        // Sent back, the call is the one the model made.
        let next = json!({"model": "gpt-5", "input": [
            {"type": "message", "role": "user", "content": "Hi"},
            call,
            {"type": "function_call_output", "call_id": call["call_id"], "output": "closed"},
        ]});
        let next = ccwire_core::api::responses::parse_request(next.to_string().as_bytes()).unwrap();
        let sent_back = next.conversation.messages[1].content[0].clone();
        assert_eq!(sent_back, encoder.message().content[0], "{stream}");
    }
}

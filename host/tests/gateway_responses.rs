//! End-to-end: the OpenAI Responses API (`POST /v1/responses`) through `ccwire serve`, in front
//! of the real CLI and the scripted model — client function tools held open across requests,
//! continued with the whole input every turn (`store: false`, as Codex sends it) or by
//! `previous_response_id` (stored responses, per tenant), and one conversation carried on
//! across the three APIs.

mod support;

use serde_json::{json, Value};
use support::*;

fn function_tool() -> Value {
    json!({
        "type": "function",
        "name": "lookup",
        "description": "Looks a record up.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        "strict": false,
    })
}

fn request(input: Value) -> Value {
    json!({"model": "gpt-5", "tools": [function_tool(), {"type": "web_search"}], "input": input})
}

fn calls(response: &Value) -> Vec<&Value> {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "function_call")
        .collect()
}

/// The client's results for the function calls of a response.
fn outputs_for(response: &Value) -> Vec<Value> {
    calls(response)
        .into_iter()
        .map(|call| {
            let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
            let q = args["query"].as_str().unwrap();
            json!({"type": "function_call_output", "call_id": call["call_id"], "output": format!("record-{q}")})
        })
        .collect()
}

fn output_text(response: &Value) -> String {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "message")
        .flat_map(|item| item["content"].as_array().unwrap())
        .filter_map(|part| part["text"].as_str())
        .collect()
}

/// A streamed Responses request: status, `x-ccwire-session`, `x-ccwire-ignored`, and the
/// events (each checked to carry its own name as `type`).
async fn stream(gw: &Gw, body: &Value) -> (u16, String, String, Vec<Value>) {
    let response = gw.post("/v1/responses", body, None).await;
    let status = response.status().as_u16();
    let kind = session_header(&response);
    let ignored = response
        .headers()
        .get("x-ccwire-ignored")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    let mut events = Vec::new();
    for frame in text.split("\n\n").filter(|f| !f.trim().is_empty()) {
        if frame.starts_with(':') {
            continue;
        }
        let event = frame.lines().find_map(|l| l.strip_prefix("event: "));
        let data: Value = serde_json::from_str(
            frame
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .expect("a data line"),
        )
        .unwrap();
        assert_eq!(event, data["type"].as_str(), "{frame}");
        events.push(data);
    }
    (status, kind, ignored, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_tool_round_trip_with_the_whole_input_every_turn() {
    let gw = Gw::start(|_| {}).await;
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are terse."}]}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "PLEASE-LOOKUP alpha and beta"}]}),
    ];
    let mut first = request(json!(input));
    first["store"] = json!(false);
    first["stream"] = json!(true);
    first["reasoning"] = json!({"summary": "auto"});
    first["include"] = json!(["reasoning.encrypted_content"]);
    let (status, kind, ignored, events) = stream(&gw, &first).await;
    assert_eq!((status, kind.as_str()), (200, "new"), "{events:?}");
    assert_eq!(ignored, "include, tools[1] (web_search)");
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[..2], ["response.created", "response.in_progress"]);
    assert_eq!(types.last(), Some(&"response.completed"));
    for (n, event) in events.iter().enumerate() {
        assert_eq!(event["sequence_number"], n);
    }
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| &e["item"])
        .collect();
    let response = &events.last().unwrap()["response"];
    assert_eq!(
        response["output"],
        json!(done),
        "the items as they were done"
    );
    assert_eq!(response["status"], "completed");
    assert_eq!(output_text(response), "Looking both up.");
    let args: Vec<&str> = calls(response)
        .iter()
        .map(|c| {
            assert_eq!(c["name"], "lookup", "the client's own tool name");
            c["arguments"].as_str().unwrap()
        })
        .collect();
    assert_eq!(args, [r#"{"query":"alpha"}"#, r#"{"query":"beta"}"#]);

    // Codex sends the output items back as they came, then its results.
    input.extend(response["output"].as_array().unwrap().iter().cloned());
    input.extend(outputs_for(response));
    let mut second = request(json!(input));
    second["store"] = json!(false);
    second["stream"] = json!(true);
    let (status, kind, _, events) = stream(&gw, &second).await;
    assert_eq!((status, kind.as_str()), (200, "continued"), "{events:?}");
    let response = &events.last().unwrap()["response"];
    let text = output_text(response);
    assert!(
        text.contains("record-alpha") && text.contains("record-beta"),
        "{text}"
    );
    assert!(calls(response).is_empty());
    // The model got the results through the held calls, and the developer message first
    // as the system prompt.
    let last = gw.fake.model_calls().pop().unwrap();
    let body = last.body.to_string();
    assert!(body.contains("record-alpha"), "{body}");
    assert!(body.contains("You are terse."), "{body}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_responses_are_continued_by_id_per_tenant() {
    let gw = Gw::start(|o| o.engine.http.api_keys = vec!["key-a".into(), "key-b".into()]).await;
    let a = Some("key-a");
    let (status, kind, first) = gw
        .call(
            "/v1/responses",
            &request(json!("PLEASE-LOOKUP alpha and beta")),
            a,
        )
        .await;
    assert_eq!((status, kind.as_str()), (200, "new"), "{first}");
    assert_eq!(first["object"], "response");
    assert_eq!(first["store"], true, "store defaults to true");
    let id = first["id"].as_str().unwrap();
    assert!(id.starts_with("resp_"), "{id}");
    assert_eq!(calls(&first).len(), 2);

    let mut second = request(json!(outputs_for(&first)));
    second["previous_response_id"] = json!(id);
    let (status, kind, body) = gw.call("/v1/responses", &second, a).await;
    assert_eq!((status, kind.as_str()), (200, "continued"), "{body}");
    assert_eq!(body["previous_response_id"], id);
    assert!(output_text(&body).contains("record-beta"), "{body}");
    let second_id = body["id"].as_str().unwrap().to_owned();
    assert_ne!(second_id, id);

    let mut third = request(json!("And the next one?"));
    third["previous_response_id"] = json!(second_id);
    let (status, kind, body) = gw.call("/v1/responses", &third, a).await;
    assert_eq!((status, kind.as_str()), (200, "continued"), "{body}");
    assert_eq!(output_text(&body), "You said: And the next one?");

    // Another tenant cannot continue it; an unknown id is a 400 naming the field.
    for (key, previous) in [(Some("key-b"), second_id.as_str()), (a, "resp_nope")] {
        let mut other = request(json!("hi"));
        other["previous_response_id"] = json!(previous);
        let (status, _, body) = gw.call("/v1/responses", &other, key).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["param"], "previous_response_id", "{body}");
        assert_eq!(body["error"]["type"], "invalid_request_error");
    }
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_conversation_goes_on_across_the_three_apis() {
    let gw = Gw::start(|_| {}).await;
    // Chat Completions: the tool calls.
    let chat_tool = json!({"type": "function", "function": {"name": "lookup", "description": "Looks a record up.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}});
    let user = json!({"role": "user", "content": "PLEASE-LOOKUP alpha and beta"});
    let body = json!({"model": "gpt-5", "tools": [chat_tool], "messages": [user]});
    let (status, kind, chat) = gw.call("/v1/chat/completions", &body, None).await;
    assert_eq!((status, kind.as_str()), (200, "new"), "{chat}");
    let message = &chat["choices"][0]["message"];
    // Responses: the same history as input items, with the results.
    let mut input = vec![
        json!({"role": "user", "content": "PLEASE-LOOKUP alpha and beta"}),
        json!({"role": "assistant", "content": message["content"]}),
    ];
    for call in message["tool_calls"].as_array().unwrap() {
        input.push(
            json!({"type": "function_call", "call_id": call["id"], "name": "lookup",
            "arguments": call["function"]["arguments"]}),
        );
    }
    for call in message["tool_calls"].as_array().unwrap() {
        let args: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        input.push(
            json!({"type": "function_call_output", "call_id": call["id"],
            "output": format!("record-{}", args["query"].as_str().unwrap())}),
        );
    }
    let responses = json!({"model": "gpt-5", "store": false, "input": input,
        "tools": [function_tool()]});
    let (status, kind, body) = gw.call("/v1/responses", &responses, None).await;
    assert_eq!((status, kind.as_str()), (200, "continued"), "{body}");
    let answer = output_text(&body);
    assert!(answer.contains("record-alpha"), "{answer}");
    // Messages: the whole history in the Anthropic shape continues it again.
    let mut messages = vec![
        json!({"role": "user", "content": "PLEASE-LOOKUP alpha and beta"}),
        json!({"role": "assistant", "content": [{"type": "text", "text": message["content"]}]}),
    ];
    let mut uses = Vec::new();
    let mut results = Vec::new();
    for call in message["tool_calls"].as_array().unwrap() {
        let args: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        results.push(json!({"type": "tool_result", "tool_use_id": call["id"],
            "content": format!("record-{}", args["query"].as_str().unwrap())}));
        uses.push(json!({"type": "tool_use", "id": call["id"], "name": "lookup", "input": args}));
    }
    messages[1]["content"].as_array_mut().unwrap().extend(uses);
    messages.push(json!({"role": "user", "content": results}));
    messages.push(json!({"role": "assistant", "content": answer}));
    messages.push(json!({"role": "user", "content": "Thanks"}));
    // The same model name: a live session cannot change its model.
    let mut body = anthropic(json!(messages));
    body["model"] = json!("gpt-5");
    let (status, kind, body) = gw.call("/v1/messages", &body, None).await;
    assert_eq!((status, kind.as_str()), (200, "continued"), "{body}");
    assert_eq!(text_of(&body), "You said: Thanks");
    gw.stop().await;
}

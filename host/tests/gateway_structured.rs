//! End-to-end: structured output and forced tool choice through the CLI's own schema mode.
//! The request's schema becomes the input schema of the CLI's structured-output tool; the
//! object the model gives it is the answer — JSON text, or the call of the client tool it
//! stands for — in each API's shape; a model that never gives a valid object is an error.

mod support;

use ccwire_tests::{Match, Reply, Script, ToolCall};
use serde_json::{json, Value};
use support::*;

fn person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": false,
    })
}

fn structured(input: Value) -> Reply {
    Reply::ToolUse {
        text: Some("Here it is.".into()),
        calls: vec![ToolCall {
            name: "StructuredOutput".into(),
            input,
        }],
    }
}

fn structured_script() -> Script {
    Script::new()
        .when(Match::Probe, Reply::text("ok"))
        // A continued conversation: the model reads the client's tool result, then answers.
        .when(
            Match::ConversationContains {
                text: "record-alpha".into(),
            },
            structured(json!({"name": "Alpha", "age": 1})),
        )
        .on_prompt(
            "PLEASE-PERSON",
            structured(json!({"name": "Ada", "age": 36})),
        )
        .on_prompt(
            "PLEASE-CHECK-FIRST",
            Reply::tool("mcp__client__lookup", json!({"query": "alpha"})),
        )
        .on_prompt("PLEASE-WEATHER", structured(json!({"city": "Paris"})))
        .on_prompt(
            "PLEASE-EITHER",
            structured(json!({"tool": "clock", "input": {"zone": "UTC"}})),
        )
        .on_prompt(
            "PLEASE-NESTED",
            structured(json!({"tool": "move", "input": {"to": {"x": 1, "y": 2}}})),
        )
        .on_prompt(
            "PLEASE-MISNESTED",
            structured(json!({"tool": "move", "input": {"to": {"x": "far"}}})),
        )
        // Always the same object, never valid: the CLI asks again, then gives up.
        .when(
            Match::ConversationContains {
                text: "PLEASE-INVALID".into(),
            },
            structured(json!({"name": "Ada"})),
        )
        .when(Match::Any, Reply::Echo)
}

/// The tools of the model's last call, by name.
fn last_call_tools(gw: &Gw) -> Vec<Value> {
    let call = gw.fake.model_calls().pop().expect("a model call");
    call.body["tools"].as_array().cloned().unwrap_or_default()
}

fn tool_named<'a>(tools: &'a [Value], name: &str) -> Option<&'a Value> {
    tools.iter().find(|t| t["name"] == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_schema_answer_is_the_object_in_every_api() {
    let gw = Gw::start_with(structured_script(), |_| {}).await;
    let person = json!({"name": "Ada", "age": 36});

    let chat = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "PLEASE-PERSON chat"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "Person", "strict": true, "schema": person_schema()}}});
    let (status, kind, body) = gw.call("/v1/chat/completions", &chat, None).await;
    assert_eq!((status, kind.as_str()), (200, "new"), "{body}");
    let message = &body["choices"][0]["message"];
    let content: Value = serde_json::from_str(message["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, person);
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    // The model was offered the schema as the structured-output tool's input, named.
    let tools = last_call_tools(&gw);
    let offered = tool_named(&tools, "StructuredOutput").expect("the structured-output tool");
    assert_eq!(offered["input_schema"]["title"], "Person");
    assert_eq!(
        offered["input_schema"]["properties"],
        person_schema()["properties"]
    );

    let responses = json!({"model": "gpt-4o", "input": "PLEASE-PERSON responses",
        "text": {"format": {"type": "json_schema", "name": "Person", "schema": person_schema()}}});
    let (status, _, body) = gw.call("/v1/responses", &responses, None).await;
    assert_eq!(status, 200, "{body}");
    let output = body["output"].as_array().unwrap();
    assert_eq!(output.len(), 1, "the object alone: {body}");
    let text = output[0]["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), person);

    for format in [
        json!({"output_format": {"type": "json_schema", "schema": person_schema()}}),
        json!({"output_config": {"format": {"type": "json_schema", "schema": person_schema()}}}),
    ] {
        let mut body = json!({"model": MODEL, "max_tokens": 1024,
            "messages": [{"role": "user", "content": format!("PLEASE-PERSON anthropic {format}")}]});
        for (k, v) in format.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, _, answer) = gw.call("/v1/messages", &body, None).await;
        assert_eq!(status, 200, "{answer}");
        let content = answer["content"].as_array().unwrap();
        assert_eq!(content.len(), 1, "{answer}");
        let object: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(object, person);
    }

    // Streamed: the object arrives as the API streams text.
    let stream = json!({"model": "gpt-4o", "stream": true,
        "messages": [{"role": "user", "content": "PLEASE-PERSON stream"}],
        "response_format": {"type": "json_object"}});
    let (status, _, data) = gw.stream("/v1/chat/completions", &stream).await;
    assert_eq!(status, 200);
    let text: String = data
        .iter()
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| {
            let chunk: Value = serde_json::from_str(d).unwrap();
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), person);
    gw.stop().await;
}

/// Schemas as client libraries write them in drafts other than draft-07: zod 4 and pydantic
/// (2020-12, naming it in `$schema`), with OpenAPI's `example` and an extension keyword, and
/// draft-04.
fn schemas_of_other_drafts() -> Vec<Value> {
    vec![
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "name": {"$ref": "#/$defs/Name"},
                "age": {"type": "integer", "minimum": 0},
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": false},
            },
            "required": ["name", "age"],
            "dependentRequired": {"pair": ["name"]},
            "unevaluatedProperties": false,
            "$defs": {"Name": {"type": "string", "minLength": 1, "example": "Ada"}},
            "x-generator": "a client library",
        }),
        json!({
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer", "minimum": 0, "exclusiveMinimum": true},
            },
            "required": ["name", "age"],
        }),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_of_any_draft_is_taken_and_answered() {
    let gw = Gw::start_with(structured_script(), |_| {}).await;
    for (n, schema) in schemas_of_other_drafts().into_iter().enumerate() {
        let format =
            json!({"type": "json_schema", "json_schema": {"name": "Person", "schema": schema}});
        let chat = json!({"model": "gpt-4o", "response_format": format,
            "messages": [{"role": "user", "content": format!("PLEASE-PERSON draft {n}")}]});
        let (status, _, body) = gw.call("/v1/chat/completions", &chat, None).await;
        assert_eq!(status, 200, "{n}: {body}");
        let content = body["choices"][0]["message"]["content"].as_str().unwrap();
        let object: Value = serde_json::from_str(content).unwrap();
        assert_eq!(object, json!({"name": "Ada", "age": 36}));
        // The CLI took the schema: the model was offered its structured-output tool, with
        // the schema in draft-07's words.
        let tools = last_call_tools(&gw);
        let offered = tool_named(&tools, "StructuredOutput").expect("the structured-output tool");
        let input = &offered["input_schema"];
        assert!(input.get("$schema").is_none(), "{input}");
        assert_eq!(input["required"], json!(["name", "age"]), "{input}");
    }
    // The same as a forced tool's input schema (LangChain's function calling, instructor).
    for (n, schema) in schemas_of_other_drafts().into_iter().enumerate() {
        let tool = json!({"name": "Person", "description": "A person.", "input_schema": schema});
        let body = json!({"model": MODEL, "max_tokens": 1024, "tools": [tool],
            "tool_choice": {"type": "tool", "name": "Person"},
            "messages": [{"role": "user", "content": format!("PLEASE-PERSON forced {n}")}]});
        let (status, _, answer) = gw.call("/v1/messages", &body, None).await;
        assert_eq!(status, 200, "{n}: {answer}");
        assert_eq!(answer["content"][0]["type"], "tool_use", "{answer}");
        assert_eq!(
            answer["content"][0]["input"],
            json!({"name": "Ada", "age": 36})
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_tools_run_before_the_structured_answer() {
    let gw = Gw::start_with(structured_script(), |_| {}).await;
    let first = json!({"role": "user", "content": "PLEASE-CHECK-FIRST then answer"});
    let mut body = anthropic(json!([first]));
    body["output_format"] = json!({"type": "json_schema", "schema": person_schema()});
    let (status, _, answer) = gw.call("/v1/messages", &body, None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["stop_reason"], "tool_use", "{answer}");
    assert_eq!(answer["content"][0]["name"], "lookup");
    let tools = last_call_tools(&gw);
    assert!(tool_named(&tools, "mcp__client__lookup").is_some());
    assert!(tool_named(&tools, "StructuredOutput").is_some());

    body["messages"] = json!([first, {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": results_for(&answer)}]);
    let (status, kind, answer) = gw.call("/v1/messages", &body, None).await;
    assert_eq!((status, kind.as_str()), (200, "continued"), "{answer}");
    let object: Value = serde_json::from_str(&text_of(&answer)).unwrap();
    assert_eq!(object, json!({"name": "Alpha", "age": 1}));
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_tool_call_is_a_call_of_the_client_s_tool() {
    let gw = Gw::start_with(structured_script(), |_| {}).await;
    let weather = json!({"name": "weather", "description": "The weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}});
    let clock = json!({"name": "clock", "description": "The time in a zone.",
        "input_schema": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}});
    let ask = json!({"role": "user", "content": "PLEASE-WEATHER in Paris"});
    let body = json!({"model": MODEL, "max_tokens": 1024, "messages": [ask],
        "tools": [weather, clock], "tool_choice": {"type": "tool", "name": "weather"}});
    let (status, _, answer) = gw.call("/v1/messages", &body, None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["stop_reason"], "tool_use");
    let content = answer["content"].as_array().unwrap();
    assert_eq!(content.len(), 1, "{answer}");
    assert_eq!(content[0]["name"], "weather");
    assert_eq!(content[0]["input"], json!({"city": "Paris"}));
    // The model had only the tool's schema to fill in, described as the tool.
    let tools = last_call_tools(&gw);
    assert!(
        tool_named(&tools, "mcp__client__weather").is_none(),
        "{tools:?}"
    );
    let offered = tool_named(&tools, "StructuredOutput").unwrap();
    assert_eq!(
        offered["input_schema"]["properties"]["city"]["type"],
        "string"
    );
    assert!(offered["input_schema"]["description"]
        .as_str()
        .unwrap()
        .contains("The weather in a city."));

    // The client runs the tool and goes on without a forced choice: the conversation carries
    // on, the model reading the result.
    let result =
        json!({"type": "tool_result", "tool_use_id": content[0]["id"], "content": "sunny-21C"});
    let next = json!({"model": MODEL, "max_tokens": 1024, "tools": [weather, clock],
        "messages": [ask, {"role": "assistant", "content": content}, {"role": "user", "content": [result]}]});
    let (status, _, answer) = gw.call("/v1/messages", &next, None).await;
    assert_eq!(status, 200, "{answer}");
    let call = gw.fake.model_calls().pop().unwrap();
    assert!(call.body["messages"].to_string().contains("sunny-21C"));

    // `required` over several tools: the object names the tool and holds its input.
    let chat = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "PLEASE-EITHER one"}],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": weather["input_schema"]}},
                  {"type": "function", "function": {"name": "clock", "parameters": clock["input_schema"]}}],
        "tool_choice": "required"});
    let (status, _, body) = gw.call("/v1/chat/completions", &chat, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    let call = &body["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "clock");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"zone": "UTC"}));

    // Tools whose schemas define their parts (`$defs`, as Pydantic writes them): each one's
    // definitions keep resolving inside the schema over the tools, and the CLI checks them.
    let point = |name: &str| {
        json!({"type": "function", "function": {"name": name, "parameters": {
            "type": "object",
            "properties": {"to": {"$ref": "#/$defs/Point"}},
            "required": ["to"],
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"]}},
        }}})
    };
    for (prompt, status) in [("PLEASE-NESTED", 200), ("PLEASE-MISNESTED", 422)] {
        let chat = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": format!("{prompt} go")}],
            "tools": [point("move"), point("jump")], "tool_choice": "required"});
        let (got, _, body) = gw.call("/v1/chat/completions", &chat, None).await;
        assert_eq!(got, status, "{prompt}: {body}");
        if status == 200 {
            let call = &body["choices"][0]["message"]["tool_calls"][0];
            assert_eq!(call["function"]["name"], "move");
            let args: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(args, json!({"to": {"x": 1, "y": 2}}));
        }
    }

    // `none`: no client tool reaches the model.
    let none = json!({"model": MODEL, "max_tokens": 1024, "tools": [weather],
        "tool_choice": {"type": "none"}, "messages": [{"role": "user", "content": "no tools now"}]});
    let (status, _, answer) = gw.call("/v1/messages", &none, None).await;
    assert_eq!(status, 200, "{answer}");
    let tools = last_call_tools(&gw);
    assert!(
        tool_named(&tools, "mcp__client__weather").is_none(),
        "{tools:?}"
    );
    assert!(
        tool_named(&tools, "StructuredOutput").is_none(),
        "{tools:?}"
    );

    // A tool the request does not have.
    let bad = json!({"model": MODEL, "max_tokens": 1024, "tools": [weather],
        "tool_choice": {"type": "tool", "name": "nope"}, "messages": [{"role": "user", "content": "x"}]});
    let (status, _, answer) = gw.call("/v1/messages", &bad, None).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["type"], "invalid_request_error");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_valid_object_is_an_error_not_free_text() {
    let gw = Gw::start_with(structured_script(), |_| {}).await;
    let chat = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "PLEASE-INVALID person"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "Person", "schema": person_schema()}}});
    let (status, _, body) = gw.call("/v1/chat/completions", &chat, None).await;
    // A 422: the CLI has asked the model again already, and the SDKs do not retry it.
    assert_eq!(status, 422, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("structured output"), "{message}");
    // The model was asked again after each invalid object.
    let attempts = gw
        .fake
        .model_calls()
        .iter()
        .filter(|c| c.body["messages"].to_string().contains("PLEASE-INVALID"))
        .count();
    assert!(attempts > 1, "{attempts}");
    // A schema the CLI does not take (no draft's `type`): the request's fault, said so.
    let broken = json!({"type": "object", "properties": {"name": {"type": "strin"}}});
    let chat = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "a broken schema"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "Person", "schema": broken}}});
    let (status, _, body) = gw.call("/v1/chat/completions", &chat, None).await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("did not take the request's JSON Schema"),
        "{message}"
    );
    gw.stop().await;
}

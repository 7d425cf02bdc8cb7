//! Test vectors of the canonical conversation form: the same conversation in both API shapes and
//! with the rewrites clients make hashes alike; any real difference hashes apart.

use ccwire_core::api::{anthropic, openai, responses, Api, ApiErrorKind, ToolChoice};
use ccwire_core::conversation::{Block, Role};
use serde_json::{json, Value};

fn anthropic_hash(body: Value) -> String {
    let req = anthropic::parse_request(body.to_string().as_bytes()).unwrap();
    req.conversation.history_hash("tenant").unwrap()
}

fn openai_hash(body: Value) -> String {
    let req = openai::parse_request(body.to_string().as_bytes()).unwrap();
    req.conversation.history_hash("tenant").unwrap()
}

/// A tool round trip in the Anthropic shape, as an SDK sends it back.
fn anthropic_conversation() -> Value {
    json!({
        "model": "claude-sonnet-4-5", "max_tokens": 1024,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "What's the weather in Paris and Rome?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "unit": "c"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome", "unit": "c"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "21C"}]}
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "Paris 18C, Rome 21C."}]},
            {"role": "user", "content": "Thanks!"}
        ],
        "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}]
    })
}

/// The same conversation in the OpenAI shape.
fn openai_conversation() -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What's the weather in Paris and Rome?"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"c\"}"}},
                {"id": "toolu_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"unit\": \"c\", \"city\": \"Rome\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
            {"role": "tool", "tool_call_id": "toolu_2", "content": "21C"},
            {"role": "assistant", "content": "Paris 18C, Rome 21C."},
            {"role": "user", "content": "Thanks!"}
        ],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}}]
    })
}

#[test]
fn both_api_shapes_of_one_conversation_hash_alike() {
    assert_eq!(
        anthropic_hash(anthropic_conversation()),
        openai_hash(openai_conversation())
    );
}

#[test]
fn client_rewrites_do_not_change_the_hash() {
    let base = anthropic_hash(anthropic_conversation());
    let mut rewritten = anthropic_conversation();
    let messages = rewritten["messages"].as_array_mut().unwrap();
    // String content as a text block, with cache_control.
    messages[0]["content"] = json!([{"type": "text", "text": "What's the weather in Paris and Rome?", "cache_control": {"type": "ephemeral"}}]);
    // Thinking with a signature, split and empty text, citations, reordered keys.
    messages[1]["content"] = json!([
        {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
        {"text": "Let ", "type": "text", "citations": []},
        {"type": "text", "text": ""},
        {"type": "text", "text": "me check."},
        {"input": {"unit": "c", "city": "Paris"}, "name": "get_weather", "id": "toolu_1", "type": "tool_use"},
        {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome", "unit": "c"}}
    ]);
    messages[3]["content"] = json!("Paris 18C, Rome 21C.");
    assert_eq!(anthropic_hash(rewritten), base);

    // The user turn split in two messages is the same turn.
    let mut split = anthropic_conversation();
    let messages = split["messages"].as_array_mut().unwrap();
    let results = messages[2]["content"].as_array().unwrap().clone();
    messages[2]["content"] = json!([results[0]]);
    messages.insert(3, json!({"role": "user", "content": [results[1]]}));
    assert_eq!(anthropic_hash(split), base);

    // OpenAI: arguments as an object, content as parts.
    let mut openai = openai_conversation();
    openai["messages"][2]["tool_calls"][0]["function"]["arguments"] =
        json!({"city": "Paris", "unit": "c"});
    openai["messages"][5]["content"] =
        json!([{"type": "text", "text": "Paris 18C, "}, {"type": "text", "text": "Rome 21C."}]);
    assert_eq!(openai_hash(openai), base);
}

#[test]
fn real_differences_hash_apart() {
    let base = anthropic_hash(anthropic_conversation());
    type Edit = Box<dyn Fn(&mut Value)>;
    let edits: Vec<Edit> = vec![
        Box::new(|c| c["messages"][0]["content"] = json!("What's the weather in Paris?")),
        Box::new(|c| c["messages"][1]["content"][1]["input"]["city"] = json!("Lyon")),
        Box::new(|c| c["messages"][1]["content"][1]["id"] = json!("toolu_9")),
        Box::new(|c| c["messages"][2]["content"][0]["content"] = json!("19C")),
        Box::new(|c| c["messages"][2]["content"][0]["is_error"] = json!(true)),
        Box::new(|c| c["messages"][3]["content"][0]["text"] = json!("Paris 18C, Rome 22C.")),
        Box::new(|c| c["messages"][1]["content"][0]["text"] = json!("Let me check")),
    ];
    for (i, edit) in edits.iter().enumerate() {
        let mut changed = anthropic_conversation();
        edit(&mut changed);
        assert_ne!(anthropic_hash(changed), base, "edit {i}");
    }
}

#[test]
fn the_history_is_everything_up_to_the_last_assistant_message() {
    let req = anthropic::parse_request(anthropic_conversation().to_string().as_bytes()).unwrap();
    let conv = &req.conversation;
    assert_eq!(conv.history_len(), 4);
    assert_eq!(conv.new_messages().len(), 1);
    assert_eq!(conv.new_messages()[0].role, Role::User);
    assert_eq!(
        conv.new_messages()[0].content,
        vec![Block::Text {
            text: "Thanks!".into()
        }]
    );
    assert_eq!(conv.system.as_deref(), Some("Be brief."));
}

#[test]
fn tool_signatures_ignore_order_and_see_changes() {
    let parse = |tools: Value| {
        let mut body = anthropic_conversation();
        body["tools"] = tools;
        anthropic::parse_request(body.to_string().as_bytes())
            .unwrap()
            .conversation
            .tool_signature()
    };
    let a = json!({"name": "a", "input_schema": {"type": "object"}});
    let b = json!({"name": "b", "input_schema": {"type": "object"}});
    assert_eq!(parse(json!([a, b])), parse(json!([b, a])));
    let b2 = json!({"name": "b", "input_schema": {"type": "object", "required": ["x"]}});
    assert_ne!(parse(json!([a, b])), parse(json!([a, b2])));
}

#[test]
fn openai_images_become_image_blocks() {
    let body = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    ]}]});
    let req = openai::parse_request(body.to_string().as_bytes()).unwrap();
    let content = &req.conversation.messages[0].content;
    assert_eq!(
        content[1],
        Block::Image {
            source: json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="})
        }
    );
    assert_eq!(
        content[2],
        Block::Image {
            source: json!({"type": "url", "url": "https://example.com/a.png"})
        }
    );
}

#[test]
fn requests_carry_stream_tools_and_choice() {
    let mut body = openai_conversation();
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    body["tool_choice"] = json!("required");
    body["temperature"] = json!(0.2);
    let req = openai::parse_request(body.to_string().as_bytes()).unwrap();
    assert!(req.stream && req.include_usage);
    assert_eq!(req.tool_choice, ToolChoice::Any);
    assert_eq!(req.conversation.tools[0].name, "get_weather");
    assert_eq!(req.ignored, ["temperature"]);
}

#[test]
fn bad_requests_get_errors_in_each_api_shape() {
    let cases = [
        (anthropic::parse_request(b"not json"), "invalid_request_error"),
        (anthropic::parse_request(br#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#), "invalid_request_error"),
        (anthropic::parse_request(br#"{"model":"m","max_tokens":5,"messages":[]}"#), "invalid_request_error"),
        (anthropic::parse_request(br#"{"model":"m","max_tokens":5,"messages":[{"role":"robot","content":"x"}]}"#), "invalid_request_error"),
        (anthropic::parse_request(br#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"pre"}]}"#), "invalid_request_error"),
    ];
    for (result, kind) in cases {
        let err = result.unwrap_err();
        assert_eq!(err.status(), 400);
        let body = err.body(ccwire_core::api::Api::Anthropic);
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], kind);
        assert!(!body["error"]["message"].as_str().unwrap().is_empty());
    }
    let err =
        openai::parse_request(br#"{"model":"m","n":2,"messages":[{"role":"user","content":"x"}]}"#)
            .unwrap_err();
    assert_eq!(err.kind, ApiErrorKind::InvalidRequest);
    let body = err.body(ccwire_core::api::Api::OpenAi);
    assert_eq!(body["error"]["param"], "n");
    assert_eq!(body["error"]["type"], "invalid_request_error");
}

#[test]
fn fields_the_gateway_does_not_know_are_ignored_and_named() {
    let req = openai::parse_request(
        br#"{"model":"m","messages":[{"role":"user","content":"x"}],"zeta_new_field":1,"temperature":0}"#,
    )
    .unwrap();
    assert_eq!(req.ignored, ["temperature", "zeta_new_field"]);
    let req = anthropic::parse_request(
        br#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"brand_new":{"a":1}}"#,
    )
    .unwrap();
    assert_eq!(req.ignored, ["brand_new"]);
}

/// A request as Claude Code itself sends it to its API: `system` messages inside `messages`,
/// `output_config`, adaptive thinking, `context_management`, `cache_control` on system, tool and
/// message blocks.
fn claude_code_request(messages: Value) -> Value {
    json!({
        "model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": true,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
        "tools": [{"name": "Bash", "description": "Run a command.",
                   "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
                   "cache_control": {"type": "ephemeral"}}],
        "metadata": {"user_id": "u"},
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    })
}

#[test]
fn claude_code_s_own_requests_are_accepted() {
    let first = json!([
        {"role": "system", "content": "The user's timezone is UTC."},
        {"role": "user", "content": [{"type": "text", "text": "Run ls", "cache_control": {"type": "ephemeral"}}]},
    ]);
    let req = anthropic::parse_request(claude_code_request(first.clone()).to_string().as_bytes())
        .unwrap();
    assert_eq!(req.ignored, ["context_management", "metadata"]);
    // Its thinking and effort are honoured.
    assert_eq!(req.thinking, Some(ccwire_core::api::Thinking::Adaptive));
    assert!(req.show_thinking);
    assert!(req.effort.is_some());
    assert_eq!(
        req.conversation.system.as_deref(),
        Some("You are Claude Code.")
    );
    assert_eq!(
        req.conversation.messages[0].content,
        [Block::Text {
            text: "<system>\nThe user's timezone is UTC.\n</system>\n\nRun ls".into()
        }],
        "the system message is text of the user turn it stands in"
    );
    // After the user's text, a system message is set apart from it.
    let later = json!([
        {"role": "user", "content": "Run ls"},
        {"role": "system", "content": [{"type": "text", "text": "Effort: high."}]},
    ]);
    let req = anthropic::parse_request(claude_code_request(later).to_string().as_bytes()).unwrap();
    assert_eq!(
        req.conversation.messages[0].content,
        [Block::Text {
            text: "Run ls\n\n<system>\nEffort: high.\n</system>\n\n".into()
        }]
    );
    // The next request continues the same history: it hashes as the first request's did.
    let mut next = first.as_array().unwrap().clone();
    next.push(json!({"role": "assistant", "content": "Done."}));
    next.push(json!({"role": "system", "content": "Reminder."}));
    next.push(json!({"role": "user", "content": "Thanks"}));
    let req =
        anthropic::parse_request(claude_code_request(json!(next)).to_string().as_bytes()).unwrap();
    assert_eq!(req.conversation.history_len(), 2);
    let err = anthropic::parse_request(
        claude_code_request(json!([{"role": "system", "content": [{"type": "image",
            "source": {"type": "url", "url": "https://example.com/a.png"}}]}, {"role": "user", "content": "x"}]))
        .to_string()
        .as_bytes(),
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "messages.0.content: a system message holds text only"
    );
}

#[test]
fn errors_name_the_field_at_fault_in_each_api_s_style() {
    let err = anthropic::parse_request(
        br#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"t","content":[{"text":"no type"}]}]}]}"#,
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "messages.2.content.1.content.0.type: field required"
    );
    let body = err.body(ccwire_core::api::Api::Anthropic);
    assert_eq!(body["error"]["message"], err.message);
    let err = anthropic::parse_request(
        br#"{"model":"m","max_tokens":5,"tools":[{"name":"a","input_schema":{}},{"name":"a","input_schema":{}}],"messages":[{"role":"user","content":"x"}]}"#,
    )
    .unwrap_err();
    assert_eq!(err.message, "tools.1.name: tool names must be unique (a)");
    let err = openai::parse_request(
        br#"{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"f"}},{"function":{}}]}]}"#,
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "messages[1].tool_calls[1]: id and function.name are required"
    );
    assert_eq!(
        err.body(ccwire_core::api::Api::OpenAi)["error"]["param"],
        "messages[1].tool_calls[1]"
    );
    let err = openai::parse_request(
        br#"{"model":"m","messages":[{"role":"user","content":[{"type":"audio"}]}]}"#,
    )
    .unwrap_err();
    assert!(
        err.message.starts_with("messages[0].content[0].type: "),
        "{}",
        err.message
    );
}

#[test]
fn tool_names_follow_the_apis_rule_and_errors_name_the_tool() {
    let anthropic_tools = |name: &str| {
        let body = json!({"model": "m", "max_tokens": 5,
            "tools": [{"name": "ok_tool-1", "input_schema": {}}, {"name": name, "input_schema": {}}],
            "messages": [{"role": "user", "content": "x"}]});
        anthropic::parse_request(body.to_string().as_bytes())
    };
    let openai_tools = |name: &str| {
        let body = json!({"model": "m",
            "tools": [{"type": "function", "function": {"name": name}}],
            "messages": [{"role": "user", "content": "x"}]});
        openai::parse_request(body.to_string().as_bytes())
    };
    let longest = "a".repeat(64);
    assert!(anthropic_tools(&longest).is_ok());
    assert!(openai_tools(&longest).is_ok());
    for bad in ["my tool", "a.b", "naïve", "x/y", &"a".repeat(65)] {
        let err = anthropic_tools(bad).unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(
            err.message
                .starts_with(&format!("tools.1.name: {bad:?} is not a valid tool name")),
            "{}",
            err.message
        );
        let err = openai_tools(bad).unwrap_err();
        assert!(
            err.message.starts_with("tools[0].function.name: "),
            "{}",
            err.message
        );
        assert!(err.message.contains(&format!("{bad:?}")), "{}", err.message);
        assert_eq!(
            err.body(ccwire_core::api::Api::OpenAi)["error"]["param"],
            "tools[0].function.name"
        );
    }
}

#[test]
fn image_data_must_be_base64_and_errors_name_the_field() {
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let anthropic_image = |data: &str| {
        let body = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
        ]}]});
        anthropic::parse_request(body.to_string().as_bytes())
    };
    let openai_image = |url: &str| {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}},
        ]}]});
        openai::parse_request(body.to_string().as_bytes())
    };
    assert!(anthropic_image(png).is_ok());
    assert!(
        anthropic_image(png.trim_end_matches('=')).is_ok(),
        "padding is optional"
    );
    // Longer than one checked piece, to cover pieces after the first.
    assert!(anthropic_image(&"QUJD".repeat(5000)).is_ok());
    assert!(openai_image(&format!("data:image/png;base64,{png}")).is_ok());
    assert!(openai_image("https://example.com/cat.png").is_ok());
    for bad in ["not base64!", "", "QUJD QUJD", "QQ==QUJD"] {
        let err = anthropic_image(bad).unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(
            err.message
                .starts_with("messages.0.content.1.source.data: the image data is"),
            "{bad:?}: {}",
            err.message
        );
        let err = openai_image(&format!("data:image/png;base64,{bad}")).unwrap_err();
        assert!(
            err.message
                .starts_with("messages[0].content[0].image_url.url: the image data is"),
            "{bad:?}: {}",
            err.message
        );
    }
    let mut long_bad = "QUJD".repeat(2000);
    long_bad.push_str("@@@@");
    assert!(
        anthropic_image(&long_bad).is_err(),
        "a bad byte past the first piece"
    );
    let err = openai_image("data:image/png,rawbytes").unwrap_err();
    assert!(
        err.message.contains("data:<media type>;base64,<data>"),
        "{}",
        err.message
    );
}

#[test]
fn padding_inside_long_image_data_is_refused() {
    // "QQ==" ends the first 4096-byte piece the data is checked in; more data follows.
    let data = format!("{}QQ=={}", "QUJD".repeat(1023), "QUJD".repeat(10));
    let body = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
    ]}]});
    let err = anthropic::parse_request(body.to_string().as_bytes()).unwrap_err();
    assert!(err.message.contains("not valid base64"), "{}", err.message);
}

#[test]
fn token_estimates_count_text_tools_images_and_messages() {
    let body = json!({"model": "m", "system": "abcd",
    "tools": [{"name": "ab", "description": "cd", "input_schema": {}}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "12345678"},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "ab", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "1234"}]},
    ]});
    let req = anthropic::parse_count_tokens_request(body.to_string().as_bytes()).unwrap();
    assert_eq!(req.max_tokens, None);
    // Text: 4 (system) + 6 (tool: name, description, "{}") + 8 + 4 (tool_use: name, "{}") + 4
    // = 26 bytes → 7 tokens; one image, 1,600; three messages, 12.
    assert_eq!(
        anthropic::estimate_input_tokens(&req.conversation),
        7 + 1600 + 12
    );
    // A count may end with the assistant's message (prefill), unlike a Messages request.
    let prefill = json!({"model": "m", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]});
    assert!(anthropic::parse_count_tokens_request(prefill.to_string().as_bytes()).is_ok());
    assert!(anthropic::parse_request(prefill.to_string().as_bytes()).is_err());
}

fn responses_request(body: Value) -> ccwire_core::api::ApiRequest {
    responses::parse_request(body.to_string().as_bytes()).unwrap()
}

/// The same conversation as a Responses request, as Codex sends it (`store: false`, the whole
/// input every turn, reasoning items, the developer message first).
fn responses_conversation() -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "instructions": "Be brief.",
        "store": false,
        "stream": true,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What's the weather in Paris and Rome?"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "toolu_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"c\"}"},
            {"type": "function_call", "call_id": "toolu_2", "name": "get_weather", "arguments": "{\"unit\": \"c\", \"city\": \"Rome\"}"},
            {"type": "function_call_output", "call_id": "toolu_1", "output": "18C"},
            {"type": "function_call_output", "call_id": "toolu_2", "output": [{"type": "input_text", "text": "21C"}]},
            {"role": "assistant", "content": "Paris 18C, Rome 21C."},
            {"role": "user", "content": "Thanks!"}
        ],
        "tools": [
            {"type": "function", "name": "get_weather", "description": "Weather", "parameters": {"type": "object"}, "strict": false},
            {"type": "web_search"}
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": true,
        "reasoning": {"summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "abc",
        "client_metadata": {"x": "y"}
    })
}

#[test]
fn the_responses_shape_of_a_conversation_hashes_like_the_other_two() {
    let request = responses_request(responses_conversation());
    assert_eq!(request.api, Api::Responses);
    assert!(request.stream);
    assert!(!request.store);
    assert_eq!(request.conversation.system.as_deref(), Some("Be brief."));
    assert!(request.show_thinking, "a reasoning summary was asked for");
    assert_eq!(request.effort, None);
    assert_eq!(
        request.conversation.history_hash("tenant").unwrap(),
        anthropic_hash(anthropic_conversation())
    );
    // The tool set (the hosted web_search tool left out) matches too.
    let anthropic = anthropic::parse_request(anthropic_conversation().to_string().as_bytes());
    assert_eq!(
        request.conversation.tool_signature(),
        anthropic.unwrap().conversation.tool_signature()
    );
    assert_eq!(
        request.ignored,
        [
            "client_metadata",
            "include",
            "parallel_tool_calls",
            "prompt_cache_key",
            "tools[1] (web_search)",
        ]
    );
}

#[test]
fn responses_input_forms() {
    // A string is one user message.
    let request = responses_request(json!({"model": "m", "input": "hi"}));
    assert_eq!(request.conversation.messages.len(), 1);
    assert!(request.store, "store defaults to true");
    assert_eq!(request.previous_response_id, None);
    // Developer and system messages before the conversation are the system prompt, after
    // `instructions`; later ones are tagged text of their user turn.
    let request = responses_request(json!({
        "model": "m",
        "instructions": "A",
        "previous_response_id": "resp_1",
        "max_output_tokens": 50,
        "input": [
            {"role": "developer", "content": "B"},
            {"role": "system", "content": [{"type": "input_text", "text": "C"}]},
            {"role": "user", "content": "hi"},
            {"role": "developer", "content": "D"},
        ]
    }));
    assert_eq!(request.conversation.system.as_deref(), Some("A\n\nB\n\nC"));
    assert_eq!(
        request.conversation.messages[0].content,
        [Block::Text {
            text: "hi\n\n<system>\nD\n</system>\n\n".into()
        }]
    );
    assert_eq!(request.previous_response_id.as_deref(), Some("resp_1"));
    assert_eq!(request.max_tokens, Some(50));
    // Images: data URLs become base64 sources, others stay URLs.
    let request = responses_request(json!({"model": "m", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "see"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
        {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
    ]}]}));
    let content = &request.conversation.messages[0].content;
    assert_eq!(
        content[1],
        Block::Image {
            source: json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="})
        }
    );
    assert_eq!(
        content[2],
        Block::Image {
            source: json!({"type": "url", "url": "https://example.com/a.png"})
        }
    );
}

#[test]
fn bad_responses_requests_name_the_field() {
    let cases = [
        (json!({"input": "hi"}), "model"),
        (json!({"model": "m"}), "input"),
        (json!({"model": "m", "input": 3}), "input"),
        (
            json!({"model": "m", "input": [{"role": "assistant", "content": "x"}]}),
            "input",
        ),
        (
            json!({"model": "m", "input": [{"type": "item_reference", "id": "x"}]}),
            "input[0].id",
        ),
        (
            json!({"model": "m", "input": [{"type": "item_reference"}]}),
            "input[0].id",
        ),
        (
            json!({"model": "m", "input": [{"type": "local_shell_call"}]}),
            "input[0].type",
        ),
        (
            json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}),
            "input[0].content[0].type",
        ),
        (
            json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]}),
            "input[0].content[0].image_url",
        ),
        (
            json!({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]}),
            "input[0].call_id",
        ),
        (
            json!({"model": "m", "input": "hi", "tools": [{"type": "function", "name": "a b"}]}),
            "tools[0].name",
        ),
        (
            json!({"model": "m", "input": "hi", "text": {"format": {"type": "xml"}}}),
            "text.format.type",
        ),
        (
            json!({"model": "m", "input": "hi", "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "array"}}}}),
            "text.format.schema",
        ),
        (
            json!({"model": "m", "input": "hi", "background": true}),
            "background",
        ),
        (
            json!({"model": "m", "input": "hi", "conversation": "conv_1"}),
            "conversation",
        ),
        (
            json!({"model": "m", "input": "hi", "max_output_tokens": 0}),
            "max_output_tokens",
        ),
        // Codex's remote compaction (v2): the gateway does not compact for the client.
        (
            json!({"model": "m", "input": [{"role": "user", "content": "x"}, {"type": "compaction_trigger"}]}),
            "input[1].type",
        ),
        (
            json!({"model": "m", "input": "hi", "tools": [{"type": "function", "name": "a"}, {"type": "function", "name": "b"}],
                   "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "c"}]}}),
            "tool_choice",
        ),
    ];
    for (body, param) in cases {
        let err = responses::parse_request(body.to_string().as_bytes()).unwrap_err();
        assert_eq!(err.kind, ApiErrorKind::InvalidRequest, "{body}");
        assert_eq!(err.param.as_deref(), Some(param), "{body}: {}", err.message);
        assert!(err.message.starts_with(param), "{body}: {}", err.message);
        let shape = err.body(Api::Responses);
        assert_eq!(shape["error"]["param"], param);
        assert_eq!(shape["error"]["type"], "invalid_request_error");
    }
}

#[test]
fn openai_system_messages_after_the_first_message_stay_in_their_turn() {
    let request = openai::parse_request(
        json!({"model": "m", "messages": [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "developer", "content": "now be terse"},
            {"role": "user", "content": "again"},
        ]})
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    assert_eq!(request.conversation.system.as_deref(), Some("S"));
    assert_eq!(
        request.conversation.messages[2].content,
        [Block::Text {
            text: "<system>\nnow be terse\n</system>\n\nagain".into()
        }]
    );
}

/// Structured output, as each API asks for it, becomes one object schema: named and described
/// by the format, `json_object` any object; `text` asks for none.
#[test]
fn every_api_asks_for_structured_output_as_an_object_schema() {
    let person =
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let named = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
                       "title": "Person", "description": "Who"});
    let chat = |format: Value| {
        openai::parse_request(
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "response_format": format})
                .to_string()
                .as_bytes(),
        )
    };
    let req = chat(json!({"type": "json_schema", "json_schema": {"name": "Person", "description": "Who", "strict": true, "schema": person}})).unwrap();
    assert_eq!(req.json_schema, Some(named.clone()));
    assert_eq!(
        chat(json!({"type": "json_object"})).unwrap().json_schema,
        Some(json!({"type": "object"}))
    );
    assert_eq!(chat(json!({"type": "text"})).unwrap().json_schema, None);
    let err = chat(
        json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "string"}}}),
    )
    .unwrap_err();
    assert_eq!(
        err.param.as_deref(),
        Some("response_format.json_schema.schema")
    );

    let req = responses::parse_request(
        json!({"model": "m", "input": "hi", "text": {"format": {"type": "json_schema", "name": "Person", "description": "Who", "schema": person}, "verbosity": "low"}})
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(req.json_schema, Some(named));
    assert!(req.ignored.is_empty(), "{:?}", req.ignored);

    let messages = |extra: Value| {
        let mut body = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        anthropic::parse_request(body.to_string().as_bytes())
    };
    for extra in [
        json!({"output_format": {"type": "json_schema", "schema": person}}),
        json!({"output_config": {"format": {"type": "json_schema", "schema": person}, "effort": "low"}}),
    ] {
        let req = messages(extra.clone()).unwrap();
        assert_eq!(req.json_schema, Some(person.clone()), "{extra}");
        assert!(req.ignored.is_empty(), "{extra}: {:?}", req.ignored);
    }
    // `properties` without a `type` is an object schema.
    let req =
        messages(json!({"output_format": {"type": "json_schema", "schema": {"properties": {}}}}))
            .unwrap();
    assert_eq!(
        req.json_schema,
        Some(json!({"type": "object", "properties": {}}))
    );
}

/// `allowed_tools` leaves only the tools it names, and its mode says whether a call is required.
#[test]
fn allowed_tools_narrow_the_tools_offered() {
    let tools = json!([
        {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "b", "parameters": {"type": "object"}}},
    ]);
    let req = openai::parse_request(
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools,
               "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "required",
                   "tools": [{"type": "function", "function": {"name": "b"}}]}}})
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    assert_eq!(req.tool_choice, ToolChoice::Any);
    let names: Vec<&str> = req
        .conversation
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["b"]);

    let req = responses::parse_request(
        json!({"model": "m", "input": "hi",
               "tools": [{"type": "function", "name": "a"}, {"type": "function", "name": "b"}],
               "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "a"}]}})
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    assert_eq!(req.tool_choice, ToolChoice::Auto);
    let names: Vec<&str> = req
        .conversation
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["a"]);
}

#[test]
fn signed_thinking_is_kept_beside_the_canonical_form_and_hashes_as_if_absent() {
    let with = json!({"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Hm.", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "thinking", "thinking": "unsigned"},
            {"type": "text", "text": "A"},
        ]},
        {"role": "user", "content": "Q2"},
    ]});
    let mut without = with.clone();
    without["messages"][1]["content"] = json!([{"type": "text", "text": "A"}]);
    assert_eq!(anthropic_hash(with.clone()), anthropic_hash(without));
    let request = anthropic::parse_request(with.to_string().as_bytes()).unwrap();
    assert_eq!(
        request.conversation.thinking,
        vec![(
            1,
            vec![
                json!({"type": "thinking", "thinking": "Hm.", "signature": "sig"}),
                json!({"type": "redacted_thinking", "data": "opaque"}),
            ]
        )],
        "a block without a signature cannot go back to the API"
    );
}

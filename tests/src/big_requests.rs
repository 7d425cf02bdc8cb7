//! The huge requests a gateway must serve without holding up the others (`stall-cli`, the
//! stall test): a Messages request with many tools, and one with a long history.

use serde_json::json;

/// A Messages request for `model` with `n` small tools (each a description and a property)
/// and one message.
pub fn with_tools(model: &str, n: usize) -> Vec<u8> {
    let mut body = format!(r#"{{"model":"{model}","max_tokens":64,"tools":["#);
    for i in 0..n {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&format!(
            r#"{{"name":"tool_{i}","description":"Tool {i}.","input_schema":{{"type":"object","properties":{{"x":{{"type":"string"}}}}}}}}"#
        ));
    }
    body.push_str(r#"],"messages":[{"role":"user","content":"Hello."}]}"#);
    body.into_bytes()
}

/// A Messages request for `model` of about `bytes`: a history of user and assistant messages
/// of 1 KiB each, then a question.
pub fn with_history(model: &str, bytes: usize) -> Vec<u8> {
    let filler = "The quick brown fox jumps over the lazy dog. ".repeat(23);
    let mut messages = Vec::new();
    let mut size = 0;
    while size + 2048 < bytes {
        let role = if messages.len() % 2 == 0 {
            "user"
        } else {
            "assistant"
        };
        let message = json!({"role": role, "content": format!("{}: {filler}", messages.len())});
        size += message.to_string().len() + 1;
        messages.push(message);
    }
    if messages.len() % 2 == 1 {
        messages.pop();
    }
    messages.push(json!({"role": "user", "content": "Summarise the conversation."}));
    serde_json::to_vec(&json!({"model": model, "max_tokens": 64, "messages": messages}))
        .expect("JSON")
}

//! In-process ("SDK") MCP servers: the JSON-RPC the CLI sends over `mcp_message`.
//!
//! In driver mode the session answers the handshake (`initialize`, notifications, `tools/list`)
//! of every registered server itself and surfaces each `tools/call` as an
//! [`McpToolCall`](crate::Chunk::McpToolCall) chunk for the embedder to answer.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// An in-process MCP server: its name and the tools it offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServer {
    /// The server name (`mcp__<name>__<tool>` to the model).
    pub name: String,
    /// The version reported in `serverInfo`.
    #[serde(default = "default_version")]
    pub version: String,
    /// The tools listed by `tools/list`.
    #[serde(default)]
    pub tools: Vec<McpTool>,
    /// `tools` as JSON, serialized ahead of the session ([`with_listed`](Self::with_listed)).
    #[serde(skip)]
    listed: Option<std::sync::Arc<str>>,
}

fn default_version() -> String {
    "1.0.0".to_owned()
}

/// One tool of an [`McpServer`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpTool {
    /// The tool name, un-prefixed.
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of the input, verbatim.
    #[serde(rename = "inputSchema", alias = "input_schema")]
    pub input_schema: Value,
    /// MCP annotations (`readOnlyHint`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// `_meta` (for example `anthropic/alwaysLoad`).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    /// Further fields of the MCP tool definition (`title`, `outputSchema`, …), passed through.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

impl McpServer {
    /// Creates a server with no tools.
    pub fn new(name: impl Into<String>) -> McpServer {
        McpServer {
            name: name.into(),
            version: default_version(),
            tools: Vec::new(),
            listed: None,
        }
    }

    /// Creates a server of `tools`, `listed` their JSON (`serde_json::to_string(&tools)`)
    /// made ahead: `tools/list` is answered with it as it is, so that a session with hundreds
    /// of thousands of tools does not serialize them where its host waits (a `tools` changed
    /// afterwards is not listed).
    pub fn with_listed(
        name: impl Into<String>,
        tools: Vec<McpTool>,
        listed: std::sync::Arc<str>,
    ) -> McpServer {
        McpServer {
            tools,
            listed: Some(listed),
            ..McpServer::new(name)
        }
    }

    /// Adds a tool.
    pub fn with_tool(mut self, tool: McpTool) -> McpServer {
        self.tools.push(tool);
        self
    }
}

impl McpTool {
    /// Creates a tool from its name, description and input schema.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> McpTool {
        McpTool {
            name: name.into(),
            description: description.into(),
            input_schema,
            annotations: None,
            meta: None,
            extra: serde_json::Map::new(),
        }
    }
}

/// The result of a `tools/call`, as the embedder gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpCallResult {
    /// MCP content blocks (`{"type":"text","text":…}`, images, …).
    pub content: Vec<Value>,
    /// Whether the call failed; the model sees an error tool result.
    #[serde(rename = "isError", alias = "is_error", default)]
    pub is_error: bool,
}

impl McpCallResult {
    /// A successful result holding one text block.
    pub fn text(text: impl Into<String>) -> McpCallResult {
        McpCallResult {
            content: vec![json!({"type": "text", "text": text.into()})],
            is_error: false,
        }
    }

    /// An error result holding one text block.
    pub fn error(text: impl Into<String>) -> McpCallResult {
        McpCallResult {
            content: vec![json!({"type": "text", "text": text.into()})],
            is_error: true,
        }
    }
}

/// The session's answer to an MCP request it handles itself: the JSON-RPC message to put in
/// `mcp_response`.
pub(crate) fn answer_handshake(
    servers: &[McpServer],
    server_name: &str,
    method: Option<&str>,
    id: Option<&Value>,
    params: Option<&Value>,
) -> Value {
    let Some(server) = servers.iter().find(|s| s.name == server_name) else {
        return rpc_error(id, -32601, &format!("Server '{server_name}' not found"));
    };
    let Some(id) = id else {
        // A notification: acknowledged with an empty result.
        return json!({"jsonrpc": "2.0", "result": {}});
    };
    match method {
        Some("initialize") => {
            let version = params
                .and_then(|p| p.get("protocolVersion"))
                .cloned()
                .unwrap_or_else(|| json!("2025-11-25"));
            json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": server.name, "version": server.version},
            }})
        }
        Some("tools/list") => {
            json!({"jsonrpc": "2.0", "id": id, "result": {"tools": server.tools}})
        }
        Some("ping") => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        Some(other) => rpc_error(Some(id), -32601, &format!("Method '{other}' not found")),
        None => rpc_error(Some(id), -32600, "Invalid request"),
    }
}

/// The whole `control_response` line (its newline included) that answers the CLI's
/// `tools/list` request `request_id` to server `server_name`, serialized straight from the
/// server's tools (no JSON value tree of them); `None` for any other request, or a server not
/// registered.
pub(crate) fn tools_list_line(
    servers: &[McpServer],
    server_name: &str,
    request_id: &str,
    rpc: &crate::wire::JsonRpc<'_>,
) -> Option<Vec<u8>> {
    let (Some("tools/list"), Some(id)) = (rpc.method.as_deref(), rpc.id) else {
        return None;
    };
    let server = servers.iter().find(|s| s.name == server_name)?;
    let mut line = Vec::with_capacity(256 + server.tools.len() * 64);
    line.extend_from_slice(
        br#"{"type":"control_response","response":{"subtype":"success","request_id":"#,
    );
    serde_json::to_writer(&mut line, request_id).expect("a string serializes");
    line.extend_from_slice(br#","response":{"mcp_response":{"jsonrpc":"2.0","id":"#);
    line.extend_from_slice(id.get().as_bytes());
    line.extend_from_slice(br#","result":{"tools":"#);
    match &server.listed {
        Some(listed) => line.extend_from_slice(listed.as_bytes()),
        None => serde_json::to_writer(&mut line, &server.tools).expect("tools serialize"),
    }
    line.extend_from_slice(
        b"}}}}}
",
    );
    Some(line)
}

/// A JSON-RPC error message.
pub(crate) fn rpc_error(id: Option<&Value>, code: i64, message: &str) -> Value {
    let mut error = json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}});
    if let Some(id) = id {
        error["id"] = id.clone();
    }
    error
}

/// The `tools/call` answer for a result.
pub(crate) fn call_result(id: &Value, result: &McpCallResult) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": result.content, "isError": result.is_error}})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `tools/list` line written straight from the tools says what the value-built answer
    /// says, and only `tools/list` of a registered server is written that way.
    #[test]
    fn a_tools_list_line_is_the_answer_as_json_values_build_it() {
        let mut tool = McpTool::new(
            "lookup",
            "Looks \"things\" up.\n",
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        );
        tool.meta = Some(json!({"anthropic/alwaysLoad": true}));
        tool.extra.insert("title".into(), json!("Lookup"));
        let servers = [McpServer::new("client").with_tool(tool)];
        let frame = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#;
        let rpc: crate::wire::JsonRpc<'_> = serde_json::from_str(frame).unwrap();
        let line = tools_list_line(&servers, "client", "req_\"1", &rpc).unwrap();
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        let written: Value = serde_json::from_slice(&line).unwrap();
        let answer = answer_handshake(
            &servers,
            "client",
            Some("tools/list"),
            Some(&json!(7)),
            None,
        );
        let expected = json!({"type": "control_response", "response": {"subtype": "success",
            "request_id": "req_\"1", "response": {"mcp_response": answer}}});
        assert_eq!(written, expected);

        // Listed as serialized ahead, the same line.
        let tools = servers[0].tools.clone();
        let listed = serde_json::to_string(&tools).unwrap().into();
        let ahead = [McpServer::with_listed("client", tools, listed)];
        assert_eq!(
            tools_list_line(&ahead, "client", "req_\"1", &rpc).unwrap(),
            line
        );

        assert!(tools_list_line(&servers, "other", "r", &rpc).is_none());
        let ping: crate::wire::JsonRpc<'_> =
            serde_json::from_str(r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#).unwrap();
        assert!(tools_list_line(&servers, "client", "r", &ping).is_none());
    }
}

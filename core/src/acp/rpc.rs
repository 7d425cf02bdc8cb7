//! JSON-RPC 2.0 as ACP uses it: one message per line, no batches. What a line holds, and the
//! lines the agent writes.

use agent_client_protocol_schema::v1::{
    AuthenticateRequest, CancelNotification, CloseSessionRequest, Error, InitializeRequest,
    JsonRpcMessage, ListSessionsRequest, LoadSessionRequest, McpServer, NewSessionRequest,
    Notification, PromptRequest, Request, RequestId, Response, ResumeSessionRequest,
    SetSessionConfigOptionRequest, SetSessionModeRequest, AGENT_METHOD_NAMES,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// A request of the client the agent serves, typed by its method.
#[derive(Debug)]
pub(super) enum Call {
    Initialize(Box<InitializeRequest>),
    Authenticate,
    NewSession(NewSessionRequest),
    /// `session/load` (`replay`: the history is shown again) or `session/resume`.
    Load {
        session_id: String,
        cwd: std::path::PathBuf,
        mcp: Vec<McpServer>,
        replay: bool,
    },
    CloseSession(CloseSessionRequest),
    ListSessions(ListSessionsRequest),
    Prompt(PromptRequest),
    SetMode(SetSessionModeRequest),
    SetConfigOption(SetSessionConfigOptionRequest),
}

/// Types a request by its method (the schema's method names). `Err(None)`: a method the agent
/// does not serve (`-32601`); `Err(Some(why))`: parameters that do not fit it (`-32602`).
pub(super) fn call(method: &str, params: Value) -> Result<Call, Option<String>> {
    fn typed<T: DeserializeOwned>(
        params: Value,
        call: fn(T) -> Call,
    ) -> Result<Call, Option<String>> {
        serde_json::from_value(params)
            .map(call)
            .map_err(|e| Some(e.to_string()))
    }
    let names = &AGENT_METHOD_NAMES;
    match method {
        m if m == names.initialize => {
            typed(params, |r: InitializeRequest| Call::Initialize(Box::new(r)))
        }
        m if m == names.authenticate => typed(params, |_: AuthenticateRequest| Call::Authenticate),
        m if m == names.session_new => typed(params, Call::NewSession),
        m if m == names.session_load => typed(params, |r: LoadSessionRequest| Call::Load {
            session_id: r.session_id.0.to_string(),
            cwd: r.cwd,
            mcp: r.mcp_servers,
            replay: true,
        }),
        m if m == names.session_resume => typed(params, |r: ResumeSessionRequest| Call::Load {
            session_id: r.session_id.0.to_string(),
            cwd: r.cwd,
            mcp: r.mcp_servers,
            replay: false,
        }),
        m if m == names.session_close => typed(params, Call::CloseSession),
        m if m == names.session_list => typed(params, Call::ListSessions),
        m if m == names.session_prompt => typed(params, Call::Prompt),
        m if m == names.session_set_mode => typed(params, Call::SetMode),
        m if m == names.session_set_config_option => typed(params, Call::SetConfigOption),
        _ => Err(None),
    }
}

/// The one notification of the client the agent acts on: `session/cancel`.
pub(super) fn cancel(method: &str, params: Value) -> Option<CancelNotification> {
    (method == AGENT_METHOD_NAMES.session_cancel)
        .then(|| serde_json::from_value(params).ok())
        .flatten()
}

/// A message from the client, its envelope checked and its payload not yet typed.
#[derive(Debug)]
pub(super) enum Incoming {
    /// A request: the client waits for the answer.
    Request {
        id: RequestId,
        method: String,
        params: Value,
    },
    /// A notification: nothing answers it.
    Notification { method: String, params: Value },
    /// The client's answer to a request of the agent.
    Response {
        id: RequestId,
        result: Result<Value, Error>,
    },
}

/// The envelope's members. `id` is `Some` whenever the member is there, `null` included.
#[derive(Deserialize)]
struct Envelope {
    jsonrpc: Option<String>,
    #[serde(default, deserialize_with = "present")]
    id: Option<RequestId>,
    method: Option<String>,
    params: Option<Value>,
    result: Option<Value>,
    error: Option<Error>,
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<RequestId>, D::Error> {
    RequestId::deserialize(deserializer).map(Some)
}

/// Reads one line. `Err` carries the id to answer with (`null` when the line has none that can
/// be read) and the error: `-32700` for text that is not JSON, `-32600` for JSON that is not a
/// JSON-RPC 2.0 message (a batch included: ACP has none).
pub(super) fn parse(line: &[u8]) -> Result<Incoming, Box<(RequestId, Error)>> {
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        Box::new((
            RequestId::Null,
            Error::parse_error().data(Value::String(e.to_string())),
        ))
    })?;
    let invalid =
        |id: RequestId, why: &str| Box::new((id, Error::invalid_request().data(Value::from(why))));
    if value.is_array() {
        return Err(invalid(RequestId::Null, "batches are not part of ACP"));
    }
    let envelope: Envelope = serde_json::from_value(value)
        .map_err(|e| invalid(RequestId::Null, &format!("not a JSON-RPC message: {e}")))?;
    let id = envelope.id.clone().unwrap_or(RequestId::Null);
    if envelope.jsonrpc.as_deref() != Some("2.0") {
        return Err(invalid(id, "`jsonrpc` must be \"2.0\""));
    }
    match (envelope.method, envelope.id) {
        (Some(method), Some(id)) => Ok(Incoming::Request {
            id,
            method,
            params: envelope.params.unwrap_or(Value::Null),
        }),
        (Some(method), None) => Ok(Incoming::Notification {
            method,
            params: envelope.params.unwrap_or(Value::Null),
        }),
        (None, Some(id)) => match (envelope.result, envelope.error) {
            (_, Some(error)) => Ok(Incoming::Response {
                id,
                result: Err(error),
            }),
            (Some(result), None) => Ok(Incoming::Response {
                id,
                result: Ok(result),
            }),
            (None, None) => Err(invalid(id, "a response needs `result` or `error`")),
        },
        (None, None) => Err(invalid(id, "a message needs `method` or `id`")),
    }
}

/// A line answering request `id`.
pub(super) fn response<T: Serialize>(id: RequestId, result: Result<T, Error>) -> Vec<u8> {
    line(&JsonRpcMessage::wrap(Response::new(id, result)))
}

/// A line of a request of the agent.
pub(super) fn request<T: Serialize>(id: i64, method: &str, params: T) -> Vec<u8> {
    line(&JsonRpcMessage::wrap(Request {
        id: RequestId::Number(id),
        method: method.into(),
        params: Some(params),
    }))
}

/// A line of a notification of the agent.
pub(super) fn notification<T: Serialize>(method: &str, params: T) -> Vec<u8> {
    line(&JsonRpcMessage::wrap(Notification {
        method: method.into(),
        params: Some(params),
    }))
}

fn line<T: Serialize>(message: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(message).expect("protocol messages serialize");
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> (RequestId, i32) {
        let (id, error) = *parse(line.as_bytes()).unwrap_err();
        (id, i32::from(error.code))
    }

    #[test]
    fn every_kind_of_message_and_every_malformed_line() {
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#),
            Ok(Incoming::Request { id: RequestId::Number(1), method, .. }) if method == "initialize"
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":null,"method":"m"}"#),
            Ok(Incoming::Request {
                id: RequestId::Null,
                ..
            })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":"a","result":{"outcome":{"outcome":"cancelled"}}}"#),
            Ok(Incoming::Response { result: Ok(_), .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"no"}}"#),
            Ok(Incoming::Response { result: Err(_), .. })
        ));
        assert_eq!(code("{not json"), (RequestId::Null, -32700));
        assert_eq!(code("[]"), (RequestId::Null, -32600));
        assert_eq!(
            code(r#"{"id":4,"method":"m"}"#),
            (RequestId::Number(4), -32600)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":5}"#),
            (RequestId::Number(5), -32600)
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0"}"#), (RequestId::Null, -32600));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{},"method":"m"}"#),
            (RequestId::Null, -32600)
        );
    }

    #[test]
    fn lines_the_agent_writes() {
        let text =
            String::from_utf8(notification("session/update", serde_json::json!({"a": 1}))).unwrap();
        assert_eq!(
            text,
            "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"a\":1}}\n"
        );
        let text = String::from_utf8(response::<Value>(
            RequestId::Number(7),
            Err(Error::method_not_found()),
        ))
        .unwrap();
        assert!(
            text.starts_with(r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601"#),
            "{text}"
        );
    }
}

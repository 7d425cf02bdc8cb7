//! The gateway engine of `ccwire serve` for JS hosts (`ccwire/conversation`).

use ccwire_core::gateway::{BodyError, Gateway, GatewayOutput, HttpConfig, HttpHead};
use serde::Deserialize;
use serde_json::Value;
use wasm_bindgen::prelude::*;

use crate::interop;

/// The `http` options of a JS `Gateway`: its HTTP face, as `ccwire serve`'s.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HttpOptions {
    #[serde(default)]
    api_keys: Vec<String>,
    admin_key: Option<String>,
    #[serde(default)]
    allow_origins: Vec<String>,
    #[serde(default)]
    allow_hosts: Vec<String>,
    max_body: Option<usize>,
    drain_grace_ms: Option<u64>,
    listener: Option<String>,
    loopback: Option<bool>,
    cli: Option<Value>,
    env: Option<std::collections::HashMap<String, String>>,
}

/// The gateway of the `Gateway` options (JSON) `options` with the HTTP face `http`.
fn gateway(options: &str, http: &str) -> Result<Gateway, JsError> {
    let o: HttpOptions = serde_json::from_str(http)
        .map_err(|err| JsError::new(&format!("Gateway http options: {err}")))?;
    let defaults = HttpConfig::default();
    let mut config = interop::endpoint_config(options)?;
    config.http = HttpConfig {
        api_keys: o.api_keys,
        admin_key: o.admin_key,
        // The package's gateway keeps no session store to keep keys in.
        managed_keys: false,
        allow_origins: o.allow_origins,
        allow_hosts: o.allow_hosts,
        max_body: o.max_body.unwrap_or(defaults.max_body),
        drain_grace_ms: o.drain_grace_ms.unwrap_or(defaults.drain_grace_ms),
        listener: o.listener.unwrap_or(defaults.listener),
        loopback: o.loopback.unwrap_or(defaults.loopback),
    };
    let mut gateway = Gateway::new(config).map_err(|err| JsError::new(&err.to_string()))?;
    gateway.set_cli(o.cli.unwrap_or(Value::Null));
    if let Some(env) = o.env {
        gateway.count_tokens_upstream(|name| env.get(name).cloned());
        let credential = ccwire_core::gateway::usage::credential_id(|name| env.get(name).cloned());
        gateway.set_credential(credential);
    }
    Ok(gateway)
}

/// Calls `f` with a request head from JS (the headers as JSON `[[name, value], …]`; the path
/// may carry its query).
fn with_head<T>(
    method: &str,
    path: &str,
    headers: &str,
    f: impl FnOnce(&HttpHead<'_>) -> T,
) -> Result<T, JsError> {
    let list: Vec<(String, String)> =
        serde_json::from_str(headers).map_err(|err| JsError::new(&format!("headers: {err}")))?;
    let headers: Vec<(&str, &str)> = list.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    Ok(f(&HttpHead {
        method,
        path,
        query,
        headers: &headers,
    }))
}

/// The transcript a CLI started with `spec` (the JSON of a `spawn` output's spec) resumes,
/// when the gateway wrote it from a client's history (`spec.resume.written`): its lines as
/// JSONL text, which the host writes at `spec.resume.path` before the start; empty otherwise
/// (a stored transcript is the host's store's).
///
/// # Errors
/// `spec` is not a spawn output's spec.
#[wasm_bindgen(js_name = writtenTranscript)]
pub fn written_transcript(spec: &str) -> Result<String, JsError> {
    let spec: ccwire_core::gateway::CliSpec =
        serde_json::from_str(spec).map_err(|err| JsError::new(&format!("spec: {err}")))?;
    let Some(written) = spec.resume.and_then(|r| r.written) else {
        return Ok(String::new());
    };
    let mut text = String::new();
    for line in written.lines() {
        text.push_str(line.get());
        text.push('\n');
    }
    Ok(text)
}

/// [`Gateway`]: every conversation's CLI session and response, driven by the host's
/// requests, CLI output and clock. Every input returns the outputs it made, as a JSON array.
#[wasm_bindgen]
pub struct WasmGateway {
    inner: Gateway,
}

#[wasm_bindgen]
impl WasmGateway {
    /// A gateway; `options` is the JSON of the `Gateway` options (`interop::endpoint_config`),
    /// `http` that of its HTTP face.
    ///
    /// # Errors
    /// Options that do not have that shape, or a listener other than loopback without keys.
    #[wasm_bindgen(constructor)]
    pub fn new(options: &str, http: &str) -> Result<WasmGateway, JsError> {
        Ok(WasmGateway {
            inner: gateway(options, http)?,
        })
    }

    /// Decides on an HTTP request from its head: `{"respond": {status, headers, body}}` (a
    /// refusal or a preflight's answer) or `{"admit": {tenant, cors}}`.
    ///
    /// # Errors
    /// Headers that are not a list of name–value pairs.
    pub fn admit(&self, method: &str, path: &str, headers: &str) -> Result<String, JsError> {
        with_head(method, path, headers, |head| {
            self.inner.admit(head).to_json().to_string()
        })
    }

    /// An admitted HTTP request with its body (or why there is none: `too_large`,
    /// `timed_out:<ms>` when it did not arrive within the host's body timeout, or the reason it
    /// could not be read): the outputs, among them a `fetch` to send for a `count_tokens`
    /// request and `drain_requested` for an accepted `POST /admin/drain`.
    ///
    /// # Errors
    /// A bad request id, headers or time.
    #[allow(clippy::too_many_arguments)]
    #[wasm_bindgen(js_name = handleHttp)]
    pub fn handle_http(
        &mut self,
        request: f64,
        method: &str,
        path: &str,
        headers: &str,
        tenant: &str,
        body: Option<Box<[u8]>>,
        body_error: Option<String>,
        now_ms: f64,
    ) -> Result<String, JsError> {
        let request = interop::id("request", request)?;
        let now = interop::timestamp(now_ms)?;
        let body = match (&body, body_error) {
            (_, Some(e)) if e == "too_large" => Err(BodyError::TooLarge),
            (_, Some(e)) if e.starts_with("timed_out:") => Err(BodyError::TimedOut {
                after_ms: e["timed_out:".len()..].parse().unwrap_or(0),
            }),
            (_, Some(reason)) => Err(BodyError::Unreadable(reason)),
            (body, None) => Ok(body.as_deref().unwrap_or_default()),
        };
        let inner = &mut self.inner;
        with_head(method, path, headers, |head| {
            inner.handle_http(now, request, head, tenant, body);
        })?;
        Ok(self.drain_outputs())
    }

    /// The answer to a `fetch` output: the body of the upstream's answer when it answered with
    /// success, else nothing.
    ///
    /// # Errors
    /// A bad request id or time.
    #[wasm_bindgen(js_name = handleFetched)]
    pub fn handle_fetched(
        &mut self,
        request: f64,
        answer: Option<Box<[u8]>>,
        now_ms: f64,
    ) -> Result<String, JsError> {
        let request = interop::id("request", request)?;
        let now = interop::timestamp(now_ms)?;
        self.inner.handle_fetched(now, request, answer.as_deref());
        Ok(self.drain_outputs())
    }

    /// A client's request (`api`: `anthropic`, `openai` or `responses`).
    ///
    /// # Errors
    /// An unknown `api`, a bad request id or time.
    #[wasm_bindgen(js_name = handleRequest)]
    pub fn handle_request(
        &mut self,
        request: f64,
        api: &str,
        tenant: &str,
        body: &[u8],
        now_ms: f64,
    ) -> Result<String, JsError> {
        let request = interop::id("request", request)?;
        let api = interop::api(api)?;
        let now = interop::timestamp(now_ms)?;
        self.inner.handle_request(now, request, api, tenant, body);
        Ok(self.drain_outputs())
    }

    /// What a session's CLI wrote to stdout.
    ///
    /// # Errors
    /// A bad session id or time.
    #[wasm_bindgen(js_name = handleStdout)]
    pub fn handle_stdout(
        &mut self,
        session: f64,
        data: &[u8],
        now_ms: f64,
    ) -> Result<String, JsError> {
        let session = interop::id("session", session)?;
        let now = interop::timestamp(now_ms)?;
        self.inner.handle_stdout(now, session, data);
        Ok(self.drain_outputs())
    }

    /// A session's CLI ended.
    ///
    /// # Errors
    /// A bad session id or time.
    #[wasm_bindgen(js_name = handleExit)]
    pub fn handle_exit(
        &mut self,
        session: f64,
        code: Option<i32>,
        signal: Option<i32>,
        stderr: &str,
        now_ms: f64,
    ) -> Result<String, JsError> {
        let session = interop::id("session", session)?;
        let now = interop::timestamp(now_ms)?;
        self.inner.handle_exit(now, session, code, signal, stderr);
        Ok(self.drain_outputs())
    }

    /// The host could not start a session's CLI.
    ///
    /// # Errors
    /// A bad session id or time.
    #[wasm_bindgen(js_name = handleSpawnFailed)]
    pub fn handle_spawn_failed(
        &mut self,
        session: f64,
        error: &str,
        now_ms: f64,
    ) -> Result<String, JsError> {
        let session = interop::id("session", session)?;
        let now = interop::timestamp(now_ms)?;
        self.inner.handle_spawn_failed(now, session, error);
        Ok(self.drain_outputs())
    }

    /// The client of a request went away.
    ///
    /// # Errors
    /// A bad request id or time.
    #[wasm_bindgen(js_name = handleClientGone)]
    pub fn handle_client_gone(&mut self, request: f64, now_ms: f64) -> Result<String, JsError> {
        let request = interop::id("request", request)?;
        let now = interop::timestamp(now_ms)?;
        self.inner.handle_client_gone(now, request);
        Ok(self.drain_outputs())
    }

    /// Applies the deadlines that passed by `now`.
    ///
    /// # Errors
    /// A bad time.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) -> Result<String, JsError> {
        let now = interop::timestamp(now_ms)?;
        self.inner.handle_timeout(now);
        Ok(self.drain_outputs())
    }

    /// Closes a session (shutting down).
    ///
    /// # Errors
    /// A bad session id or time.
    pub fn close(&mut self, session: f64, now_ms: f64) -> Result<String, JsError> {
        let session = interop::id("session", session)?;
        let now = interop::timestamp(now_ms)?;
        self.inner.close(now, session);
        Ok(self.drain_outputs())
    }

    /// The pending approvals of `tenant` (JSON).
    pub fn approvals(&self, tenant: &str) -> String {
        self.inner.approvals(tenant).to_string()
    }

    /// A person's answer to an approval: `{"decided": …, "outputs": [...]}` (JSON).
    ///
    /// An unknown approval (404) or an answer of another shape (400) comes back in place of
    /// the result, as `{"apiError":{"status","body"}}`.
    ///
    /// # Errors
    /// A bad time.
    #[wasm_bindgen(js_name = answerApproval)]
    pub fn answer_approval(
        &mut self,
        tenant: &str,
        id: &str,
        body: &[u8],
        now_ms: f64,
    ) -> Result<String, JsError> {
        let now = interop::timestamp(now_ms)?;
        let decided = match self.inner.answer_approval(now, tenant, id, body) {
            Ok(decided) => decided,
            Err(err) => return Ok(interop::api_error(&err, ccwire_core::api::Api::Anthropic)),
        };
        Ok(format!(
            r#"{{"decided":{decided},"outputs":{}}}"#,
            self.drain_outputs()
        ))
    }

    /// Opens a stream of `tenant`'s approval events for request `request`.
    ///
    /// # Errors
    /// A bad request id or time.
    #[wasm_bindgen(js_name = handleApprovalEvents)]
    pub fn handle_approval_events(
        &mut self,
        request: f64,
        tenant: &str,
        now_ms: f64,
    ) -> Result<String, JsError> {
        let request = interop::id("request", request)?;
        let now = interop::timestamp(now_ms)?;
        self.inner.handle_approval_events(now, request, tenant);
        Ok(self.drain_outputs())
    }

    /// Starts draining (see `Gateway::drain`).
    ///
    /// # Errors
    /// A bad time.
    pub fn drain(&mut self, grace_ms: f64, now_ms: f64) -> Result<String, JsError> {
        let now = interop::timestamp(now_ms)?;
        let grace = interop::timestamp(grace_ms)?;
        self.inner.drain(now, grace);
        Ok(self.drain_outputs())
    }

    /// Whether the gateway is draining and no CLI is left.
    #[wasm_bindgen(js_name = isDrained)]
    pub fn is_drained(&self) -> bool {
        self.inner.is_drained()
    }

    /// The next deadline as `{"atMs", "reason"}`, or `null`.
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&self) -> String {
        interop::endpoint_deadline(self.inner.poll_timeout())
    }

    /// `GET /metrics` (Prometheus text).
    pub fn metrics(&self) -> String {
        self.inner.metrics()
    }

    /// `GET /v1/models` (JSON).
    pub fn models(&self) -> String {
        self.inner.models().to_string()
    }

    /// Live sessions.
    #[wasm_bindgen(js_name = sessionCount)]
    pub fn session_count(&self) -> usize {
        self.inner.session_count()
    }

    /// Held client tool calls, over all sessions.
    #[wasm_bindgen(js_name = heldCount)]
    pub fn held_count(&self) -> usize {
        self.inner.held_count()
    }

    /// Responses in flight.
    #[wasm_bindgen(js_name = requestCount)]
    pub fn request_count(&self) -> usize {
        self.inner.request_count()
    }
}

impl WasmGateway {
    /// The outputs made so far, as one JSON array (each as [`GatewayOutput::to_json`] writes
    /// it).
    fn drain_outputs(&mut self) -> String {
        let mut out = String::from("[");
        while let Some(output) = self.inner.poll_output() {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&GatewayOutput::to_json(&output));
        }
        out.push(']');
        out
    }
}

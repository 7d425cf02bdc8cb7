//! The gateway endpoint of `ccwire serve` for JS hosts (`ccwire/conversation`).

use ccwire_core::gateway::{Endpoint, EndpointOutput};
use wasm_bindgen::prelude::*;

use crate::interop;

/// [`Endpoint`]: every conversation's CLI session and response, driven by the host's
/// requests, CLI output and clock. Every input returns the outputs it made, as a JSON array.
#[wasm_bindgen]
pub struct WasmGateway {
    inner: Endpoint,
}

#[wasm_bindgen]
impl WasmGateway {
    /// A gateway; `options` is the JSON of the `Gateway` options (`interop::endpoint_config`).
    ///
    /// # Errors
    /// Options that do not have that shape.
    #[wasm_bindgen(constructor)]
    pub fn new(options: &str) -> Result<WasmGateway, JsError> {
        Ok(WasmGateway {
            inner: Endpoint::new(interop::endpoint_config(options)?),
        })
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

    /// Starts draining (see `Endpoint::drain`).
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
    /// The outputs made so far, as one JSON array (each as [`EndpointOutput::to_json`] writes
    /// it).
    fn drain_outputs(&mut self) -> String {
        let mut out = String::from("[");
        while let Some(output) = self.inner.poll_output() {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&EndpointOutput::to_json(&output));
        }
        out.push(']');
        out
    }
}

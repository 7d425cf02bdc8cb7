//! The gateway state machine of `ccwire serve` (`ccwire/conversation`).

use ccwire_core::api::Api;
use ccwire_core::conversation::Message;
use ccwire_core::gateway::{self, Gateway};
use wasm_bindgen::prelude::*;

use crate::interop;
use crate::WasmResponseEncoder;

/// The gateway's bookkeeping. It keeps what it needs of each request in flight, so the host
/// ends a response with the assistant message alone.
#[wasm_bindgen]
pub struct WasmGateway {
    inner: Gateway,
    client_server: String,
}

#[wasm_bindgen]
impl WasmGateway {
    /// A gateway; `options` is the JSON of `{heldCallTimeoutMs, idleTtlMs, clientServer}`.
    ///
    /// # Errors
    /// Options that do not have that shape.
    #[wasm_bindgen(constructor)]
    pub fn new(options: &str) -> Result<WasmGateway, JsError> {
        let (config, client_server) = interop::gateway_options(options)?;
        Ok(WasmGateway {
            inner: Gateway::new(config),
            client_server,
        })
    }

    /// Parses a request body of `api` and finds the session it continues or starts (JSON).
    /// A Responses request gets `response_id` (required for it): its response is stored under
    /// it when the request asks (`store`), and a `previous_response_id` is resolved first.
    ///
    /// # Errors
    /// An unknown `api`, or a Responses request without `response_id`; the API's validation
    /// error, a request the CLI cannot honour, an unknown `previous_response_id`, tool results
    /// that do not match the calls the session waits for (400) or a busy conversation (429), as
    /// `ccwire-api-error <status> <body>`.
    pub fn route(
        &mut self,
        api: &str,
        body: &str,
        tenant: &str,
        now_ms: f64,
        response_id: Option<String>,
    ) -> Result<String, JsError> {
        let now = interop::timestamp(now_ms)?;
        let (api, parsed) = interop::parse_request(api, body)?;
        let mut request = parsed
            .and_then(|r| gateway::check_request(&r).map(|()| r))
            .map_err(|err| interop::api_error(&err, api))?;
        let response = match (api, response_id) {
            (Api::Responses, Some(id)) => Some(id),
            (Api::Responses, None) => {
                return Err(JsError::new(
                    "route: a Responses request needs a response id",
                ))
            }
            (_, _) => None,
        };
        let previous = request.previous_response_id.clone();
        let route = self
            .inner
            .route_request(
                tenant,
                &mut request,
                response.as_deref().unwrap_or_default(),
                now,
            )
            .map_err(|err| interop::api_error(&err, api))?;
        Ok(interop::route(
            &route,
            &request,
            &self.client_server,
            response.as_deref().map(|id| (id, previous.as_deref())),
        ))
    }

    /// A response ended normally with this assistant message (JSON, canonical) and client tool
    /// calls (JSON array of ids).
    ///
    /// # Errors
    /// A malformed message or id list, or a live session with no request in flight.
    #[wasm_bindgen(js_name = responseDone)]
    pub fn response_done(
        &mut self,
        session: f64,
        message: &str,
        tool_calls: &str,
        now_ms: f64,
    ) -> Result<(), JsError> {
        let message = interop::assistant_message(message)?;
        let tool_calls = interop::tool_call_ids(tool_calls)?;
        self.done(session, message, tool_calls, now_ms)
    }

    /// A response ended normally: the encoder's message and client tool calls.
    ///
    /// # Errors
    /// An encoder whose response did not finish or call tools, or a live session with no
    /// request in flight.
    #[wasm_bindgen(js_name = responseDoneWith)]
    pub fn response_done_with(
        &mut self,
        session: f64,
        encoder: &WasmResponseEncoder,
        now_ms: f64,
    ) -> Result<(), JsError> {
        let (message, tool_calls) = encoder.completed()?;
        self.done(session, message, tool_calls, now_ms)
    }

    /// A response ended without completing; the session stays.
    ///
    /// # Errors
    /// A bad session id or time.
    #[wasm_bindgen(js_name = responseFailed)]
    pub fn response_failed(&mut self, session: f64, now_ms: f64) -> Result<(), JsError> {
        let session = interop::session_id(session)?;
        let now = interop::timestamp(now_ms)?;
        self.inner.response_failed(session, now);
        Ok(())
    }

    /// The CLI calls a client tool: `{"action":"answer","result":…}` or `{"action":"hold"}`.
    ///
    /// # Errors
    /// A bad session id or time.
    #[wasm_bindgen(js_name = toolCall)]
    pub fn tool_call(
        &mut self,
        session: f64,
        request_id: &str,
        tool_use_id: Option<String>,
        now_ms: f64,
    ) -> Result<String, JsError> {
        let session = interop::session_id(session)?;
        let now = interop::timestamp(now_ms)?;
        let action = self
            .inner
            .tool_call(session, request_id, tool_use_id.as_deref(), now);
        Ok(interop::call_action(&action))
    }

    /// The CLI cancelled a held call.
    ///
    /// # Errors
    /// A bad session id.
    #[wasm_bindgen(js_name = toolCancelled)]
    pub fn tool_cancelled(&mut self, session: f64, tool_use_id: &str) -> Result<(), JsError> {
        let session = interop::session_id(session)?;
        self.inner.tool_cancelled(session, tool_use_id);
        Ok(())
    }

    /// Forgets a session.
    ///
    /// # Errors
    /// A bad session id.
    pub fn close(&mut self, session: f64) -> Result<(), JsError> {
        let session = interop::session_id(session)?;
        self.inner.close(session);
        Ok(())
    }

    /// The next deadline as `{"atMs":…,"reason":"held_call"|"idle"}`, or `null`.
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&self) -> String {
        interop::gateway_deadline(self.inner.poll_timeout())
    }

    /// Applies the deadlines that passed by `now`; returns the actions (JSON array).
    ///
    /// # Errors
    /// A bad time.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) -> Result<String, JsError> {
        let now = interop::timestamp(now_ms)?;
        Ok(interop::gateway_actions(&self.inner.handle_timeout(now)))
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

    /// Stored Responses API responses, over all tenants.
    #[wasm_bindgen(js_name = storedCount)]
    pub fn stored_count(&self) -> usize {
        self.inner.stored_count()
    }
}

impl WasmGateway {
    fn done(
        &mut self,
        session: f64,
        message: Message,
        tool_calls: Vec<String>,
        now_ms: f64,
    ) -> Result<(), JsError> {
        let session = interop::session_id(session)?;
        let now = interop::timestamp(now_ms)?;
        let recorded = self.inner.response_done(session, &message, tool_calls, now);
        if !recorded && self.inner.sessions().any(|s| s == session) {
            return Err(JsError::new(&format!(
                "session {session} has no request in flight: route a request to it first, \
                 and end each response once"
            )));
        }
        // Otherwise recorded, or closed while the response ran: nothing to record.
        Ok(())
    }
}

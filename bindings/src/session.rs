//! The engines: transcript replay and [`WasmSession`].

use ccwire_core::{Replayer, Session};
use wasm_bindgen::prelude::*;

use crate::interop::{self, timestamp, Step};

/// Replays a whole transcript; returns its chunks as a JSON array, in ASCII.
#[wasm_bindgen(js_name = replayTranscript)]
pub fn replay_transcript(transcript: &[u8]) -> Vec<u8> {
    let mut replayer = Replayer::new();
    replayer.push(transcript);
    replayer.finish();
    let mut out = Vec::with_capacity(transcript.len());
    interop::write_chunks(&mut out, std::iter::from_fn(|| replayer.poll_chunk()));
    out
}

/// Replays a transcript string; returns its chunks as a JSON array, in ASCII.
#[wasm_bindgen(js_name = replayTranscriptText)]
pub fn replay_transcript_text(transcript: &str) -> Vec<u8> {
    replay_transcript(transcript.as_bytes())
}

/// Incremental transcript replay: push bytes, get chunks.
#[wasm_bindgen]
pub struct WasmReplayer {
    inner: Replayer,
}

#[wasm_bindgen]
impl WasmReplayer {
    /// A replayer with default settings.
    #[wasm_bindgen(constructor)]
    pub fn new() -> WasmReplayer {
        WasmReplayer {
            inner: Replayer::new(),
        }
    }

    /// Feeds transcript bytes, split anywhere; returns the chunks they produced (JSON array).
    pub fn push(&mut self, data: &[u8]) -> Vec<u8> {
        self.inner.push(data);
        self.chunks()
    }

    /// Feeds transcript text; returns the chunks it produced (JSON array).
    #[wasm_bindgen(js_name = pushText)]
    pub fn push_text(&mut self, data: &str) -> Vec<u8> {
        self.push(data.as_bytes())
    }

    /// Ends the transcript; returns the last chunks (JSON array).
    pub fn finish(&mut self) -> Vec<u8> {
        self.inner.finish();
        self.chunks()
    }

    /// The `t_ms` of the last transcript line read.
    #[wasm_bindgen(js_name = nowMs)]
    pub fn now_ms(&self) -> f64 {
        self.inner.now() as f64
    }

    /// The tool-wait state (JSON).
    #[wasm_bindgen(js_name = toolWait)]
    pub fn tool_wait(&self) -> String {
        serde_json::to_string(self.inner.tool_wait()).expect("tool wait serializes")
    }

    fn chunks(&mut self) -> Vec<u8> {
        let inner = &mut self.inner;
        let mut out = Vec::new();
        interop::write_chunks(&mut out, std::iter::from_fn(|| inner.poll_chunk()));
        out
    }
}

impl Default for WasmReplayer {
    fn default() -> Self {
        WasmReplayer::new()
    }
}

/// One CLI process's protocol engine, in driver or observer mode.
///
/// Every input method returns `{"chunks":[…],"stdin":[…]}` (JSON): the chunks it produced and,
/// in driver mode, the lines to write to the CLI's stdin, in order.
#[wasm_bindgen]
pub struct WasmSession {
    inner: Session,
}

#[wasm_bindgen]
impl WasmSession {
    /// A session; `options` is the JSON of `{lineLimit, seed, timeouts, mcpServers}`.
    ///
    /// # Errors
    /// Options that do not have that shape.
    #[wasm_bindgen(constructor)]
    pub fn new(driver: bool, options: &str) -> Result<WasmSession, JsError> {
        let config = interop::session_config(options)?;
        let inner = if driver {
            Session::driver(config)
        } else {
            Session::observer(config)
        };
        Ok(WasmSession { inner })
    }

    fn step(&mut self) -> Step {
        Step::drain(self.inner.drain_outputs().into_iter())
    }

    /// Feeds bytes the CLI wrote to stdout, split anywhere.
    ///
    /// # Errors
    /// A `now_ms` that is not a time.
    pub fn push(&mut self, now_ms: f64, data: &[u8]) -> Result<Vec<u8>, JsError> {
        self.inner.handle_stdout(timestamp(now_ms)?, data);
        Ok(self.step().finish())
    }

    /// Feeds text the CLI wrote to stdout.
    ///
    /// # Errors
    /// A `now_ms` that is not a time.
    #[wasm_bindgen(js_name = pushText)]
    pub fn push_text(&mut self, now_ms: f64, data: &str) -> Result<Vec<u8>, JsError> {
        self.push(now_ms, data.as_bytes())
    }

    /// Observer mode: feeds bytes the host wrote to the CLI's stdin, split anywhere.
    ///
    /// # Errors
    /// A `now_ms` that is not a time.
    #[wasm_bindgen(js_name = pushStdin)]
    pub fn push_stdin(&mut self, now_ms: f64, data: &[u8]) -> Result<Vec<u8>, JsError> {
        self.inner.handle_stdin(timestamp(now_ms)?, data);
        Ok(self.step().finish())
    }

    /// Reports the end of the CLI's stdout.
    ///
    /// # Errors
    /// A `now_ms` that is not a time.
    #[wasm_bindgen(js_name = endStdout)]
    pub fn end_stdout(&mut self, now_ms: f64) -> Result<Vec<u8>, JsError> {
        self.inner.handle_stdout_eof(timestamp(now_ms)?);
        Ok(self.step().finish())
    }

    /// Feeds one whole CLI → host message.
    ///
    /// # Errors
    /// A `now_ms` that is not a time.
    #[wasm_bindgen(js_name = observeOut)]
    pub fn observe_out(&mut self, now_ms: f64, line: &str) -> Result<Vec<u8>, JsError> {
        self.inner.observe_out(timestamp(now_ms)?, line);
        Ok(self.step().finish())
    }

    /// Feeds one whole host → CLI message.
    ///
    /// # Errors
    /// A `now_ms` that is not a time.
    #[wasm_bindgen(js_name = observeIn)]
    pub fn observe_in(&mut self, now_ms: f64, line: &str) -> Result<Vec<u8>, JsError> {
        self.inner.observe_in(timestamp(now_ms)?, line);
        Ok(self.step().finish())
    }

    /// Reports that the CLI process ended.
    ///
    /// # Errors
    /// A `now_ms` that is not a time.
    #[wasm_bindgen(js_name = processExit)]
    pub fn process_exit(
        &mut self,
        now_ms: f64,
        code: Option<i32>,
        signal: Option<i32>,
    ) -> Result<Vec<u8>, JsError> {
        self.inner
            .handle_process_exit(timestamp(now_ms)?, code, signal);
        Ok(self.step().finish())
    }

    /// Applies the timeout policy to every deadline at or before `now_ms`.
    ///
    /// # Errors
    /// A `now_ms` that is not a time.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) -> Result<Vec<u8>, JsError> {
        self.inner.handle_timeout(timestamp(now_ms)?);
        Ok(self.step().finish())
    }

    /// The earliest deadline and why (JSON object), or `null`.
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&self) -> String {
        interop::deadline(self.inner.poll_timeout())
    }

    /// The tool-wait state (JSON).
    #[wasm_bindgen(js_name = toolWait)]
    pub fn tool_wait(&self) -> String {
        serde_json::to_string(self.inner.tool_wait()).expect("tool wait serializes")
    }

    /// Every tool call with its status, as a JSON object from id to status.
    #[wasm_bindgen(js_name = toolStatuses)]
    pub fn tool_statuses(&self) -> String {
        let map: serde_json::Map<String, serde_json::Value> = self
            .inner
            .tool_statuses()
            .map(|(id, status)| (id.to_owned(), status.as_str().into()))
            .collect();
        serde_json::to_string(&map).expect("statuses serialize")
    }

    /// Whether a turn is running.
    #[wasm_bindgen(js_name = turnRunning)]
    pub fn turn_running(&self) -> bool {
        self.inner.turn_running()
    }

    /// The CLI's session id, from the latest `system/init`.
    #[wasm_bindgen(js_name = sessionId)]
    pub fn session_id(&self) -> Option<String> {
        self.inner.session_id().map(str::to_owned)
    }

    /// Sends `initialize`; `options` is the JSON of `{hooks, extra}`.
    ///
    /// # Errors
    /// Bad options, or a command the session refuses (observer mode, process ended).
    pub fn initialize(&mut self, now_ms: f64, options: &str) -> Result<Vec<u8>, JsError> {
        let (hooks, extra) = interop::initialize_options(options)?;
        let (id, callbacks) = self
            .inner
            .initialize(timestamp(now_ms)?, &hooks, extra)
            .map_err(command_error)?;
        let callbacks = serde_json::to_string(&callbacks).expect("ids serialize");
        Ok(self
            .step()
            .with("requestId", &interop::string(&id))
            .with("callbackIds", &callbacks)
            .finish())
    }

    /// Sends a prompt; `message` is the JSON of `{content, uuid, priority, extra}`.
    ///
    /// # Errors
    /// A bad message, or a command the session refuses.
    #[wasm_bindgen(js_name = sendUserMessage)]
    pub fn send_user_message(&mut self, now_ms: f64, message: &str) -> Result<Vec<u8>, JsError> {
        let message = interop::user_message(message)?;
        self.inner
            .send_user_message(timestamp(now_ms)?, message)
            .map_err(command_error)?;
        Ok(self.step().finish())
    }

    /// Answers a permission request; `decision` is JSON (`{behavior:"allow"|"deny", …}`).
    ///
    /// # Errors
    /// A bad decision, an unknown request, or a command the session refuses.
    #[wasm_bindgen(js_name = respondPermission)]
    pub fn respond_permission(
        &mut self,
        now_ms: f64,
        request_id: &str,
        decision: &str,
    ) -> Result<Vec<u8>, JsError> {
        let decision = interop::permission_decision(decision)?;
        let delivery = self
            .inner
            .respond_permission(timestamp(now_ms)?, request_id, decision)
            .map_err(command_error)?;
        Ok(self
            .step()
            .with("delivery", interop::delivery(delivery))
            .finish())
    }

    /// Answers a hook request with the hook's JSON output.
    ///
    /// # Errors
    /// Bad JSON, an unknown request, or a command the session refuses.
    #[wasm_bindgen(js_name = respondHook)]
    pub fn respond_hook(
        &mut self,
        now_ms: f64,
        request_id: &str,
        output: &str,
    ) -> Result<Vec<u8>, JsError> {
        let output = interop::hook_output(output)?;
        let delivery = self
            .inner
            .respond_hook(timestamp(now_ms)?, request_id, output)
            .map_err(command_error)?;
        Ok(self
            .step()
            .with("delivery", interop::delivery(delivery))
            .finish())
    }

    /// Answers an elicitation; `answer` is the JSON of MCP's `ElicitResult`
    /// (`{action:"accept", content}`, `{action:"decline"}`, `{action:"cancel"}`).
    ///
    /// # Errors
    /// An answer that is not an object, an unknown request, or a command the session refuses.
    #[wasm_bindgen(js_name = respondElicitation)]
    pub fn respond_elicitation(
        &mut self,
        now_ms: f64,
        request_id: &str,
        answer: &str,
    ) -> Result<Vec<u8>, JsError> {
        let answer = interop::request_answer("elicitation answer", answer)?;
        let delivery = self
            .inner
            .respond_elicitation(timestamp(now_ms)?, request_id, answer)
            .map_err(command_error)?;
        Ok(self
            .step()
            .with("delivery", interop::delivery(delivery))
            .finish())
    }

    /// Answers a dialog; `answer` is the JSON of `{behavior:"completed", result}` or
    /// `{behavior:"cancelled"}`.
    ///
    /// # Errors
    /// An answer that is not an object, an unknown request, or a command the session refuses.
    #[wasm_bindgen(js_name = respondUserDialog)]
    pub fn respond_user_dialog(
        &mut self,
        now_ms: f64,
        request_id: &str,
        answer: &str,
    ) -> Result<Vec<u8>, JsError> {
        let answer = interop::request_answer("dialog answer", answer)?;
        let delivery = self
            .inner
            .respond_user_dialog(timestamp(now_ms)?, request_id, answer)
            .map_err(command_error)?;
        Ok(self
            .step()
            .with("delivery", interop::delivery(delivery))
            .finish())
    }

    /// Answers an MCP tool call; `result` is the JSON of `{content, isError}`.
    ///
    /// # Errors
    /// A bad result, an unknown request, or a command the session refuses.
    #[wasm_bindgen(js_name = respondMcp)]
    pub fn respond_mcp(
        &mut self,
        now_ms: f64,
        request_id: &str,
        result: &str,
    ) -> Result<Vec<u8>, JsError> {
        let result = interop::mcp_result(result)?;
        let delivery = self
            .inner
            .respond_mcp(timestamp(now_ms)?, request_id, result)
            .map_err(command_error)?;
        Ok(self
            .step()
            .with("delivery", interop::delivery(delivery))
            .finish())
    }

    /// Answers any request from the CLI with a control error.
    ///
    /// # Errors
    /// An unknown request, or a command the session refuses.
    #[wasm_bindgen(js_name = respondError)]
    pub fn respond_error(
        &mut self,
        now_ms: f64,
        request_id: &str,
        message: &str,
    ) -> Result<Vec<u8>, JsError> {
        let delivery = self
            .inner
            .respond_error(timestamp(now_ms)?, request_id, message)
            .map_err(command_error)?;
        Ok(self
            .step()
            .with("delivery", interop::delivery(delivery))
            .finish())
    }

    /// Interrupts the running turn.
    ///
    /// # Errors
    /// A command the session refuses.
    pub fn interrupt(&mut self, now_ms: f64) -> Result<Vec<u8>, JsError> {
        let id = self
            .inner
            .interrupt(timestamp(now_ms)?)
            .map_err(command_error)?;
        Ok(self.request(&id))
    }

    /// Switches the model (`None`: the session default).
    ///
    /// # Errors
    /// A command the session refuses.
    #[wasm_bindgen(js_name = setModel)]
    pub fn set_model(&mut self, now_ms: f64, model: Option<String>) -> Result<Vec<u8>, JsError> {
        let id = self
            .inner
            .set_model(timestamp(now_ms)?, model.as_deref())
            .map_err(command_error)?;
        Ok(self.request(&id))
    }

    /// Switches the permission mode.
    ///
    /// # Errors
    /// A command the session refuses.
    #[wasm_bindgen(js_name = setPermissionMode)]
    pub fn set_permission_mode(&mut self, now_ms: f64, mode: &str) -> Result<Vec<u8>, JsError> {
        let id = self
            .inner
            .set_permission_mode(timestamp(now_ms)?, mode)
            .map_err(command_error)?;
        Ok(self.request(&id))
    }

    /// Sends any control request; `fields` is a JSON object.
    ///
    /// # Errors
    /// Bad fields, or a command the session refuses.
    #[wasm_bindgen(js_name = sendControl)]
    pub fn send_control(
        &mut self,
        now_ms: f64,
        subtype: &str,
        fields: &str,
    ) -> Result<Vec<u8>, JsError> {
        let fields = interop::control_fields(fields)?;
        let id = self
            .inner
            .send_control(timestamp(now_ms)?, subtype, fields)
            .map_err(command_error)?;
        Ok(self.request(&id))
    }

    /// Sends a typed control request: the JSON of a `HostRequest` (`{subtype:"mcp_status"}`,
    /// `{subtype:"stop_task", task_id}`, …).
    ///
    /// # Errors
    /// A subtype ccwire does not type, or a command the session refuses.
    #[wasm_bindgen(js_name = request)]
    pub fn host_request(&mut self, now_ms: f64, request: &str) -> Result<Vec<u8>, JsError> {
        let (subtype, fields) = interop::host_request(request)?;
        let id = self
            .inner
            .send_control(timestamp(now_ms)?, &subtype, fields)
            .map_err(command_error)?;
        Ok(self.request(&id))
    }

    fn request(&mut self, id: &str) -> Vec<u8> {
        self.step().with("requestId", &interop::string(id)).finish()
    }
}

fn command_error(err: ccwire_core::CommandError) -> JsError {
    JsError::new(&err.to_string())
}

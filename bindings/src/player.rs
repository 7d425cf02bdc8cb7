//! The tape player (`ccwire/play`) and the transcript lines recorders write, for Node hosts.

use ccwire_core::play::{Fault, PlayOutput, Player};
use serde_json::json;
use wasm_bindgen::prelude::*;

use crate::interop;

/// The transcript line (with its newline) of a wire line that went `dir` (`in` or `out`)
/// `t_ms` after the CLI started: what `ccwire record` and the Rust client write. Empty for an
/// empty line.
///
/// # Errors
/// A time that is not a whole number of milliseconds.
#[wasm_bindgen(js_name = transcriptLine)]
pub fn transcript_line(dir: &str, t_ms: f64, line: &[u8]) -> Result<Vec<u8>, JsError> {
    let t_ms = interop::timestamp(t_ms)?;
    Ok(ccwire_core::transcript::transcript_line(dir, t_ms, line).unwrap_or_default())
}

/// The CLI release ccwire is tested against, which a player says it is (`--version`).
#[wasm_bindgen(js_name = testedCliVersion)]
pub fn tested_cli_version() -> String {
    ccwire_core::args::TESTED_CLI_VERSION.to_owned()
}

/// [`Player`]: a recorded transcript playing the CLI's part. Every input returns the outputs
/// it made, as a JSON array: `{"type":"write","index","data"}` (a line, as text) or
/// `{"type":"write","index","base64"}` (bytes that are not UTF-8), `{"type":"filler","bytes"}`
/// (that many `x` and a newline), `{"type":"kill"}` (SIGKILL the process), `{"type":"stalled"}`
/// (nothing more comes: stay up until killed), `{"type":"diverged","message"}`,
/// `{"type":"exit","code"}`.
#[wasm_bindgen]
pub struct WasmPlayer {
    inner: Player,
}

#[wasm_bindgen]
impl WasmPlayer {
    /// A player of `tape`; `speed`: none plays every line as soon as the host's lines before
    /// it have come, a number that many times as fast as recorded; `faults`: the failures to
    /// inject, as `ccwire play --fault` takes them (`garbage@3`, `kill@4`, `exit-code=7`, …).
    ///
    /// # Errors
    /// A tape that is not a transcript (the line named), or a fault that is not one.
    #[wasm_bindgen(constructor)]
    pub fn new(
        tape: &[u8],
        verify: bool,
        speed: Option<f64>,
        faults: Option<Vec<String>>,
    ) -> Result<WasmPlayer, JsError> {
        let faults = faults
            .unwrap_or_default()
            .iter()
            .map(|f| f.parse::<Fault>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| JsError::new(&err))?;
        let mut inner = Player::new(tape, verify, speed.map(|s| s.max(1e-6)))
            .map_err(|err| JsError::new(&err.to_string()))?;
        inner.inject(&faults);
        Ok(WasmPlayer { inner })
    }

    /// What the host wrote to stdin.
    ///
    /// # Errors
    /// A bad time.
    #[wasm_bindgen(js_name = handleStdin)]
    pub fn handle_stdin(&mut self, now_ms: f64, data: &[u8]) -> Result<String, JsError> {
        let now = interop::timestamp(now_ms)?;
        self.inner.handle_stdin(now, data);
        Ok(self.outputs())
    }

    /// The host closed stdin.
    ///
    /// # Errors
    /// A bad time.
    #[wasm_bindgen(js_name = handleStdinEof)]
    pub fn handle_stdin_eof(&mut self, now_ms: f64) -> Result<String, JsError> {
        let now = interop::timestamp(now_ms)?;
        self.inner.handle_stdin_eof(now);
        Ok(self.outputs())
    }

    /// The paced tape's next line is due.
    ///
    /// # Errors
    /// A bad time.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) -> Result<String, JsError> {
        let now = interop::timestamp(now_ms)?;
        self.inner.handle_timeout(now);
        Ok(self.outputs())
    }

    /// When the next recorded line is due (paced play only), in ms of the host's clock.
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&self) -> Option<f64> {
        self.inner.poll_timeout().map(|at| at as f64)
    }

    /// The outputs so far, as a JSON array.
    pub fn outputs(&mut self) -> String {
        let mut outputs = Vec::new();
        while let Some(output) = self.inner.poll_output() {
            outputs.push(match output {
                PlayOutput::Write { index, bytes } => match String::from_utf8(bytes) {
                    Ok(data) => json!({"type": "write", "index": index, "data": data}),
                    Err(err) => {
                        use base64::Engine;
                        let data = base64::engine::general_purpose::STANDARD.encode(err.as_bytes());
                        json!({"type": "write", "index": index, "base64": data})
                    }
                },
                PlayOutput::Diverged(divergence) => {
                    json!({"type": "diverged", "message": divergence.to_string()})
                }
                PlayOutput::Filler { bytes } => json!({"type": "filler", "bytes": bytes}),
                PlayOutput::Kill => json!({"type": "kill"}),
                PlayOutput::Stalled => json!({"type": "stalled"}),
                PlayOutput::Exit(code) => json!({"type": "exit", "code": code}),
                _ => continue,
            });
        }
        serde_json::Value::Array(outputs).to_string()
    }
}

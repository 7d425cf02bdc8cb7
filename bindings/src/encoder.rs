//! The Anthropic and OpenAI response encoders (`ccwire/conversation`).

use ccwire_core::api::replay::ReplayResponses;
use ccwire_core::api::response::ResponseEncoder;
use ccwire_core::api::Api;
use wasm_bindgen::prelude::*;

use crate::interop;

/// One API response built from the chunks of a turn: SSE frames as they come when streaming,
/// the JSON body at the end.
#[wasm_bindgen]
pub struct WasmResponseEncoder {
    inner: ResponseEncoder,
    api: Api,
}

#[wasm_bindgen]
impl WasmResponseEncoder {
    /// An encoder; `options` is the JSON of `{api, stream, model, id, created, includeUsage,
    /// clientTools, clientToolPrefix}`.
    ///
    /// # Errors
    /// Options that do not have that shape.
    #[wasm_bindgen(constructor)]
    pub fn new(options: &str) -> Result<WasmResponseEncoder, JsError> {
        let options = interop::encoder_options(options)?;
        Ok(WasmResponseEncoder {
            api: options.api,
            inner: ResponseEncoder::new(options),
        })
    }

    /// Takes the next chunk (its JSON); returns the SSE frames it produced (JSON array).
    ///
    /// # Errors
    /// A chunk the encoder reads that lacks a field or has one of the wrong type.
    pub fn push(&mut self, chunk: &str) -> Result<String, JsError> {
        let Some(chunk) = interop::encoder_chunk(chunk)? else {
            return Ok("[]".to_owned());
        };
        Ok(interop::frames(&self.inner.push(&chunk)))
    }

    /// Ends the response with an error; returns the SSE frames (JSON array).
    ///
    /// # Errors
    /// A status that is not one of the API errors'.
    pub fn fail(&mut self, message: &str, status: f64) -> Result<String, JsError> {
        let error = interop::api_error_of(message, status)?;
        Ok(interop::frames(&self.inner.fail(error)))
    }

    /// A keep-alive frame.
    pub fn ping(&mut self) -> String {
        self.inner.ping()
    }

    /// Whether any SSE frame has been produced.
    pub fn started(&self) -> bool {
        self.inner.started()
    }

    /// How the response ended (JSON; `null` while it runs).
    pub fn outcome(&self) -> String {
        interop::outcome(self.inner.outcome(), self.api)
    }

    /// The client tool calls (JSON array of `{id, name, input}`).
    #[wasm_bindgen(js_name = toolCalls)]
    pub fn tool_calls(&self) -> String {
        interop::tool_calls(&self.inner.tool_calls())
    }

    /// The non-streaming body (JSON; `null` until complete, and after a failure).
    pub fn body(&self) -> String {
        self.inner
            .body()
            .map_or_else(|| "null".to_owned(), |body| body.to_string())
    }

    /// The response as a canonical assistant message (JSON).
    pub fn message(&self) -> String {
        interop::message(&self.inner.message())
    }
}

/// The chunk types a response encoder reads (JSON array); pushing any other chunk does nothing.
#[wasm_bindgen(js_name = encoderChunkTypes)]
pub fn encoder_chunk_types() -> String {
    serde_json::to_string(&interop::ENCODER_CHUNK_TYPES).expect("strings serialize")
}

/// The responses `ccwire replay --format <format>` prints for a replay's chunks (a JSON array,
/// as the main module's `replayTranscript` returns it).
///
/// # Errors
/// An unknown format, or text that is not an array of chunks.
#[wasm_bindgen(js_name = encodeChunks)]
pub fn encode_chunks(chunks: &str, format: &str) -> Result<String, JsError> {
    let (api, stream) = interop::replay_format(format)?;
    let chunks: Vec<&serde_json::value::RawValue> =
        serde_json::from_str(chunks).map_err(|err| JsError::new(&format!("chunks: {err}")))?;
    let mut responses = ReplayResponses::new(api, stream);
    let mut out = String::new();
    for chunk in chunks {
        if let Some(chunk) = interop::encoder_chunk(chunk.get())? {
            responses.push(&chunk, &mut out);
        }
    }
    Ok(out)
}

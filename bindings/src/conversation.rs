//! Request canonicalization and history hashes (`ccwire/conversation`).

use ccwire_core::api::{anthropic, openai, Api};
use wasm_bindgen::prelude::*;

use crate::interop;

/// Parses an API request body (`api` is `anthropic` or `openai`) into its canonical form with
/// the history hash for `tenant`, as JSON.
///
/// # Errors
/// An unknown `api`, or the API's own validation error (message `ccwire-api-error <status>
/// <body>`).
#[wasm_bindgen(js_name = canonicalRequest)]
pub fn canonical_request(api: &str, body: &str, tenant: &str) -> Result<String, JsError> {
    let (api, parsed) = match api {
        "anthropic" => (Api::Anthropic, anthropic::parse_request(body.as_bytes())),
        "openai" => (Api::OpenAi, openai::parse_request(body.as_bytes())),
        other => {
            return Err(JsError::new(&format!(
                "api must be \"anthropic\" or \"openai\", got {other:?}"
            )))
        }
    };
    let request = parsed.map_err(|err| interop::api_error(&err, api))?;
    Ok(interop::canonical_request(&request, tenant))
}

//! Request canonicalization and history hashes (`ccwire/conversation`).

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
    let (api, parsed) = interop::parse_request(api, body)?;
    let request = parsed.map_err(|err| interop::api_error(&err, api))?;
    Ok(interop::canonical_request(&request, tenant))
}

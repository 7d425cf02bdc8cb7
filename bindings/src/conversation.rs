//! Request canonicalization and history hashes (`ccwire/conversation`).

use wasm_bindgen::prelude::*;

use ccwire_core::gateway::{Gateway, RouteKey};

use crate::interop;

/// Parses an API request body (`api` is `anthropic` or `openai`) into its canonical form with
/// the history hash for `tenant`, as JSON.
///
/// The API's own validation error comes back in place of the result, as
/// `{"apiError":{"status","body"}}`.
///
/// # Errors
/// An unknown `api`.
#[wasm_bindgen(js_name = canonicalRequest)]
pub fn canonical_request(api: &str, body: &str, tenant: &str) -> Result<String, JsError> {
    let (api, parsed) = interop::parse_request(api, body)?;
    Ok(match parsed {
        Ok(request) => interop::canonical_request(&request, tenant),
        Err(err) => interop::api_error(&err, api),
    })
}

/// The key that says which gateway must serve a request (`Gateway::route_key`), as JSON:
/// `{"kind":"new"}` or `{"kind":"conversation","key":…}`.
///
/// The API's own validation error comes back in place of the result, as
/// `{"apiError":{"status","body"}}`.
///
/// # Errors
/// An unknown `api`.
#[wasm_bindgen(js_name = routeKey)]
pub fn route_key(api: &str, body: &str, tenant: &str) -> Result<String, JsError> {
    let api = interop::api(api)?;
    let key = match Gateway::route_key(api, tenant, body.as_bytes()) {
        Ok(key) => key,
        Err(err) => return Ok(interop::api_error(&err, api)),
    };
    Ok(match key {
        RouteKey::New => r#"{"kind":"new"}"#.to_owned(),
        RouteKey::Conversation(key) => {
            serde_json::json!({"kind": "conversation", "key": key}).to_string()
        }
    })
}

/// The CLI's arguments for the options of `ccwire/node`'s `claudeArgs` (JSON): the same
/// flags, in the same order, as the Rust `ClaudeOptions` and the gateway (one builder,
/// [`ccwire_core::args::CliArgs`]). Returns them as a JSON array.
///
/// # Errors
/// Options that are not a JSON object, or a field of the wrong type (named).
#[wasm_bindgen(js_name = cliArgs)]
pub fn cli_args(options: &str) -> Result<String, JsError> {
    let args = interop::cli_args(options).map_err(|e| JsError::new(&format!("claudeArgs: {e}")))?;
    Ok(serde_json::to_string(&args.to_args()).expect("strings serialize"))
}

/// The fields of the CLI's `initialize` request for the options of `ccwire/node`'s
/// `claudeInitialize` (JSON): the system prompt, agents and output schema, which do not go on
/// the command line ([`ccwire_core::args::CliArgs::initialize`]). Returns a JSON object.
///
/// # Errors
/// As [`cli_args`].
#[wasm_bindgen(js_name = cliInitialize)]
pub fn cli_initialize(options: &str) -> Result<String, JsError> {
    let args =
        interop::cli_args(options).map_err(|e| JsError::new(&format!("claudeInitialize: {e}")))?;
    Ok(serde_json::Value::Object(args.initialize()).to_string())
}

//! # ccwire-wasm
//!
//! The WebAssembly side of the npm package `ccwire`: thin wasm-bindgen classes over the
//! `ccwire-core` engines. Nothing here holds protocol logic.
//!
//! Every method takes and returns JSON text; the package's JS wrapper (`js/`) turns it into
//! plain objects and back, so what JavaScript sees re-serializes to the native `serde_json`
//! bytes exactly. Conversions live in [`interop`]. Misuse surfaces as a JS `Error`; a panic is
//! reported on the console by the panic hook installed at start.
//!
//! Two modules are built from this crate, so that each page loads only what it uses: with the
//! `session` feature the engines (`Session`, `Replayer`, `replayTranscript`; the package's main
//! entry), with the `conversation` feature the request canonicalization, history hash,
//! response encoders and gateway state machine (`ccwire/conversation`). Both are on by default.

#[cfg(feature = "conversation")]
pub mod conversation;
#[cfg(feature = "conversation")]
mod encoder;
#[cfg(feature = "conversation")]
mod gateway;
pub mod interop;
#[cfg(feature = "conversation")]
mod player;
#[cfg(feature = "session")]
mod session;

#[cfg(feature = "conversation")]
pub use encoder::*;
#[cfg(feature = "conversation")]
pub use gateway::*;
#[cfg(feature = "conversation")]
pub use player::*;
#[cfg(feature = "session")]
pub use session::*;

use wasm_bindgen::prelude::*;

/// Installs the panic hook (runs once when the module is instantiated).
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

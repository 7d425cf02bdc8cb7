//! # ccwire-core
//!
//! A sans-IO engine for the Claude Code SDK wire protocol: the newline-delimited JSON the `claude`
//! CLI speaks on stdin/stdout with `--input-format stream-json --output-format stream-json
//! --verbose`, including its control channel (permissions, hooks, in-process MCP, interrupts).
//!
//! Four engines share one contract:
//! - [`Session`]: one CLI's stream — its stdout in, chunks and its stdin's lines out — as the
//!   driver of the CLI or as an observer of recorded traffic;
//! - [`gateway::Gateway`]: `ccwire serve`'s engine — HTTP requests, many CLIs' output and time
//!   in; responses, CLI starts, stdin lines, store requests and deadlines out;
//! - [`acp::Agent`]: `ccwire acp`'s engine — an editor's Agent Client Protocol in, each
//!   session's CLI driven, what the editor shows out;
//! - [`play::Player`]: a recorded transcript played back as the CLI, for hosts under test.
//!
//! ## The contract
//!
//! - **No IO, no clock, no randomness.** Bytes and the current time come in as arguments; chunks,
//!   bytes for the CLI's stdin and deadlines go out. Time is a [`Timestamp`] in milliseconds,
//!   always the first argument (`now`). Request ids come from a counter and a host-given seed.
//! - **Deterministic.** The same inputs give the same outputs, byte for byte, natively and in
//!   WebAssembly.
//! - **Incomplete input is normal.** Bytes may be split anywhere, even inside a UTF-8 character.
//! - **Bad input is an output.** A malformed line, an over-long line or an unknown message becomes
//!   an `error` or `unknown` chunk and the session goes on. `Err` means misuse by the embedder.
//!
//! ## Example
//!
//! A session driving a CLI: the prompt goes out as a line for its stdin, what the CLI
//! answers comes back as chunks.
//!
//! ```
//! use ccwire_core::{Chunk, Output, Session, SessionConfig, UserMessage};
//!
//! let mut session = Session::driver(SessionConfig::default());
//! session.send_user_message(0, UserMessage::text("Say hi."))?;
//! let mut stdin = Vec::new();
//! while let Some(output) = session.poll_output() {
//!     if let Output::Write(line) = output {
//!         stdin.extend(line); // the host writes this to the CLI's stdin
//!     }
//! }
//! let line = String::from_utf8_lossy(&stdin);
//! assert!(line.contains(r#""type":"user""#) && line.ends_with('\n'));
//!
//! // What the CLI wrote on stdout, in pieces of any size.
//! session.handle_stdout(40, br#"{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hi!"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}},"parent_tool_use_id":null,"session_id":"s1"}
//! {"type":"result","subtype":"success","is_error":false,"duration_ms":40,"num_turns":1,"result":"Hi!","session_id":"s1","total_cost_usd":0.0,"usage":{}}
//! "#);
//! let mut text = String::new();
//! let mut done = false;
//! while let Some(output) = session.poll_output() {
//!     match output {
//!         Output::Chunk(Chunk::TextDelta { text: piece, .. }) => text.push_str(&piece),
//!         Output::Chunk(Chunk::TurnComplete { is_error, .. }) => done = !is_error,
//!         _ => {}
//!     }
//! }
//! assert_eq!((text.as_str(), done), ("Hi!", true));
//! # Ok::<(), ccwire_core::CommandError>(())
//! ```
//!
//! ## The run loop
//!
//! 1. Call an input: [`Session::handle_stdout`] with what the CLI wrote, a command such as
//!    [`Session::send_user_message`] or [`Session::respond_permission`], or
//!    [`Session::handle_timeout`] when the deadline passed.
//! 2. Drain [`Session::poll_output`] until it returns `None`: write every [`Output::Write`] to
//!    the CLI's stdin in order, hand every [`Output::Chunk`] to the UI.
//! 3. Ask [`Session::poll_timeout`] for the next deadline and sleep until then or until more
//!    input arrives.
//!
//! The one invariant: after every input, drain the outputs before the next input.
//!
//! The chunk contract is docs/CHUNKS.md; [`transcript`] replays recorded traffic through an
//! observer session.

pub mod acp;
pub mod api;
pub mod args;
mod chunk;
pub mod conversation;
pub mod framing;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod gateway;
mod json;
mod lookup;
pub mod mcp;
pub mod play;
pub mod requests;
mod session;
mod time;
pub mod transcript;
pub mod wire;

pub use time::Timestamp;

pub use chunk::{
    Behavior, BlockedKind, BlockedOn, Chunk, CliEvent, CommandLifecycle, ElicitationDetails,
    ErrorKind, Fields, FileAttachmentsMissing, InheritedAsksSettled, InstructionSizeWarning,
    MissingFile, PermissionCheck, PluginUi, ResolveReason, StatusReason, TitleChanged, ToolStatus,
    ToolWait,
};
pub use json::{AsciiFormatter, Json};
pub use mcp::{McpCallResult, McpServer, McpTool};
pub use requests::HostRequest;
pub use session::{
    CommandError, Delivery, HookMatcher, Mode, Output, PermissionDecision, Session, SessionConfig,
    TimeoutReason, Timeouts, UserMessage,
};
pub use transcript::{replay, Replayer};

/// The crate README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

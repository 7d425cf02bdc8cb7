//! # ccwire-host
//!
//! Runs the Claude Code CLI over the [`ccwire_core`] engine: the process transport
//! ([`process`]), the command line it is started with ([`claude`]), the async [`Client`] for Rust
//! embedders, transcript recording ([`record`]), the gateway's OS sandbox ([`sandbox`]) and the end of
//! what its CLIs leave running ([`tree`]). Every protocol decision is made by the core;
//! this crate does IO only.
//!
//! ## Example
//!
//! A turn with the CLI on `PATH` (or named by `ClaudeOptions::claude`, or `CCWIRE_CLAUDE`),
//! its text as it streams:
//!
//! ```no_run
//! use ccwire_core::Chunk;
//! use ccwire_host::{Client, ClientOptions};
//!
//! # async fn run() -> Result<(), ccwire_host::ClientError> {
//! let mut options = ClientOptions::default();
//! options.claude.args.include_partial_messages = true; // token streaming
//! let mut client = Client::connect(options).await?;
//! let mut turn = client.query("Say hi.").await?;
//! while let Some(chunk) = turn.next().await {
//!     if let Chunk::TextDelta { text, .. } = chunk? {
//!         print!("{text}");
//!     }
//! }
//! client.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! The command line it starts the CLI with, from the [`CliArgs`] of [`ClaudeOptions`] (the
//! same flags `ccwire serve` and the npm package's client use):
//!
//! ```
//! use ccwire_host::{ClaudeOptions, CliArgs, SystemPrompt};
//!
//! let options = ClaudeOptions {
//!     args: CliArgs {
//!         model: Some("sonnet".into()),
//!         system_prompt: SystemPrompt::Append("Answer briefly.".into()),
//!         allowed_tools: vec!["Read".into()],
//!         ..CliArgs::default()
//!     },
//!     ..ClaudeOptions::default()
//! };
//! let args = options.args.to_args();
//! assert_eq!(&args[..5], ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]);
//! assert!(args.windows(2).any(|w| w == ["--model", "sonnet"]));
//! // No settings file (hooks, skills, plugins) loads unless named.
//! assert!(args.contains(&"--setting-sources=".to_owned()));
//! ```
//!
//! ## Features
//!
//! - `serve`: `ccwire serve` as a library ([`serve::Server`], the OS sandbox, the session
//!   store), with its HTTP server and client (axum, hyper, reqwest).
//! - `cli` (default, with `serve`): the `ccwire` binary (clap, the terminal's log, the
//!   mimalloc allocator).
//!
//! An app that only drives the CLI with [`Client`] depends on it with
//! `default-features = false`: none of the above is built.

#[cfg(feature = "serve")]
pub mod beneath;
pub mod claude;
pub mod client;
#[cfg(feature = "serve")]
pub mod cluster;
#[cfg(feature = "serve")]
pub mod egress;
pub mod process;
pub mod record;
#[cfg(feature = "serve")]
pub mod sandbox;
#[cfg(feature = "serve")]
pub mod serve;
#[cfg(feature = "serve")]
pub mod store;
pub mod tree;

pub use claude::{find_cli, ClaudeOptions, CliArgs, CliNotFound, SystemPrompt, Thinking};
pub use client::{
    Client, ClientError, ClientHandle, ClientOptions, ControlAnswer, Event, Hook,
    PermissionRequest, Tool, ToolServer, Turn,
};
pub use process::{CliProcess, ExitInfo, SpawnError};

/// The Rust examples of docs/USING.md, compiled (and run, where they can) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/USING.md")]
struct UsingDoctests;

/// The crate README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct CrateReadmeDoctests;

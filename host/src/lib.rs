//! # ccwire-host
//!
//! Runs the Claude Code CLI over the [`ccwire_core`] engine: the process transport
//! ([`process`]), the command line it is started with ([`claude`]), the async [`Client`] for Rust
//! embedders, transcript recording ([`record`]), the gateway's OS sandbox ([`sandbox`]) and the end of
//! what its CLIs leave running ([`tree`]). Every protocol decision is made by the core;
//! this crate does IO only.

pub mod claude;
pub mod client;
pub mod gateway;
pub mod process;
pub mod record;
pub mod sandbox;
pub mod tree;

pub use claude::{find_cli, ClaudeOptions, CliNotFound, SystemPrompt, Thinking};
pub use client::{
    Client, ClientError, ClientHandle, ClientOptions, ControlAnswer, Event, Hook,
    PermissionRequest, Tool, ToolServer, Turn,
};
pub use process::{CliProcess, ExitInfo, SpawnError};

/// The README's Rust examples, compiled (and run, where they can) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

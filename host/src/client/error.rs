//! What can go wrong with a client: [`ClientError`].

use std::time::Duration;

use crate::process::{ExitInfo, SpawnError};

/// What can go wrong with a client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The CLI could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The CLI did not answer `initialize` in time.
    #[error("the CLI did not answer initialize within {0:?}")]
    InitializeTimeout(Duration),
    /// The CLI answered a request with an error.
    #[error("the CLI refused {subtype}: {error}")]
    Refused {
        /// The request subtype.
        subtype: String,
        /// The CLI's message.
        error: String,
    },
    /// The CLI process ended.
    #[error("{}", process_exit_message(.exit, .result.as_deref(), .stderr))]
    ProcessExited {
        /// How it ended.
        exit: ExitInfo,
        /// The text of the last error result, when the CLI reported one.
        result: Option<String>,
        /// The end of its stderr.
        stderr: String,
    },
    /// The client was closed.
    #[error("the client is closed")]
    Closed,
    /// ccwire itself was stopped (a signal); the CLI was ended with it.
    #[error("{0}")]
    Stopped(&'static str),
    /// The session refused a command.
    #[error(transparent)]
    Command(#[from] ccwire_core::CommandError),
}

fn process_exit_message(exit: &ExitInfo, result: Option<&str>, stderr: &str) -> String {
    let mut text = format!("the Claude Code CLI ended ({exit})");
    if let Some(result) = result {
        text.push_str(&format!(": {result}"));
    }
    if !stderr.is_empty() {
        text.push_str(&format!("; stderr: {stderr}"));
    }
    text
}

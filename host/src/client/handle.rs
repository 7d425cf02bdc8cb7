//! Commands to the task that drives the CLI, and [`ClientHandle`], which sends them from
//! anywhere.

use ccwire_core::{McpCallResult, UserMessage};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::ClientError;

/// The answer to a control request.
#[derive(Debug, Clone)]
pub struct ControlAnswer {
    /// The success payload.
    pub response: Value,
}

/// A command for the driver.
pub(super) enum Command {
    Send(UserMessage, oneshot::Sender<Result<(), ClientError>>),
    Control(
        String,
        Map<String, Value>,
        oneshot::Sender<Result<ControlAnswer, ClientError>>,
    ),
    RespondTool(String, McpCallResult),
    Close,
}

/// Commands for a [`Client`](super::Client) from anywhere: cheap to clone.
#[derive(Debug, Clone)]
pub struct ClientHandle {
    pub(super) commands: mpsc::UnboundedSender<Command>,
}

impl ClientHandle {
    /// Answers a `tools/call` of a held tool server ([`ClientOptions::held_tool_servers`]); an
    /// answer to a call the CLI has cancelled is dropped.
    ///
    /// [`ClientOptions::held_tool_servers`]: super::ClientOptions::held_tool_servers
    pub fn respond_tool(&self, request_id: &str, result: McpCallResult) {
        let _ = self
            .commands
            .send(Command::RespondTool(request_id.to_owned(), result));
    }

    /// Sends a prompt; its chunks arrive through [`Client::next_event`]. The prompt is queued
    /// when this is called; the future says whether it was written.
    ///
    /// # Errors
    /// When the process has ended or the client is closed.
    ///
    /// [`Client::next_event`]: super::Client::next_event
    pub fn send(
        &self,
        message: UserMessage,
    ) -> impl std::future::Future<Output = Result<(), ClientError>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let queued = self.commands.send(Command::Send(message, tx));
        async move {
            queued.map_err(|_| ClientError::Closed)?;
            rx.await.map_err(|_| ClientError::Closed)?
        }
    }

    /// Interrupts the running turn.
    ///
    /// # Errors
    /// When the CLI refuses or the process has ended.
    pub async fn interrupt(&self) -> Result<ControlAnswer, ClientError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Control("interrupt".to_owned(), Map::new(), tx))
            .map_err(|_| ClientError::Closed)?;
        rx.await.map_err(|_| ClientError::Closed)?
    }

    /// Closes the CLI's stdin: it finishes and exits.
    pub fn end_input(&self) {
        let _ = self.commands.send(Command::Close);
    }
}

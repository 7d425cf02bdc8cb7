//! What the client receives: [`Event`]s, and the [`Turn`] that reads one turn's chunks.

use ccwire_core::Chunk;
use futures::stream::Stream;

use super::{Client, ClientError};
use crate::process::ExitInfo;

/// What the client receives.
#[derive(Debug, Clone)]
// Nearly every event is a chunk: boxing chunks would cost an allocation each to save the one
// exit event a few bytes.
#[allow(clippy::large_enum_variant)]
pub enum Event {
    /// A chunk.
    Chunk(Chunk),
    /// The process ended; no more events follow.
    Exited {
        /// How.
        exit: ExitInfo,
        /// The text of the last error result, if the last turn failed.
        result: Option<String>,
        /// The end of stderr.
        stderr: String,
    },
}

/// The events of one turn, up to and including its `turn_complete`.
pub struct Turn<'a> {
    pub(super) client: &'a mut Client,
    pub(super) done: bool,
}

impl<'a> Turn<'a> {
    /// The next chunk of the turn; `None` after `turn_complete`.
    ///
    /// # Errors
    /// [`ClientError::ProcessExited`] when the process ends before the turn completes.
    pub async fn next(&mut self) -> Option<Result<Chunk, ClientError>> {
        if self.done {
            return None;
        }
        match self.client.next_event().await {
            Some(Event::Chunk(chunk)) => {
                if matches!(chunk, Chunk::TurnComplete { .. }) {
                    self.done = true;
                }
                Some(Ok(chunk))
            }
            Some(Event::Exited {
                exit,
                result,
                stderr,
            }) => {
                self.done = true;
                Some(Err(ClientError::ProcessExited {
                    exit,
                    result,
                    stderr,
                }))
            }
            None => {
                self.done = true;
                Some(Err(self.client.exit_error().await))
            }
        }
    }

    /// Reads the turn to its end and returns every chunk.
    ///
    /// # Errors
    /// As [`Turn::next`].
    pub async fn collect(mut self) -> Result<Vec<Chunk>, ClientError> {
        let mut chunks = Vec::new();
        while let Some(chunk) = self.next().await {
            chunks.push(chunk?);
        }
        Ok(chunks)
    }

    /// The client, for commands during the turn (interrupt, …).
    pub fn client(&self) -> &Client {
        self.client
    }

    /// A `Stream` of the turn's chunks.
    pub fn into_stream(self) -> impl Stream<Item = Result<Chunk, ClientError>> + Send + 'a {
        futures::stream::unfold(self, |mut turn| async move {
            let item = turn.next().await?;
            Some((item, turn))
        })
    }
}

//! Transcript recording: every wire line, both directions, with the time since the CLI started.

use std::io::{self, Write};

/// Which way a line travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Host → CLI (stdin).
    In,
    /// CLI → host (stdout).
    Out,
}

impl Direction {
    fn as_str(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

/// Writes transcript lines: `{"dir":"in"|"out","t_ms":…,"msg":…}`.
#[derive(Debug)]
pub struct TranscriptWriter<W: Write> {
    out: W,
}

impl<W: Write> TranscriptWriter<W> {
    /// A writer over `out`.
    pub fn new(out: W) -> TranscriptWriter<W> {
        TranscriptWriter { out }
    }

    /// Records one wire line (without its newline), losslessly: a JSON line as `msg`, any
    /// other text as `text`, bytes that are not UTF-8 as `base64` (the transcript format of
    /// [`ccwire_core::transcript`]), so a replay reports it as the live session did.
    ///
    /// # Errors
    /// When writing fails.
    pub fn line(&mut self, dir: Direction, t_ms: u64, line: &[u8]) -> io::Result<()> {
        let Some(bytes) = ccwire_core::transcript::transcript_line(dir.as_str(), t_ms, line) else {
            return Ok(());
        };
        self.out.write_all(&bytes)?;
        self.out.flush()
    }

    /// Records a line that was over the recorder's line limit and not kept: its length.
    ///
    /// # Errors
    /// When writing fails.
    pub fn too_long(&mut self, dir: Direction, t_ms: u64, bytes: u64) -> io::Result<()> {
        let line = ccwire_core::transcript::too_long_line(dir.as_str(), t_ms, bytes);
        self.out.write_all(&line)?;
        self.out.flush()
    }

    /// Records a note of the recorder's own.
    ///
    /// # Errors
    /// When writing fails.
    pub fn note(&mut self, t_ms: u64, note: &str) -> io::Result<()> {
        self.out
            .write_all(&ccwire_core::transcript::note_line(t_ms, note))?;
        self.out.flush()
    }
}

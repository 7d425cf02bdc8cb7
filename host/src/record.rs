//! Transcript recording: every wire line, both directions, with the time since the CLI started.

use std::io::{self, Write};

use serde_json::value::RawValue;

/// Which way a line travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Host → CLI (stdin).
    In,
    /// CLI → host (stdout).
    Out,
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

    /// Records one wire line (without its newline). A line that is not JSON is kept as a
    /// `note` with the text, so nothing the CLI printed is lost.
    ///
    /// # Errors
    /// When writing fails.
    pub fn line(&mut self, dir: Direction, t_ms: u64, line: &[u8]) -> io::Result<()> {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        let dir = match dir {
            Direction::In => "in",
            Direction::Out => "out",
        };
        match serde_json::from_str::<&RawValue>(text) {
            Ok(msg) => writeln!(
                self.out,
                r#"{{"dir":"{dir}","t_ms":{t_ms},"msg":{}}}"#,
                msg.get()
            ),
            Err(_) => {
                let note = serde_json::to_string(&format!("{dir}: {text}"))?;
                writeln!(self.out, r#"{{"dir":"note","t_ms":{t_ms},"note":{note}}}"#)
            }
        }?;
        self.out.flush()
    }

    /// Records a note of the recorder's own.
    ///
    /// # Errors
    /// When writing fails.
    pub fn note(&mut self, t_ms: u64, note: &str) -> io::Result<()> {
        let note = serde_json::to_string(note)?;
        writeln!(self.out, r#"{{"dir":"note","t_ms":{t_ms},"note":{note}}}"#)?;
        self.out.flush()
    }
}

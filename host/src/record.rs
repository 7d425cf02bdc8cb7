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
        if line.is_empty() {
            return Ok(());
        }
        let dir = dir.as_str();
        match std::str::from_utf8(line) {
            Ok(text) => match serde_json::from_str::<&RawValue>(text) {
                Ok(msg) => writeln!(
                    self.out,
                    r#"{{"dir":"{dir}","t_ms":{t_ms},"msg":{}}}"#,
                    msg.get()
                ),
                Err(_) => {
                    let text = serde_json::to_string(text)?;
                    writeln!(self.out, r#"{{"dir":"{dir}","t_ms":{t_ms},"text":{text}}}"#)
                }
            },
            Err(_) => {
                use base64::Engine;
                let bytes = base64::engine::general_purpose::STANDARD.encode(line);
                writeln!(
                    self.out,
                    r#"{{"dir":"{dir}","t_ms":{t_ms},"base64":"{bytes}"}}"#
                )
            }
        }?;
        self.out.flush()
    }

    /// Records a line that was over the recorder's line limit and not kept: its length.
    ///
    /// # Errors
    /// When writing fails.
    pub fn too_long(&mut self, dir: Direction, t_ms: u64, bytes: u64) -> io::Result<()> {
        let dir = dir.as_str();
        writeln!(
            self.out,
            r#"{{"dir":"{dir}","t_ms":{t_ms},"too_long":{bytes}}}"#
        )?;
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

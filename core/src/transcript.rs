//! Transcripts: recorded wire traffic, replayed through an observer session.
//!
//! One JSON object per line: `{"dir":"in"|"out","t_ms":<ms since spawn>,"msg":<message>}`.
//! A wire line that was not JSON is kept whole instead of `msg`: `"text":<the line>` for UTF-8,
//! `"base64":<its bytes>` otherwise, and a line over the recorder's limit as `"too_long":<its
//! length>`; each replays as the live session read it (the same `invalid_message` or
//! `line_too_long` error). Lines with another `dir` (`note`, …) are recorder annotations and are
//! skipped. A line without `dir` is a bare stream-json message, read as `out`, so raw CLI stdout
//! replays as it is.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::chunk::{Chunk, ErrorKind, ToolStatus, ToolWait};
use crate::framing::{Frame, LineFramer};
use crate::session::{line_error, Dir, Output, Session, SessionConfig};
use crate::Timestamp;

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow, default)]
    dir: Option<Cow<'a, str>>,
    #[serde(default)]
    t_ms: Option<f64>,
    #[serde(borrow, default)]
    msg: Option<&'a RawValue>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    base64: Option<Cow<'a, str>>,
    #[serde(default)]
    too_long: Option<u64>,
}

/// The transcript line (with its newline) of a wire line (without its newline) that went
/// `dir` (`"in"`: host → CLI, `"out"`: CLI → host) `t_ms` after the CLI started, kept
/// losslessly: a JSON line as `msg`, any other text as `text`, bytes that are not UTF-8 as
/// `base64`. `None` for an empty line (the wire has none). Every recorder of ccwire (the Rust
/// client, `ccwire record`, the npm package's client) writes these.
pub fn transcript_line(dir: &str, t_ms: u64, line: &[u8]) -> Option<Vec<u8>> {
    if line.is_empty() {
        return None;
    }
    let dir = serde_json::to_string(dir).expect("strings serialize");
    let text = match std::str::from_utf8(line) {
        Ok(text) => match serde_json::from_str::<&RawValue>(text) {
            Ok(msg) => format!(r#"{{"dir":{dir},"t_ms":{t_ms},"msg":{}}}"#, msg.get()),
            Err(_) => {
                let text = serde_json::to_string(text).expect("strings serialize");
                format!(r#"{{"dir":{dir},"t_ms":{t_ms},"text":{text}}}"#)
            }
        },
        Err(_) => {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD.encode(line);
            format!(r#"{{"dir":{dir},"t_ms":{t_ms},"base64":"{bytes}"}}"#)
        }
    };
    let mut bytes = text.into_bytes();
    bytes.push(b'\n');
    Some(bytes)
}

/// The transcript line of a wire line over the recorder's line limit, not kept: its length.
pub fn too_long_line(dir: &str, t_ms: u64, bytes: u64) -> Vec<u8> {
    let dir = serde_json::to_string(dir).expect("strings serialize");
    format!("{{\"dir\":{dir},\"t_ms\":{t_ms},\"too_long\":{bytes}}}\n").into_bytes()
}

/// A note of the recorder's own (`"dir":"note"`), which replay skips.
pub fn note_line(t_ms: u64, note: &str) -> Vec<u8> {
    let note = serde_json::to_string(note).expect("strings serialize");
    format!("{{\"dir\":\"note\",\"t_ms\":{t_ms},\"note\":{note}}}\n").into_bytes()
}

/// Replays a transcript incrementally: push bytes, drain chunks.
#[derive(Debug)]
pub struct Replayer {
    framer: LineFramer,
    session: Session,
    now: Timestamp,
}

impl Replayer {
    /// A replayer with default settings.
    pub fn new() -> Replayer {
        Replayer::with_config(SessionConfig::default())
    }

    /// A replayer whose session uses `config` (the line limit applies to transcript lines).
    pub fn with_config(config: SessionConfig) -> Replayer {
        Replayer {
            framer: LineFramer::new(config.line_limit),
            session: Session::observer(config),
            now: 0,
        }
    }

    /// Feeds transcript bytes, split anywhere.
    pub fn push(&mut self, data: &[u8]) {
        let Replayer {
            framer,
            session,
            now,
        } = self;
        framer.push(data, |frame| feed(session, now, frame));
    }

    /// Ends the transcript: a last line without newline is read, and the CLI's output ends.
    pub fn finish(&mut self) {
        let Replayer {
            framer,
            session,
            now,
        } = self;
        framer.finish(|frame| feed(session, now, frame));
        session.handle_stdout_eof(*now);
    }

    /// The next chunk, in order.
    pub fn poll_chunk(&mut self) -> Option<Chunk> {
        loop {
            if let Output::Chunk(chunk) = self.session.poll_output()? {
                return Some(chunk);
            }
        }
    }

    /// The session the transcript is replayed through, for its final state.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The tool-wait state at this point of the transcript.
    pub fn tool_wait(&self) -> &ToolWait {
        self.session.tool_wait()
    }

    /// Every tool call seen, with its status at this point.
    pub fn tool_statuses(&self) -> Vec<(String, ToolStatus)> {
        self.session
            .tool_statuses()
            .map(|(id, status)| (id.to_owned(), status))
            .collect()
    }

    /// The time of the last line read (its `t_ms`).
    pub fn now(&self) -> Timestamp {
        self.now
    }
}

impl Default for Replayer {
    fn default() -> Self {
        Replayer::new()
    }
}

fn feed(session: &mut Session, now: &mut Timestamp, frame: Frame<'_>) {
    let Frame::Line(line) = frame else {
        session.feed_frame(*now, Dir::Out, frame);
        return;
    };
    let parsed = std::str::from_utf8(line)
        .ok()
        .and_then(|text| serde_json::from_str::<Line<'_>>(text).ok());
    let Some(parsed) = parsed else {
        // Not a transcript object: the session reports what is wrong with it.
        session.feed_frame(*now, Dir::Out, frame);
        return;
    };
    if let Some(t) = parsed.t_ms.filter(|t| t.is_finite() && *t >= 0.0) {
        *now = t as Timestamp;
    }
    let dir = match parsed.dir.as_deref() {
        None => return session.feed_frame(*now, Dir::Out, frame),
        Some("out") => Dir::Out,
        Some("in") => Dir::In,
        Some(_) => return,
    };
    match (parsed.msg, &parsed.text, &parsed.base64, parsed.too_long) {
        (Some(msg), ..) if dir == Dir::Out => session.observe_out(*now, msg.get()),
        (Some(msg), ..) => session.observe_in(*now, msg.get()),
        (None, Some(text), ..) => session.feed_frame(*now, dir, Frame::Line(text.as_bytes())),
        (None, None, Some(encoded), _) => {
            use base64::Engine;
            match base64::engine::general_purpose::STANDARD.decode(encoded.as_bytes()) {
                Ok(bytes) if !bytes.is_empty() => {
                    session.feed_frame(*now, dir, Frame::Line(&bytes));
                }
                _ => session.push_chunk(line_error(
                    ErrorKind::MalformedTranscriptLine,
                    "a transcript line's `base64` must hold a line's bytes in base64".to_owned(),
                    line,
                )),
            }
        }
        (None, None, None, Some(bytes)) => {
            session.feed_frame(*now, dir, Frame::TooLong { bytes });
        }
        (None, None, None, None) => session.push_chunk(line_error(
            ErrorKind::MalformedTranscriptLine,
            "a transcript line with `dir` needs `msg` (or `text`, `base64`, `too_long`)".to_owned(),
            line,
        )),
    }
}

/// Replays a whole transcript and returns its chunks.
pub fn replay(transcript: &[u8]) -> Vec<Chunk> {
    let mut replayer = Replayer::new();
    replayer.push(transcript);
    replayer.finish();
    std::iter::from_fn(|| replayer.poll_chunk()).collect()
}

//! Newline framing: byte chunks of any size in, whole lines out.
//!
//! The CLI writes one JSON object per line. Reads return arbitrary chunks, so a chunk boundary may
//! fall anywhere, even inside a UTF-8 character; an incomplete line is kept until its newline
//! arrives. Only `\n` separates lines. Surrounding whitespace (a trailing `\r` included) is removed
//! from complete lines and blank lines are skipped. A line longer than the limit is reported once
//! and skipped up to its newline without being held in memory.

/// The default line limit: 32 MiB.
pub const DEFAULT_LINE_LIMIT: usize = 32 * 1024 * 1024;

/// One item produced by [`LineFramer`].
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A complete line, without its newline and surrounding whitespace; never empty.
    Line(&'a [u8]),
    /// A line longer than the limit was skipped; `bytes` is its length without the newline.
    TooLong {
        /// Length of the skipped line in bytes.
        bytes: u64,
    },
}

/// Splits a byte stream into lines.
#[derive(Debug)]
pub struct LineFramer {
    /// The incomplete line carried over from earlier chunks.
    partial: Vec<u8>,
    limit: usize,
    /// Bytes of an over-long line skipped so far, while skipping one.
    skipping: Option<u64>,
}

impl Default for LineFramer {
    fn default() -> Self {
        LineFramer::new(DEFAULT_LINE_LIMIT)
    }
}

impl LineFramer {
    /// Creates a framer whose lines may be at most `limit` bytes long.
    pub fn new(limit: usize) -> LineFramer {
        LineFramer {
            partial: Vec::new(),
            limit: limit.max(1),
            skipping: None,
        }
    }

    /// The line limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes of an incomplete line held, waiting for its newline.
    pub fn buffered(&self) -> usize {
        self.partial.len()
    }

    /// Feeds a chunk and calls `on_frame` for every frame it completes, in order.
    pub fn push(&mut self, mut data: &[u8], mut on_frame: impl FnMut(Frame<'_>)) {
        while !data.is_empty() {
            let newline = memchr::memchr(b'\n', data);
            if let Some(skipped) = self.skipping {
                match newline {
                    Some(pos) => {
                        self.skipping = None;
                        on_frame(Frame::TooLong {
                            bytes: skipped + pos as u64,
                        });
                        data = &data[pos + 1..];
                    }
                    None => {
                        self.skipping = Some(skipped + data.len() as u64);
                        return;
                    }
                }
                continue;
            }
            match newline {
                Some(pos) => {
                    let piece = &data[..pos];
                    data = &data[pos + 1..];
                    if self.partial.is_empty() {
                        self.emit(piece, &mut on_frame);
                    } else if self.partial.len() + piece.len() > self.limit {
                        let bytes = (self.partial.len() + piece.len()) as u64;
                        self.partial = Vec::new();
                        on_frame(Frame::TooLong { bytes });
                    } else {
                        let mut line = std::mem::take(&mut self.partial);
                        line.extend_from_slice(piece);
                        self.emit(&line, &mut on_frame);
                        line.clear();
                        self.partial = line;
                    }
                }
                None => {
                    if self.partial.len() + data.len() > self.limit {
                        self.skipping = Some((self.partial.len() + data.len()) as u64);
                        self.partial = Vec::new();
                    } else {
                        self.partial.extend_from_slice(data);
                    }
                    return;
                }
            }
        }
    }

    /// Ends the stream: a final line without a newline is emitted (or reported as too long).
    pub fn finish(&mut self, mut on_frame: impl FnMut(Frame<'_>)) {
        if let Some(bytes) = self.skipping.take() {
            on_frame(Frame::TooLong { bytes });
        }
        let line = std::mem::take(&mut self.partial);
        self.emit(&line, &mut on_frame);
    }

    fn emit(&self, line: &[u8], on_frame: &mut impl FnMut(Frame<'_>)) {
        if line.len() > self.limit {
            on_frame(Frame::TooLong {
                bytes: line.len() as u64,
            });
            return;
        }
        let trimmed = line.trim_ascii();
        if !trimmed.is_empty() {
            on_frame(Frame::Line(trimmed));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(framer: &mut LineFramer, chunks: &[&[u8]]) -> Vec<String> {
        let mut out = Vec::new();
        for chunk in chunks {
            framer.push(chunk, |f| out.push(describe(f)));
        }
        framer.finish(|f| out.push(describe(f)));
        out
    }

    fn describe(frame: Frame<'_>) -> String {
        match frame {
            Frame::Line(l) => String::from_utf8_lossy(l).into_owned(),
            Frame::TooLong { bytes } => format!("<too long: {bytes}>"),
        }
    }

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let mut f = LineFramer::default();
        assert_eq!(
            frames(&mut f, &[b"{\"a\"", b":1}\n{\"b", b"\":2}\n"]),
            ["{\"a\":1}", "{\"b\":2}"]
        );
    }

    #[test]
    fn crlf_and_blank_lines_are_tolerated() {
        let mut f = LineFramer::default();
        assert_eq!(frames(&mut f, &[b"one\r\n\r\n  \ntwo\r\n"]), ["one", "two"]);
    }

    #[test]
    fn a_split_inside_a_utf8_character_is_rejoined() {
        let text = "{\"t\":\"é\"}\n".as_bytes();
        let mut f = LineFramer::default();
        assert_eq!(frames(&mut f, &[&text[..7], &text[7..]]), ["{\"t\":\"é\"}"]);
    }

    #[test]
    fn an_over_long_line_is_reported_and_skipped() {
        let mut f = LineFramer::new(8);
        let out = frames(&mut f, &[b"ok\n0123", b"456789abc", b"def\nnext\n"]);
        assert_eq!(out, ["ok", "<too long: 16>", "next"]);
        assert_eq!(f.buffered(), 0);
    }

    #[test]
    fn a_final_line_without_newline_is_flushed() {
        let mut f = LineFramer::default();
        assert_eq!(frames(&mut f, &[b"a\nb"]), ["a", "b"]);
    }

    #[test]
    fn only_newline_separates_lines() {
        let mut f = LineFramer::default();
        assert_eq!(
            frames(&mut f, &["x\u{2028}y\rz\n".as_bytes()]),
            ["x\u{2028}y\rz"]
        );
    }
}

//! Failures a [`Player`] injects into its output, as a crashing or misbehaving CLI would make
//! them (`ccwire play --fault`, `ccwire-play --fault`): one model for every host.

use std::str::FromStr;

use super::{PlayOutput, Player};

/// A failure to inject. `N` is the Nth recorded line the player writes, from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// `exit-mid-line@N`: half of line N, then exit 1.
    ExitMidLine(usize),
    /// `stall@N`: write nothing from line N on, and ignore stdin closing.
    Stall(usize),
    /// `garbage@N`: a line that is neither JSON nor UTF-8, before line N.
    Garbage(usize),
    /// `oversize@N`: a 100 MiB line before line N.
    Oversize(usize),
    /// `kill@N`: the player kills itself (SIGKILL) before line N.
    Kill(usize),
    /// `duplicate@N`: line N twice (a control request twice under one id).
    Duplicate(usize),
    /// `unknown-response@N`: a control response for a request id the host never used, before
    /// line N.
    UnknownResponse(usize),
    /// `unknown-cancel@N`: a cancel for a request id the host never used, before line N.
    UnknownCancel(usize),
    /// `exit-code=K`: exit with K when the tape is over.
    ExitCode(i32),
}

/// The forms [`Fault`] reads, for messages.
pub const FAULTS: &str = "exit-mid-line@N, stall@N, garbage@N, oversize@N, kill@N, duplicate@N, \
                          unknown-response@N, unknown-cancel@N or exit-code=K";

/// The request id the injected control lines name: one the host never used.
pub const UNKNOWN_ID: &str = "req_ccwire_play_unknown";

/// The size of the line `oversize@N` writes.
pub const OVERSIZE_BYTES: usize = 100 * 1024 * 1024;

impl FromStr for Fault {
    type Err = String;

    fn from_str(text: &str) -> Result<Fault, String> {
        if let Some(code) = text.strip_prefix("exit-code=") {
            return code
                .parse()
                .map(Fault::ExitCode)
                .map_err(|_| format!("fault {text}: the exit code must be a number"));
        }
        let Some((kind, at)) = text.split_once('@') else {
            return Err(format!("fault {text}: expected {FAULTS}"));
        };
        let at: usize = at
            .parse()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| format!("fault {text}: N must be a line number from 1"))?;
        Ok(match kind {
            "exit-mid-line" => Fault::ExitMidLine(at),
            "stall" => Fault::Stall(at),
            "garbage" => Fault::Garbage(at),
            "oversize" => Fault::Oversize(at),
            "kill" => Fault::Kill(at),
            "duplicate" => Fault::Duplicate(at),
            "unknown-response" => Fault::UnknownResponse(at),
            "unknown-cancel" => Fault::UnknownCancel(at),
            other => {
                return Err(format!(
                    "fault {text}: no fault named {other:?} (expected {FAULTS})"
                ))
            }
        })
    }
}

impl Player {
    /// Injects `faults` into what the player writes from now on.
    pub fn inject(&mut self, faults: &[Fault]) {
        self.faults.extend_from_slice(faults);
    }

    /// Whether a `stall@N` fault has stopped the player: it writes nothing more and ignores
    /// stdin closing, and its host must keep running until it is killed.
    pub fn stalled(&self) -> bool {
        self.stalled
    }

    /// What `output` becomes under the faults: the outputs to give, in order.
    pub(super) fn faulted(&mut self, output: PlayOutput) {
        if self.stalled || self.ended {
            return;
        }
        let PlayOutput::Write { index, bytes } = output else {
            let output = match output {
                PlayOutput::Exit(code) => PlayOutput::Exit(
                    self.faults
                        .iter()
                        .find_map(|f| match f {
                            Fault::ExitCode(k) => Some(*k),
                            _ => None,
                        })
                        .unwrap_or(code),
                ),
                other => other,
            };
            self.injected.push_back(output);
            return;
        };
        let line = |text: String| PlayOutput::Write {
            index: 0,
            bytes: text.into_bytes(),
        };
        for at in 0..self.faults.len() {
            let out = match self.faults[at] {
                Fault::Garbage(n) if n == index => PlayOutput::Write {
                    index: 0,
                    bytes: b"this is not JSON \xff\xfe\n".to_vec(),
                },
                Fault::Oversize(n) if n == index => PlayOutput::Filler {
                    bytes: OVERSIZE_BYTES,
                },
                Fault::ExitMidLine(n) if n == index => {
                    self.injected.push_back(PlayOutput::Write {
                        index,
                        bytes: bytes[..bytes.len() / 2].to_vec(),
                    });
                    self.injected.push_back(PlayOutput::Exit(1));
                    self.ended = true;
                    return;
                }
                Fault::Kill(n) if n == index => {
                    self.injected.push_back(PlayOutput::Kill);
                    self.ended = true;
                    return;
                }
                Fault::Stall(n) if n == index => {
                    self.injected.push_back(PlayOutput::Stalled);
                    self.stalled = true;
                    return;
                }
                Fault::Duplicate(n) if n == index => PlayOutput::Write {
                    index,
                    bytes: bytes.clone(),
                },
                Fault::UnknownResponse(n) if n == index => line(format!(
                    "{{\"type\":\"control_response\",\"response\":{{\"subtype\":\"success\",\"request_id\":\"{UNKNOWN_ID}\",\"response\":{{}}}}}}\n"
                )),
                Fault::UnknownCancel(n) if n == index => line(format!(
                    "{{\"type\":\"control_cancel_request\",\"request_id\":\"{UNKNOWN_ID}\"}}\n"
                )),
                _ => continue,
            };
            self.injected.push_back(out);
        }
        self.injected.push_back(PlayOutput::Write { index, bytes });
    }
}

//! Test support for ccwire: the transcript corpus, a scripted fake Anthropic Messages API server,
//! and the real CLI run offline against it.

pub mod cli;
pub mod fake_anthropic;

pub use fake_anthropic::{FakeAnthropic, Match, Reply, Script, ToolCall, Usage};

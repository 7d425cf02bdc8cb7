//! Test support for ccwire: the transcript corpus, a scripted fake Anthropic Messages API server,
//! the real CLI run offline against it, a fake CLI (the `fake-claude` binary and the gateway
//! simulation's), and a real Redis server.

pub mod big_requests;
pub mod cli;
pub mod fake_anthropic;
pub mod fake_cli;
pub mod redis;

pub use fake_anthropic::{FakeAnthropic, Match, Reply, Script, ToolCall, Usage};
pub use redis::RedisServer;

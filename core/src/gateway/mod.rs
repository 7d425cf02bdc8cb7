//! The gateway of `ccwire serve`, sans-IO: one [`Gateway`] takes HTTP requests, what the CLIs
//! print and the time, and says what to do through one [`poll_output`](Gateway::poll_output).
//!
//! A [`Gateway`] serves the Anthropic Messages, OpenAI Chat Completions and Responses APIs
//! (and models, token counts, approvals, metrics, health, the admin drain) over Claude Code
//! CLIs: each conversation is one CLI session, continued while its client's history matches,
//! with the client's own tools held open across requests. The host — `ccwire serve`
//! (`ccwire-host`), the npm package's `Gateway`, a simulation in a test — owns the sockets,
//! processes and clock, and runs the loop on [`Gateway`]'s page: inputs go in with `now`,
//! [`GatewayOutput`]s come out in order (start a CLI, write to it, close it, answer a request,
//! fetch a token count, exit after a drain), and [`poll_timeout`](Gateway::poll_timeout) says
//! when to wake it.
//!
//! - [`GatewayConfig`] sets it up: [`Limits`] (deadlines), caps, enabled tools, the HTTP face
//!   ([`HttpConfig`]: keys, origins, body limit), the tenants' directories.
//! - [`Gateway::admit`] decides on a request from its head, [`Gateway::handle_http`] takes its
//!   body — read and [`prepare`]d first, off any lock, when the host shares the gateway
//!   between threads.
//! - [`Gateway::route_key`] and the `Claim`/`Release` outputs are the seam for running many
//!   gateways as one (see "Scale-out" on [`Gateway`]).
//! - With [`GatewayConfig::store`], conversations outlive their CLIs: the
//!   [`GatewayOutput::Store`] asks keep each CLI's transcript and each conversation's
//!   [`ConversationRecord`] in a session store the host provides, and a history no live CLI
//!   continues is looked up there and resumed by a new CLI (the answers come back through
//!   [`Gateway::handle_store`]).
//!
//! Inside, the gateway keeps a registry of conversations (which live session a request's
//! history continues, held tool calls, stored responses) and turns API requests into what the
//! CLI takes (the prompt, its arguments and environment); neither is part of its API.

mod draft07;
mod engine;
mod metrics;
pub mod quota;
mod registry;
mod translate;
pub mod usage;
mod written;
pub(crate) use written::iso_time;

pub use engine::{
    fair_share, fans_out, is_tenant_id, merge_node_answers, parse_request, prepare, tenant_id,
    Admission, BodyError, CliSpec, ConfigError, ConversationKey, ConversationRecord, Ended, FanOut,
    Gateway, GatewayConfig, GatewayOutput, GatewayTimeout, Held, Holder, HttpConfig, HttpHead,
    HttpResponse, Placed, Placement, Prepared, PreparedRequest, RecordState, RequestId, ResumeSpec,
    RouteKey, StoreAnswer, StoreAsk, TenantDirs, CLIENT_SERVER, STRIPPED_ENV,
};
pub use metrics::Histogram;
pub use registry::{approval_route_key, Limits, ResumeReason, SessionId, HELD_CALL_TIMEOUT_TEXT};
pub use translate::{env_to_remove, mcp_result, CODE_TOOLS, OWN_ENV_PREFIX, PASSED_ENV};
pub use written::WrittenHistory;

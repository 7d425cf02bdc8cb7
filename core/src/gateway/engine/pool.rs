//! New CLIs: the command line and MCP server of a conversation's settings, their start, and
//! the pool of CLIs started ahead of need.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::prepared::SessionTurn;
use super::StoreAsk;
use super::{
    mix, CliSpec, FirstPrompt, Gateway, GatewayOutput, Live, ResumeSpec, Starting, TenantDirs,
    CLIENT_SERVER, STRIPPED_ENV,
};
use crate::api::{ApiRequest, ToolChoice};
use crate::args::{CliArgs, SystemPrompt};
use crate::gateway::registry::SessionId;
use crate::gateway::translate::{cli_model, Structured};
use crate::mcp::{McpServer, McpTool};
use crate::session::{HookMatcher, Session, SessionConfig};
use crate::Timestamp;

/// How to start a conversation's CLI: its command line and environment (for the host), the
/// MCP server of the client's tools and the fields of its `initialize` request (the system
/// prompt goes there, not on the command line: it can be larger than an argument may be).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct NewCli {
    pub(super) spec: CliSpec,
    pub(super) servers: Vec<McpServer>,
    pub(super) init: Map<String, Value>,
    /// Tools every call of which must ask permission, even those the CLI deems safe to run
    /// unasked (a read-only `ls`): a `PreToolUse` hook answers `ask` for them. (A rule the
    /// user saved does not stop such a tool asking: only a Managed Agents session's
    /// `always_ask` tools are these.)
    #[serde(default)]
    pub(super) ask_first: Vec<String>,
}

/// The pool's settings as the session store keeps them.
#[derive(Debug, Serialize, Deserialize)]
struct PoolSettings {
    signature: String,
    cli: NewCli,
}

/// A CLI started ahead of need, waiting for a conversation with its settings.
#[derive(Debug)]
pub(super) struct Warm {
    /// The settings it was started with (command line and client tools).
    pub(super) signature: String,
}

impl Gateway {
    /// How to start the CLI of a new conversation of `request` for `tenant`: the command line,
    /// environment and directories, and the MCP server of the client's tools. Equal for
    /// requests a warm CLI can serve.
    pub(super) fn cli_for(
        &self,
        request: &ApiRequest,
        (tools, listed): (Vec<McpTool>, std::sync::Arc<str>),
        structured: Option<&Structured>,
        tenant: &str,
        turn: Option<&SessionTurn>,
    ) -> NewCli {
        // A Managed Agents session runs the tools of its agent the gateway enables.
        let session_tools = turn.map(|t| t.tools.cli_tools());
        let enabled = session_tools.as_ref().unwrap_or(&self.config.enabled_tools);
        // A forced call is the object the model gives the CLI's structured-output tool: the
        // client's tools themselves are not offered, nor are any for `tool_choice: none`.
        let forced = structured.is_some_and(|s| s.answer.is_call());
        let offered = !forced && request.tool_choice != ToolChoice::None;
        let all = tools.len();
        let external: Vec<McpTool> = tools
            .into_iter()
            .filter(|t| offered && !enabled.contains(&t.name))
            .collect();
        let mut args = CliArgs {
            system_prompt: match &request.conversation.system {
                Some(system) => SystemPrompt::Custom(system.clone()),
                None => SystemPrompt::Preset,
            },
            json_schema: structured.map(|s| s.schema.clone()),
            model: cli_model(&request.model, self.config.default_model.as_deref()),
            tools: Some(enabled.clone()),
            allowed_tools: enabled.clone(),
            include_partial_messages: true,
            // No settings file brings hooks, skills or plugins the operator did not choose.
            setting_sources: self.config.setting_sources.clone(),
            thinking: request.thinking,
            effort: request.effort.map(str::to_owned),
            ..CliArgs::default()
        };
        let mut servers = Vec::new();
        if !external.is_empty() {
            args.allowed_tools.push(format!("mcp__{CLIENT_SERVER}"));
            // Listed as serialized ahead when every tool is offered (else serialized then).
            servers.push(if external.len() == all {
                McpServer::with_listed(CLIENT_SERVER, external, listed)
            } else {
                let mut server = McpServer::new(CLIENT_SERVER);
                server.tools = external;
                server
            });
            let extra = json!({"alwaysLoad": true, "disableAutoBackground": true});
            let Value::Object(extra) = extra else {
                unreachable!("an object")
            };
            args.sdk_mcp_servers.push((CLIENT_SERVER.to_owned(), extra));
        }
        let mut ask_first = Vec::new();
        let mut egress = Vec::new();
        if let Some(turn) = turn {
            // What its agent's policies let run without asking runs; every other call comes
            // to the gateway, which answers it by its policy or asks the session's user.
            args.allowed_tools.retain(|t| !enabled.contains(t));
            args.allowed_tools.extend(turn.tools.allowed());
            args.disallowed_tools = turn.tools.disallowed();
            args.mcp_servers = turn.tools.mcp_servers();
            egress = turn.tools.mcp_urls();
            args.permission_prompts = true;
            ask_first = turn.tools.ask_first();
        } else if self.config.approvals {
            // Enabled tools ask; a person answers over HTTP.
            args.allowed_tools.retain(|t| !enabled.contains(t));
            args.permission_prompts = true;
        }
        let init = args.initialize();
        let args = args.to_args();
        let dirs = (self.config.tenant_root.as_deref()).map(|root| TenantDirs::new(root, tenant));
        let env = self.cli_env(dirs.as_ref());
        let cwd = match (&self.config.shared_cwd, &dirs) {
            (_, Some(_)) if turn.is_some() => self
                .cli_dirs(tenant, turn.map(|t| t.id.as_str()))
                .map(|(cwd, _)| cwd),
            (Some(shared), _) => Some(shared.clone()),
            (None, Some(dirs)) => Some(dirs.work.clone()),
            (None, None) => None,
        };
        let spec = CliSpec {
            args,
            env_remove: self.cli_env_remove(),
            env,
            cwd,
            tenant: dirs,
            egress,
            resume: None,
        };
        NewCli {
            spec,
            servers,
            init,
            ask_first,
        }
    }

    /// The variables a CLI gets: the gateway's own, the configured ones, and with tenant
    /// directories the tenant's home, configuration, caches and temporary directory.
    fn cli_env(&self, dirs: Option<&TenantDirs>) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = [
            ("CLAUDE_CODE_SDK_READS_SESSION_STATE", "1"),
            // A client's `@path` is text for the model, never a file to read (besides every
            // prompt going as `text_not_typed`).
            ("CLAUDE_CODE_DISABLE_FILE_MENTIONS", "1"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
        env.extend(self.config.cli_env.iter().cloned());
        if let Some(dirs) = dirs {
            // Everything the CLI keeps (settings, sessions, credentials, caches, temporary
            // files) goes under the tenant's own directories, whatever the host's variables say.
            let home = &dirs.home;
            env.extend(
                [
                    ("HOME", home.clone()),
                    ("CLAUDE_CONFIG_DIR", format!("{home}/.claude")),
                    ("XDG_CONFIG_HOME", format!("{home}/.config")),
                    ("XDG_CACHE_HOME", format!("{home}/.cache")),
                    ("XDG_DATA_HOME", format!("{home}/.local/share")),
                    ("XDG_STATE_HOME", format!("{home}/.local/state")),
                    ("TMPDIR", dirs.tmp.clone()),
                    ("CLAUDE_CODE_TMPDIR", dirs.tmp.clone()),
                ]
                .map(|(k, v)| (k.to_owned(), v)),
            );
        }
        env
    }

    /// The variables no CLI inherits.
    fn cli_env_remove(&self) -> Vec<String> {
        // A parent Claude Code session (`CLAUDECODE`) would make the CLI think it is nested.
        std::iter::once("CLAUDECODE")
            .chain(STRIPPED_ENV.iter().copied())
            .map(str::to_owned)
            .chain(self.config.cli_env_remove.iter().cloned())
            .collect()
    }

    /// The warm pool fills with CLIs of the settings a restarted gateway's pool learned last
    /// (what [`StoreAsk::Pool`] kept), without waiting for a conversation to teach
    /// it. Returns `false` for settings it cannot read (they are ignored).
    pub fn restore_pool(&mut self, now: Timestamp, settings: &str) -> bool {
        self.now = now;
        let Ok(PoolSettings { signature, mut cli }) = serde_json::from_str(settings) else {
            return false;
        };
        // The variables are this gateway's, never kept.
        cli.spec.env = self.cli_env(cli.spec.tenant.as_ref());
        cli.spec.env_remove = self.cli_env_remove();
        cli.spec.resume = None;
        self.refill(now, &signature, &cli, false);
        true
    }

    /// Asks for a CLI for session `id` and sends it `initialize`; `prompt` goes to it once
    /// the CLI has answered (a warm CLI gets none until a conversation takes it).
    pub(super) fn spawn(
        &mut self,
        now: Timestamp,
        id: SessionId,
        cli: NewCli,
        prompt: Option<FirstPrompt>,
        resume: Option<ResumeSpec>,
    ) {
        let NewCli {
            mut spec,
            servers,
            init,
            ask_first,
        } = cli;
        let cli_id = match &resume {
            Some(resume) => resume.key.id.clone(),
            None => self.conversation_id(),
        };
        // A transcript written for it is resumed (the equals form: no id is read as a flag);
        // with a store, a new one is named for the conversation, and mirrored to the store.
        match &resume {
            Some(_) => spec.args.push(format!("--resume={cli_id}")),
            None if self.config.store => spec.args.push(format!("--session-id={cli_id}")),
            None => {}
        }
        if self.config.store {
            spec.args.push("--session-mirror".to_owned());
        }
        if resume.as_ref().is_some_and(|r| r.rerun) {
            // The transcript ends with tool results the turn goes on from.
            spec.env.push((
                "CLAUDE_CODE_RESUME_INTERRUPTED_TURN".to_owned(),
                "1".to_owned(),
            ));
        }
        let transcript = resume.as_ref().map(|r| r.path.clone());
        let resumed = resume.is_some();
        let cwd = spec.cwd.clone();
        // A conversation it starts records its context, with a store (mirrored) to learn from.
        let first_turn = (resume.is_none() && self.config.store)
            .then(|| super::context::FirstTurn::of(&spec.args));
        spec.resume = resume;
        let mut session = Session::driver(SessionConfig {
            seed: mix(self.config.seed ^ id.rotate_left(17)),
            mcp_servers: servers,
            ..SessionConfig::default()
        });
        self.metrics.spawns += 1;
        self.outputs
            .push_back(GatewayOutput::Spawn { session: id, spec });
        let hooks: Vec<HookMatcher> = (!ask_first.is_empty())
            .then(|| HookMatcher {
                event: "PreToolUse".to_owned(),
                matcher: Some(ask_first.join("|")),
                timeout_s: None,
            })
            .into_iter()
            .collect();
        let init_id = match session.initialize(now, &hooks, init) {
            Ok((init_id, _)) => init_id,
            Err(_) => unreachable!("a new driver session takes commands"),
        };
        self.lives.insert(
            id,
            Live {
                session,
                tenant: String::new(),
                request: None,
                starting: Some(Starting {
                    init_id,
                    prompt,
                    deadline: now.saturating_add(self.config.start_timeout_ms),
                }),
                settle_by: None,
                rate_limit_resets_ms: None,
                cli_id,
                transcript,
                mirrored: Vec::new(),
                record: None,
                watched: super::console::Watched::new(now),
                cwd,
                first_turn,
                meter: crate::gateway::usage::TurnMeter::new(resumed),
            },
        );
    }

    /// A warm CLI started for these settings, taken out of the pool (the oldest first).
    pub(super) fn take_warm(&mut self, signature: &str) -> Option<SessionId> {
        let id = self
            .pool
            .iter()
            .find(|(_, warm)| warm.signature == signature)
            .map(|(id, _)| *id)?;
        self.pool.remove(&id);
        Some(id)
    }

    /// Keeps the pool stocked for the settings of a conversation that just started: one CLI
    /// for the one a conversation took, and after a miss as many as fit, making room by
    /// closing the oldest warm CLI of other settings (at most one). The CLIs start one at a
    /// time ([`pool_step`](Self::pool_step)), so a burst of new conversations does not share
    /// the machine with a burst of starting CLIs.
    pub(super) fn refill(&mut self, now: Timestamp, signature: &str, cli: &NewCli, hit: bool) {
        let want = self.config.pool;
        if want == 0 {
            return;
        }
        let mut room = want.saturating_sub(self.pool.len() + self.pool_wanted.len());
        if room == 0 {
            let other = self
                .pool
                .iter()
                .find(|(_, warm)| warm.signature != signature)
                .map(|(id, _)| *id);
            if let Some(oldest) = other {
                self.close(now, oldest);
                room = 1;
            }
        }
        let count = if hit { room.min(1) } else { room };
        if !hit && self.config.store {
            // What the pool learned outlives the gateway (without the variables).
            let mut cli = cli.clone();
            cli.spec.env.clear();
            let settings = PoolSettings {
                signature: signature.to_owned(),
                cli,
            };
            let settings = serde_json::to_string(&settings).expect("settings serialize");
            self.outputs
                .push_back(GatewayOutput::Store(StoreAsk::Pool { settings }));
        }
        for _ in 0..count {
            self.pool_wanted
                .push_back((signature.to_owned(), cli.clone()));
        }
    }

    /// Starts the next wanted warm CLI when none is starting.
    pub(super) fn pool_step(&mut self) {
        let starting = self
            .pool
            .keys()
            .any(|id| self.lives.get(id).is_some_and(|l| l.starting.is_some()));
        if starting || self.lives.len() >= self.config.max_sessions {
            return;
        }
        let Some((signature, cli)) = self.pool_wanted.pop_front() else {
            return;
        };
        let now = self.now;
        let id = self.registry.allocate_id();
        self.pool.insert(id, Warm { signature });
        self.spawn(now, id, cli, None, None);
        self.drain_session(now, id);
    }
}

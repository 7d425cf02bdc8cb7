//! The CLI's command line, built in one place: [`CliArgs`] is what the gateway, the Rust
//! `ClaudeOptions` of `ccwire-host` (which carries one) and the Node client of the npm package
//! start the CLI with,
//! so the three agree flag for flag. Values that can be large — the system prompt, custom
//! agents, an output schema — go in the `initialize` request instead
//! ([`CliArgs::initialize`]): a command line has a size limit (about 128 KiB per argument on
//! Linux), a line on stdin none.

use serde_json::{json, Map, Value};

pub use crate::api::Thinking;

/// The CLI release ccwire is tested against (what a player of a recording says it is).
pub const TESTED_CLI_VERSION: &str = "2.1.332";

/// The system prompt the CLI runs with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SystemPrompt {
    /// Claude Code's own system prompt (no flag).
    #[default]
    Preset,
    /// Replace it (`--system-prompt`); an empty string is an empty prompt.
    Custom(String),
    /// Keep Claude Code's and append to it (`--append-system-prompt`).
    Append(String),
}

/// How to start the CLI: its command line after the executable ([`to_args`](Self::to_args))
/// and the fields of its `initialize` request ([`initialize`](Self::initialize)). The
/// stream-json flags ([`STREAM_JSON_ARGS`](crate::wire::STREAM_JSON_ARGS)) always come first,
/// and `--setting-sources` is always there: no settings file loads unless named.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CliArgs {
    /// The system prompt: `initialize.systemPrompt` (replacing Claude Code's) or
    /// `initialize.appendSystemPrompt`.
    pub system_prompt: SystemPrompt,
    /// `--model`.
    pub model: Option<String>,
    /// `--max-turns` (0: no limit).
    pub max_turns: u32,
    /// `--tools`: the built-in tools the model may use (`None`: the CLI's default set;
    /// `Some(vec![])`: none).
    pub tools: Option<Vec<String>>,
    /// `--allowedTools`: rules for tools that run without asking (`Read`, `Bash(git:*)`,
    /// `mcp__calc`, …).
    pub allowed_tools: Vec<String>,
    /// `--disallowedTools`.
    pub disallowed_tools: Vec<String>,
    /// `--permission-mode` (`default`, `acceptEdits`, `plan`, …).
    pub permission_mode: Option<String>,
    /// Route permission prompts over the control channel (`--permission-prompt-tool stdio`).
    pub permission_prompts: bool,
    /// In-process MCP servers, by name, with extra config fields per server
    /// (`alwaysLoad`, `disableAutoBackground`, …).
    pub sdk_mcp_servers: Vec<(String, Map<String, Value>)>,
    /// External MCP servers by name, each as `--mcp-config` takes it:
    /// `{"type":"stdio","command":…,"args":[…],"env":{…}}`, `{"type":"http","url":…,
    /// "headers":{…}}` or `{"type":"sse","url":…}`.
    pub mcp_servers: Vec<(String, Value)>,
    /// `--strict-mcp-config`: only the MCP servers given here, none from settings files.
    pub strict_mcp_config: bool,
    /// `--settings`: a settings file, or settings as JSON.
    pub settings: Option<String>,
    /// `--setting-sources`: which settings files load (`user`, `project`, `local`), with the
    /// hooks, skills, plugins, agents and CLAUDE.md files they bring. Empty (the default) loads
    /// none, as the Agent SDKs do: nothing on disk changes what the app asked for.
    pub setting_sources: Vec<String>,
    /// `--fallback-model`: the model to use when the main one is overloaded.
    pub fallback_model: Option<String>,
    /// `--betas`: beta headers for the API requests.
    pub betas: Vec<String>,
    /// `--max-budget-usd`: stop when the session has cost this much.
    pub max_budget_usd: Option<f64>,
    /// `--thinking=adaptive`, `--thinking=disabled` or `--max-thinking-tokens N`.
    pub thinking: Option<Thinking>,
    /// `--effort` (`low`, `medium`, `high`, `xhigh`, `max`).
    pub effort: Option<String>,
    /// Custom sub-agents by name (`initialize.agents`, as `--agents` takes them).
    pub agents: Option<Value>,
    /// Structured output: the JSON Schema (its root an object) of the object every turn ends
    /// with (`initialize.jsonSchema`, as `--json-schema` takes it). The model gives the object
    /// to the CLI's `StructuredOutput` tool; the turn's `result` carries it as
    /// `structured_output` ([`Chunk::TurnComplete`](crate::Chunk::TurnComplete)).
    pub json_schema: Option<Value>,
    /// `--include-partial-messages` (token streaming).
    pub include_partial_messages: bool,
    /// `--resume=<session id>`.
    pub resume: Option<String>,
    /// `--continue`: the most recent session in the working directory.
    pub continue_conversation: bool,
    /// `--fork-session`: with `resume` or `continue`, a new session from that one.
    pub fork_session: bool,
    /// `--session-id=<uuid>`: the id of a new session (its transcript's name).
    pub session_id: Option<String>,
    /// `--session-mirror`: the CLI writes each line it adds to its session transcript to
    /// stdout too, for a session store; each comes as a
    /// [`Chunk::TranscriptMirror`](crate::Chunk::TranscriptMirror).
    pub session_mirror: bool,
    /// `--add-dir`, once per directory: more directories the CLI may work in.
    pub add_dirs: Vec<String>,
    /// Further arguments, appended as given.
    pub extra_args: Vec<String>,
}

impl CliArgs {
    /// The fields of the CLI's `initialize` request these options make: `systemPrompt` (a
    /// one-element list) or `appendSystemPrompt`, `agents`, `jsonSchema`.
    pub fn initialize(&self) -> Map<String, Value> {
        let mut fields = Map::new();
        match &self.system_prompt {
            SystemPrompt::Preset => {}
            SystemPrompt::Custom(p) => {
                fields.insert("systemPrompt".into(), json!([p]));
            }
            SystemPrompt::Append(p) => {
                fields.insert("appendSystemPrompt".into(), json!(p));
            }
        }
        if let Some(agents) = &self.agents {
            fields.insert("agents".into(), agents.clone());
        }
        if let Some(schema) = &self.json_schema {
            fields.insert("jsonSchema".into(), schema.clone());
        }
        fields
    }

    /// The arguments, in a fixed order: the stream-json flags, then the options above in the
    /// order they are listed (those [`initialize`](Self::initialize) carries left out),
    /// `--add-dir` and the extra arguments last.
    pub fn to_args(&self) -> Vec<String> {
        let mut args: Vec<String> = crate::wire::STREAM_JSON_ARGS
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut flag = |name: &str, value: Option<String>| {
            args.push(name.to_owned());
            args.extend(value);
        };
        if let Some(model) = &self.model {
            flag("--model", Some(model.clone()));
        }
        if self.max_turns > 0 {
            flag("--max-turns", Some(self.max_turns.to_string()));
        }
        if let Some(tools) = &self.tools {
            flag("--tools", Some(tools.join(",")));
        }
        if !self.allowed_tools.is_empty() {
            flag("--allowedTools", Some(self.allowed_tools.join(",")));
        }
        if !self.disallowed_tools.is_empty() {
            flag("--disallowedTools", Some(self.disallowed_tools.join(",")));
        }
        if let Some(mode) = &self.permission_mode {
            flag("--permission-mode", Some(mode.clone()));
        }
        if self.permission_prompts {
            flag("--permission-prompt-tool", Some("stdio".into()));
        }
        if !self.sdk_mcp_servers.is_empty() || !self.mcp_servers.is_empty() {
            let mut servers: Map<String, Value> = self
                .sdk_mcp_servers
                .iter()
                .map(|(name, extra)| {
                    let mut config = Map::new();
                    config.insert("type".into(), json!("sdk"));
                    config.insert("name".into(), json!(name));
                    config.extend(extra.clone());
                    (name.clone(), Value::Object(config))
                })
                .collect();
            servers.extend(self.mcp_servers.iter().cloned());
            flag(
                "--mcp-config",
                Some(json!({"mcpServers": servers}).to_string()),
            );
        }
        if self.strict_mcp_config {
            flag("--strict-mcp-config", None);
        }
        if let Some(settings) = &self.settings {
            flag("--settings", Some(settings.clone()));
        }
        // The equals form: an empty list is a value, not a missing one.
        flag(
            &format!("--setting-sources={}", self.setting_sources.join(",")),
            None,
        );
        if let Some(model) = &self.fallback_model {
            flag("--fallback-model", Some(model.clone()));
        }
        if !self.betas.is_empty() {
            flag("--betas", Some(self.betas.join(",")));
        }
        if let Some(budget) = self.max_budget_usd {
            flag("--max-budget-usd", Some(budget.to_string()));
        }
        match self.thinking {
            None => {}
            Some(Thinking::Adaptive) => flag("--thinking=adaptive", None),
            Some(Thinking::Disabled) => flag("--thinking=disabled", None),
            Some(Thinking::Budget(tokens)) => {
                flag("--max-thinking-tokens", Some(tokens.to_string()));
            }
        }
        if let Some(effort) = &self.effort {
            flag("--effort", Some(effort.clone()));
        }
        if self.include_partial_messages {
            flag("--include-partial-messages", None);
        }
        // The equals form: an id starting with `-` must not be read as a flag.
        if let Some(id) = &self.resume {
            flag(&format!("--resume={id}"), None);
        }
        if self.continue_conversation {
            flag("--continue", None);
        }
        if self.fork_session {
            flag("--fork-session", None);
        }
        if let Some(id) = &self.session_id {
            flag(&format!("--session-id={id}"), None);
        }
        if self.session_mirror {
            flag("--session-mirror", None);
        }
        for dir in &self.add_dirs {
            flag("--add-dir", Some(dir.clone()));
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_json_flags_come_first_and_no_settings_file_loads_unasked() {
        assert_eq!(
            CliArgs::default().to_args(),
            [
                "--output-format",
                "stream-json",
                "--verbose",
                "--input-format",
                "stream-json",
                "--setting-sources="
            ]
        );
    }

    #[test]
    fn the_npm_client_builds_the_same_arguments() {
        // The same options and the same list as tests/sdk/ts/test/node-host.test.mjs checks for
        // `claudeArgs` of `ccwire/node`.
        let options = CliArgs {
            system_prompt: SystemPrompt::Custom(String::new()),
            model: Some("sonnet".into()),
            max_turns: 3,
            allowed_tools: vec!["Read".into(), "mcp__calc".into()],
            permission_prompts: true,
            sdk_mcp_servers: vec![("calc".into(), Map::new())],
            mcp_servers: vec![(
                "files".into(),
                json!({"type": "stdio", "command": "files-server"}),
            )],
            add_dirs: vec!["/data".into()],
            thinking: Some(Thinking::Budget(4096)),
            include_partial_messages: true,
            resume: Some("-id".into()),
            ..CliArgs::default()
        };
        let expected = [
            "--output-format",
            "stream-json",
            "--verbose",
            "--input-format",
            "stream-json",
            "--model",
            "sonnet",
            "--max-turns",
            "3",
            "--allowedTools",
            "Read,mcp__calc",
            "--permission-prompt-tool",
            "stdio",
            "--mcp-config",
            r#"{"mcpServers":{"calc":{"type":"sdk","name":"calc"},"files":{"type":"stdio","command":"files-server"}}}"#,
            "--setting-sources=",
            "--max-thinking-tokens",
            "4096",
            "--include-partial-messages",
            "--resume=-id",
            "--add-dir",
            "/data",
        ];
        let mut args = options.to_args();
        let at = args.iter().position(|a| a == "--mcp-config").unwrap() + 1;
        // The same JSON; the keys in JavaScript's order or serde_json's.
        let config: Value = serde_json::from_str(&args[at]).unwrap();
        assert_eq!(config, serde_json::from_str::<Value>(expected[at]).unwrap());
        args[at] = expected[at].to_owned();
        assert_eq!(args, expected);
        // The system prompt goes in `initialize`, as the npm client's `claudeInitialize` has it.
        assert_eq!(
            Value::Object(options.initialize()),
            json!({"systemPrompt": [""]})
        );
    }

    #[test]
    fn every_cli_setting_becomes_its_flag() {
        let options = CliArgs {
            tools: Some(vec![]),
            disallowed_tools: vec!["Bash".into(), "Write".into()],
            permission_mode: Some("plan".into()),
            sdk_mcp_servers: vec![(
                "client".into(),
                json!({"alwaysLoad": true}).as_object().unwrap().clone(),
            )],
            mcp_servers: vec![(
                "files".into(),
                json!({"type": "stdio", "command": "files-server", "args": ["--ro"]}),
            )],
            strict_mcp_config: true,
            settings: Some(r#"{"cleanupPeriodDays":7}"#.into()),
            setting_sources: vec!["user".into(), "project".into()],
            add_dirs: vec!["/data".into(), "/more".into()],
            fallback_model: Some("sonnet".into()),
            betas: vec!["context-1m-2025-08-07".into()],
            max_budget_usd: Some(2.5),
            thinking: Some(Thinking::Budget(4096)),
            effort: Some("high".into()),
            continue_conversation: true,
            fork_session: true,
            session_id: Some("0b5e6d0e-0000-4000-8000-000000000000".into()),
            session_mirror: true,
            agents: Some(json!({"reviewer": {"description": "Reviews", "prompt": "Review."}})),
            extra_args: vec!["--debug".into()],
            ..CliArgs::default()
        };
        let args = options.to_args();
        let after = |flag: &str| args[args.iter().position(|a| a == flag).unwrap() + 1].clone();
        assert_eq!(after("--tools"), "");
        assert_eq!(after("--disallowedTools"), "Bash,Write");
        assert_eq!(after("--permission-mode"), "plan");
        assert_eq!(
            serde_json::from_str::<Value>(&after("--mcp-config")).unwrap(),
            json!({"mcpServers": {
                "client": {"type": "sdk", "name": "client", "alwaysLoad": true},
                "files": {"type": "stdio", "command": "files-server", "args": ["--ro"]}}})
        );
        assert_eq!(after("--settings"), r#"{"cleanupPeriodDays":7}"#);
        assert_eq!(after("--fallback-model"), "sonnet");
        assert_eq!(after("--betas"), "context-1m-2025-08-07");
        assert_eq!(after("--max-budget-usd"), "2.5");
        assert_eq!(after("--max-thinking-tokens"), "4096");
        assert_eq!(after("--effort"), "high");
        for flag in [
            "--strict-mcp-config",
            "--setting-sources=user,project",
            "--continue",
            "--fork-session",
            "--session-id=0b5e6d0e-0000-4000-8000-000000000000",
            "--session-mirror",
        ] {
            assert!(args.contains(&flag.to_owned()), "{flag}: {args:?}");
        }
        let dirs: Vec<&String> = args
            .iter()
            .zip(args.iter().skip(1))
            .filter(|(flag, _)| *flag == "--add-dir")
            .map(|(_, dir)| dir)
            .collect();
        assert_eq!(dirs, ["/data", "/more"]);
        assert_eq!(args.last().map(String::as_str), Some("--debug"));
        // Agents go in `initialize`, not on the command line.
        assert!(!args.contains(&"--agents".to_owned()), "{args:?}");
        assert_eq!(
            options.initialize()["agents"]["reviewer"]["prompt"],
            "Review."
        );
    }

    #[test]
    fn thinking_is_adaptive_a_budget_or_off() {
        let flags = |thinking| {
            CliArgs {
                thinking: Some(thinking),
                ..CliArgs::default()
            }
            .to_args()
        };
        assert!(flags(Thinking::Adaptive).contains(&"--thinking=adaptive".to_owned()));
        assert!(flags(Thinking::Disabled).contains(&"--thinking=disabled".to_owned()));
        assert!(flags(Thinking::Budget(2048)).contains(&"--max-thinking-tokens".to_owned()));
    }

    #[test]
    fn values_that_look_like_flags_stay_values() {
        let args = CliArgs {
            resume: Some("-x".into()),
            model: Some("--fast".into()),
            ..CliArgs::default()
        }
        .to_args();
        assert!(args.contains(&"--resume=-x".to_owned()));
        let at = args.iter().position(|a| a == "--model");
        assert_eq!(at.map(|i| args[i + 1].as_str()), Some("--fast"), "{args:?}");
    }

    #[test]
    fn large_values_go_in_initialize_not_on_the_command_line() {
        let big = "x".repeat(1 << 20);
        let options = CliArgs {
            system_prompt: SystemPrompt::Custom(big.clone()),
            agents: Some(json!({"reviewer": {"description": "d", "prompt": big}})),
            json_schema: Some(json!({"type": "object", "description": big})),
            ..CliArgs::default()
        };
        let args = options.to_args();
        assert!(args.iter().all(|a| a.len() < 1024), "{args:?}");
        let init = options.initialize();
        assert_eq!(init["systemPrompt"], json!([big]));
        assert_eq!(init["agents"]["reviewer"]["prompt"], json!(big));
        assert_eq!(init["jsonSchema"]["type"], "object");
        let append = CliArgs {
            system_prompt: SystemPrompt::Append("more".into()),
            ..CliArgs::default()
        };
        assert_eq!(
            Value::Object(append.initialize()),
            json!({"appendSystemPrompt": "more"})
        );
        assert!(CliArgs::default().initialize().is_empty());
    }
}

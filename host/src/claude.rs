//! Finding the `claude` executable and building its command line (docs/PROTOCOL.md §2).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The environment variable naming the CLI executable.
pub const CLAUDE_ENV: &str = "CCWIRE_CLAUDE";

pub use ccwire_core::args::TESTED_CLI_VERSION;

/// The CLI could not be found.
#[derive(Debug, thiserror::Error)]
#[error(
    "the Claude Code CLI was not found ({searched}); install it with \
     `npm install -g @anthropic-ai/claude-code@{TESTED_CLI_VERSION}`, or name the executable: \
     `ClaudeOptions::claude` in Rust, `--claude PATH` for the ccwire command, or the \
     {CLAUDE_ENV} variable"
)]
pub struct CliNotFound {
    searched: String,
}

/// Finds the CLI: an explicit path, then `CCWIRE_CLAUDE`, then `claude` on `PATH`.
///
/// # Errors
/// [`CliNotFound`] naming the install command.
pub fn find_cli(explicit: Option<&Path>) -> Result<PathBuf, CliNotFound> {
    if let Some(path) = explicit {
        return existing(path).ok_or_else(|| CliNotFound {
            searched: format!("{} does not exist", path.display()),
        });
    }
    if let Some(path) = std::env::var_os(CLAUDE_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return existing(&path).ok_or_else(|| CliNotFound {
            searched: format!("{CLAUDE_ENV}={} does not exist", path.display()),
        });
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path_var) {
        // Only absolute PATH entries: a relative one would resolve against the cwd.
        if !dir.is_absolute() {
            continue;
        }
        if let Some(found) = existing(&dir.join("claude")) {
            return Ok(found);
        }
    }
    Err(CliNotFound {
        searched: format!("no path given, no {CLAUDE_ENV}, no `claude` on PATH"),
    })
}

fn existing(path: &Path) -> Option<PathBuf> {
    path.is_file().then(|| path.to_path_buf())
}

pub use ccwire_core::args::{SystemPrompt, Thinking};

/// How to start the CLI.
#[derive(Debug, Clone, Default)]
pub struct ClaudeOptions {
    /// The executable; found with [`find_cli`] when `None`.
    pub claude: Option<PathBuf>,
    /// `--model`.
    pub model: Option<String>,
    /// `--max-turns` (0 = unset).
    pub max_turns: u32,
    /// The system prompt (sent in the `initialize` request, at any size).
    pub system_prompt: SystemPrompt,
    /// `--allowedTools`: rules that approve without asking.
    pub allowed_tools: Vec<String>,
    /// `--disallowedTools`.
    pub disallowed_tools: Vec<String>,
    /// `--tools`: the built-in tools offered (`None` = the CLI's default set).
    pub tools: Option<Vec<String>>,
    /// `--permission-mode` (`default`, `acceptEdits`, `plan`, …).
    pub permission_mode: Option<String>,
    /// Route permission prompts over the control channel (`--permission-prompt-tool stdio`).
    pub permission_prompts: bool,
    /// In-process MCP servers, by name, with extra config fields per server
    /// (`alwaysLoad`, `disableAutoBackground`, …).
    pub sdk_mcp_servers: Vec<(String, Map<String, Value>)>,
    /// `--include-partial-messages` (token streaming).
    pub include_partial_messages: bool,
    /// `--resume=<session id>`.
    pub resume: Option<String>,
    /// `--continue`: the most recent session in the working directory.
    pub continue_conversation: bool,
    /// `--fork-session` (with resume or continue).
    pub fork_session: bool,
    /// `--session-id=<uuid>`: the new session's id (its transcript's name).
    pub session_id: Option<String>,
    /// `--session-mirror`: every line the CLI adds to its session transcript comes as a
    /// [`Chunk::TranscriptMirror`](ccwire_core::Chunk::TranscriptMirror) too.
    pub session_mirror: bool,
    /// The working directory.
    pub cwd: Option<PathBuf>,
    /// Variables added to the CLI's environment.
    pub env: Vec<(OsString, OsString)>,
    /// Variables removed from the CLI's environment.
    pub env_remove: Vec<OsString>,
    /// External MCP servers by name, each as the CLI's `--mcp-config` takes it:
    /// `{"type":"stdio","command":…,"args":[…],"env":{…}}`, `{"type":"http","url":…,
    /// "headers":{…}}` or `{"type":"sse","url":…}`.
    pub mcp_servers: Vec<(String, Value)>,
    /// `--strict-mcp-config`: only the MCP servers given here, none from settings files.
    pub strict_mcp_config: bool,
    /// `--settings`: a settings file, or settings as JSON.
    pub settings: Option<String>,
    /// `--setting-sources`: which settings files load (`user`, `project`, `local`), with the
    /// hooks, skills, plugins, agents and CLAUDE.md files they bring. `None` (the default)
    /// loads none, as the Agent SDKs do: nothing on disk changes what the app asked for.
    pub setting_sources: Option<Vec<String>>,
    /// `--add-dir`: more directories the CLI may work in.
    pub add_dirs: Vec<PathBuf>,
    /// `--fallback-model`: the model to use when the main one is overloaded.
    pub fallback_model: Option<String>,
    /// `--betas`: beta headers for the API requests.
    pub betas: Vec<String>,
    /// `--max-budget-usd`: stop when the session has cost this much.
    pub max_budget_usd: Option<f64>,
    /// Extended thinking: `--thinking=adaptive`, `--max-thinking-tokens N` or
    /// `--thinking=disabled`.
    pub thinking: Option<Thinking>,
    /// `--effort` (`low`, `medium`, `high`, `max`).
    pub effort: Option<String>,
    /// Custom sub-agents by name (`{"reviewer":{"description":…,"prompt":…}}`), sent in the
    /// `initialize` request.
    pub agents: Option<Value>,
    /// Structured output: every turn ends with an object this JSON Schema validates (its root
    /// an object), in [`Chunk::TurnComplete`](ccwire_core::Chunk::TurnComplete)'s
    /// `structured_output`; sent in the `initialize` request.
    pub json_schema: Option<Value>,
    /// Further arguments, appended as given.
    pub extra_args: Vec<OsString>,
}

impl ClaudeOptions {
    /// The arguments after the executable, as [`CliArgs`](ccwire_core::args::CliArgs) builds
    /// them for every host (`--add-dir` directories and the extra arguments, last, as given).
    pub fn args(&self) -> Vec<OsString> {
        let args = self.cli_args().to_args();
        let mut args: Vec<OsString> = args.into_iter().map(OsString::from).collect();
        for dir in &self.add_dirs {
            args.push(OsString::from("--add-dir"));
            args.push(dir.clone().into_os_string());
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }

    /// The fields of the CLI's `initialize` request these options make (system prompt,
    /// agents, output schema: values too large for a command line), as
    /// [`CliArgs::initialize`](ccwire_core::args::CliArgs::initialize) builds them.
    pub fn initialize(&self) -> Map<String, Value> {
        self.cli_args().initialize()
    }

    fn cli_args(&self) -> ccwire_core::args::CliArgs {
        ccwire_core::args::CliArgs {
            system_prompt: self.system_prompt.clone(),
            model: self.model.clone(),
            max_turns: self.max_turns,
            tools: self.tools.clone(),
            allowed_tools: self.allowed_tools.clone(),
            disallowed_tools: self.disallowed_tools.clone(),
            permission_mode: self.permission_mode.clone(),
            permission_prompts: self.permission_prompts,
            sdk_mcp_servers: self.sdk_mcp_servers.clone(),
            mcp_servers: self.mcp_servers.clone(),
            strict_mcp_config: self.strict_mcp_config,
            settings: self.settings.clone(),
            setting_sources: self.setting_sources.clone().unwrap_or_default(),
            fallback_model: self.fallback_model.clone(),
            betas: self.betas.clone(),
            max_budget_usd: self.max_budget_usd,
            thinking: self.thinking,
            effort: self.effort.clone(),
            agents: self.agents.clone(),
            json_schema: self.json_schema.clone(),
            include_partial_messages: self.include_partial_messages,
            resume: self.resume.clone(),
            continue_conversation: self.continue_conversation,
            fork_session: self.fork_session,
            session_id: self.session_id.clone(),
            session_mirror: self.session_mirror,
            // Paths and arguments need not be UTF-8: added below as they are.
            add_dirs: Vec::new(),
            extra_args: Vec::new(),
        }
    }

    /// Variables to set, and to remove, in the CLI's environment.
    pub fn env_changes(&self) -> (Vec<(OsString, OsString)>, Vec<OsString>) {
        // A parent Claude Code session would make the child think it is nested.
        let mut remove = vec![OsString::from("CLAUDECODE")];
        remove.extend(self.env_remove.iter().cloned());
        let mut set = vec![(
            OsString::from("CLAUDE_CODE_SDK_READS_SESSION_STATE"),
            OsString::from("1"),
        )];
        set.extend(self.env.iter().cloned());
        (set, remove)
    }
}

/// The version the CLI at `path` reports (`claude --version`), if it answers within 20 s.
pub async fn cli_version(path: &std::path::Path) -> Option<String> {
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        tokio::process::Command::new(path)
            .arg("--version")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.split_whitespace().next().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn strings(args: Vec<OsString>) -> Vec<String> {
        args.into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn the_base_arguments_are_always_there_and_no_settings_file_loads_unasked() {
        let args = strings(ClaudeOptions::default().args());
        assert_eq!(
            args,
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
        let options = ClaudeOptions {
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
            setting_sources: Some(vec![]),
            add_dirs: vec!["/data".into()],
            thinking: Some(Thinking::Budget(4096)),
            include_partial_messages: true,
            resume: Some("-id".into()),
            ..ClaudeOptions::default()
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
        let mut args = strings(options.args());
        let at = args.iter().position(|a| a == "--mcp-config").unwrap() + 1;
        // The same JSON; the keys in JavaScript's order or serde_json's.
        let config: Value = serde_json::from_str(&args[at]).unwrap();
        assert_eq!(config, serde_json::from_str::<Value>(expected[at]).unwrap());
        args[at] = expected[at].to_owned();
        assert_eq!(args, expected);
        // The system prompt goes in `initialize`, as the npm client's `claudeInitialize` has it.
        assert_eq!(
            Value::Object(options.initialize()),
            serde_json::json!({"systemPrompt": [""]})
        );
    }

    #[test]
    fn the_full_set_of_cli_settings_become_flags() {
        let options = ClaudeOptions {
            sdk_mcp_servers: vec![("client".into(), Map::new())],
            mcp_servers: vec![(
                "files".into(),
                json!({"type": "stdio", "command": "files-server", "args": ["--ro"]}),
            )],
            strict_mcp_config: true,
            settings: Some(r#"{"cleanupPeriodDays":7}"#.into()),
            setting_sources: Some(vec![]),
            add_dirs: vec!["/data".into(), "/more".into()],
            fallback_model: Some("sonnet".into()),
            betas: vec!["context-1m-2025-08-07".into()],
            max_budget_usd: Some(2.5),
            thinking: Some(Thinking::Budget(4096)),
            effort: Some("high".into()),
            agents: Some(json!({"reviewer": {"description": "Reviews", "prompt": "Review."}})),
            ..ClaudeOptions::default()
        };
        let args = strings(options.args());
        let after = |flag: &str| args[args.iter().position(|a| a == flag).unwrap() + 1].clone();
        assert_eq!(
            serde_json::from_str::<Value>(&after("--mcp-config")).unwrap(),
            json!({"mcpServers": {
                "client": {"type": "sdk", "name": "client"},
                "files": {"type": "stdio", "command": "files-server", "args": ["--ro"]}}})
        );
        assert!(args.contains(&"--strict-mcp-config".to_owned()));
        assert_eq!(after("--settings"), r#"{"cleanupPeriodDays":7}"#);
        assert!(
            args.contains(&"--setting-sources=".to_owned()),
            "none: {args:?}"
        );
        let dirs: Vec<&String> = args
            .iter()
            .zip(args.iter().skip(1))
            .filter(|(flag, _)| *flag == "--add-dir")
            .map(|(_, dir)| dir)
            .collect();
        assert_eq!(dirs, ["/data", "/more"]);
        assert_eq!(after("--fallback-model"), "sonnet");
        assert_eq!(after("--betas"), "context-1m-2025-08-07");
        assert_eq!(after("--max-budget-usd"), "2.5");
        assert_eq!(after("--max-thinking-tokens"), "4096");
        assert_eq!(after("--effort"), "high");
        // Agents go in `initialize`, not on the command line.
        assert!(!args.contains(&"--agents".to_owned()), "{args:?}");
        assert_eq!(
            options.initialize()["agents"]["reviewer"]["prompt"],
            "Review."
        );
        let adaptive = ClaudeOptions {
            thinking: Some(Thinking::Adaptive),
            ..ClaudeOptions::default()
        };
        assert!(strings(adaptive.args()).contains(&"--thinking=adaptive".to_owned()));
    }

    #[test]
    fn options_become_flags() {
        let options = ClaudeOptions {
            model: Some("claude-sonnet-4-5".into()),
            max_turns: 3,
            system_prompt: SystemPrompt::Custom(String::new()),
            allowed_tools: vec!["mcp__client".into(), "Read".into()],
            permission_prompts: true,
            sdk_mcp_servers: vec![(
                "client".into(),
                json!({"alwaysLoad": true}).as_object().unwrap().clone(),
            )],
            include_partial_messages: true,
            resume: Some("-not-a-flag".into()),
            ..ClaudeOptions::default()
        };
        let args = strings(options.args());
        let joined = args.join(" ");
        assert!(joined.contains("stream-json --model claude-sonnet-4-5 --max-turns 3"));
        assert!(!joined.contains("--system-prompt"), "{joined}");
        assert!(joined.contains("--allowedTools mcp__client,Read"));
        assert!(joined.contains("--permission-prompt-tool stdio"));
        let config = &args[args.iter().position(|a| a == "--mcp-config").unwrap() + 1];
        assert_eq!(
            serde_json::from_str::<Value>(config).unwrap(),
            json!({"mcpServers":{"client":{"type":"sdk","name":"client","alwaysLoad":true}}})
        );
        assert!(args.contains(&"--include-partial-messages".to_owned()));
        assert!(args.contains(&"--resume=-not-a-flag".to_owned()));
    }

    #[test]
    fn a_missing_explicit_path_names_the_install_command() {
        let err = find_cli(Some(Path::new("/nonexistent/claude"))).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/nonexistent/claude"), "{text}");
        assert!(
            text.contains("npm install -g @anthropic-ai/claude-code@2.1.332"),
            "{text}"
        );
    }
}

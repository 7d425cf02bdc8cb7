//! The CLI's command line, built in one place: [`CliArgs`] is what the gateway, the Rust
//! `ClaudeOptions` of `ccwire-host` and the Node client of the npm package start the CLI with,
//! so the three agree flag for flag.

use serde_json::{json, Map, Value};

pub use crate::api::Thinking;

/// The CLI release ccwire is tested against (what a player of a recording says it is).
pub const TESTED_CLI_VERSION: &str = "2.1.330";

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

/// Everything on the CLI's command line after the executable. The stream-json flags
/// ([`STREAM_JSON_ARGS`](crate::wire::STREAM_JSON_ARGS)) always come first, and
/// `--setting-sources` is always there: no settings file loads unless named.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CliArgs {
    /// `--system-prompt` or `--append-system-prompt`.
    pub system_prompt: SystemPrompt,
    /// `--model`.
    pub model: Option<String>,
    /// `--max-turns` (0: no limit).
    pub max_turns: u32,
    /// `--tools`: the built-in tools the model may use (`Some(vec![])`: none).
    pub tools: Option<Vec<String>>,
    /// `--allowedTools`: tools that run without asking.
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
    /// External MCP servers by name, each as `--mcp-config` takes it
    /// (`{"type":"stdio","command":…}`, `{"type":"http","url":…}`, …).
    pub mcp_servers: Vec<(String, Value)>,
    /// `--strict-mcp-config`: only the MCP servers given here.
    pub strict_mcp_config: bool,
    /// `--settings`: a settings file, or settings as JSON.
    pub settings: Option<String>,
    /// `--setting-sources`: which settings files load (`user`, `project`, `local`); empty:
    /// none.
    pub setting_sources: Vec<String>,
    /// `--fallback-model`.
    pub fallback_model: Option<String>,
    /// `--betas`.
    pub betas: Vec<String>,
    /// `--max-budget-usd`.
    pub max_budget_usd: Option<f64>,
    /// `--thinking=adaptive`, `--thinking=disabled` or `--max-thinking-tokens N`.
    pub thinking: Option<Thinking>,
    /// `--effort` (`low`, `medium`, `high`, `xhigh`, `max`).
    pub effort: Option<String>,
    /// `--agents`: custom sub-agents by name.
    pub agents: Option<Value>,
    /// `--include-partial-messages` (token streaming).
    pub include_partial_messages: bool,
    /// `--resume=<session id>`.
    pub resume: Option<String>,
    /// `--continue`.
    pub continue_conversation: bool,
    /// `--fork-session`.
    pub fork_session: bool,
    /// `--add-dir`, once per directory.
    pub add_dirs: Vec<String>,
    /// Further arguments, appended as given.
    pub extra_args: Vec<String>,
}

impl CliArgs {
    /// The arguments, in a fixed order: the stream-json flags, then the options above in the
    /// order they are listed, `--add-dir` and the extra arguments last.
    pub fn to_args(&self) -> Vec<String> {
        let mut args: Vec<String> = crate::wire::STREAM_JSON_ARGS
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut flag = |name: &str, value: Option<String>| {
            args.push(name.to_owned());
            args.extend(value);
        };
        match &self.system_prompt {
            SystemPrompt::Preset => {}
            SystemPrompt::Custom(p) => flag("--system-prompt", Some(p.clone())),
            SystemPrompt::Append(p) => flag("--append-system-prompt", Some(p.clone())),
        }
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
        if let Some(agents) = &self.agents {
            flag("--agents", Some(agents.to_string()));
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
    fn values_that_look_like_flags_stay_values() {
        let args = CliArgs {
            resume: Some("-x".into()),
            system_prompt: SystemPrompt::Append("--model opus".into()),
            ..CliArgs::default()
        }
        .to_args();
        assert!(args.contains(&"--resume=-x".to_owned()));
        let at = args.iter().position(|a| a == "--append-system-prompt");
        assert_eq!(
            at.map(|i| args[i + 1].as_str()),
            Some("--model opus"),
            "{args:?}"
        );
    }
}

//! An agent's tools in a Managed Agents session: which of its built-in toolset and MCP
//! toolsets the session's CLI runs, what each call's permission policy is, and how the CLI's
//! tool calls and results read as the API's events.

use serde_json::{json, Value};

use super::agents::{AgentSnapshot, Policy, Tool};

/// The built-in tools of `agent_toolset_20260401` and the CLI tools that are them.
const BUILT_IN: [(&str, &str); 8] = [
    ("bash", "Bash"),
    ("edit", "Edit"),
    ("read", "Read"),
    ("write", "Write"),
    ("glob", "Glob"),
    ("grep", "Grep"),
    ("web_fetch", "WebFetch"),
    ("web_search", "WebSearch"),
];

/// What a session's CLI runs of its agent's tools.
#[derive(Debug, Clone, Default, PartialEq)]
pub(in crate::gateway::engine) struct SessionTools {
    /// Built-in tools the CLI runs, by the CLI's names, and whether each asks first.
    pub(super) built_in: Vec<(String, bool)>,
    /// URL MCP servers the CLI connects to: name, URL, and their tools' policies.
    pub(super) mcp: Vec<McpToolset>,
}

/// An `mcp_toolset` of the agent with its server.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct McpToolset {
    pub(super) name: String,
    pub(super) url: String,
    /// Whether a tool without a config of its own is on, and asks first.
    enabled: bool,
    ask: bool,
    /// Tools configured one by one: name, enabled, asks first.
    configs: Vec<(String, bool, bool)>,
}

/// How a tool call of a session is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Permission {
    /// It runs (`always_allow`).
    Allow,
    /// It waits for the user's `user.tool_confirmation` (`always_ask`).
    Ask,
    /// It does not run: the tool is not enabled in the session.
    Deny,
}

impl Permission {
    /// The event's `evaluated_permission`.
    pub(super) fn evaluated(self) -> &'static str {
        match self {
            Permission::Allow => "allow",
            Permission::Ask => "ask",
            Permission::Deny => "deny",
        }
    }

    /// The event's `evaluation`: the policy that decided (none for a refused call).
    pub(super) fn evaluation(self) -> Value {
        match self {
            Permission::Allow => json!({"type": "always_allow"}),
            Permission::Ask => json!({"type": "always_ask"}),
            Permission::Deny => Value::Null,
        }
    }
}

impl SessionTools {
    /// What a session of `agent` (as the session keeps its snapshot) runs on a gateway that
    /// enables the CLI tools `enabled`, takes URL MCP servers when `mcp_allowed`, and makes
    /// every tool ask when `always_ask`; with what it leaves out, in words for a warning.
    pub(super) fn of(
        agent: &AgentSnapshot,
        enabled: &[String],
        mcp_allowed: bool,
        always_ask: bool,
    ) -> (SessionTools, Vec<String>) {
        let mut tools = SessionTools::default();
        let mut left_out = Vec::new();
        let mut not_enabled = Vec::new();
        let asks = |policy: Policy| always_ask || policy == Policy::AlwaysAsk;
        for toolset in &agent.definition.tools {
            match toolset {
                Tool::BuiltIn { configs, .. } => {
                    for config in configs.iter().filter(|c| c.config.enabled) {
                        let name = config.name.as_str();
                        let Some((_, cli)) = BUILT_IN.iter().find(|(api, _)| *api == name) else {
                            continue;
                        };
                        if !enabled.iter().any(|e| e == cli) {
                            not_enabled.push(name.to_owned());
                            continue;
                        }
                        let ask = asks(config.config.permission_policy);
                        tools.built_in.push(((*cli).to_owned(), ask));
                    }
                }
                Tool::Mcp {
                    mcp_server_name: name,
                    default_config,
                    configs,
                } => {
                    let servers = &agent.definition.mcp_servers;
                    let Some(server) = servers.iter().find(|s| &s.name == name) else {
                        continue;
                    };
                    if !mcp_allowed {
                        left_out.push(format!("MCP server {name} (not allowed on this gateway: ccwire serve --allow-mcp-servers)"));
                        continue;
                    }
                    let configs = (configs.iter())
                        .map(|c| {
                            let ask = asks(c.config.permission_policy);
                            (c.name.clone(), c.config.enabled, ask)
                        })
                        .collect();
                    tools.mcp.push(McpToolset {
                        name: name.clone(),
                        url: server.url.clone(),
                        enabled: default_config.enabled,
                        ask: asks(default_config.permission_policy),
                        configs,
                    });
                }
                Tool::Custom { .. } => {}
            }
        }
        if !not_enabled.is_empty() {
            left_out.push(format!(
                "built-in tools {} (not enabled on this gateway: ccwire serve --enable-tool)",
                not_enabled.join(", ")
            ));
        }
        (tools, left_out)
    }

    /// The built-in tools the CLI runs (CLI names).
    pub(in crate::gateway::engine) fn cli_tools(&self) -> Vec<String> {
        self.built_in.iter().map(|(t, _)| t.clone()).collect()
    }

    /// The tools that run without asking: the built-in ones whose policy is `always_allow`.
    /// (An MCP tool's call always comes to the gateway, which answers it by its policy.)
    pub(in crate::gateway::engine) fn allowed(&self) -> Vec<String> {
        (self.built_in.iter())
            .filter(|(_, ask)| !ask)
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// The built-in tools whose every call asks first (`always_ask`).
    pub(in crate::gateway::engine) fn ask_first(&self) -> Vec<String> {
        (self.built_in.iter())
            .filter(|(_, ask)| *ask)
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// The MCP tools turned off (`mcp__<server>__<tool>`), which the model is not offered.
    pub(in crate::gateway::engine) fn disallowed(&self) -> Vec<String> {
        let mut off = Vec::new();
        for set in &self.mcp {
            if !set.enabled {
                // A server whose tools are off unless configured on: each configured one is
                // allowed below; the rest are refused when called.
                continue;
            }
            for (tool, on, _) in &set.configs {
                if !on {
                    off.push(format!("mcp__{}__{tool}", set.name));
                }
            }
        }
        off
    }

    /// The `--mcp-config` servers: each URL server as a streamable HTTP server.
    pub(in crate::gateway::engine) fn mcp_servers(&self) -> Vec<(String, Value)> {
        (self.mcp.iter())
            .map(|s| (s.name.clone(), json!({"type": "http", "url": s.url})))
            .collect()
    }

    /// The URLs of the URL MCP servers the CLI connects to.
    pub(in crate::gateway::engine) fn mcp_urls(&self) -> Vec<String> {
        self.mcp.iter().map(|s| s.url.clone()).collect()
    }

    /// How a call of the CLI tool `name` is treated, and what the API calls it: the
    /// built-in tool's name, or an MCP server's name and its tool's.
    pub(super) fn permission(&self, name: &str) -> (Permission, ToolName) {
        if let Some(api) = api_name(name) {
            let permission = match self.built_in.iter().find(|(t, _)| t == name) {
                Some((_, true)) => Permission::Ask,
                Some((_, false)) => Permission::Allow,
                None => Permission::Deny,
            };
            return (permission, ToolName::BuiltIn(api.to_owned()));
        }
        if let Some(rest) = name.strip_prefix("mcp__") {
            // The longest server name that fits (a server's name may hold "__").
            let set = (self.mcp.iter())
                .filter(|s| {
                    rest.strip_prefix(s.name.as_str())
                        .is_some_and(|r| r.starts_with("__"))
                })
                .max_by_key(|s| s.name.len());
            if let Some(set) = set {
                let tool = &rest[set.name.len() + 2..];
                let (on, ask) = match set.configs.iter().find(|(t, ..)| t == tool) {
                    Some((_, on, ask)) => (*on, *ask),
                    None => (set.enabled, set.ask),
                };
                let permission = match (on, ask) {
                    (false, _) => Permission::Deny,
                    (true, true) => Permission::Ask,
                    (true, false) => Permission::Allow,
                };
                return (
                    permission,
                    ToolName::Mcp {
                        server: set.name.clone(),
                        tool: tool.to_owned(),
                    },
                );
            }
        }
        (Permission::Deny, ToolName::BuiltIn(name.to_owned()))
    }
}

/// A tool as the API names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ToolName {
    /// A built-in tool (`bash`…): `agent.tool_use`.
    BuiltIn(String),
    /// An MCP server's tool: `agent.mcp_tool_use`.
    Mcp { server: String, tool: String },
}

/// The API's name of a built-in CLI tool.
fn api_name(cli: &str) -> Option<&'static str> {
    BUILT_IN
        .iter()
        .find(|(_, c)| *c == cli)
        .map(|(api, _)| *api)
}

#[cfg(test)]
mod tests {
    use super::super::events::EventBody;
    use super::*;

    /// An agent as a session keeps it, made from these fields as the API makes it.
    fn agent() -> AgentSnapshot {
        let body = json!({"name": "a", "model": "m", "tools": [
            {"type": "agent_toolset_20260401", "configs": [
                {"name": "bash", "enabled": true, "permission_policy": {"type": "always_ask"}},
                {"name": "read", "enabled": true, "permission_policy": {"type": "always_allow"}},
                {"name": "write", "enabled": true, "permission_policy": {"type": "always_allow"}},
                {"name": "grep", "enabled": false, "permission_policy": {"type": "always_allow"}}]},
            {"type": "mcp_toolset", "mcp_server_name": "docs",
             "default_config": {"enabled": true, "permission_policy": {"type": "always_ask"}},
             "configs": [{"name": "search", "enabled": true,
                          "permission_policy": {"type": "always_allow"}},
                         {"name": "drop", "enabled": false,
                          "permission_policy": {"type": "always_ask"}}]}],
            "mcp_servers": [{"type": "url", "name": "docs", "url": "http://127.0.0.1:9/mcp"}]});
        let (definition, _) = super::super::agents::agent_fields(body.as_object().unwrap(), None)
            .expect("an agent the API takes");
        AgentSnapshot {
            definition,
            id: "agent_1".into(),
            kind: "agent".into(),
            version: 1,
        }
    }

    #[test]
    fn only_what_the_operator_enables_runs_and_each_call_gets_its_policy() {
        let enabled = ["Bash".to_owned(), "Read".to_owned(), "Grep".to_owned()];
        let (tools, left_out) = SessionTools::of(&agent(), &enabled, true, false);
        assert_eq!(tools.cli_tools(), ["Bash", "Read"]);
        assert_eq!(tools.allowed(), ["Read"]);
        assert_eq!(left_out.len(), 1);
        assert!(left_out[0].contains("write"), "{left_out:?}");
        assert_eq!(tools.permission("Bash").0, Permission::Ask);
        assert_eq!(tools.permission("Read").0, Permission::Allow);
        assert_eq!(tools.permission("Write").0, Permission::Deny);
        assert_eq!(tools.permission("Grep").0, Permission::Deny);
        let (p, name) = tools.permission("mcp__docs__search");
        assert_eq!(p, Permission::Allow);
        assert_eq!(
            name,
            ToolName::Mcp {
                server: "docs".into(),
                tool: "search".into()
            }
        );
        assert_eq!(tools.permission("mcp__docs__fetch").0, Permission::Ask);
        assert_eq!(tools.permission("mcp__docs__drop").0, Permission::Deny);
        assert_eq!(tools.permission("mcp__other__x").0, Permission::Deny);
        assert_eq!(tools.disallowed(), ["mcp__docs__drop"]);
        assert_eq!(
            tools.mcp_servers(),
            [(
                "docs".to_owned(),
                json!({"type": "http", "url": "http://127.0.0.1:9/mcp"})
            )]
        );
    }

    #[test]
    fn a_gateway_without_mcp_servers_or_with_approvals_says_so_and_asks() {
        let enabled = ["Read".to_owned()];
        let (tools, left_out) = SessionTools::of(&agent(), &enabled, false, true);
        assert!(tools.mcp.is_empty());
        assert!(left_out.iter().any(|w| w.contains("--allow-mcp-servers")));
        assert_eq!(tools.permission("Read").0, Permission::Ask);
        assert!(tools.allowed().is_empty());
    }

    #[test]
    fn events_name_tools_as_the_api_does() {
        let (p, name) = SessionTools::default().permission("Bash");
        let json = |body: EventBody| serde_json::to_value(body).unwrap();
        let event = json(EventBody::tool_use(
            &name,
            json!({"command": "ls"}),
            Permission::Ask,
        ));
        assert_eq!(p, Permission::Deny);
        assert_eq!(event["name"], "bash");
        assert_eq!(event["evaluated_permission"], "ask");
        assert_eq!(event["evaluation"]["type"], "always_ask");
        let result = json(EventBody::tool_result(
            &name,
            "sevt_1",
            &json!("a\nb"),
            false,
        ));
        assert_eq!(result["type"], "agent.tool_result");
        assert_eq!(result["content"][0]["text"], "a\nb");
        let mcp = ToolName::Mcp {
            server: "s".into(),
            tool: "t".into(),
        };
        let result = json(EventBody::tool_result(
            &mcp,
            "sevt_2",
            &json!([{"type": "text", "text": "x"}]),
            true,
        ));
        assert_eq!(result["mcp_tool_use_id"], "sevt_2");
        assert_eq!(result["is_error"], true);
    }
}

//! The Managed Agents API's agents: typed as the API shows them, and read from a request's
//! fields with every value resolved (the model's object form, each built-in tool with its
//! config and permission policy). What cannot apply to a local Claude Code is refused with a
//! 400 that says so (skills, multi-agent rosters, an execution identity other than the
//! gateway's own).

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::api::{invalid, metadata, string_or_null, Refusal};

/// The built-in tools of `agent_toolset_20260401`, as the API names them.
pub(super) const AGENT_TOOLS: [&str; 8] = [
    "bash",
    "edit",
    "read",
    "write",
    "glob",
    "grep",
    "web_fetch",
    "web_search",
];

/// The most URL MCP servers an agent names, the longest URL, the most MCP tool configs in all
/// its toolsets and the longest tool name: a session's CLI takes its servers and the tools it
/// turns off on its command line, where one argument holds at most 128 KiB.
const MAX_MCP_SERVERS: usize = 16;
const MAX_URL: usize = 2048;
const MAX_MCP_CONFIGS: usize = 128;
const MAX_TOOL_NAME: usize = 128;

/// An agent (one version of it) as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Agent {
    /// What a session takes of it.
    #[serde(flatten)]
    pub(super) snapshot: AgentSnapshot,
    pub(super) archived_at: Option<String>,
    pub(super) created_at: String,
    pub(super) metadata: Map<String, Value>,
    pub(super) updated_at: String,
}

/// An agent as a session keeps it: its definition, id and version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct AgentSnapshot {
    #[serde(flatten)]
    pub(super) definition: Definition,
    pub(super) id: String,
    /// Always `agent`.
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) version: u64,
}

/// What an agent does (an update that changes none of it, nor the metadata, makes no new
/// version).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Definition {
    pub(super) name: String,
    pub(super) description: Option<String>,
    pub(super) system: Option<String>,
    pub(super) model: Model,
    pub(super) tools: Vec<Tool>,
    pub(super) mcp_servers: Vec<McpServer>,
    /// Always empty here.
    pub(super) skills: Vec<Value>,
    /// Always `null` here.
    pub(super) multiagent: Option<Value>,
    /// Always `{"type": "service_account"}`: the gateway's own.
    pub(super) execution_identity: Value,
}

/// An agent's model, in its object form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Model {
    pub(super) id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) effort: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) inference_geo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) speed: Option<String>,
}

/// A tool of an agent, by its `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub(super) enum Tool {
    /// The built-in toolset: every tool with its config.
    #[serde(rename = "agent_toolset_20260401")]
    BuiltIn {
        default_config: ToolConfig,
        configs: Vec<BuiltInConfig>,
    },
    /// The tools of one of the agent's MCP servers.
    #[serde(rename = "mcp_toolset")]
    Mcp {
        mcp_server_name: String,
        default_config: ToolConfig,
        configs: Vec<McpConfig>,
    },
    /// A tool the client runs (its calls are `agent.custom_tool_use` events).
    #[serde(rename = "custom")]
    Custom {
        name: String,
        description: String,
        input_schema: Value,
    },
}

/// Whether a tool is on, and whether its calls ask first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct ToolConfig {
    pub(super) enabled: bool,
    pub(super) permission_policy: Policy,
}

/// A built-in tool's config, with its own options (`web_fetch`'s and `web_search`'s domains…).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct BuiltInConfig {
    /// The tool's name again (the API writes both).
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) name: String,
    #[serde(flatten)]
    pub(super) config: ToolConfig,
    #[serde(flatten)]
    pub(super) options: Map<String, Value>,
}

/// An MCP tool's config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct McpConfig {
    pub(super) name: String,
    #[serde(flatten)]
    pub(super) config: ToolConfig,
}

/// A permission policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Policy {
    AlwaysAllow,
    AlwaysAsk,
}

/// A URL MCP server of an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct McpServer {
    /// Always `url`.
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) name: String,
    pub(super) url: String,
}

impl AgentSnapshot {
    /// The agent's custom tools, as Messages API tools.
    pub(super) fn custom_tools(&self) -> Vec<Value> {
        (self.definition.tools.iter())
            .filter_map(|t| match t {
                Tool::Custom {
                    name,
                    description,
                    input_schema,
                } => Some(json!({"name": name, "description": description,
                        "input_schema": input_schema})),
                _ => None,
            })
            .collect()
    }
}

/// A permission policy as given (`null`: the default).
fn policy(value: Option<&Value>, default: Policy, at: &str) -> Result<Policy, Refusal> {
    match value {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v["type"].as_str() {
            Some("always_allow") => Ok(Policy::AlwaysAllow),
            Some("always_ask") => Ok(Policy::AlwaysAsk),
            Some("auto") => Err(invalid(format!(
                "{at}.permission_policy: `auto` is not supported by this gateway (use always_allow or always_ask)"
            ))),
            _ => Err(invalid(format!(
                "{at}.permission_policy: must be {{\"type\": \"always_allow\" | \"always_ask\"}}"
            ))),
        },
    }
}

/// `enabled` as given (`null`: the default).
fn enabled(value: Option<&Value>, default: bool, at: &str) -> Result<bool, Refusal> {
    match value {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(format!("{at}.enabled: must be a boolean"))),
    }
}

/// An agent's `model`, resolved: always the object form.
fn model(value: &Value) -> Result<Model, Refusal> {
    let mut model = Model {
        id: String::new(),
        effort: None,
        inference_geo: None,
        speed: None,
    };
    let given = match value {
        Value::String(id) if !id.is_empty() => {
            model.id = id.clone();
            return Ok(model);
        }
        Value::Object(o) => match o.get("id") {
            Some(Value::String(id)) if !id.is_empty() => {
                model.id = id.clone();
                o
            }
            _ => return Err(invalid("model.id: required")),
        },
        _ => return Err(invalid("model: a model name, or {\"id\": …}")),
    };
    model.effort = match given.get("effort") {
        None | Some(Value::Null) => None,
        Some(Value::String(level)) => Some(json!({"type": level})),
        Some(v @ Value::Object(_)) if v["type"].is_string() => Some(json!({"type": v["type"]})),
        Some(_) => return Err(invalid("model.effort: a level or {\"type\": level}")),
    };
    let text = |field: &str| match given.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("model.{field}: must be a string"))),
    };
    model.inference_geo = text("inference_geo")?;
    model.speed = text("speed")?;
    Ok(model)
}

/// An agent's `tools`, resolved, checked against its `mcp_servers`' names.
fn tools(value: &Value, servers: &[McpServer]) -> Result<Vec<Tool>, Refusal> {
    let Value::Array(list) = value else {
        return Err(invalid("tools: must be an array"));
    };
    let mut out = Vec::new();
    let mut mcp_configs = 0;
    for (i, tool) in list.iter().enumerate() {
        let at = format!("tools.{i}");
        out.push(match tool["type"].as_str() {
            Some("agent_toolset_20260401") => toolset(tool, &at)?,
            Some("mcp_toolset") => {
                let name = tool["mcp_server_name"].as_str().unwrap_or_default();
                if !servers.iter().any(|s| s.name == name) {
                    return Err(invalid(format!(
                        "{at}.mcp_server_name: no MCP server {name:?} in mcp_servers"
                    )));
                }
                let (default_config, configs) = configs(tool, Policy::AlwaysAsk, &at)?;
                mcp_configs += configs.len();
                if mcp_configs > MAX_MCP_CONFIGS {
                    return Err(invalid(format!(
                        "tools: at most {MAX_MCP_CONFIGS} configs in all mcp_toolsets (this gateway passes them on a command line)"
                    )));
                }
                let configs = (configs.into_iter())
                    .map(|(name, config, _)| McpConfig { name, config })
                    .collect();
                Tool::Mcp {
                    mcp_server_name: name.to_owned(),
                    default_config,
                    configs,
                }
            }
            Some("custom") => {
                let name = tool["name"].as_str().unwrap_or_default();
                let fits = (1..=128).contains(&name.len())
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                if !fits {
                    return Err(invalid(format!(
                        "{at}.name: 1 to 128 letters, digits, '_' or '-'"
                    )));
                }
                let Some(description) = tool["description"].as_str() else {
                    return Err(invalid(format!("{at}.description: required")));
                };
                if tool["input_schema"]["type"] != "object" {
                    return Err(invalid(format!(
                        "{at}.input_schema: a JSON Schema of type \"object\""
                    )));
                }
                Tool::Custom {
                    name: name.to_owned(),
                    description: description.to_owned(),
                    input_schema: tool["input_schema"].clone(),
                }
            }
            _ => {
                return Err(invalid(format!(
                    "{at}.type: agent_toolset_20260401, mcp_toolset or custom"
                )))
            }
        });
    }
    Ok(out)
}

/// A toolset's `default_config` and `configs`, resolved: each config's tool name, config, and
/// the config as given.
type Configs<'a> = (ToolConfig, Vec<(String, ToolConfig, &'a Value)>);

fn configs<'a>(tool: &'a Value, default_policy: Policy, at: &str) -> Result<Configs<'a>, Refusal> {
    let given = &tool["default_config"];
    let at_default = format!("{at}.default_config");
    let default = ToolConfig {
        enabled: enabled(given.get("enabled"), true, &at_default)?,
        permission_policy: policy(given.get("permission_policy"), default_policy, &at_default)?,
    };
    let mut out = Vec::new();
    match &tool["configs"] {
        Value::Null => {}
        Value::Array(list) => {
            for (j, config) in list.iter().enumerate() {
                let at = format!("{at}.configs.{j}");
                let Some(name) = config["name"].as_str() else {
                    return Err(invalid(format!("{at}.name: required")));
                };
                if name.is_empty() || name.len() > MAX_TOOL_NAME {
                    return Err(invalid(format!(
                        "{at}.name: 1 to {MAX_TOOL_NAME} characters"
                    )));
                }
                let resolved = ToolConfig {
                    enabled: enabled(config.get("enabled"), default.enabled, &at)?,
                    permission_policy: policy(
                        config.get("permission_policy"),
                        default.permission_policy,
                        &at,
                    )?,
                };
                out.push((name.to_owned(), resolved, config));
            }
        }
        _ => return Err(invalid(format!("{at}.configs: must be an array"))),
    }
    Ok((default, out))
}

/// The built-in toolset, resolved: every tool with its config.
fn toolset(tool: &Value, at: &str) -> Result<Tool, Refusal> {
    let (default_config, given) = configs(tool, Policy::AlwaysAllow, at)?;
    for (name, ..) in &given {
        if !AGENT_TOOLS.contains(&name.as_str()) {
            return Err(invalid(format!(
                "{at}.configs: no built-in tool {name:?} (bash, edit, read, write, glob, grep, web_fetch, web_search)"
            )));
        }
    }
    let configs = AGENT_TOOLS
        .iter()
        .map(|name| {
            let mine = given.iter().find(|(n, ..)| n == name);
            let config = mine.map_or(default_config, |(_, config, _)| *config);
            let extras: &[&str] = match *name {
                "web_fetch" => &[
                    "allowed_domains",
                    "blocked_domains",
                    "max_content_tokens",
                    "url_sources",
                ],
                "web_search" => &["allowed_domains", "blocked_domains", "user_location"],
                _ => &[],
            };
            let mut options = Map::new();
            for extra in extras {
                if let Some(v) = mine.map(|(.., c)| &c[*extra]).filter(|v| !v.is_null()) {
                    options.insert((*extra).to_owned(), v.clone());
                }
            }
            if *name == "web_fetch" {
                options.entry("url_sources").or_insert(Value::Null);
            }
            BuiltInConfig {
                kind: (*name).to_owned(),
                name: (*name).to_owned(),
                config,
                options,
            }
        })
        .collect();
    Ok(Tool::BuiltIn {
        default_config,
        configs,
    })
}

/// An agent's `mcp_servers`, checked.
fn mcp_servers(value: &Value) -> Result<Vec<McpServer>, Refusal> {
    let Value::Array(list) = value else {
        return Err(invalid("mcp_servers: must be an array"));
    };
    if list.len() > MAX_MCP_SERVERS {
        return Err(invalid(format!(
            "mcp_servers: at most {MAX_MCP_SERVERS} servers (this gateway passes them on a command line)"
        )));
    }
    let mut out: Vec<McpServer> = Vec::new();
    for (i, server) in list.iter().enumerate() {
        let (Some("url"), Some(name), Some(url)) = (
            server["type"].as_str(),
            server["name"].as_str(),
            server["url"].as_str(),
        ) else {
            return Err(invalid(format!(
                "mcp_servers.{i}: {{\"type\": \"url\", \"name\": …, \"url\": …}}"
            )));
        };
        if name.is_empty() || name.len() > 255 || out.iter().any(|s| s.name == name) {
            return Err(invalid(format!(
                "mcp_servers.{i}.name: 1 to 255 characters, each name once"
            )));
        }
        if url.len() > MAX_URL {
            return Err(invalid(format!(
                "mcp_servers.{i}.url: at most {MAX_URL} bytes"
            )));
        }
        out.push(McpServer {
            kind: "url".to_owned(),
            name: name.to_owned(),
            url: url.to_owned(),
        });
    }
    Ok(out)
}

/// The definition and metadata of agent `current` (or of a new one) with `body`'s fields, as
/// they will be kept.
pub(super) fn agent_fields(
    body: &Map<String, Value>,
    current: Option<&Agent>,
) -> Result<(Definition, Map<String, Value>), Refusal> {
    let name = match (body.get("name"), current) {
        (Some(Value::String(n)), _) if !n.is_empty() => n.clone(),
        (None, Some(current)) => current.snapshot.definition.name.clone(),
        _ => return Err(invalid("name: required, a non-empty string")),
    };
    let model = match (body.get("model"), current) {
        (None, Some(current)) => current.snapshot.definition.model.clone(),
        (Some(v), _) if !v.is_null() => model(v)?,
        _ => return Err(invalid("model: required")),
    };
    let mut agent = match current {
        Some(current) => current.snapshot.definition.clone(),
        None => Definition {
            name: String::new(),
            description: None,
            system: None,
            model: model.clone(),
            tools: Vec::new(),
            mcp_servers: Vec::new(),
            skills: Vec::new(),
            multiagent: None,
            execution_identity: json!({"type": "service_account"}),
        },
    };
    agent.name = name;
    agent.model = model;
    let text = |field: &str| -> Result<Option<Option<String>>, Refusal> {
        // An empty string clears it, as null does.
        Ok(string_or_null(body, field)?.map(|v| v.filter(|s| !s.is_empty())))
    };
    if let Some(description) = text("description")? {
        agent.description = description;
    }
    if let Some(system) = text("system")? {
        agent.system = system;
    }
    if let Some(servers) = body.get("mcp_servers") {
        agent.mcp_servers = match servers {
            Value::Null => Vec::new(),
            v => mcp_servers(v)?,
        };
    }
    if let Some(t) = body.get("tools") {
        agent.tools = match t {
            Value::Null => Vec::new(),
            v => tools(v, &agent.mcp_servers)?,
        };
    }
    let referenced = |name: &str| {
        (agent.tools.iter())
            .any(|t| matches!(t, Tool::Mcp { mcp_server_name, .. } if mcp_server_name == name))
    };
    if let Some(unused) = agent.mcp_servers.iter().find(|s| !referenced(&s.name)) {
        return Err(invalid(format!(
            "mcp_servers: {:?} is not used by any mcp_toolset in tools",
            unused.name
        )));
    }
    match body.get("skills") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) if list.is_empty() => agent.skills = Vec::new(),
        Some(_) => {
            return Err(invalid(
                "skills: not supported by this gateway (the local Claude Code runs no Anthropic or custom skills)",
            ))
        }
    }
    match body.get("multiagent") {
        None | Some(Value::Null) => {}
        Some(_) => {
            return Err(invalid(
                "multiagent: not supported by this gateway (a session runs one agent)",
            ))
        }
    }
    match body.get("execution_identity") {
        None => {}
        Some(v) if v.is_null() || v["type"] == "service_account" => {
            agent.execution_identity = json!({"type": "service_account"});
        }
        Some(_) => {
            return Err(invalid(
                "execution_identity: only service_account (the gateway's own) is supported",
            ))
        }
    }
    let current_metadata = current.map(|c| &c.metadata);
    let metadata = match (body.get("metadata"), current_metadata) {
        (None | Some(Value::Null), current) => current.cloned().unwrap_or_default(),
        (Some(m), Some(current)) => metadata(m, Some(current), true)?,
        (Some(m), None) => metadata(m, None, false)?,
    };
    Ok((agent, metadata))
}

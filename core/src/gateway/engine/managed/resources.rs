//! The Managed Agents API (beta `managed-agents-2026-04-01`) in its own shapes, ids and
//! errors, for the official SDKs' `beta.agents` and `beta.environments` clients: agents with
//! versions, and environments (a local one: each session works in a directory of its own under
//! the tenant's home). Every resource belongs to the tenant (API key) that made it.
//!
//! What cannot apply to a local Claude Code is refused with a 400 that says so (skills,
//! multi-agent rosters, an AWS execution identity, self-hosted environments), or, for an
//! environment's cloud settings (networking, packages), accepted, kept and named in an
//! `x-ccwire-warning` header.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::api::*;
use super::{ResourceRoute as Route, Route as ManagedRoute};
use crate::gateway::engine::{tenant_id, Gateway, GatewayOutput, HttpHead, RequestId, StoreAsk};
use crate::Timestamp;

/// The built-in tools of `agent_toolset_20260401`, as the API names them.
const AGENT_TOOLS: [&str; 8] = [
    "bash",
    "edit",
    "read",
    "write",
    "glob",
    "grep",
    "web_fetch",
    "web_search",
];

/// Each tenant's agents and environments, in the order they were made.
#[derive(Debug, Default)]
pub(in crate::gateway::engine) struct Managed {
    tenants: BTreeMap<String, Resources>,
    next: u64,
    /// Requests waiting for their tenant's resources from the session store.
    loading: BTreeMap<RequestId, Parked>,
}

#[derive(Debug, Default)]
struct Resources {
    /// Each agent's versions, oldest first (the last is the agent now), with the order it was
    /// made in.
    agents: Vec<(u64, Vec<Value>)>,
    environments: Vec<(u64, Value)>,
}

/// A request parked until its tenant's resources are read.
#[derive(Debug)]
struct Parked {
    tenant: String,
    method: String,
    path: String,
    query: String,
    body: Vec<u8>,
}

/// A change a request made, for the session store.
#[derive(Debug)]
struct Kept {
    kind: &'static str,
    id: String,
    /// `None`: deleted.
    json: Option<Value>,
}

/// A permission policy as given (`null`: the default).
fn policy(value: Option<&Value>, default: &Value, at: &str) -> Result<Value, Refusal> {
    match value {
        None | Some(Value::Null) => Ok(default.clone()),
        Some(v) => match v["type"].as_str() {
            Some("always_allow" | "always_ask") => Ok(json!({"type": v["type"]})),
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
fn model(value: &Value) -> Result<Value, Refusal> {
    let (id, given) = match value {
        Value::String(id) if !id.is_empty() => return Ok(json!({"id": id})),
        Value::Object(o) => match o.get("id") {
            Some(Value::String(id)) if !id.is_empty() => (id.clone(), o),
            _ => return Err(invalid("model.id: required")),
        },
        _ => return Err(invalid("model: a model name, or {\"id\": …}")),
    };
    let mut out = json!({"id": id});
    match given.get("effort") {
        None | Some(Value::Null) => {}
        Some(Value::String(level)) => out["effort"] = json!({"type": level}),
        Some(v @ Value::Object(_)) if v["type"].is_string() => {
            out["effort"] = json!({"type": v["type"]});
        }
        Some(_) => return Err(invalid("model.effort: a level or {\"type\": level}")),
    }
    for field in ["inference_geo", "speed"] {
        match given.get(field) {
            None | Some(Value::Null) => {}
            Some(v @ Value::String(_)) => out[field] = v.clone(),
            Some(_) => return Err(invalid(format!("model.{field}: must be a string"))),
        }
    }
    Ok(out)
}

/// An agent's `tools`, resolved, checked against its `mcp_servers`' names.
fn tools(value: &Value, servers: &[String]) -> Result<Value, Refusal> {
    let Value::Array(list) = value else {
        return Err(invalid("tools: must be an array"));
    };
    let mut out = Vec::new();
    for (i, tool) in list.iter().enumerate() {
        let at = format!("tools.{i}");
        out.push(match tool["type"].as_str() {
            Some("agent_toolset_20260401") => toolset(tool, &at)?,
            Some("mcp_toolset") => {
                let name = tool["mcp_server_name"].as_str().unwrap_or_default();
                if !servers.iter().any(|s| s == name) {
                    return Err(invalid(format!(
                        "{at}.mcp_server_name: no MCP server {name:?} in mcp_servers"
                    )));
                }
                let (default, configs) = configs(tool, json!({"type": "always_ask"}), &at)?;
                let configs: Vec<Value> = configs
                    .into_iter()
                    .map(|(name, enabled, policy, _)| {
                        json!({"name": name, "enabled": enabled, "permission_policy": policy})
                    })
                    .collect();
                json!({"type": "mcp_toolset", "mcp_server_name": name,
                       "default_config": default, "configs": configs})
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
                if !tool["description"].is_string() {
                    return Err(invalid(format!("{at}.description: required")));
                }
                if tool["input_schema"]["type"] != "object" {
                    return Err(invalid(format!(
                        "{at}.input_schema: a JSON Schema of type \"object\""
                    )));
                }
                json!({"type": "custom", "name": name, "description": tool["description"],
                       "input_schema": tool["input_schema"]})
            }
            _ => {
                return Err(invalid(format!(
                    "{at}.type: agent_toolset_20260401, mcp_toolset or custom"
                )))
            }
        });
    }
    Ok(Value::Array(out))
}

/// A toolset's `default_config` and `configs`, resolved: (name, enabled, policy, the config).
#[allow(clippy::type_complexity)]
fn configs(
    tool: &Value,
    default_policy: Value,
    at: &str,
) -> Result<(Value, Vec<(String, bool, Value, Value)>), Refusal> {
    let given = &tool["default_config"];
    let on = enabled(given.get("enabled"), true, &format!("{at}.default_config"))?;
    let policy_now = policy(
        given.get("permission_policy"),
        &default_policy,
        &format!("{at}.default_config"),
    )?;
    let default = json!({"enabled": on, "permission_policy": policy_now});
    let mut out = Vec::new();
    match &tool["configs"] {
        Value::Null => {}
        Value::Array(list) => {
            for (j, config) in list.iter().enumerate() {
                let at = format!("{at}.configs.{j}");
                let Some(name) = config["name"].as_str() else {
                    return Err(invalid(format!("{at}.name: required")));
                };
                let e = enabled(config.get("enabled"), on, &at)?;
                let p = policy(config.get("permission_policy"), &policy_now, &at)?;
                out.push((name.to_owned(), e, p, config.clone()));
            }
        }
        _ => return Err(invalid(format!("{at}.configs: must be an array"))),
    }
    Ok((default, out))
}

/// The built-in toolset, resolved: every tool with its config.
fn toolset(tool: &Value, at: &str) -> Result<Value, Refusal> {
    let (default, given) = configs(tool, json!({"type": "always_allow"}), at)?;
    for (name, ..) in &given {
        if !AGENT_TOOLS.contains(&name.as_str()) {
            return Err(invalid(format!(
                "{at}.configs: no built-in tool {name:?} (bash, edit, read, write, glob, grep, web_fetch, web_search)"
            )));
        }
    }
    let configs: Vec<Value> = AGENT_TOOLS
        .iter()
        .map(|name| {
            let mine = given.iter().find(|(n, ..)| n == name);
            let (on, policy) = match mine {
                Some((_, on, policy, _)) => (Value::Bool(*on), policy.clone()),
                None => (
                    default["enabled"].clone(),
                    default["permission_policy"].clone(),
                ),
            };
            let mut config = json!({"type": name, "name": name, "enabled": on,
                                    "permission_policy": policy});
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
            for extra in extras {
                if let Some(v) = mine.map(|(.., c)| &c[*extra]).filter(|v| !v.is_null()) {
                    config[*extra] = v.clone();
                }
            }
            if *name == "web_fetch" && config.get("url_sources").is_none() {
                config["url_sources"] = Value::Null;
            }
            config
        })
        .collect();
    Ok(json!({"type": "agent_toolset_20260401", "default_config": default, "configs": configs}))
}

/// An agent's `mcp_servers`, checked, and their names.
fn mcp_servers(value: &Value) -> Result<(Value, Vec<String>), Refusal> {
    let Value::Array(list) = value else {
        return Err(invalid("mcp_servers: must be an array"));
    };
    let mut names: Vec<String> = Vec::new();
    let mut out = Vec::new();
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
        if name.is_empty() || name.len() > 255 || names.iter().any(|n| n == name) {
            return Err(invalid(format!(
                "mcp_servers.{i}.name: 1 to 255 characters, each name once"
            )));
        }
        names.push(name.to_owned());
        out.push(json!({"type": "url", "name": name, "url": url}));
    }
    Ok((Value::Array(out), names))
}

/// The agent `current` (or a new one) with `body`'s fields: the fields as they will be kept.
fn agent_fields(body: &Map<String, Value>, current: Option<&Value>) -> Result<Value, Refusal> {
    let mut agent = current.cloned().unwrap_or_else(|| {
        json!({"name": null, "description": null, "system": null, "model": null,
               "tools": [], "mcp_servers": [], "skills": [], "metadata": {},
               "multiagent": null, "execution_identity": {"type": "service_account"}})
    });
    match body.get("name") {
        Some(Value::String(n)) if !n.is_empty() => agent["name"] = json!(n),
        None if current.is_some() => {}
        _ => return Err(invalid("name: required, a non-empty string")),
    }
    match body.get("model") {
        Some(Value::Null) | None if current.is_some() && body.get("model").is_none() => {}
        Some(v) if !v.is_null() => agent["model"] = model(v)?,
        _ => return Err(invalid("model: required")),
    }
    for field in ["description", "system"] {
        if let Some(v) = string_or_null(body, field)? {
            agent[field] = match v {
                Value::String(s) if s.is_empty() => Value::Null,
                v => v,
            };
        }
    }
    if let Some(servers) = body.get("mcp_servers") {
        agent["mcp_servers"] = match servers {
            Value::Null => json!([]),
            v => mcp_servers(v)?.0,
        };
    }
    let names: Vec<String> = agent["mcp_servers"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|s| s["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if let Some(t) = body.get("tools") {
        agent["tools"] = match t {
            Value::Null => json!([]),
            v => tools(v, &names)?,
        };
    }
    let referenced = |name: &str| {
        agent["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["mcp_server_name"] == name))
    };
    if let Some(unused) = names.iter().find(|n| !referenced(n)) {
        return Err(invalid(format!(
            "mcp_servers: {unused:?} is not used by any mcp_toolset in tools"
        )));
    }
    match body.get("skills") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) if list.is_empty() => agent["skills"] = json!([]),
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
        Some(Value::Null) => agent["execution_identity"] = json!({"type": "service_account"}),
        Some(v) if v["type"] == "service_account" => {
            agent["execution_identity"] = json!({"type": "service_account"});
        }
        Some(_) => {
            return Err(invalid(
                "execution_identity: only service_account (the gateway's own) is supported",
            ))
        }
    }
    if let Some(m) = body.get("metadata") {
        agent["metadata"] = match (m, current) {
            (Value::Null, _) => agent["metadata"].clone(),
            (m, Some(_)) => metadata(m, current.map(|c| &c["metadata"]), true)?,
            (m, None) => metadata(m, None, false)?,
        };
    }
    Ok(agent)
}

/// The fields of an agent that make a version (its id, version and times are not).
fn definition(agent: &Value) -> Value {
    let mut d = agent.clone();
    if let Value::Object(o) = &mut d {
        for k in [
            "id",
            "type",
            "version",
            "created_at",
            "updated_at",
            "archived_at",
        ] {
            o.remove(k);
        }
    }
    d
}

/// An environment's `config`, resolved (the local environment's), with what cannot apply here.
fn environment_config(
    value: Option<&Value>,
    current: Option<&Value>,
) -> Result<(Value, Vec<String>), Refusal> {
    let default = json!({"type": "cloud", "networking": {"type": "unrestricted"},
        "packages": {"type": "packages", "apt": [], "cargo": [], "gem": [], "go": [], "npm": [], "pip": []}});
    let mut config = current.cloned().unwrap_or(default);
    let Some(given) = value.filter(|v| !v.is_null()) else {
        return Ok((config, Vec::new()));
    };
    match given["type"].as_str() {
        Some("cloud") => {}
        Some("self_hosted") => {
            return Err(invalid(
                "config.type: self_hosted environments are not supported by this gateway (its environment is the local machine: use cloud)",
            ))
        }
        _ => return Err(invalid("config.type: cloud")),
    }
    let mut ignored = Vec::new();
    match &given["networking"] {
        Value::Null => {}
        n @ Value::Object(_) => {
            match n["type"].as_str() {
                Some("unrestricted") => {}
                Some("limited") => ignored.push("config.networking (limited)".to_owned()),
                _ => return Err(invalid("config.networking.type: unrestricted or limited")),
            }
            config["networking"] = n.clone();
        }
        _ => return Err(invalid("config.networking: must be an object")),
    }
    match &given["packages"] {
        Value::Null => {}
        Value::Object(p) => {
            for manager in ["apt", "cargo", "gem", "go", "npm", "pip"] {
                match p.get(manager) {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(list)) => {
                        if !list.is_empty() {
                            ignored.push(format!("config.packages.{manager}"));
                        }
                        config["packages"][manager] = Value::Array(list.clone());
                    }
                    Some(_) => {
                        return Err(invalid(format!(
                            "config.packages.{manager}: must be an array of strings"
                        )))
                    }
                }
            }
        }
        _ => return Err(invalid("config.packages: must be an object")),
    }
    Ok((config, ignored))
}

impl Managed {
    fn resources(&mut self, tenant: &str) -> &mut Resources {
        self.tenants.entry(tenant.to_owned()).or_default()
    }

    /// Whether `request` waits for its tenant's resources from the session store.
    pub(in crate::gateway::engine) fn is_loading(&self, request: RequestId) -> bool {
        self.loading.contains_key(&request)
    }
}

impl Gateway {
    /// A request to the Managed Agents API (its `route`), answered whole.
    pub(in crate::gateway::engine) fn handle_managed(
        &mut self,
        request: RequestId,
        route: ManagedRoute<'_>,
        head: &HttpHead<'_>,
        tenant: &str,
        body: &[u8],
    ) {
        if self.config.store && !self.managed.tenants.contains_key(tenant) {
            // Its resources are read first (once per tenant).
            self.managed.loading.insert(
                request,
                Parked {
                    tenant: tenant.to_owned(),
                    method: head.method.to_owned(),
                    path: head.path.to_owned(),
                    query: head.query.to_owned(),
                    body: body.to_vec(),
                },
            );
            self.outputs
                .push_back(GatewayOutput::Store(StoreAsk::LoadManaged {
                    request,
                    tenant: tenant_id(tenant),
                }));
            return;
        }
        let mut warnings = Vec::new();
        let mut kept = Vec::new();
        let answer = match route {
            ManagedRoute::Session(route) => self
                .handle_session(request, route, head, tenant, body, &mut warnings)
                .unwrap_or(Ok((0, Value::Null))),
            ManagedRoute::Resource(route) => {
                self.managed_answer(route, head, tenant, body, &mut warnings, &mut kept)
            }
        };
        // Kept before the answer ends (the host holds its end until they are).
        for change in kept.into_iter().filter(|_| self.config.store) {
            let json = change.json.map(|v| v.to_string());
            self.outputs
                .push_back(GatewayOutput::Store(StoreAsk::Managed {
                    request: Some(request),
                    tenant: tenant_id(tenant),
                    kind: change.kind.to_owned(),
                    id: change.id,
                    json,
                }));
        }
        let (status, value, mut headers) = match answer {
            // An event stream, kept open.
            Ok((0, _)) => return,
            Ok((status, value)) => (status, value, Vec::new()),
            Err(refusal) => {
                let (body, headers) = refusal.answer();
                (refusal.status, body, headers)
            }
        };
        headers.push(("content-type".to_owned(), "application/json".to_owned()));
        if !warnings.is_empty() {
            let why = match route {
                ManagedRoute::Session(_) => "do not run in this session",
                ManagedRoute::Resource(_) => {
                    "cannot apply to the local environment: kept, not applied"
                }
            };
            headers.push((
                "x-ccwire-warning".to_owned(),
                format!("{} {why}", warnings.join(", ")),
            ));
        }
        self.respond_whole(request, status, headers, value.to_string().into_bytes());
    }

    /// Notes resource `id` of `kind` as changed, for the session store: as kept, with the order
    /// it was made in.
    fn keep(&mut self, tenant: &str, kind: &'static str, id: &str, kept: &mut Vec<Kept>) {
        let mine = self.managed.resources(tenant);
        let json = match kind {
            "agent" => mine
                .agents
                .iter()
                .find(|(_, v)| v[0]["id"] == id)
                .map(|(order, v)| json!({"order": order, "data": v})),
            _ => mine
                .environments
                .iter()
                .find(|(_, e)| e["id"] == id)
                .map(|(order, e)| json!({"order": order, "data": e})),
        };
        kept.push(Kept {
            kind,
            id: id.to_owned(),
            json,
        });
    }

    /// A new resource id: `prefix` and 32 hex digits, unpredictable without the id key.
    fn managed_id(&mut self, prefix: &str) -> String {
        self.managed.next += 1;
        self.secret_id(prefix, self.managed.next)
    }

    /// The time now, as this API writes times (RFC 3339, UTC).
    pub(super) fn managed_now(&self) -> String {
        crate::gateway::translate::iso_time(self.config.unix_epoch_ms.saturating_add(self.now))
    }

    /// The session store's answer to a [`StoreAsk::LoadManaged`]: the tenant's
    /// resources as [`StoreAsk::Managed`] kept them (`kind`, `json`), or `None` when
    /// the store failed (the request gets a 503 that asks to retry shortly). The request
    /// waiting for them is then answered.
    pub(in crate::gateway::engine) fn store_managed_loaded(
        &mut self,
        now: Timestamp,
        request: RequestId,
        resources: Option<Vec<(String, String)>>,
    ) {
        self.now = now;
        let Some(parked) = self.managed.loading.remove(&request) else {
            return;
        };
        let Some(resources) = resources else {
            let refusal = Refusal {
                status: 503,
                kind: "api_error",
                message: "the session store that keeps this API's resources is unavailable; retry shortly".to_owned(),
                code: None,
            };
            let (body, mut headers) = refusal.answer();
            headers.push(("content-type".to_owned(), "application/json".to_owned()));
            let body = body.to_string().into_bytes();
            return self.respond_whole(request, refusal.status, headers, body);
        };
        if !self.managed.tenants.contains_key(&parked.tenant) {
            let mut mine = Resources::default();
            let mut sessions = Vec::new();
            for (kind, json) in resources {
                let Ok(Value::Object(kept)) = serde_json::from_str::<Value>(&json) else {
                    continue;
                };
                let order = kept.get("order").and_then(Value::as_u64).unwrap_or(0);
                match (kind.as_str(), kept.get("data")) {
                    ("agent", Some(Value::Array(versions))) if !versions.is_empty() => {
                        mine.agents.push((order, versions.clone()));
                    }
                    ("environment", Some(e @ Value::Object(_))) => {
                        mine.environments.push((order, e.clone()));
                    }
                    ("session", Some(data @ Value::Object(_))) => {
                        sessions.push((order, data.clone()));
                    }
                    _ => {}
                }
            }
            mine.agents.sort_by_key(|(order, _)| *order);
            mine.environments.sort_by_key(|(order, _)| *order);
            self.managed.tenants.insert(parked.tenant.clone(), mine);
            sessions.sort_by_key(|(order, _)| *order);
            for (order, data) in sessions {
                self.restore_session(&parked.tenant, order, data);
            }
        }
        let head = HttpHead {
            method: &parked.method,
            path: &parked.path,
            query: &parked.query,
            headers: &[],
        };
        // (The path was a route of this API when the request was parked.)
        if let Some(route) = ManagedRoute::parse(&parked.path) {
            self.handle_managed(request, route, &head, &parked.tenant, &parked.body);
        }
    }

    /// Forgets what this gateway read of `tenant`'s (the API key's) Managed Agents resources:
    /// its next request reads them from the session store again (a host whose gateway takes
    /// over a tenant another gateway served).
    pub fn forget_managed(&mut self, tenant: &str) {
        self.managed.tenants.remove(tenant);
        self.forget_sessions(tenant);
    }

    /// The order of a resource made now: its creation time, then a counter.
    pub(super) fn managed_order(&mut self) -> u64 {
        let wall = self.config.unix_epoch_ms.saturating_add(self.now);
        wall.saturating_mul(1000) + self.managed.next % 1000
    }

    fn managed_answer(
        &mut self,
        route: Route<'_>,
        head: &HttpHead<'_>,
        tenant: &str,
        body: &[u8],
        warnings: &mut Vec<String>,
        kept: &mut Vec<Kept>,
    ) -> Result<(u16, Value), Refusal> {
        let params = query(head.query);
        let object = || json_object(body);
        let now = self.managed_now();
        let archived = param(&params, "include_archived") == Some("true");
        match (head.method, route) {
            ("POST", Route::Agents) => {
                let body = object()?;
                let mut agent = agent_fields(&body, None)?;
                let id = self.managed_id("agent_");
                agent["id"] = json!(id);
                agent["type"] = json!("agent");
                agent["version"] = json!(1);
                agent["created_at"] = json!(now);
                agent["updated_at"] = json!(now);
                agent["archived_at"] = Value::Null;
                let order = self.managed_order();
                self.managed
                    .resources(tenant)
                    .agents
                    .push((order, vec![agent.clone()]));
                self.keep(tenant, "agent", &id, kept);
                Ok((200, agent))
            }
            ("GET", Route::Agents) => {
                let (gte, lte) = (
                    param(&params, "created_at[gte]").map(normalize_time),
                    param(&params, "created_at[lte]").map(normalize_time),
                );
                let items: Vec<Value> = self
                    .managed
                    .resources(tenant)
                    .agents
                    .iter()
                    .rev()
                    .filter_map(|(_, v)| v.last())
                    .filter(|a| archived || a["archived_at"].is_null())
                    .filter(|a| {
                        let at = a["created_at"].as_str().unwrap_or_default();
                        gte.as_deref().is_none_or(|g| at >= g)
                            && lte.as_deref().is_none_or(|l| at <= l)
                    })
                    .cloned()
                    .collect();
                Ok((200, page(items, &params, 100)?))
            }
            ("GET", Route::Agent(id)) => {
                let versions = self.agent_versions(tenant, id)?;
                match param(&params, "version") {
                    None => Ok((200, versions.last().cloned().unwrap_or_default())),
                    Some(v) => {
                        let n: usize = v
                            .parse()
                            .map_err(|_| invalid("version: a positive integer"))?;
                        match n.checked_sub(1).and_then(|i| versions.get(i)) {
                            Some(agent) => Ok((200, agent.clone())),
                            None => Err(not_found(&format!("agent {id} version"), v)),
                        }
                    }
                }
            }
            ("POST", Route::Agent(id)) => {
                let body = object()?;
                let versions = self.agent_versions(tenant, id)?;
                let current = versions.last().cloned().unwrap_or_default();
                if !current["archived_at"].is_null() {
                    return Err(invalid(format!("agent {id} is archived")));
                }
                let version = current["version"].as_u64().unwrap_or(1);
                match body.get("version") {
                    None | Some(Value::Null) => {}
                    Some(v) if v.as_u64() == Some(version) => {}
                    Some(v) => {
                        return Err(Refusal {
                            status: 409,
                            kind: "conflict_error",
                            message: format!(
                                "agent {id} is at version {version}, not {v}: read it again"
                            ),
                            code: None,
                        })
                    }
                }
                let updated = agent_fields(&body, Some(&current))?;
                if definition(&updated) == definition(&current) {
                    return Ok((200, current));
                }
                let mut next = updated;
                next["version"] = json!(version + 1);
                next["updated_at"] = json!(now);
                let versions = self.agent_versions_mut(tenant, id)?;
                versions.push(next.clone());
                self.keep(tenant, "agent", id, kept);
                Ok((200, next))
            }
            ("POST", Route::AgentArchive(id)) => {
                let versions = self.agent_versions_mut(tenant, id)?;
                let agent = versions.last_mut().expect("an agent has a version");
                if !agent["archived_at"].is_null() {
                    return Ok((200, agent.clone()));
                }
                agent["archived_at"] = json!(now);
                let agent = agent.clone();
                self.keep(tenant, "agent", id, kept);
                Ok((200, agent))
            }
            ("GET", Route::AgentVersions(id)) => {
                let items: Vec<Value> = self
                    .agent_versions(tenant, id)?
                    .iter()
                    .rev()
                    .cloned()
                    .collect();
                Ok((200, page(items, &params, 100)?))
            }
            ("POST", Route::Environments) => {
                let body = object()?;
                let Some(Value::String(name)) = body
                    .get("name")
                    .filter(|n| n.as_str().is_some_and(|s| !s.is_empty()))
                else {
                    return Err(invalid("name: required, a non-empty string"));
                };
                let (config, ignored) = environment_config(body.get("config"), None)?;
                warnings.extend(ignored);
                let description = string_or_null(&body, "description")?.unwrap_or(Value::Null);
                let metadata = match body.get("metadata") {
                    None | Some(Value::Null) => json!({}),
                    Some(m) => metadata(m, None, false)?,
                };
                let scope = match body.get("scope") {
                    None | Some(Value::Null) => json!("organization"),
                    Some(v) if v == "organization" => v.clone(),
                    Some(_) => return Err(invalid("scope: organization")),
                };
                let id = self.managed_id("env_");
                let environment = json!({"id": id, "type": "environment", "name": name,
                    "description": description, "config": config, "metadata": metadata,
                    "scope": scope, "created_at": now, "updated_at": now, "archived_at": null});
                let order = self.managed_order();
                self.managed
                    .resources(tenant)
                    .environments
                    .push((order, environment.clone()));
                self.keep(tenant, "environment", &id, kept);
                Ok((200, environment))
            }
            ("GET", Route::Environments) => {
                let items: Vec<Value> = self
                    .managed
                    .resources(tenant)
                    .environments
                    .iter()
                    .rev()
                    .map(|(_, e)| e)
                    .filter(|e| archived || e["archived_at"].is_null())
                    .cloned()
                    .collect();
                Ok((200, page(items, &params, 100)?))
            }
            ("GET", Route::Environment(id)) => {
                let environment = self.environment(tenant, id)?;
                Ok((200, environment.clone()))
            }
            ("POST", Route::Environment(id)) => {
                let body = object()?;
                let environment = self.environment(tenant, id)?.clone();
                if !environment["archived_at"].is_null() {
                    return Err(Refusal {
                        code: Some("environment_archived"),
                        ..invalid(format!("environment {id} is archived"))
                    });
                }
                let mut next = environment.clone();
                if let Some(given) = body.get("config").filter(|c| !c.is_null()) {
                    if given["type"].is_string() && given["type"] != environment["config"]["type"] {
                        return Err(Refusal {
                            code: Some("invalid_config_type_change"),
                            ..invalid("config.type: an environment's config type cannot change")
                        });
                    }
                    let (config, ignored) =
                        environment_config(Some(given), Some(&environment["config"]))?;
                    warnings.extend(ignored);
                    next["config"] = config;
                }
                match body.get("name") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(n)) if !n.is_empty() => next["name"] = json!(n),
                    Some(_) => return Err(invalid("name: a non-empty string")),
                }
                if let Some(d) = string_or_null(&body, "description")? {
                    next["description"] = d;
                }
                if let Some(m) = body.get("metadata").filter(|m| !m.is_null()) {
                    next["metadata"] = metadata(m, Some(&environment["metadata"]), true)?;
                }
                match body.get("scope") {
                    None | Some(Value::Null) => {}
                    Some(v) if v == "organization" => {}
                    Some(_) => return Err(invalid("scope: organization")),
                }
                if next != environment {
                    next["updated_at"] = json!(now);
                    *self.environment_mut(tenant, id)? = next.clone();
                    self.keep(tenant, "environment", id, kept);
                }
                Ok((200, next))
            }
            ("DELETE", Route::Environment(id)) => {
                self.environment(tenant, id)?;
                self.managed
                    .resources(tenant)
                    .environments
                    .retain(|(_, e)| e["id"] != id);
                kept.push(Kept {
                    kind: "environment",
                    id: id.to_owned(),
                    json: None,
                });
                Ok((200, json!({"id": id, "type": "environment_deleted"})))
            }
            ("POST", Route::EnvironmentArchive(id)) => {
                let environment = self.environment_mut(tenant, id)?;
                if !environment["archived_at"].is_null() {
                    return Ok((200, environment.clone()));
                }
                environment["archived_at"] = json!(now);
                let environment = environment.clone();
                self.keep(tenant, "environment", id, kept);
                Ok((200, environment))
            }
            (method, _) => Err(Refusal {
                status: 405,
                kind: "invalid_request_error",
                message: format!("{} does not take {method}", head.path),
                code: None,
            }),
        }
    }

    /// An agent of `tenant`: its latest version, or `version`.
    pub(super) fn managed_agent(
        &mut self,
        tenant: &str,
        id: &str,
        version: Option<u64>,
    ) -> Result<Value, Refusal> {
        let versions = self.agent_versions(tenant, id)?;
        match version {
            None => Ok(versions.last().cloned().unwrap_or_default()),
            Some(n) => n
                .checked_sub(1)
                .and_then(|i| versions.get(i as usize))
                .cloned()
                .ok_or_else(|| not_found(&format!("agent {id} version"), &n.to_string())),
        }
    }

    /// An environment of `tenant`.
    pub(super) fn managed_environment(&mut self, tenant: &str, id: &str) -> Result<Value, Refusal> {
        self.environment(tenant, id).cloned()
    }

    fn agent_versions(&mut self, tenant: &str, id: &str) -> Result<&Vec<Value>, Refusal> {
        self.managed
            .resources(tenant)
            .agents
            .iter()
            .find(|(_, v)| v[0]["id"] == id)
            .map(|(_, v)| v)
            .ok_or_else(|| not_found("agent", id))
    }

    fn agent_versions_mut(&mut self, tenant: &str, id: &str) -> Result<&mut Vec<Value>, Refusal> {
        self.managed
            .resources(tenant)
            .agents
            .iter_mut()
            .find(|(_, v)| v[0]["id"] == id)
            .map(|(_, v)| v)
            .ok_or_else(|| not_found("agent", id))
    }

    fn environment(&mut self, tenant: &str, id: &str) -> Result<&Value, Refusal> {
        self.managed
            .resources(tenant)
            .environments
            .iter()
            .map(|(_, e)| e)
            .find(|e| e["id"] == id)
            .ok_or_else(|| Refusal {
                code: Some("environment_not_found"),
                ..not_found("environment", id)
            })
    }

    fn environment_mut(&mut self, tenant: &str, id: &str) -> Result<&mut Value, Refusal> {
        self.managed
            .resources(tenant)
            .environments
            .iter_mut()
            .map(|(_, e)| e)
            .find(|e| e["id"] == id)
            .ok_or_else(|| Refusal {
                code: Some("environment_not_found"),
                ..not_found("environment", id)
            })
    }
}

/// A time a client gives in a filter, as comparable with the times this API writes (RFC 3339
/// in UTC): an offset of `+00:00` is written `Z`; other forms are compared as given.
fn normalize_time(given: &str) -> String {
    let t = given.replace(' ', "+");
    match t.strip_suffix("+00:00") {
        Some(utc) => format!("{utc}Z"),
        None => t,
    }
}

#[cfg(test)]
mod tests {
    use super::query;

    #[test]
    fn a_query_is_decoded_and_brackets_dropped() {
        assert_eq!(
            query("limit=2&statuses[]=idle&statuses%5B%5D=running&created_at%5Bgte%5D=2026-01-01T00%3A00%3A00%2B00%3A00"),
            [
                ("limit".into(), "2".into()),
                ("statuses".into(), "idle".into()),
                ("statuses".into(), "running".into()),
                ("created_at[gte]".into(), "2026-01-01T00:00:00+00:00".into()),
            ]
        );
    }
}

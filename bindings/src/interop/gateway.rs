//! The `Gateway`'s options and deadline, and the options of `claudeArgs` (`ccwire/node`).

use ccwire_core::gateway::{GatewayConfig, GatewayTimeout};
use ccwire_core::Timestamp;
use serde::Deserialize;

use wasm_bindgen::JsError;

use super::parse;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GatewayOptions {
    held_call_timeout_ms: Option<u64>,
    idle_ttl_ms: Option<u64>,
    max_stored_responses: Option<usize>,
    max_sessions: Option<usize>,
    enabled_tools: Option<Vec<String>>,
    default_model: Option<String>,
    ping_every_ms: Option<u64>,
    settle_grace_ms: Option<u64>,
    start_timeout_ms: Option<u64>,
    seed: Option<u64>,
    id_key: Option<String>,
    unix_epoch_ms: Option<u64>,
    publish_index: Option<bool>,
    max_concurrent: Option<usize>,
    max_concurrent_per_key: Option<usize>,
    max_sessions_per_key: Option<usize>,
    max_queue: Option<usize>,
    queue_timeout_ms: Option<u64>,
    pool: Option<usize>,
    approvals: Option<bool>,
    approval_timeout_ms: Option<u64>,
    tenant_root: Option<String>,
    shared_cwd: Option<String>,
    setting_sources: Option<Vec<String>>,
}

/// Reads the `Gateway` options: `{heldCallTimeoutMs, idleTtlMs, maxStoredResponses,
/// maxSessions, enabledTools, defaultModel, pingEveryMs, settleGraceMs, startTimeoutMs, seed,
/// idKey (64 hex digits; else the ids come from the seed), unixEpochMs, publishIndex, maxConcurrent, maxConcurrentPerKey, maxQueue, queueTimeoutMs,
/// pool, approvals, approvalTimeoutMs, tenantRoot, sharedCwd, settingSources}`, each optional.
pub fn endpoint_config(text: &str) -> Result<GatewayConfig, JsError> {
    let o: GatewayOptions = parse("Gateway options", text)?;
    let mut c = GatewayConfig::default();
    let set = |field: &mut u64, value: Option<u64>| {
        if let Some(v) = value {
            *field = v;
        }
    };
    set(&mut c.limits.held_call_timeout_ms, o.held_call_timeout_ms);
    set(&mut c.limits.idle_ttl_ms, o.idle_ttl_ms);
    set(&mut c.ping_every_ms, o.ping_every_ms);
    set(&mut c.settle_grace_ms, o.settle_grace_ms);
    set(&mut c.start_timeout_ms, o.start_timeout_ms);
    set(&mut c.seed, o.seed);
    c.id_key = match o.id_key {
        Some(hex) => id_key(&hex)?,
        None => GatewayConfig::id_key_from_seed(c.seed),
    };
    set(&mut c.unix_epoch_ms, o.unix_epoch_ms);
    if let Some(n) = o.max_stored_responses {
        c.limits.max_stored_responses = n;
    }
    if let Some(n) = o.max_sessions {
        c.max_sessions = n;
    }
    if let Some(tools) = o.enabled_tools {
        c.enabled_tools = tools;
    }
    c.default_model = o.default_model;
    c.publish_index = o.publish_index.unwrap_or(false);
    set(&mut c.queue_timeout_ms, o.queue_timeout_ms);
    set(&mut c.approval_timeout_ms, o.approval_timeout_ms);
    c.max_concurrent = o.max_concurrent.unwrap_or(c.max_concurrent);
    c.max_concurrent_per_key = o.max_concurrent_per_key.unwrap_or(c.max_concurrent_per_key);
    c.max_sessions_per_key = o.max_sessions_per_key.unwrap_or(c.max_sessions_per_key);
    c.max_queue = o.max_queue.unwrap_or(c.max_queue);
    c.pool = o.pool.unwrap_or(c.pool);
    c.approvals = o.approvals.unwrap_or(false);
    c.tenant_root = o.tenant_root;
    c.shared_cwd = o.shared_cwd;
    c.setting_sources = o.setting_sources.unwrap_or_default();
    Ok(c)
}

/// The `idKey` option: 32 bytes as 64 hex digits.
fn id_key(hex: &str) -> Result<[u8; 32], JsError> {
    let bad = || JsError::new("Gateway options: idKey must be 64 hex digits (32 random bytes)");
    if hex.len() != 64 || !hex.is_ascii() {
        return Err(bad());
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(key)
}

/// The gateway's next deadline as `{"atMs", "reason"}` (the reason in words), or `null`.
pub fn endpoint_deadline(next: Option<(Timestamp, GatewayTimeout)>) -> String {
    let Some((at, reason)) = next else {
        return "null".to_owned();
    };
    serde_json::json!({"atMs": at, "reason": reason.to_string()}).to_string()
}

/// Reads the options of `claudeArgs` (`ccwire/node`): `{systemPrompt: string | {append},
/// model, maxTurns, tools, allowedTools, disallowedTools, permissionMode, permissionPrompts,
/// sdkMcpServers: [name], mcpServers: {name: config}, strictMcpConfig, settings: string |
/// object, settingSources, addDirs, fallbackModel, betas, maxBudgetUsd, thinking: "adaptive" |
/// "disabled" | {budgetTokens}, effort, agents, includePartialMessages, resume, continue,
/// forkSession, sessionId, sessionMirror, extraArgs}`. Other fields (a client's own) are left alone; an empty string or
/// a false value is an option not given, as JavaScript reads it.
///
/// # Errors
/// Options that are not an object, or a field of the wrong type (named).
#[cfg(feature = "conversation")]
pub fn cli_args(options: &str) -> Result<ccwire_core::args::CliArgs, String> {
    use ccwire_core::args::{CliArgs, SystemPrompt, Thinking};
    use serde_json::{Map, Value};
    let value: Value = serde_json::from_str(options).map_err(|e| e.to_string())?;
    let Value::Object(o) = value else {
        return Err("options must be an object".into());
    };
    let absent = |v: &&Value| !matches!(v, Value::Null | Value::Bool(false)) && *v != "";
    let get = |name: &str| o.get(name).filter(absent);
    let text = |name: &str| -> Result<Option<String>, String> {
        match get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("{name} must be a string")),
        }
    };
    let list = |name: &str| -> Result<Vec<String>, String> {
        match get(name) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| format!("{name} must be an array of strings")),
            Some(_) => Err(format!("{name} must be an array of strings")),
        }
    };
    let flag = |name: &str| get(name).is_some_and(|v| *v == Value::Bool(true));
    let system_prompt = match o.get("systemPrompt") {
        None | Some(Value::Null) => SystemPrompt::Preset,
        Some(Value::String(p)) => SystemPrompt::Custom(p.clone()),
        Some(Value::Object(p)) => match p.get("append") {
            Some(Value::String(a)) => SystemPrompt::Append(a.clone()),
            _ => return Err("systemPrompt must be a string or {append: string}".into()),
        },
        Some(_) => return Err("systemPrompt must be a string or {append: string}".into()),
    };
    let thinking = match get("thinking") {
        None => None,
        Some(Value::String(t)) if t == "adaptive" => Some(Thinking::Adaptive),
        Some(Value::String(t)) if t == "disabled" => Some(Thinking::Disabled),
        Some(Value::Object(t)) => match t.get("budgetTokens").and_then(Value::as_u64) {
            Some(n) => Some(Thinking::Budget(n)),
            None => return Err("thinking.budgetTokens must be a whole number".into()),
        },
        Some(_) => {
            return Err(r#"thinking must be "adaptive", "disabled" or {budgetTokens}"#.into())
        }
    };
    let mcp_servers = match get("mcpServers") {
        None => Vec::new(),
        Some(Value::Object(servers)) => servers
            .iter()
            .map(|(n, c)| (n.clone(), c.clone()))
            .collect(),
        Some(_) => return Err("mcpServers must be an object of server configs".into()),
    };
    let settings = match get("settings") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    };
    let number = |name: &str| -> Result<Option<f64>, String> {
        match o.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| format!("{name} must be a number")),
        }
    };
    Ok(CliArgs {
        system_prompt,
        model: text("model")?,
        max_turns: number("maxTurns")?
            .filter(|n| *n > 0.0)
            .map_or(0, |n| n as u32),
        tools: match o.get("tools") {
            None | Some(Value::Null) => None,
            Some(_) => Some(list("tools")?),
        },
        allowed_tools: list("allowedTools")?,
        disallowed_tools: list("disallowedTools")?,
        permission_mode: text("permissionMode")?,
        permission_prompts: flag("permissionPrompts"),
        sdk_mcp_servers: list("sdkMcpServers")?
            .into_iter()
            .map(|name| (name, Map::new()))
            .collect(),
        mcp_servers,
        strict_mcp_config: flag("strictMcpConfig"),
        settings,
        setting_sources: list("settingSources")?,
        fallback_model: text("fallbackModel")?,
        betas: list("betas")?,
        max_budget_usd: number("maxBudgetUsd")?,
        thinking,
        effort: text("effort")?,
        agents: get("agents").cloned(),
        json_schema: match get("jsonSchema") {
            None => None,
            Some(schema @ Value::Object(_)) => Some(schema.clone()),
            Some(_) => return Err("jsonSchema must be a JSON Schema object".into()),
        },
        include_partial_messages: flag("includePartialMessages"),
        resume: text("resume")?,
        continue_conversation: flag("continue"),
        fork_session: flag("forkSession"),
        session_id: text("sessionId")?,
        session_mirror: flag("sessionMirror"),
        add_dirs: list("addDirs")?,
        extra_args: match o.get("extraArgs") {
            None | Some(Value::Null) => Vec::new(),
            Some(_) => list("extraArgs")?,
        },
    })
}

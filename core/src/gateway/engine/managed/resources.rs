//! The Managed Agents API's resources, agents and environments, per tenant: kept in memory,
//! read from the session store at a tenant's first request and written back as they change;
//! the requests of their routes answered.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::agents::{agent_fields, Agent, AgentSnapshot};
use super::api::*;
use super::environments::{self, Environment};
use super::{ResourceRoute as Route, Route as ManagedRoute};
use crate::gateway::engine::{tenant_id, Gateway, GatewayOutput, HttpHead, RequestId, StoreAsk};
use crate::Timestamp;

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
    agents: Vec<(u64, Vec<Agent>)>,
    environments: Vec<(u64, Environment)>,
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

/// The API's JSON of a resource.
fn shown(resource: &impl serde::Serialize) -> Value {
    serde_json::to_value(resource).unwrap_or_default()
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
        let mark = self.outputs.len();
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
        // Its answer ends once the store keeps what it changed.
        let waiting = (self.outputs.range(mark..))
            .filter(|o| {
                matches!(o, GatewayOutput::Store(StoreAsk::Managed { request: Some(r), .. })
                         if *r == request)
            })
            .count();
        if waiting > 0 {
            self.hold_change(request, mark, waiting, None);
        }
    }

    /// Notes resource `id` of `kind` as changed, for the session store: as kept, with the order
    /// it was made in.
    fn keep(&mut self, tenant: &str, kind: &'static str, id: &str, kept: &mut Vec<Kept>) {
        let mine = self.managed.resources(tenant);
        let json = match kind {
            "agent" => (mine.agents.iter())
                .find(|(_, v)| v[0].snapshot.id == id)
                .map(|(order, v)| json!({"order": order, "data": v})),
            _ => (mine.environments.iter())
                .find(|(_, e)| e.id == id)
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
        crate::gateway::written::iso_time(self.config.unix_epoch_ms.saturating_add(self.now))
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
                // A record that does not read as its kind is passed over.
                let Ok(Value::Object(mut kept)) = serde_json::from_str::<Value>(&json) else {
                    continue;
                };
                let order = kept.get("order").and_then(Value::as_u64).unwrap_or(0);
                let data = kept.remove("data").unwrap_or_default();
                match kind.as_str() {
                    "agent" => match serde_json::from_value::<Vec<Agent>>(data) {
                        Ok(versions) if !versions.is_empty() => {
                            mine.agents.push((order, versions));
                        }
                        _ => {}
                    },
                    "environment" => {
                        if let Ok(e) = serde_json::from_value::<Environment>(data) {
                            mine.environments.push((order, e));
                        }
                    }
                    "session" => sessions.push((order, data)),
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
                let (definition, metadata) = agent_fields(&object()?, None)?;
                let id = self.managed_id("agent_");
                let agent = Agent {
                    snapshot: AgentSnapshot {
                        definition,
                        id: id.clone(),
                        kind: "agent".to_owned(),
                        version: 1,
                    },
                    archived_at: None,
                    created_at: now.clone(),
                    metadata,
                    updated_at: now,
                };
                let order = self.managed_order();
                let shown = shown(&agent);
                (self.managed.resources(tenant).agents).push((order, vec![agent]));
                self.keep(tenant, "agent", &id, kept);
                Ok((200, shown))
            }
            ("GET", Route::Agents) => {
                let (gte, lte) = (
                    param(&params, "created_at[gte]").map(normalize_time),
                    param(&params, "created_at[lte]").map(normalize_time),
                );
                let items: Vec<Value> = (self.managed.resources(tenant).agents.iter())
                    .rev()
                    .filter_map(|(_, v)| v.last())
                    .filter(|a| archived || a.archived_at.is_none())
                    .filter(|a| {
                        let at = a.created_at.as_str();
                        gte.as_deref().is_none_or(|g| at >= g)
                            && lte.as_deref().is_none_or(|l| at <= l)
                    })
                    .map(shown)
                    .collect();
                Ok((200, page(items, &params, 100)?))
            }
            ("GET", Route::Agent(id)) => {
                let version = match param(&params, "version") {
                    None => None,
                    Some(v) => Some(
                        v.parse::<u64>()
                            .map_err(|_| invalid("version: a positive integer"))?,
                    ),
                };
                Ok((200, shown(&self.managed_agent(tenant, id, version)?)))
            }
            ("POST", Route::Agent(id)) => {
                let body = object()?;
                let current = self.managed_agent(tenant, id, None)?;
                if current.archived_at.is_some() {
                    return Err(invalid(format!("agent {id} is archived")));
                }
                let version = current.snapshot.version;
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
                let (definition, metadata) = agent_fields(&body, Some(&current))?;
                if definition == current.snapshot.definition && metadata == current.metadata {
                    return Ok((200, shown(&current)));
                }
                let mut next = current;
                next.snapshot.definition = definition;
                next.metadata = metadata;
                next.snapshot.version = version + 1;
                next.updated_at = now;
                let shown = shown(&next);
                self.agent_versions_mut(tenant, id)?.push(next);
                self.keep(tenant, "agent", id, kept);
                Ok((200, shown))
            }
            ("POST", Route::AgentArchive(id)) => {
                let versions = self.agent_versions_mut(tenant, id)?;
                let agent = versions.last_mut().expect("an agent has a version");
                if agent.archived_at.is_some() {
                    return Ok((200, shown(agent)));
                }
                agent.archived_at = Some(now);
                let shown = shown(agent);
                self.keep(tenant, "agent", id, kept);
                Ok((200, shown))
            }
            ("GET", Route::AgentVersions(id)) => {
                let versions = self.agent_versions_mut(tenant, id)?;
                let items: Vec<Value> = versions.iter().rev().map(shown).collect();
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
                let (config, ignored) = environments::config(body.get("config"), None)?;
                warnings.extend(ignored);
                let description = string_or_null(&body, "description")?.flatten();
                let metadata = match body.get("metadata") {
                    None | Some(Value::Null) => Default::default(),
                    Some(m) => metadata(m, None, false)?,
                };
                match body.get("scope") {
                    None | Some(Value::Null) => {}
                    Some(v) if v == "organization" => {}
                    Some(_) => return Err(invalid("scope: organization")),
                }
                let id = self.managed_id("env_");
                let environment = Environment {
                    archived_at: None,
                    config,
                    created_at: now.clone(),
                    description,
                    id: id.clone(),
                    metadata,
                    name: name.clone(),
                    scope: "organization".to_owned(),
                    kind: "environment".to_owned(),
                    updated_at: now,
                };
                let order = self.managed_order();
                let shown = shown(&environment);
                (self.managed.resources(tenant).environments).push((order, environment));
                self.keep(tenant, "environment", &id, kept);
                Ok((200, shown))
            }
            ("GET", Route::Environments) => {
                let items: Vec<Value> = (self.managed.resources(tenant).environments.iter())
                    .rev()
                    .map(|(_, e)| e)
                    .filter(|e| archived || e.archived_at.is_none())
                    .map(shown)
                    .collect();
                Ok((200, page(items, &params, 100)?))
            }
            ("GET", Route::Environment(id)) => Ok((200, shown(self.environment_mut(tenant, id)?))),
            ("POST", Route::Environment(id)) => {
                let body = object()?;
                let environment = self.environment_mut(tenant, id)?.clone();
                if environment.archived_at.is_some() {
                    return Err(Refusal {
                        code: Some("environment_archived"),
                        ..invalid(format!("environment {id} is archived"))
                    });
                }
                let mut next = environment.clone();
                if let Some(given) = body.get("config").filter(|c| !c.is_null()) {
                    if given["type"]
                        .as_str()
                        .is_some_and(|t| t != environment.config.kind)
                    {
                        return Err(Refusal {
                            code: Some("invalid_config_type_change"),
                            ..invalid("config.type: an environment's config type cannot change")
                        });
                    }
                    let (config, ignored) =
                        environments::config(Some(given), Some(&environment.config))?;
                    warnings.extend(ignored);
                    next.config = config;
                }
                match body.get("name") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(n)) if !n.is_empty() => next.name = n.clone(),
                    Some(_) => return Err(invalid("name: a non-empty string")),
                }
                if let Some(d) = string_or_null(&body, "description")? {
                    next.description = d;
                }
                if let Some(m) = body.get("metadata").filter(|m| !m.is_null()) {
                    next.metadata = metadata(m, Some(&environment.metadata), true)?;
                }
                match body.get("scope") {
                    None | Some(Value::Null) => {}
                    Some(v) if v == "organization" => {}
                    Some(_) => return Err(invalid("scope: organization")),
                }
                if next != environment {
                    next.updated_at = now;
                    *self.environment_mut(tenant, id)? = next.clone();
                    self.keep(tenant, "environment", id, kept);
                }
                Ok((200, shown(&next)))
            }
            ("DELETE", Route::Environment(id)) => {
                self.environment_mut(tenant, id)?;
                (self.managed.resources(tenant).environments).retain(|(_, e)| e.id != id);
                kept.push(Kept {
                    kind: "environment",
                    id: id.to_owned(),
                    json: None,
                });
                Ok((200, json!({"id": id, "type": "environment_deleted"})))
            }
            ("POST", Route::EnvironmentArchive(id)) => {
                let environment = self.environment_mut(tenant, id)?;
                if environment.archived_at.is_some() {
                    return Ok((200, shown(environment)));
                }
                environment.archived_at = Some(now);
                let shown = shown(environment);
                self.keep(tenant, "environment", id, kept);
                Ok((200, shown))
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
    ) -> Result<Agent, Refusal> {
        let versions = self.agent_versions_mut(tenant, id)?;
        match version {
            None => Ok(versions.last().cloned().expect("an agent has a version")),
            Some(n) => n
                .checked_sub(1)
                .and_then(|i| versions.get(usize::try_from(i).ok()?))
                .cloned()
                .ok_or_else(|| not_found(&format!("agent {id} version"), &n.to_string())),
        }
    }

    /// An environment of `tenant`.
    pub(super) fn managed_environment(
        &mut self,
        tenant: &str,
        id: &str,
    ) -> Result<Environment, Refusal> {
        self.environment_mut(tenant, id).map(|e| e.clone())
    }

    /// The versions of agent `id` of `tenant`, oldest first.
    fn agent_versions_mut(&mut self, tenant: &str, id: &str) -> Result<&mut Vec<Agent>, Refusal> {
        (self.managed.resources(tenant).agents.iter_mut())
            .find(|(_, v)| v[0].snapshot.id == id)
            .map(|(_, v)| v)
            .ok_or_else(|| not_found("agent", id))
    }

    /// Environment `id` of `tenant`.
    fn environment_mut(&mut self, tenant: &str, id: &str) -> Result<&mut Environment, Refusal> {
        (self.managed.resources(tenant).environments.iter_mut())
            .map(|(_, e)| e)
            .find(|e| e.id == id)
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

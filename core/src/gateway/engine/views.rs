//! What the gateway shows of itself, changing nothing: counts, metrics, models, a request's
//! route key.

use super::*;

impl Gateway {
    /// Live CLI sessions.
    pub fn session_count(&self) -> usize {
        self.lives.len()
    }

    /// Client tool calls held open, over all sessions.
    pub fn held_count(&self) -> usize {
        self.registry.held_count()
    }

    /// The live conversations of `tenant` (an API key) and the client tool calls they hold.
    pub fn tenant_counts(&self, tenant: &str) -> (usize, usize) {
        let mine = self.lives.iter().filter(|(_, live)| live.tenant == tenant);
        mine.fold((0, 0), |(sessions, held), (id, _)| {
            (sessions + 1, held + self.registry.held_in(*id))
        })
    }

    /// CLIs started ahead of need, waiting for a conversation.
    pub fn pool_count(&self) -> usize {
        self.pool.len()
    }

    /// Responses in flight.
    pub fn request_count(&self) -> usize {
        self.requests.len()
    }

    /// The ids of live sessions, in order.
    pub fn cli_sessions(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.lives.keys().copied()
    }

    /// Whether a request waits for the session store to find its conversation or a stored
    /// response it continues ([`StoreAsk::Find`],
    /// [`StoreAsk::FindResponse`]).
    pub fn is_finding(&self, request: RequestId) -> bool {
        self.finding.contains_key(&request) || self.fetching.contains_key(&request)
    }

    /// Whether the gateway still holds `request` open: a response in flight, a lookup, an
    /// event stream (approvals, a session's). A host whose client went away from such a
    /// request says so ([`handle_client_gone`](Self::handle_client_gone)).
    pub fn holds(&self, request: RequestId) -> bool {
        self.requests.contains_key(&request)
            || self.is_finding(request)
            || self.watchers.contains_key(&request)
            || self.console_waiting.contains_key(&request)
            || self.metering.is_waiting(request)
            || self.managed.is_loading(request)
    }

    /// The session a request's response comes from, while it is in flight.
    pub fn request_session(&self, request: RequestId) -> Option<SessionId> {
        self.requests.get(&request).map(|r| r.session)
    }

    /// The time now as Unix ms.
    pub(super) fn wall_ms(&self) -> u64 {
        self.config.unix_epoch_ms.saturating_add(self.now)
    }

    /// Counts for the gateway and for `tenant`.
    pub(super) fn count(&mut self, tenant: &str, f: impl Fn(&mut Metrics)) {
        f(&mut self.metrics);
        if !self.tenant_metrics.contains_key(tenant) {
            self.tenant_metrics
                .insert(tenant.to_owned(), Metrics::default());
        }
        f(self.tenant_metrics.get_mut(tenant).expect("inserted above"));
    }

    /// `GET /metrics` with a tenant's key: the series of its own requests (responses, turns,
    /// tokens, latencies, clients gone) and its own sessions, responses, queued requests and
    /// approvals; nothing of other tenants or of the gateway's processes.
    pub fn tenant_metrics(&self, tenant: &str) -> String {
        let empty = Metrics::default();
        let mine = self.tenant_metrics.get(tenant).unwrap_or(&empty);
        let sessions = self.lives.values().filter(|l| l.tenant == tenant).count();
        let text = mine.render_tenant(&Gauges {
            sessions,
            starting: 0,
            pooled: 0,
            pool_ready: 0,
            held: 0,
            in_flight: self
                .requests
                .values()
                .filter(|r| r.tenant == tenant)
                .count(),
            queued: self.queue.iter().filter(|q| q.tenant == tenant).count(),
            stored: 0,
            approvals: self
                .approvals
                .values()
                .filter(|a| a.tenant == tenant)
                .count(),
        });
        self.labelled(text)
    }

    /// Metrics text with this gateway's [`node`](GatewayConfig::node) label, if it has one.
    pub(super) fn labelled(&self, text: String) -> String {
        match &self.config.node {
            Some(node) => crate::gateway::metrics::with_label(&text, "node", node),
            None => text,
        }
    }

    /// `GET /metrics` with the admin key (or on a gateway without keys): the gateway's
    /// counters, gauges and latency histograms in the Prometheus text format.
    pub fn metrics(&self) -> String {
        let starting = self
            .lives
            .iter()
            .filter(|(id, l)| l.starting.is_some() && !self.pool.contains_key(id))
            .count();
        let text = self.metrics.render(&Gauges {
            sessions: self.lives.len() - starting - self.pool.len(),
            starting,
            pooled: self.pool.len(),
            pool_ready: self
                .pool
                .keys()
                .filter(|id| self.lives.get(id).is_some_and(|l| l.starting.is_none()))
                .count(),
            held: self.registry.held_count(),
            in_flight: self.requests.len(),
            queued: self.queue.len(),
            stored: self.registry.stored_count(),
            approvals: self.approvals.len(),
        });
        let mut text = text;
        self.metering.write_metrics(&mut text);
        self.labelled(text)
    }

    /// `GET /v1/models`: the CLI's models (once a CLI has said which) and its aliases, in one
    /// list that reads as both APIs' shapes.
    pub fn models(&self) -> Value {
        let mut ids: Vec<(String, String)> = Vec::new();
        if let Some(Value::Array(list)) = &self.models {
            for model in list {
                if let Some(id) = model.get("value").and_then(Value::as_str) {
                    let name = model
                        .get("displayName")
                        .and_then(Value::as_str)
                        .unwrap_or(id);
                    ids.push((id.to_owned(), name.to_owned()));
                }
            }
        }
        for alias in ["default", "sonnet", "opus", "haiku"] {
            if !ids.iter().any(|(id, _)| id == alias) {
                ids.push((alias.to_owned(), alias.to_owned()));
            }
        }
        if let Some(default) = &self.config.default_model {
            if !ids.iter().any(|(id, _)| id == default) {
                ids.push((default.clone(), default.clone()));
            }
        }
        let data: Vec<Value> = ids
            .iter()
            .map(|(id, name)| {
                json!({
                    "id": id, "type": "model", "object": "model", "display_name": name,
                    "created_at": "1970-01-01T00:00:00Z", "created": 0, "owned_by": "anthropic",
                })
            })
            .collect();
        json!({
            "object": "list",
            "data": data,
            "has_more": false,
            "first_id": ids.first().map(|(id, _)| id),
            "last_id": ids.last().map(|(id, _)| id),
        })
    }

    /// The key that says which gateway must serve a request (see "Scale-out" above): the scoped
    /// hash of the history it continues, the stored response it names, or none for a new
    /// conversation. Changes nothing.
    ///
    /// # Errors
    /// The request's own validation error, as [`handle_request`](Self::handle_request) would
    /// answer it.
    pub fn route_key(api: Api, tenant: &str, body: &[u8]) -> Result<RouteKey, ApiError> {
        prepared::prepare_request(api, tenant, body).map(|r| r.route_key(tenant))
    }
}

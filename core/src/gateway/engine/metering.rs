//! Usage: each CLI turn metered into its key's row of the day ([`usage`](crate::gateway::usage)),
//! the subscription's rate-limit windows the CLIs report, and `GET /v1/usage`.

use std::fmt::Write;

use super::*;
use crate::gateway::metrics::label_value;
use crate::gateway::usage::{self, Tally, UsageRow, Window, DAY_MS};

/// How long the store's figures of a key with a quota are used before they are read again
/// (what other gateways added since is not seen before) (ms).
const QUOTA_RECHECK_MS: u64 = 10_000;
/// How many days of usage a gateway without a session store keeps (as the Redis store does).
const KEPT_DAYS: u64 = 400;
/// The most days one `GET /v1/usage` covers.
const MAX_DAYS: u64 = 366;
/// The days `GET /v1/usage` covers without `from`: the last thirty, today included.
const DEFAULT_DAYS: u64 = 30;

/// What the gateway knows of usage.
#[derive(Debug, Default)]
pub(super) struct Metering {
    /// The credential its CLIs use ([`usage::credential_id`]).
    credential: String,
    /// The windows its CLIs reported, by credential and kind.
    windows: BTreeMap<(String, String), Window>,
    /// Without a session store: the use since the gateway started, by key (its tenant id), day
    /// (days since 1970-01-01) and model; days older than [`KEPT_DAYS`] are forgotten.
    local: BTreeMap<(String, u64, String), Tally>,
    /// `GET /v1/usage` requests waiting for the store's rows.
    pub(super) waiting: BTreeMap<RequestId, UsageQuery>,
    /// The bytes each tenant's transcripts take in the session store, as it last said
    /// ([`StoreAnswer::Usage`]), and when it was last asked, by tenant id.
    pub(super) store_bytes: BTreeMap<String, (u64, Timestamp)>,
    /// With a store, by tenant id: what each key with a quota used, as the store last said.
    quota_used: BTreeMap<String, QuotaUsed>,
}

/// What a key with a quota used in its quota's periods, as the store said, and the requests
/// that wait for the store's first answer.
#[derive(Debug, Default)]
struct QuotaUsed {
    /// Figures by day (days since 1970-01-01); none until the store answers.
    rows: Option<Vec<(u64, Tally)>>,
    /// When the store was last asked.
    asked: Timestamp,
    /// Turns that wait for the first answer.
    waiting: Vec<Queued>,
}

/// What a key's quota says of a new turn.
pub(super) enum QuotaCheck {
    /// Under its limits, or none.
    Go,
    /// Over one: the 429 and its headers.
    Refuse(ApiError, Vec<(String, String)>),
    /// Not known yet: the store is asked.
    Wait,
}

impl Metering {
    pub(super) fn new() -> Metering {
        Metering {
            credential: "login".to_owned(),
            ..Metering::default()
        }
    }

    /// Whether `request` waits for the store's rows.
    pub(super) fn is_waiting(&self, request: RequestId) -> bool {
        self.waiting.contains_key(&request)
            || (self.quota_used.values()).any(|u| u.waiting.iter().any(|q| q.request == request))
    }

    /// Forgets `request` if it waits for the store's figures of its key (its client went
    /// away): its tenant.
    pub(super) fn forget_waiting(&mut self, request: RequestId) -> Option<String> {
        for used in self.quota_used.values_mut() {
            if let Some(at) = used.waiting.iter().position(|q| q.request == request) {
                return Some(used.waiting.remove(at).tenant);
            }
        }
        None
    }

    /// The `anthropic-ratelimit-unified-*` headers of this gateway's credential's windows at
    /// `wall` (Unix ms): what the Anthropic API told its CLIs last.
    pub(super) fn headers(&self, wall: u64) -> Vec<(String, String)> {
        let mine = (self.windows.iter())
            .filter(|((credential, _), _)| *credential == self.credential)
            .map(|(_, w)| w);
        usage::unified_headers(mine, wall)
    }

    /// The windows' gauges, in the Prometheus text format.
    pub(super) fn write_metrics(&self, out: &mut String) {
        let series = [
            (
                "ccwire_ratelimit_utilization",
                "The fraction of each subscription rate-limit window used, as a CLI last \
                 reported it.",
            ),
            (
                "ccwire_ratelimit_resets_at_seconds",
                "When each subscription rate-limit window resets (Unix seconds).",
            ),
            (
                "ccwire_ratelimit_status",
                "Each subscription rate-limit window's status (allowed, allowed_warning, \
                 rejected): 1 for the status last reported.",
            ),
        ];
        for (name, help) in series {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for w in self.windows.values() {
                let labels = format!(
                    "credential=\"{}\",window=\"{}\"",
                    label_value(&w.credential),
                    label_value(&w.kind)
                );
                let sample = match name {
                    "ccwire_ratelimit_utilization" => w.utilization.map(|u| (labels, u)),
                    "ccwire_ratelimit_resets_at_seconds" => w.resets_at.map(|s| (labels, s as f64)),
                    _ => (w.status.as_deref())
                        .map(|s| (format!("{labels},status=\"{}\"", label_value(s)), 1.0)),
                };
                if let Some((labels, value)) = sample {
                    let _ = writeln!(out, "{name}{{{labels}}} {value}");
                }
            }
        }
    }
}

/// A `GET /v1/usage` request, read.
#[derive(Debug, Clone)]
pub(super) struct UsageQuery {
    /// The key whose rows it lists (its tenant id); `None`: every key's (the admin).
    key: Option<String>,
    model: Option<String>,
    /// The first and last day (days since 1970-01-01).
    from: u64,
    to: u64,
    csv: bool,
}

impl UsageQuery {
    /// The query of a request whose caller sees `scope` (its tenant id; `None`: every key),
    /// on day `today`.
    fn parse(head: &HttpHead<'_>, scope: Option<String>, today: u64) -> Result<Self, ApiError> {
        let params = super::managed::query(head.query);
        let param = |name: &str| super::managed::param(&params, name).filter(|v| !v.is_empty());
        let invalid = |message: String| ApiError::new(ApiErrorKind::InvalidRequest, message);
        let day = |name: &str, default: u64| match param(name) {
            None => Ok(default),
            Some(text) => usage::day_number(text)
                .ok_or_else(|| invalid(format!("{name}: {text:?} is not a day (YYYY-MM-DD)"))),
        };
        let to = day("to", today)?;
        let from = day("from", to.saturating_sub(DEFAULT_DAYS - 1))?;
        if from > to {
            return Err(invalid("from is after to".to_owned()));
        }
        if to - from >= MAX_DAYS {
            return Err(invalid(format!(
                "from {} to {} is more than {MAX_DAYS} days: ask for less at a time",
                usage::day_name(from),
                usage::day_name(to)
            )));
        }
        let key = match (scope, param("key")) {
            (Some(own), Some(named)) if named != own => {
                return Err(ApiError::new(
                    ApiErrorKind::Forbidden,
                    "a key sees its own usage only (the admin key sees every key's)",
                ))
            }
            (Some(own), _) => Some(own),
            (None, named) => named.map(str::to_owned),
        };
        let csv = match param("format") {
            Some("csv") => true,
            Some("json") => false,
            Some(other) => return Err(invalid(format!("format: {other:?} is not csv or json"))),
            None => head
                .header("accept")
                .is_some_and(|a| a.contains("text/csv")),
        };
        Ok(UsageQuery {
            key,
            model: param("model").map(str::to_owned),
            from,
            to,
            csv,
        })
    }

    fn takes(&self, row: &UsageRow) -> bool {
        self.key.as_ref().is_none_or(|k| *k == row.key)
            && self.model.as_ref().is_none_or(|m| *m == row.model)
            && usage::day_number(&row.day).is_some_and(|d| (self.from..=self.to).contains(&d))
    }
}

impl Gateway {
    /// Sets the credential this gateway's CLIs use ([`usage::credential_id`] of the variables
    /// they get): the windows they report are kept under it, and its windows' headers go on
    /// responses.
    pub fn set_credential(&mut self, id: String) {
        self.metering.credential = id;
    }

    /// A chunk of `session`'s CLI, for what it says of usage: the model of its main thread,
    /// the windows of a `rate_limit_event`, a turn's figures in its `result`.
    pub(super) fn meter_chunk(&mut self, session: SessionId, chunk: &Chunk) {
        let wall = self.wall_ms();
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        match chunk {
            Chunk::SessionInit {
                model: Some(model), ..
            }
            | Chunk::MessageStart {
                model: Some(model),
                parent_tool_use_id: None,
                ..
            } => live.meter.model = Some(model.clone()),
            Chunk::RateLimit { info, .. } => {
                let credential = self.metering.credential.clone();
                for window in usage::windows_of(&info.to_value(), &credential, wall) {
                    let at = (window.credential.clone(), window.kind.clone());
                    self.metering.windows.insert(at, window.clone());
                    if self.config.store {
                        let ask = StoreAsk::KeepWindow { window };
                        self.outputs.push_back(GatewayOutput::Store(ask));
                    }
                }
            }
            Chunk::TurnComplete {
                usage, model_usage, ..
            } => {
                let rows = live.meter.turn(&usage.to_value(), &model_usage.to_value());
                let tenant = live.tenant.clone();
                self.add_usage(&tenant, rows);
            }
            _ => {}
        }
    }

    /// Adds a turn's figures to `tenant`'s (its key's) rows of today.
    fn add_usage(&mut self, tenant: &str, rows: Vec<(String, Tally)>) {
        let day = usage::day_of(self.wall_ms());
        let today = self.wall_ms() / DAY_MS;
        let id = tenant_id(tenant);
        for (model, tally) in rows {
            self.count(tenant, |m| m.cost_nano_usd += tally.cost_nano_usd);
            if let Some(rows) =
                (self.metering.quota_used.get_mut(&id)).and_then(|u| u.rows.as_mut())
            {
                rows.push((today, tally));
            }
            if self.config.store {
                let ask = StoreAsk::AddUsage {
                    tenant: id.clone(),
                    day: day.clone(),
                    model,
                    tally,
                };
                self.outputs.push_back(GatewayOutput::Store(ask));
            } else {
                let local = &mut self.metering.local;
                let row = (id.clone(), today, model);
                if !local.contains_key(&row) {
                    local.retain(|(_, day, _), _| day + KEPT_DAYS > today);
                }
                local.entry(row).or_default().add(&tally);
            }
        }
    }

    /// The most conversations `tenant` (its key) runs at once: the gateway's cap per key, or
    /// its quota's if lower.
    pub(super) fn sessions_cap(&self, tenant: &str) -> usize {
        let quota = self
            .quota_of(&tenant_id(tenant))
            .and_then(|q| q.conversations);
        quota.map_or(self.config.max_sessions_per_key, |n| {
            n.min(self.config.max_sessions_per_key)
        })
    }

    /// Whether a new turn of `tenant` (its key) is within its quota's limits on tokens and
    /// cost: from what this gateway metered without a store; with one, from what the store
    /// says (read again every [`QUOTA_RECHECK_MS`], so other gateways' turns count too), the
    /// key's first turn waiting for it.
    pub(super) fn check_quota(&mut self, tenant: &str) -> QuotaCheck {
        let id = tenant_id(tenant);
        let Some(quota) = self.quota_of(&id).filter(|q| !q.limits.is_empty()) else {
            return QuotaCheck::Go;
        };
        let wall = self.wall_ms();
        let today = wall / DAY_MS;
        let since = quota.since(today);
        let rows: Vec<(u64, Tally)> = if !self.config.store {
            (self
                .metering
                .local
                .range((id.clone(), since, String::new())..))
            .take_while(|((key, _, _), _)| *key == id)
            .map(|((_, day, _), t)| (*day, *t))
            .collect()
        } else {
            let now = self.now;
            let used = self.metering.quota_used.entry(id.clone()).or_default();
            let ask = match &used.rows {
                None if used.waiting.is_empty() => true,
                None => return QuotaCheck::Wait,
                Some(_) => now.saturating_sub(used.asked) >= QUOTA_RECHECK_MS,
            };
            let rows = used.rows.clone();
            if ask {
                used.asked = now;
                let ask = StoreAsk::ReadUsage {
                    request: None,
                    tenant: Some(id),
                    from: usage::day_name(since),
                    to: usage::day_name(today),
                };
                self.outputs.push_back(GatewayOutput::Store(ask));
            }
            match rows {
                Some(rows) => rows,
                None => return QuotaCheck::Wait,
            }
        };
        let Some(over) = quota.exceeded(&rows, today) else {
            return QuotaCheck::Go;
        };
        let seconds = (over.resets_day * DAY_MS)
            .saturating_sub(wall)
            .div_ceil(1000)
            .max(1);
        let error = ApiError::new(ApiErrorKind::RateLimit, over.message()).retry_after(seconds);
        // An SDK would retry in vain until the period ends.
        let mut headers = vec![("x-ccwire-quota".to_owned(), over.limit.to_string())];
        if seconds > 60 {
            headers.push(("x-should-retry".to_owned(), "false".to_owned()));
        }
        QuotaCheck::Refuse(error, headers)
    }

    /// Parks a turn until the store says what its key used.
    pub(super) fn wait_for_quota(&mut self, queued: Queued) {
        let id = tenant_id(&queued.tenant);
        self.metering
            .quota_used
            .entry(id)
            .or_default()
            .waiting
            .push(queued);
    }

    /// The store's figures of a key with a quota (`None`: it could not read them): the
    /// turns that waited for them go on, or get a 503 that asks to retry.
    fn quota_read(&mut self, now: Timestamp, id: &str, rows: Option<Vec<UsageRow>>) {
        let Some(used) = self.metering.quota_used.get_mut(id) else {
            return;
        };
        let waiting = std::mem::take(&mut used.waiting);
        match rows {
            Some(rows) => {
                let days = rows
                    .into_iter()
                    .filter_map(|r| Some((usage::day_number(&r.day)?, r.tally)));
                used.rows = Some(days.collect());
                for queued in waiting {
                    self.admit_turn(now, queued);
                }
            }
            None => {
                if used.rows.is_none() {
                    self.metering.quota_used.remove(id);
                }
                let error = ApiError::new(
                    ApiErrorKind::Unavailable,
                    "the session store is unavailable: this key's quota cannot be checked; \
                     retry shortly",
                )
                .retry_after(2);
                for queued in waiting {
                    self.respond_error(queued.request, queued.api, &[], &error);
                }
            }
        }
    }

    /// `GET /v1/usage`: the caller's usage by day and model (the admin's: every key's) and the
    /// windows, as JSON or CSV; from the session store when there is one.
    pub(super) fn handle_usage(&mut self, request: RequestId, head: &HttpHead<'_>) {
        let today = self.wall_ms() / DAY_MS;
        let query = self
            .front
            .scope(head)
            .and_then(|scope| UsageQuery::parse(head, scope.as_deref().map(tenant_id), today));
        let query = match query {
            Ok(query) => query,
            Err(e) => return self.respond_error(request, head.api(), &[], &e),
        };
        if self.config.store {
            let ask = StoreAsk::ReadUsage {
                request: Some(request),
                tenant: query.key.clone(),
                from: usage::day_name(query.from),
                to: usage::day_name(query.to),
            };
            self.outputs.push_back(GatewayOutput::Store(ask));
            self.metering.waiting.insert(request, query);
            return;
        }
        let rows = (self.metering.local.iter())
            .map(|((key, day, model), tally)| UsageRow {
                key: key.clone(),
                day: usage::day_name(*day),
                model: model.clone(),
                tally: *tally,
            })
            .collect();
        let windows = self.metering.windows.values().cloned().collect();
        self.answer_usage(request, &query, rows, windows);
    }

    /// The session store's answer to a [`StoreAsk::ReadUsage`]: a `GET /v1/usage`'s rows,
    /// or a key's figures for its quota (`request` none).
    pub(super) fn store_usage_read(
        &mut self,
        now: Timestamp,
        request: Option<RequestId>,
        tenant: Option<String>,
        read: Option<(Vec<UsageRow>, Vec<Window>)>,
    ) {
        self.now = now;
        let Some(request) = request else {
            if let Some(tenant) = tenant {
                self.quota_read(now, &tenant, read.map(|(rows, _)| rows));
            }
            return;
        };
        let Some(query) = self.metering.waiting.remove(&request) else {
            return;
        };
        match read {
            Some((rows, windows)) => self.answer_usage(request, &query, rows, windows),
            None => {
                let error = ApiError::new(
                    ApiErrorKind::Unavailable,
                    "the session store is unavailable: usage cannot be read; retry shortly",
                )
                .retry_after(2);
                self.respond_error(request, Api::Anthropic, &[], &error);
            }
        }
    }

    fn answer_usage(
        &mut self,
        request: RequestId,
        query: &UsageQuery,
        rows: Vec<UsageRow>,
        mut windows: Vec<Window>,
    ) {
        let mut rows: Vec<UsageRow> = rows.into_iter().filter(|r| query.takes(r)).collect();
        rows.sort_by(|a, b| (&a.day, &a.key, &a.model).cmp(&(&b.day, &b.key, &b.model)));
        let (from, to) = (usage::day_name(query.from), usage::day_name(query.to));
        if query.csv {
            let headers = vec![
                (
                    "content-type".to_owned(),
                    "text/csv; charset=utf-8".to_owned(),
                ),
                (
                    "content-disposition".to_owned(),
                    format!("attachment; filename=\"ccwire-usage-{from}-{to}.csv\""),
                ),
            ];
            return self.respond_whole(request, 200, headers, csv(&rows).into_bytes());
        }
        let mut total = Tally::default();
        for row in &rows {
            total.add(&row.tally);
        }
        windows.sort_by(|a, b| (&a.credential, &a.kind).cmp(&(&b.credential, &b.kind)));
        let wall = self.wall_ms();
        let windows: Vec<Value> = (windows.iter())
            .map(|w| {
                let mut json = serde_json::to_value(w).expect("a window serializes");
                json["has_reset"] = w.has_reset(wall).into();
                json
            })
            .collect();
        let answer = json!({
            "object": "usage",
            "from": from,
            "to": to,
            "key": query.key,
            "model": query.model,
            "data": rows.iter().map(row_json).collect::<Vec<_>>(),
            "total": tally_json(&total),
            "windows": windows,
        });
        self.respond_json(request, 200, &answer);
    }
}

fn tally_json(t: &Tally) -> Value {
    json!({
        "turns": t.turns,
        "input_tokens": t.input_tokens,
        "output_tokens": t.output_tokens,
        "cache_read_input_tokens": t.cache_read_input_tokens,
        "cache_creation_input_tokens": t.cache_creation_input_tokens,
        "cost_usd": t.cost_usd(),
    })
}

fn row_json(row: &UsageRow) -> Value {
    let mut json = json!({"key": row.key, "day": row.day, "model": row.model});
    if let (Value::Object(out), Value::Object(tally)) = (&mut json, tally_json(&row.tally)) {
        out.extend(tally);
    }
    json
}

/// The rows as CSV (RFC 4180), a header first. A text cell a spreadsheet would read as a
/// formula (`=`, `+`, `-`, `@` first) starts with `'`.
fn csv(rows: &[UsageRow]) -> String {
    let mut out = String::from(
        "key,day,model,turns,input_tokens,output_tokens,cache_read_input_tokens,\
         cache_creation_input_tokens,cost_usd\r\n",
    );
    let cell = |text: &str| {
        let text = match text.chars().next() {
            Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{text}"),
            _ => text.to_owned(),
        };
        if text.contains([',', '"', '\r', '\n']) {
            format!("\"{}\"", text.replace('"', "\"\""))
        } else {
            text
        }
    };
    for row in rows {
        let t = &row.tally;
        let _ = write!(
            out,
            "{},{},{},{},{},{},{},{},{}\r\n",
            cell(&row.key),
            cell(&row.day),
            cell(&row.model),
            t.turns,
            t.input_tokens,
            t.output_tokens,
            t.cache_read_input_tokens,
            t.cache_creation_input_tokens,
            t.cost_usd()
        );
    }
    out
}

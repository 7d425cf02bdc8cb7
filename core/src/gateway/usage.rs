//! What each key used and what the account allows: tokens by kind and cost, per key, day and
//! model ([`Tally`], [`UsageRow`]), and the subscription's rate-limit windows the CLI reports
//! in `rate_limit_event` ([`Window`]).
//!
//! The gateway meters each CLI turn from its `result`: the CLI's `modelUsage` and
//! `total_cost_usd` are the process's cumulative figures, so a turn's use is the difference
//! from the CLI's previous result. A resumed CLI may start from the figures
//! of the process before it (the CLI restores them), which the gateway cannot know: its first
//! turn is metered from that turn's own `usage`, priced with [`price`]. A session store
//! keeps the sums (a cluster adds into the same rows), and `GET /v1/usage` reads them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Tokens by kind, the cost, and how many turns they came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// CLI turns.
    #[serde(default)]
    pub turns: u64,
    /// Input tokens outside the prompt cache.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// The cost, in billionths of a US dollar (integers sum exactly across a cluster).
    #[serde(default)]
    pub cost_nano_usd: u64,
}

impl Tally {
    /// The names of its counts, as a store keeps them, in order.
    pub const FIELDS: [&'static str; 6] = [
        "turns",
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "cost_nano_usd",
    ];

    /// Its counts, named as [`FIELDS`](Self::FIELDS).
    pub fn fields(&self) -> [(&'static str, u64); 6] {
        [
            ("turns", self.turns),
            ("input_tokens", self.input_tokens),
            ("output_tokens", self.output_tokens),
            ("cache_read_input_tokens", self.cache_read_input_tokens),
            (
                "cache_creation_input_tokens",
                self.cache_creation_input_tokens,
            ),
            ("cost_nano_usd", self.cost_nano_usd),
        ]
    }

    /// Adds `n` to the count named `field` (one of [`FIELDS`](Self::FIELDS)); other names
    /// are ignored.
    pub fn add_field(&mut self, field: &str, n: u64) {
        let count = match field {
            "turns" => &mut self.turns,
            "input_tokens" => &mut self.input_tokens,
            "output_tokens" => &mut self.output_tokens,
            "cache_read_input_tokens" => &mut self.cache_read_input_tokens,
            "cache_creation_input_tokens" => &mut self.cache_creation_input_tokens,
            "cost_nano_usd" => &mut self.cost_nano_usd,
            _ => return,
        };
        *count = count.saturating_add(n);
    }

    /// Adds another tally to this one.
    pub fn add(&mut self, other: &Tally) {
        for (field, n) in other.fields() {
            self.add_field(field, n);
        }
    }

    /// Its tokens of every kind.
    pub fn tokens(&self) -> u64 {
        (self.input_tokens + self.output_tokens)
            .saturating_add(self.cache_read_input_tokens)
            .saturating_add(self.cache_creation_input_tokens)
    }

    /// The cost in US dollars.
    pub fn cost_usd(&self) -> f64 {
        self.cost_nano_usd as f64 / 1e9
    }

    /// The tokens of a usage object of the Messages API (a turn's `usage`).
    fn of_usage(usage: &Value) -> Tally {
        let n = |name| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
        Tally {
            input_tokens: n("input_tokens"),
            output_tokens: n("output_tokens"),
            cache_read_input_tokens: n("cache_read_input_tokens"),
            cache_creation_input_tokens: n("cache_creation_input_tokens"),
            ..Tally::default()
        }
    }

    /// One model's entry of the CLI's `modelUsage`.
    fn of_model_usage(entry: &Value) -> Tally {
        let n = |name| entry.get(name).and_then(Value::as_u64).unwrap_or(0);
        let cost = entry.get("costUSD").and_then(Value::as_f64).unwrap_or(0.0);
        Tally {
            turns: 0,
            input_tokens: n("inputTokens"),
            output_tokens: n("outputTokens"),
            cache_read_input_tokens: n("cacheReadInputTokens"),
            cache_creation_input_tokens: n("cacheCreationInputTokens"),
            cost_nano_usd: nano_usd(cost),
        }
    }

    /// What `self` (cumulative) adds to `before`; all of `self` if a count went down (the
    /// CLI started counting afresh).
    fn since(&self, before: &Tally) -> Tally {
        let pairs = self.fields().into_iter().zip(before.fields());
        if pairs.clone().any(|((_, now), (_, then))| now < then) {
            return *self;
        }
        let mut delta = Tally::default();
        for ((field, now), (_, then)) in pairs {
            delta.add_field(field, now - then);
        }
        delta
    }
}

/// Dollars as billionths of a dollar (negative and non-finite amounts as none).
fn nano_usd(usd: f64) -> u64 {
    if usd.is_finite() && usd > 0.0 {
        (usd * 1e9).round() as u64
    } else {
        0
    }
}

/// A model's list prices, in US dollars per million tokens: input, output, cache write (five
/// minutes), cache read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Tokens written to the prompt cache.
    pub cache_write: f64,
    /// Tokens read from the prompt cache.
    pub cache_read: f64,
}

impl Price {
    const fn new(input: f64, output: f64, cache_write: f64, cache_read: f64) -> Price {
        Price {
            input,
            output,
            cache_write,
            cache_read,
        }
    }

    /// What `tally`'s tokens cost, in billionths of a dollar.
    pub fn cost_nano_usd(&self, tally: &Tally) -> u64 {
        // A token at `p` dollars per million costs `p * 1000` billionths.
        let usd_per_million = tally.input_tokens as f64 * self.input
            + tally.output_tokens as f64 * self.output
            + tally.cache_creation_input_tokens as f64 * self.cache_write
            + tally.cache_read_input_tokens as f64 * self.cache_read;
        (usd_per_million * 1000.0).round() as u64
    }
}

/// Anthropic's list prices by model id prefix, the most specific first (the pinned CLI's own
/// catalogue has the same figures).
const PRICES: &[(&str, Price)] = &[
    ("claude-opus-4-1", Price::new(15.0, 75.0, 18.75, 1.5)),
    ("claude-opus-4-0", Price::new(15.0, 75.0, 18.75, 1.5)),
    ("claude-opus-4-2025", Price::new(15.0, 75.0, 18.75, 1.5)),
    ("claude-opus-4", Price::new(5.0, 25.0, 6.25, 0.5)),
    ("claude-3-opus", Price::new(15.0, 75.0, 18.75, 1.5)),
    ("claude-sonnet-4", Price::new(3.0, 15.0, 3.75, 0.3)),
    ("claude-3-7-sonnet", Price::new(3.0, 15.0, 3.75, 0.3)),
    ("claude-3-5-sonnet", Price::new(3.0, 15.0, 3.75, 0.3)),
    ("claude-haiku-4", Price::new(1.0, 5.0, 1.25, 0.1)),
    ("claude-3-5-haiku", Price::new(0.8, 4.0, 1.0, 0.08)),
    ("claude-3-haiku", Price::new(0.25, 1.25, 0.3, 0.03)),
];

/// The list price of `model` (an id such as `claude-sonnet-4-5-20250929`, a provider's
/// `us.anthropic.claude-…` too), if the table knows it.
pub fn price(model: &str) -> Option<Price> {
    let id = &model[model.find("claude-")?..];
    PRICES
        .iter()
        .find(|(prefix, _)| id.starts_with(prefix))
        .map(|(_, price)| *price)
}

/// What one live CLI has reported so far, to meter each of its turns.
#[derive(Debug, Clone, Default)]
pub(crate) struct TurnMeter {
    /// The model its main thread uses, as its `init` or last message named it.
    pub(crate) model: Option<String>,
    /// Its cumulative use per model at its last result; `None` until a result when the
    /// CLI may have started from figures the gateway does not know (a resumed CLI).
    seen: Option<BTreeMap<String, Tally>>,
}

impl TurnMeter {
    /// The meter of a CLI that starts from nothing (`resumed`: one that may start from its
    /// predecessor's figures).
    pub(crate) fn new(resumed: bool) -> TurnMeter {
        TurnMeter {
            model: None,
            seen: (!resumed).then(BTreeMap::new),
        }
    }

    /// A turn's `result`: what the turn used, by model (the main model's row counts the
    /// turn). `usage` is the turn's own (its main thread's), `model_usage` the CLI's
    /// cumulative `modelUsage`.
    pub(crate) fn turn(&mut self, usage: &Value, model_usage: &Value) -> Vec<(String, Tally)> {
        let cumulative: Option<BTreeMap<String, Tally>> = model_usage.as_object().map(|models| {
            (models.iter())
                .map(|(model, entry)| (model.clone(), Tally::of_model_usage(entry)))
                .collect()
        });
        let main = self.model.clone().unwrap_or_else(|| "unknown".to_owned());
        let own = Tally::of_usage(usage);
        // Without a known start, the figures are the turn's own when the main model's
        // match the turn's usage (the CLI restored nothing).
        let baseline = self.seen.take().or_else(|| {
            let now = cumulative.as_ref()?.get(&main)?;
            let fresh = now.input_tokens == own.input_tokens
                && now.output_tokens == own.output_tokens
                && now.cache_read_input_tokens == own.cache_read_input_tokens
                && now.cache_creation_input_tokens == own.cache_creation_input_tokens;
            fresh.then(BTreeMap::new)
        });
        let mut rows: Vec<(String, Tally)> = match (&baseline, &cumulative) {
            (Some(before), Some(now)) => (now.iter())
                .map(|(model, tally)| {
                    let delta = match before.get(model) {
                        Some(then) => tally.since(then),
                        None => *tally,
                    };
                    (model.clone(), delta)
                })
                .filter(|(_, delta)| *delta != Tally::default())
                .collect(),
            // The turn's own usage, at list price.
            _ => {
                let mut tally = own;
                tally.cost_nano_usd = price(&main).map_or(0, |p| p.cost_nano_usd(&own));
                vec![(main.clone(), tally)]
            }
        };
        self.seen = cumulative.or(baseline);
        match rows.iter_mut().position(|(model, _)| *model == main) {
            Some(i) => rows[i].1.turns = 1,
            None => rows.push((
                main,
                Tally {
                    turns: 1,
                    ..Tally::default()
                },
            )),
        }
        rows
    }
}

/// One key's use of one model on one day (UTC), as `GET /v1/usage` lists it and a session
/// store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageRow {
    /// The key's tenant id ([`tenant_id`](super::tenant_id)).
    pub key: String,
    /// The day, `YYYY-MM-DD` (UTC).
    pub day: String,
    /// The model.
    pub model: String,
    /// What was used.
    #[serde(flatten)]
    pub tally: Tally,
}

/// A subscription rate-limit window as the CLI last reported it (`rate_limit_event`), for
/// the credential its CLIs use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// The credential's id ([`credential_id`]).
    pub credential: String,
    /// `five_hour`, `seven_day`, `seven_day_opus`, `seven_day_sonnet`,
    /// `seven_day_overage_included`, `overage`; or `unified`: the account's status, with
    /// [`claim`](Self::claim) naming the window that limits it.
    pub kind: String,
    /// `allowed`, `allowed_warning` or `rejected`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The fraction of the window used (above 1 past its cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<f64>,
    /// When the window resets (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<u64>,
    /// The highest warning threshold passed, as a fraction of the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surpassed_threshold: Option<f64>,
    /// `unified`: the window that limits the account (`rateLimitType`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// `overage`: why overage is off (`overageDisabledReason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// When the CLI reported it (Unix ms, the gateway's clock).
    pub observed_ms: u64,
}

impl Window {
    /// Whether its reset time has passed at `now_ms` (Unix ms).
    pub fn has_reset(&self, now_ms: u64) -> bool {
        self.resets_at
            .is_some_and(|at| at.saturating_mul(1000) <= now_ms)
    }
}

/// The windows a `rate_limit_info` reports for `credential`, observed at `now_ms`: the
/// account's status (`unified`), the window it names, each of `unifiedWindows`, and overage.
pub(crate) fn windows_of(info: &Value, credential: &str, now_ms: u64) -> Vec<Window> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let number = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let seconds = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).map(|s| s as u64);
    let window = |kind: &str, v: &Value| Window {
        credential: credential.to_owned(),
        kind: kind.to_owned(),
        status: text(v, "status"),
        utilization: number(v, "utilization"),
        resets_at: seconds(v, "resetsAt"),
        surpassed_threshold: number(v, "surpassedThreshold"),
        claim: None,
        disabled_reason: None,
        observed_ms: now_ms,
    };
    let mut out = Vec::new();
    let claim = text(info, "rateLimitType");
    out.push(Window {
        claim: claim.clone(),
        ..window("unified", info)
    });
    if let Some(kind) = &claim {
        out.push(window(kind, info));
    }
    if let Some(windows) = info.get("unifiedWindows").and_then(Value::as_object) {
        for (kind, v) in windows {
            out.retain(|w| w.kind != *kind);
            out.push(window(kind, v));
        }
    }
    if let Some(status) = text(info, "overageStatus") {
        out.retain(|w| w.kind != "overage");
        out.push(Window {
            status: Some(status),
            resets_at: seconds(info, "overageResetsAt"),
            disabled_reason: text(info, "overageDisabledReason"),
            ..window("overage", &Value::Null)
        });
    }
    out
}

/// The short names the Anthropic API gives windows in its `anthropic-ratelimit-unified-*`
/// headers.
const HEADER_NAMES: [(&str, &str); 4] = [
    ("five_hour", "5h"),
    ("seven_day", "7d"),
    ("seven_day_overage_included", "7d_oi"),
    ("overage", "overage"),
];

/// The `anthropic-ratelimit-unified-*` headers the Anthropic API would send for these
/// windows (of one credential), leaving out those whose reset time has passed at `now_ms`.
pub fn unified_headers<'a>(
    windows: impl IntoIterator<Item = &'a Window>,
    now_ms: u64,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut push = |name: String, value: Option<String>| {
        if let Some(value) = value {
            out.push((format!("anthropic-ratelimit-unified-{name}"), value));
        }
    };
    for w in windows.into_iter().filter(|w| !w.has_reset(now_ms)) {
        let short = if w.kind == "unified" {
            None
        } else {
            match HEADER_NAMES.iter().find(|(kind, _)| *kind == w.kind) {
                Some((_, short)) => Some(*short),
                None => continue,
            }
        };
        let name = |field: &str| match short {
            None => field.to_owned(),
            Some(short) => format!("{short}-{field}"),
        };
        push(name("status"), w.status.clone());
        push(name("reset"), w.resets_at.map(|s| s.to_string()));
        push(name("utilization"), w.utilization.map(|u| u.to_string()));
        push(
            name("surpassed-threshold"),
            w.surpassed_threshold.map(|u| u.to_string()),
        );
        push(name("representative-claim"), w.claim.clone());
        push(name("disabled-reason"), w.disabled_reason.clone());
    }
    out
}

/// The id of the credential a CLI uses, from the variables it gets (`var`): a digest of
/// `CLAUDE_CODE_OAUTH_TOKEN`, `ANTHROPIC_API_KEY` or `ANTHROPIC_AUTH_TOKEN` (the first set),
/// or `login` (the CLI's stored login). Reveals nothing of the secret.
pub fn credential_id(var: impl Fn(&str) -> Option<String>) -> String {
    use sha2::Digest;
    for (name, short) in [
        ("CLAUDE_CODE_OAUTH_TOKEN", "oauth"),
        ("ANTHROPIC_API_KEY", "key"),
        ("ANTHROPIC_AUTH_TOKEN", "token"),
    ] {
        if let Some(secret) = var(name).filter(|v| !v.is_empty()) {
            let mut hash = sha2::Sha256::new();
            hash.update(b"ccwire credential\0");
            hash.update(secret.as_bytes());
            let hex = crate::conversation::hex(&hash.finalize()[..6]);
            return format!("{short}-{hex}");
        }
    }
    "login".to_owned()
}

/// A day in ms.
pub(crate) const DAY_MS: u64 = 86_400_000;

/// The day (UTC, `YYYY-MM-DD`) of a Unix time in ms.
pub fn day_of(unix_ms: u64) -> String {
    let (y, m, d) = civil(unix_ms / DAY_MS);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The number of days since 1970-01-01 of a `YYYY-MM-DD` day, if it is one.
pub fn day_number(day: &str) -> Option<u64> {
    let mut parts = day.splitn(3, '-');
    let mut part = |len: usize| {
        let p = parts
            .next()
            .filter(|p| p.len() == len && p.bytes().all(|b| b.is_ascii_digit()))?;
        p.parse::<u64>().ok()
    };
    let (y, m, d) = (part(4)?, part(2)?, part(2)?);
    let days = days_from_civil(y, m, d)?;
    // A day past its month's end (2026-02-30) is no day.
    (civil(days) == (y, m, d)).then_some(days)
}

/// The days (since 1970-01-01) from `from` to `to` (`YYYY-MM-DD`, both included), if both are
/// days.
pub fn day_range(from: &str, to: &str) -> Option<std::ops::RangeInclusive<u64>> {
    Some(day_number(from)?..=day_number(to)?)
}

/// The day (UTC, `YYYY-MM-DD`) `days` after 1970-01-01.
pub fn day_name(days: u64) -> String {
    day_of(days.saturating_mul(DAY_MS))
}

/// The days since 1970-01-01 of year `y`, month `m`, day `d` (Howard Hinnant's
/// days_from_civil, for years from 1970 to 9999; a day past its month's end runs into the
/// next month).
pub(super) fn days_from_civil(y: u64, m: u64, d: u64) -> Option<u64> {
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&m) || d == 0 {
        return None;
    }
    let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).checked_sub(719_468)
}

/// Year, month, day of `days` since 1970-01-01 (Howard Hinnant's civil_from_days).
pub(super) fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + u64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn days_are_utc_calendar_days_both_ways() {
        assert_eq!(day_of(0), "1970-01-01");
        // 2026-11-28T23:59:59.999Z and the next millisecond.
        assert_eq!(day_of(1_795_910_399_999), "2026-11-28");
        assert_eq!(day_of(1_795_910_400_000), "2026-11-29");
        assert_eq!(day_of(951_782_400_000), "2000-02-29");
        for days in [0, 59, 60, 10_956, 11_016, 20_000, 2_932_896] {
            assert_eq!(day_number(&day_name(days)), Some(days));
        }
        for bad in [
            "2026-02-30",
            "2026-13-01",
            "2026-1-01",
            "1969-12-31",
            "x",
            "",
        ] {
            assert_eq!(day_number(bad), None, "{bad}");
        }
    }

    fn model_usage(model: &str, input: u64, output: u64, cost: f64) -> Value {
        json!({model: {"inputTokens": input, "outputTokens": output,
            "cacheReadInputTokens": 0, "cacheCreationInputTokens": 0, "costUSD": cost}})
    }

    #[test]
    fn a_fresh_cli_is_metered_by_the_difference_of_its_cumulative_figures() {
        let sonnet = "claude-sonnet-4-5-20250929";
        let mut meter = TurnMeter::new(false);
        meter.model = Some(sonnet.to_owned());
        let usage = json!({"input_tokens": 12, "output_tokens": 7});
        let first = meter.turn(&usage, &model_usage(sonnet, 12, 7, 0.000141));
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].1.turns, first[0].1.input_tokens), (1, 12));
        assert_eq!(first[0].1.cost_nano_usd, 141_000);
        let second = meter.turn(&usage, &model_usage(sonnet, 36, 21, 0.000423));
        assert_eq!(
            (second[0].1.input_tokens, second[0].1.output_tokens),
            (24, 14)
        );
        assert_eq!(second[0].1.cost_nano_usd, 282_000);
    }

    #[test]
    fn a_subagents_model_gets_its_own_row_and_the_turn_counts_once() {
        let mut meter = TurnMeter::new(false);
        meter.model = Some("claude-opus-4-5".to_owned());
        let mut cumulative = model_usage("claude-opus-4-5", 100, 10, 0.00075);
        cumulative["claude-haiku-4-5"] =
            model_usage("claude-haiku-4-5", 50, 5, 0.000075)["claude-haiku-4-5"].clone();
        let rows = meter.turn(
            &json!({"input_tokens": 100, "output_tokens": 10}),
            &cumulative,
        );
        let turns: Vec<_> = rows.iter().map(|(m, t)| (m.as_str(), t.turns)).collect();
        assert_eq!(turns, [("claude-haiku-4-5", 0), ("claude-opus-4-5", 1)]);
    }

    #[test]
    fn a_resumed_cli_that_restored_its_figures_is_priced_from_its_turn() {
        let sonnet = "claude-sonnet-4-5-20250929";
        let mut meter = TurnMeter::new(true);
        meter.model = Some(sonnet.to_owned());
        let usage = json!({"input_tokens": 12, "output_tokens": 7});
        // The CLI restored two earlier turns' figures: only this turn is metered.
        let rows = meter.turn(&usage, &model_usage(sonnet, 36, 21, 0.000423));
        assert_eq!((rows[0].1.input_tokens, rows[0].1.output_tokens), (12, 7));
        assert_eq!(rows[0].1.cost_nano_usd, 141_000);
        // Its next turn by difference again.
        let rows = meter.turn(&usage, &model_usage(sonnet, 48, 28, 0.000564));
        assert_eq!(
            (rows[0].1.input_tokens, rows[0].1.cost_nano_usd),
            (12, 141_000)
        );
        // A resumed CLI that restored nothing: its figures are the turn's.
        let mut meter = TurnMeter::new(true);
        meter.model = Some(sonnet.to_owned());
        let rows = meter.turn(&usage, &model_usage(sonnet, 12, 7, 0.0002));
        assert_eq!(rows[0].1.cost_nano_usd, 200_000);
    }

    #[test]
    fn prices_are_found_by_model_family() {
        assert_eq!(price("claude-opus-4-1-20250805").unwrap().input, 15.0);
        assert_eq!(price("claude-opus-4-5-20251101").unwrap().input, 5.0);
        assert_eq!(price("us.anthropic.claude-haiku-4-5").unwrap().output, 5.0);
        assert_eq!(price("gpt-4o"), None);
    }

    #[test]
    fn a_rate_limit_event_gives_the_accounts_status_and_each_window() {
        let info = json!({"status": "allowed_warning", "resetsAt": 1_893_456_000,
            "rateLimitType": "five_hour", "utilization": 0.8, "overageStatus": "rejected",
            "overageDisabledReason": "org_level_disabled",
            "unifiedWindows": {"seven_day": {"utilization": 0.35, "resetsAt": 1_893_888_000}}});
        let windows = windows_of(&info, "oauth-1", 5);
        let kinds: Vec<_> = windows.iter().map(|w| w.kind.as_str()).collect();
        assert_eq!(kinds, ["unified", "five_hour", "seven_day", "overage"]);
        let headers = unified_headers(&windows, 1_800_000_000_000);
        let get = |name: &str| {
            let name = format!("anthropic-ratelimit-unified-{name}");
            headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("status"), Some("allowed_warning"));
        assert_eq!(get("representative-claim"), Some("five_hour"));
        assert_eq!(get("5h-utilization"), Some("0.8"));
        assert_eq!(get("7d-reset"), Some("1893888000"));
        assert_eq!(get("overage-status"), Some("rejected"));
        assert_eq!(get("overage-disabled-reason"), Some("org_level_disabled"));
        // Past their reset, windows say nothing (overage, with no reset time, stays).
        let later = unified_headers(&windows, 1_900_000_000_000);
        let names: Vec<_> = later.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "anthropic-ratelimit-unified-overage-status",
                "anthropic-ratelimit-unified-overage-disabled-reason"
            ]
        );
    }

    #[test]
    fn a_credential_id_names_its_kind_and_hides_the_secret() {
        let id = credential_id(|n| (n == "ANTHROPIC_API_KEY").then(|| "sk-secret".to_owned()));
        assert!(id.starts_with("key-") && !id.contains("secret"), "{id}");
        assert_eq!(credential_id(|_| None), "login");
    }
}

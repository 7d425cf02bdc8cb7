//! The gateway's counters, gauges and histograms, written in the Prometheus text format
//! (`GET /metrics`). Deterministic: series come out sorted.

use std::collections::BTreeMap;
use std::fmt::Write;

/// Upper bounds (seconds) of the latency histograms' buckets.
const SECONDS_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0, 300.0,
];

/// A cumulative histogram of durations, in Prometheus' shape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// Observations at or under each of [`SECONDS_BUCKETS`] (not cumulative here).
    buckets: [u64; SECONDS_BUCKETS.len()],
    count: u64,
    sum_seconds: f64,
}

impl Histogram {
    /// Records one duration.
    pub fn observe(&mut self, seconds: f64) {
        self.count += 1;
        self.sum_seconds += seconds;
        if let Some(i) = SECONDS_BUCKETS.iter().position(|b| seconds <= *b) {
            self.buckets[i] += 1;
        }
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Writes the histogram's series (`_bucket`, `_sum`, `_count`) under `name`.
    pub fn write(&self, out: &mut String, name: &str, help: &str) {
        header(out, name, help, "histogram");
        let mut cumulative = 0;
        for (bound, n) in SECONDS_BUCKETS.iter().zip(self.buckets) {
            cumulative += n;
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum_seconds);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// How long each of [`Recent`]'s buckets is (ms).
pub(crate) const RECENT_BUCKET_MS: u64 = 10_000;
/// How many buckets [`Recent`] keeps: ten minutes.
pub(crate) const RECENT_BUCKETS: u64 = 60;

/// What happened in one bucket of [`Recent`].
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Bucket {
    /// Its index: its start over [`RECENT_BUCKET_MS`] (Unix ms, so that the buckets of the
    /// nodes of a cluster line up).
    index: u64,
    pub turns: u64,
    /// Tokens of the responses that ended in it, by kind.
    pub tokens: BTreeMap<&'static str, u64>,
    /// What the gateway added to first bytes: the sum, count and largest (ms).
    pub added_ms: (u64, u64, u64),
    pub pool_hits: u64,
    pub pool_misses: u64,
}

impl Bucket {
    /// A response to whose first byte the gateway added `ms`.
    pub(crate) fn observe_added(&mut self, ms: u64) {
        let (sum, count, max) = &mut self.added_ms;
        *sum += ms;
        *count += 1;
        *max = (*max).max(ms);
    }
}

/// The last ten minutes in ten-second buckets, for the console's charts (`GET /v1/stats`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Recent {
    buckets: std::collections::VecDeque<Bucket>,
}

impl Recent {
    /// The bucket of `now` (Unix ms), those too old forgotten.
    pub(crate) fn at(&mut self, now: u64) -> &mut Bucket {
        let index = now / RECENT_BUCKET_MS;
        while (self.buckets.front()).is_some_and(|b| b.index + RECENT_BUCKETS <= index) {
            self.buckets.pop_front();
        }
        if self.buckets.back().is_none_or(|b| b.index != index) {
            self.buckets.push_back(Bucket {
                index,
                ..Bucket::default()
            });
        }
        self.buckets.back_mut().expect("pushed above")
    }

    /// The buckets of the last ten minutes up to `now` (Unix ms), oldest first, each with its
    /// start (`at_ms`); empty ones too. With `pool`, its hits and misses.
    pub(crate) fn series(&self, now: u64, pool: bool) -> Vec<serde_json::Value> {
        let last = now / RECENT_BUCKET_MS;
        let empty = Bucket::default();
        // Always ten minutes: those before the gateway started are empty.
        (0..RECENT_BUCKETS)
            .rev()
            .map(|ago| {
                let index = last.checked_sub(ago);
                let b = (self.buckets.iter())
                    .find(|b| Some(b.index) == index)
                    .unwrap_or(&empty);
                let (sum, count, max) = b.added_ms;
                let start = (last - ago.min(last)) * RECENT_BUCKET_MS;
                let mut bucket = serde_json::json!({
                    "at_ms": start,
                    "turns": b.turns,
                    "tokens": b.tokens,
                    "added_ms_avg": (count > 0).then(|| sum / count),
                    "added_ms_sum": sum,
                    "added_count": count,
                    "added_ms_max": (count > 0).then_some(max),
                });
                if pool {
                    bucket["pool_hits"] = b.pool_hits.into();
                    bucket["pool_misses"] = b.pool_misses.into();
                }
                bucket
            })
            .collect()
    }
}

/// What the gateway counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Metrics {
    /// Responses by (API, HTTP status).
    pub requests: BTreeMap<(&'static str, u16), u64>,
    /// Requests that reached a CLI turn, by how their session was found.
    pub turns: BTreeMap<&'static str, u64>,
    /// Resumed conversations, by why they had no live CLI.
    pub resumes: BTreeMap<&'static str, u64>,
    /// Histories retold in one prompt, by why no transcript could carry them.
    pub rebuilds: BTreeMap<&'static str, u64>,
    /// Session store calls that failed, by what was asked: `find` (the request got a 503),
    /// `load` (a transcript to resume: the request got a 503), `write` (retried with the
    /// conversation's next write).
    pub store_failures: BTreeMap<&'static str, u64>,
    pub spawns: u64,
    /// CLI ends by how: `exit`, `signal`, `spawn_failed`.
    pub exits: BTreeMap<&'static str, u64>,
    /// Tokens of completed responses, by kind.
    pub tokens: BTreeMap<&'static str, u64>,
    /// The cost of CLI turns, in billionths of a US dollar ([`usage`](super::usage)).
    pub cost_nano_usd: u64,
    pub held_call_timeouts: u64,
    /// New conversations a warm CLI took, and those that found none.
    pub pool_hits: u64,
    pub pool_misses: u64,
    pub clients_gone: u64,
    /// From a request to the first byte of its response (the head of a stream, or the whole
    /// JSON answer).
    pub first_byte: Histogram,
    /// From a request to the end of its response.
    pub response: Histogram,
    /// What the gateway added to a response's first byte: its time to first byte less the
    /// CLI's own (from the turn reaching it to its first answer), a new CLI's start included.
    pub added: Histogram,
    /// The last ten minutes, for the console.
    pub recent: Recent,
}

/// The gauges the gateway reads from its state when asked.
pub(crate) struct Gauges {
    pub sessions: usize,
    pub starting: usize,
    pub pooled: usize,
    pub pool_ready: usize,
    pub held: usize,
    pub in_flight: usize,
    pub queued: usize,
    pub stored: usize,
    pub approvals: usize,
}

impl Metrics {
    /// Every series, for the operator.
    pub(crate) fn render(&self, gauges: &Gauges) -> String {
        self.write(gauges, true)
    }

    /// A tenant's series: its requests, turns, tokens, latencies and clients gone, and the
    /// gauges of its own sessions, responses, queued requests and approvals; none of the
    /// gateway's processes (spawns, exits, the pool, held calls, stored responses).
    pub(crate) fn render_tenant(&self, gauges: &Gauges) -> String {
        self.write(gauges, false)
    }

    fn write(&self, gauges: &Gauges, all: bool) -> String {
        let mut out = String::new();
        header(
            &mut out,
            "ccwire_requests_total",
            "Responses sent, by API and HTTP status.",
            "counter",
        );
        for ((api, status), n) in &self.requests {
            let _ = writeln!(
                out,
                "ccwire_requests_total{{api=\"{api}\",status=\"{status}\"}} {n}"
            );
        }
        header(
            &mut out,
            "ccwire_turns_total",
            "Requests that reached a Claude Code turn, by how their session was found.",
            "counter",
        );
        for (kind, n) in &self.turns {
            let _ = writeln!(out, "ccwire_turns_total{{session=\"{kind}\"}} {n}");
        }
        header(
            &mut out,
            "ccwire_resumes_total",
            "Conversations a new Claude Code session resumed from the session store, by why \
             they had no live one.",
            "counter",
        );
        for (reason, n) in &self.resumes {
            let _ = writeln!(out, "ccwire_resumes_total{{reason=\"{reason}\"}} {n}");
        }
        header(
            &mut out,
            "ccwire_store_failures_total",
            "Session store calls that failed, by what was asked (find: the request got a 503; \
             write: kept to retry with the conversation's next write).",
            "counter",
        );
        for (op, n) in &self.store_failures {
            let _ = writeln!(out, "ccwire_store_failures_total{{op=\"{op}\"}} {n}");
        }
        header(
            &mut out,
            "ccwire_rebuilds_total",
            "Histories retold to a new Claude Code session in one prompt, by why no transcript \
             could carry them.",
            "counter",
        );
        for (reason, n) in &self.rebuilds {
            let _ = writeln!(out, "ccwire_rebuilds_total{{reason=\"{reason}\"}} {n}");
        }
        let gauges = [
            (
                true,
                "ccwire_sessions",
                "Live Claude Code sessions (conversations).",
                gauges.sessions,
            ),
            (
                false,
                "ccwire_sessions_starting",
                "Claude Code processes starting for a request.",
                gauges.starting,
            ),
            (
                false,
                "ccwire_pool_ready",
                "Claude Code processes started ahead that are ready (answered initialize).",
                gauges.pool_ready,
            ),
            (
                false,
                "ccwire_pool_sessions",
                "Claude Code processes started ahead, waiting for a conversation.",
                gauges.pooled,
            ),
            (
                false,
                "ccwire_held_tool_calls",
                "Client tool calls held open for the client's result.",
                gauges.held,
            ),
            (
                true,
                "ccwire_responses_in_flight",
                "Responses being produced.",
                gauges.in_flight,
            ),
            (
                true,
                "ccwire_requests_queued",
                "Requests waiting for a free turn.",
                gauges.queued,
            ),
            (
                true,
                "ccwire_pending_approvals",
                "Permission requests waiting for a person's answer.",
                gauges.approvals,
            ),
            (
                false,
                "ccwire_stored_responses",
                "Stored Responses API responses.",
                gauges.stored,
            ),
        ];
        for (_, name, help, value) in gauges.into_iter().filter(|g| all || g.0) {
            header(&mut out, name, help, "gauge");
            let _ = writeln!(out, "{name} {value}");
        }
        let counters = [
            (
                false,
                "ccwire_cli_spawns_total",
                "Claude Code processes asked for.",
                self.spawns,
            ),
            (
                false,
                "ccwire_held_call_timeouts_total",
                "Held client tool calls answered with a timeout.",
                self.held_call_timeouts,
            ),
            (
                true,
                "ccwire_clients_gone_total",
                "Clients that went away before their response ended.",
                self.clients_gone,
            ),
            (
                false,
                "ccwire_pool_hits_total",
                "New conversations a CLI started ahead took.",
                self.pool_hits,
            ),
            (
                false,
                "ccwire_pool_misses_total",
                "New conversations that found no CLI started ahead with their settings.",
                self.pool_misses,
            ),
        ];
        for (_, name, help, value) in counters.into_iter().filter(|c| all || c.0) {
            header(&mut out, name, help, "counter");
            let _ = writeln!(out, "{name} {value}");
        }
        if all {
            header(
                &mut out,
                "ccwire_cli_exits_total",
                "Claude Code processes that ended (exit, signal) or could not start (spawn_failed).",
                "counter",
            );
            for (how, n) in &self.exits {
                let _ = writeln!(out, "ccwire_cli_exits_total{{how=\"{how}\"}} {n}");
            }
        }
        header(
            &mut out,
            "ccwire_tokens_total",
            "Model tokens of completed responses, by kind.",
            "counter",
        );
        for (kind, n) in &self.tokens {
            let _ = writeln!(out, "ccwire_tokens_total{{kind=\"{kind}\"}} {n}");
        }
        header(
            &mut out,
            "ccwire_cost_usd_total",
            "The cost of Claude Code turns, as the CLI reports it (list prices where it cannot).",
            "counter",
        );
        let _ = writeln!(
            out,
            "ccwire_cost_usd_total {}",
            self.cost_nano_usd as f64 / 1e9
        );
        self.first_byte.write(
            &mut out,
            "ccwire_time_to_first_byte_seconds",
            "From a request to the first byte of its response.",
        );
        self.response.write(
            &mut out,
            "ccwire_response_seconds",
            "From a request to the end of its response.",
        );
        self.added.write(
            &mut out,
            "ccwire_added_seconds",
            "What the gateway added to a response's first byte (a new CLI's start included).",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_cumulatively_with_an_infinite_bucket() {
        let mut h = Histogram::default();
        for s in [0.0005, 0.02, 0.02, 7.0, 1000.0] {
            h.observe(s);
        }
        let mut out = String::new();
        h.write(&mut out, "t", "T.");
        assert!(out.contains("t_bucket{le=\"0.001\"} 1\n"));
        assert!(out.contains("t_bucket{le=\"0.025\"} 3\n"));
        assert!(out.contains("t_bucket{le=\"10\"} 4\n"));
        assert!(out.contains("t_bucket{le=\"300\"} 4\n"));
        assert!(out.contains("t_bucket{le=\"+Inf\"} 5\n"));
        assert!(out.contains("t_count 5\n"));
        assert!(out.starts_with("# HELP t T.\n# TYPE t histogram\n"));
    }
}

/// A label's value as the Prometheus text format writes it (`\\`, `"` and newlines escaped).
pub(crate) fn label_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `text` (the Prometheus text format) with the label `name="value"` on every sample.
pub(crate) fn with_label(text: &str, name: &str, value: &str) -> String {
    let label = format!("{name}=\"{}\"", label_value(value));
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            out.push_str(line);
        } else if let Some((series, labels)) = line.split_once('{') {
            let _ = write!(out, "{series}{{{label},{labels}");
        } else if let Some((series, sample)) = line.split_once(' ') {
            let _ = write!(out, "{series}{{{label}}} {sample}");
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod label_tests {
    use super::with_label;

    #[test]
    fn every_sample_gets_the_label_and_nothing_else_changes() {
        let text =
            "# HELP a An a.\n# TYPE a counter\na 1\nb{api=\"x\"} 2\nc_bucket{le=\"0.5\"} 3\n";
        assert_eq!(
            with_label(text, "node", "gw\"1"),
            "# HELP a An a.\n# TYPE a counter\na{node=\"gw\\\"1\"} 1\nb{node=\"gw\\\"1\",api=\"x\"} 2\nc_bucket{node=\"gw\\\"1\",le=\"0.5\"} 3\n"
        );
    }
}

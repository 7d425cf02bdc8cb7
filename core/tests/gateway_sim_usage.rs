//! Usage in simulation: each key's turns metered by day and model from the CLI's results,
//! `GET /v1/usage` (JSON and CSV, a key's own or the admin's every key's), the rate-limit
//! windows a `rate_limit_event` reports (headers, `/metrics`), and a session store that keeps
//! them across a restart.

mod sim;
use sim::*;

/// 100 seconds before midnight (UTC) of 2026-11-28.
const EPOCH_MS: u64 = 1_795_910_300_000;

fn gateway(store: bool) -> Sim {
    with_quotas(store, &[])
}

/// A gateway whose keys alice and bob have these quotas (by key).
fn with_quotas(store: bool, quotas: &[(&str, &str)]) -> Sim {
    let config = GatewayConfig {
        store,
        quotas: (quotas.iter())
            .map(|(key, spec)| (tenant_id(key), spec.parse().unwrap()))
            .collect(),
        unix_epoch_ms: EPOCH_MS,
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into(), "bob".into()],
            admin_key: Some("root".into()),
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    };
    let mut sim = Sim::new(config);
    if store {
        sim.store = Some(SimStore::default());
    }
    sim
}

fn turn(sim: &mut Sim, key: &str, messages: Value, stream: bool) -> RequestId {
    let id = sim.send(Api::Anthropic, key, anthropic(messages, stream));
    assert_eq!(sim.response(id).status, 200, "{}", sim.response(id).text());
    id
}

/// `GET path` with `key`: the status and body.
fn get(sim: &mut Sim, key: &str, path: &str) -> (u16, String) {
    let (status, body, _) = console(sim, key, path);
    (status, body)
}

fn usage(sim: &mut Sim, key: &str, query: &str) -> Value {
    let (status, body) = get(sim, key, &format!("/v1/usage{query}"));
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Two turns of alice's in one conversation and one of bob's on 2026-11-28, one of alice's on
/// the 29th.
fn two_days(sim: &mut Sim) {
    turn(
        sim,
        "alice",
        json!([{"role": "user", "content": "Hi"}]),
        false,
    );
    let history = json!([{"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "echo: Hi"},
        {"role": "user", "content": "Again"}]);
    turn(sim, "alice", history, true);
    turn(
        sim,
        "bob",
        json!([{"role": "user", "content": "Yo"}]),
        false,
    );
    sim.advance(200_000);
    turn(
        sim,
        "alice",
        json!([{"role": "user", "content": "Next day"}]),
        false,
    );
}

#[test]
fn each_keys_turns_are_metered_by_day_and_model_and_a_key_sees_its_own() {
    let mut sim = gateway(false);
    two_days(&mut sim);
    let alice = tenant_id("alice");
    let mine = usage(&mut sim, "alice", "");
    assert_eq!(
        (&mine["from"], &mine["to"]),
        (&json!("2026-10-31"), &json!("2026-11-29"))
    );
    let rows = mine["data"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{mine}");
    // The second turn of the conversation's CLI is the difference of its cumulative figures.
    assert_eq!(
        rows[0],
        json!({"key": alice, "day": "2026-11-28", "model": "fake", "turns": 2,
            "input_tokens": 24, "output_tokens": 10, "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0, "cost_usd": 0.0002})
    );
    assert_eq!(
        (&rows[1]["day"], &rows[1]["turns"]),
        (&json!("2026-11-29"), &json!(1))
    );
    assert_eq!(mine["total"]["turns"], 3);
    assert_eq!(mine["total"]["cost_usd"], 0.0003);
    // Another key's usage is not alice's to see; the admin sees every key's.
    let bob = tenant_id("bob");
    let (status, body) = get(&mut sim, "alice", &format!("/v1/usage?key={bob}"));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("its own usage only"), "{body}");
    let all = usage(&mut sim, "root", "");
    assert_eq!(all["total"]["turns"], 4);
    let bobs = usage(
        &mut sim,
        "root",
        &format!("?key={bob}&from=2026-11-28&to=2026-11-28"),
    );
    assert_eq!(bobs["data"].as_array().unwrap().len(), 1);
    assert_eq!(bobs["data"][0]["key"], bob);
    let other_model = usage(&mut sim, "root", "?model=claude-opus-4-5");
    assert_eq!(other_model["data"], json!([]));
    let day_before = usage(&mut sim, "root", "?to=2026-11-27");
    assert_eq!(day_before["total"]["turns"], 0);
    // No key at all is a 401; bad days and ranges are 400s that say why.
    let unauthenticated = sim.http("GET", "/v1/usage", &[], "").unwrap();
    assert_eq!(sim.response(unauthenticated).status, 401);
    for (query, why) in [
        ("?from=2026-02-30", "is not a day"),
        ("?from=2026-11-29&to=2026-11-28", "from is after to"),
        ("?from=2025-01-01&to=2026-11-28", "more than 366 days"),
        ("?format=xml", "is not csv or json"),
    ] {
        let (status, body) = get(&mut sim, "root", &format!("/v1/usage{query}"));
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body.contains(why), "{query}: {body}");
    }
    // The cost is counted in /metrics too (the operator's, and alice's own).
    let (_, metrics) = get(&mut sim, "root", "/metrics");
    assert!(
        metrics.contains("\nccwire_cost_usd_total 0.0004\n"),
        "{metrics}"
    );
    let (_, own) = get(&mut sim, "alice", "/metrics");
    assert!(own.contains("\nccwire_cost_usd_total 0.0003\n"), "{own}");
}

#[test]
fn usage_comes_as_csv_for_a_spreadsheet() {
    let mut sim = gateway(false);
    two_days(&mut sim);
    let id = sim
        .http(
            "GET",
            "/v1/usage?format=csv",
            &[("authorization", "Bearer root")],
            "",
        )
        .unwrap();
    let response = sim.response(id);
    assert_eq!(
        response.header("content-type"),
        Some("text/csv; charset=utf-8")
    );
    assert!(response
        .header("content-disposition")
        .unwrap()
        .contains("ccwire-usage-2026-10-31-2026-11-29.csv"));
    let text = response.text();
    let lines: Vec<&str> = text.split("\r\n").collect();
    assert_eq!(
        lines[0],
        "key,day,model,turns,input_tokens,output_tokens,cache_read_input_tokens,\
         cache_creation_input_tokens,cost_usd"
    );
    assert_eq!(lines.len(), 5, "a header, three rows and the end: {text:?}");
    assert!(
        lines[1].ends_with(",2026-11-28,fake,2,24,10,0,0,0.0002"),
        "{text}"
    );
    // `Accept: text/csv` asks for it too.
    let id = sim
        .http(
            "GET",
            "/v1/usage",
            &[("authorization", "Bearer alice"), ("accept", "text/csv")],
            "",
        )
        .unwrap();
    assert_eq!(sim.response(id).text().split("\r\n").count(), 4);
}

#[test]
fn a_rate_limit_event_gives_the_windows_their_headers_and_gauges() {
    let mut sim = gateway(false);
    let warned = turn(
        &mut sim,
        "alice",
        json!([{"role": "user", "content": "limit: allowed_warning 0.8"}]),
        false,
    );
    let response = sim.response(warned);
    let header = |name: &str| {
        let name = format!("anthropic-ratelimit-unified-{name}");
        response.header(&name).map(str::to_owned)
    };
    assert_eq!(header("status").as_deref(), Some("allowed_warning"));
    assert_eq!(header("representative-claim").as_deref(), Some("five_hour"));
    assert_eq!(header("5h-utilization").as_deref(), Some("0.8"));
    assert_eq!(header("5h-reset").as_deref(), Some("1893456000"));
    // Every response after carries them, streamed ones and other keys' too.
    let streamed = turn(
        &mut sim,
        "bob",
        json!([{"role": "user", "content": "Hi"}]),
        true,
    );
    assert_eq!(
        sim.response(streamed)
            .header("anthropic-ratelimit-unified-5h-utilization"),
        Some("0.8")
    );
    let windows = usage(&mut sim, "bob", "")["windows"].clone();
    let kinds: Vec<&str> = (windows.as_array().unwrap().iter())
        .map(|w| w["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["five_hour", "unified"]);
    assert_eq!(windows[0]["utilization"], 0.8);
    assert_eq!(windows[0]["credential"], "login");
    assert_eq!(windows[0]["has_reset"], false);
    // Rejected: the next event replaces what was known.
    turn(
        &mut sim,
        "alice",
        json!([{"role": "user", "content": "limit: rejected 1.0"}]),
        false,
    );
    let (_, metrics) = get(&mut sim, "root", "/metrics");
    for series in [
        "ccwire_ratelimit_utilization{credential=\"login\",window=\"five_hour\"} 1\n",
        "ccwire_ratelimit_resets_at_seconds{credential=\"login\",window=\"five_hour\"} 1893456000\n",
        "ccwire_ratelimit_status{credential=\"login\",window=\"unified\",status=\"rejected\"} 1\n",
    ] {
        assert!(metrics.contains(series), "{series}: {metrics}");
    }
}

#[test]
fn with_a_store_usage_and_windows_are_kept_there_and_read_back_after_a_restart() {
    let mut sim = gateway(true);
    two_days(&mut sim);
    turn(
        &mut sim,
        "bob",
        json!([{"role": "user", "content": "limit: allowed_warning 0.9"}]),
        false,
    );
    let store = sim.store.as_ref().unwrap();
    assert_eq!(store.metered.len(), 4, "{:?}", store.metered);
    assert_eq!(store.windows.len(), 2);
    let days = "?from=2026-11-28&to=2026-11-29";
    let before = usage(&mut sim, "root", days);
    // A new gateway on the same store reads what the old one kept.
    let store = sim.store.take();
    let mut sim = gateway(true);
    sim.store = store;
    let after = usage(&mut sim, "root", days);
    assert_eq!(after["data"], before["data"]);
    assert_eq!(after["total"]["turns"], 5);
    assert_eq!(after["windows"].as_array().unwrap().len(), 2);
    // A store that cannot be read is a 503 that asks to retry.
    sim.store.as_mut().unwrap().down = Some(true);
    let (status, body) = get(&mut sim, "alice", "/v1/usage");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("retry"), "{body}");
}

fn hello(sim: &mut Sim, key: &str, text: &str) -> RequestId {
    let body = anthropic(json!([{"role": "user", "content": text}]), false);
    sim.send(Api::Anthropic, key, body)
}

#[test]
fn a_key_over_its_daily_token_quota_gets_a_429_until_the_day_ends_and_others_go_on() {
    // Each of the fake CLI's turns is 17 tokens.
    let mut sim = with_quotas(false, &[("alice", "tokens/day=30")]);
    for text in ["One", "Two"] {
        let id = hello(&mut sim, "alice", text);
        assert_eq!(sim.response(id).status, 200);
    }
    let clis = sim.specs.len();
    let refused = hello(&mut sim, "alice", "Three");
    let response = sim.response(refused);
    assert_eq!(response.status, 429, "{}", response.text());
    let body = response.json();
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert_eq!(
        body["error"]["message"],
        "this key has used 34 tokens of its quota of 30 tokens per day; it resets at \
         2026-11-29T00:00:00Z"
    );
    // It says when, and that retrying before then is vain.
    assert_eq!(response.header("retry-after"), Some("99"));
    assert_eq!(response.header("x-should-retry"), Some("false"));
    assert_eq!(response.header("x-ccwire-quota"), Some("tokens/day=30"));
    assert_eq!(sim.specs.len(), clis, "no CLI started");
    let other = hello(&mut sim, "bob", "Hi");
    assert_eq!(sim.response(other).status, 200);
    // A new day, a new allowance.
    sim.advance(100_000);
    let next_day = hello(&mut sim, "alice", "Four");
    assert_eq!(sim.response(next_day).status, 200);
}

#[test]
fn a_cost_quota_counts_what_other_gateways_added_to_the_store() {
    let mut sim = with_quotas(true, &[("alice", "cost/month=0.0008")]);
    // Another gateway of the cluster has metered alice's turns this month.
    let store = sim.store.as_mut().unwrap();
    let row = (
        "2026-11-03".to_owned(),
        tenant_id("alice"),
        "claude-opus-4-5".to_owned(),
    );
    let spent = Tally {
        turns: 3,
        cost_nano_usd: 400_000,
        ..Tally::default()
    };
    store.metered.insert(row.clone(), spent);
    // The first turn waits for the store's figures: under the limit, it goes on.
    let first = hello(&mut sim, "alice", "One");
    assert_eq!(sim.response(first).status, 200);
    // The other gateway goes on spending; this one sees it once it reads again (10 s).
    sim.store
        .as_mut()
        .unwrap()
        .metered
        .get_mut(&row)
        .unwrap()
        .cost_nano_usd = 600_000;
    let before = hello(&mut sim, "alice", "Two");
    assert_eq!(
        sim.response(before).status,
        200,
        "within 10 s of the last read"
    );
    sim.advance(10_000);
    let asks = hello(&mut sim, "alice", "Three");
    assert_eq!(
        sim.response(asks).status,
        200,
        "read again: its answer counts from now"
    );
    let refused = hello(&mut sim, "alice", "Four");
    let response = sim.response(refused);
    assert_eq!(response.status, 429, "{}", response.text());
    let message = response.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("used $0.0009 of its quota of $0.0008 per month; it resets at 2026-12-01"),
        "{message}"
    );
    let bob = hello(&mut sim, "bob", "Hi");
    assert_eq!(sim.response(bob).status, 200, "no quota");
}

#[test]
fn a_quota_the_store_cannot_read_is_a_503_to_retry() {
    let mut sim = with_quotas(true, &[("alice", "tokens/week=1000")]);
    sim.store.as_mut().unwrap().down = Some(true);
    let refused = hello(&mut sim, "alice", "One");
    let response = sim.response(refused);
    assert_eq!(response.status, 503, "{}", response.text());
    assert!(response.text().contains("quota cannot be checked"));
    sim.store.as_mut().unwrap().down = None;
    let again = hello(&mut sim, "alice", "One");
    assert_eq!(sim.response(again).status, 200);
}

#[test]
fn a_key_runs_no_more_conversations_at_once_than_its_quota_allows() {
    let mut sim = with_quotas(false, &[("alice", "conversations=1")]);
    let busy = stall(&mut sim, "alice");
    assert!(!sim.response(busy).ended);
    let second = hello(&mut sim, "alice", "Another");
    let response = sim.response(second);
    assert_eq!(response.status, 429, "{}", response.text());
    assert!(response.text().contains("its maximum of 1 conversations"));
    // bob has no such quota.
    stall(&mut sim, "bob");
    let and = hello(&mut sim, "bob", "And");
    assert_eq!(sim.response(and).status, 200);
}

#[test]
fn a_gateway_without_a_store_keeps_400_days_of_usage() {
    let mut sim = gateway(false);
    turn(
        &mut sim,
        "alice",
        json!([{"role": "user", "content": "Long ago"}]),
        false,
    );
    let old = "?from=2026-11-28&to=2026-11-28";
    assert_eq!(usage(&mut sim, "root", old)["total"]["turns"], 1);
    sim.advance(400 * 86_400_000);
    turn(
        &mut sim,
        "alice",
        json!([{"role": "user", "content": "Now"}]),
        false,
    );
    assert_eq!(
        usage(&mut sim, "root", old)["total"]["turns"],
        0,
        "forgotten"
    );
    assert_eq!(usage(&mut sim, "root", "")["total"]["turns"], 1);
}

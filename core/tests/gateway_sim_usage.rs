//! Usage in simulation: each key's turns metered by day and model from the CLI's results,
//! `GET /v1/usage` (JSON and CSV, a key's own or the admin's every key's), the rate-limit
//! windows a `rate_limit_event` reports (headers, `/metrics`), and a session store that keeps
//! them across a restart.

mod sim;
use sim::*;

/// 100 seconds before midnight (UTC) of 2026-11-28.
const EPOCH_MS: u64 = 1_795_910_300_000;

fn gateway(store: bool) -> Sim {
    let config = GatewayConfig {
        store,
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

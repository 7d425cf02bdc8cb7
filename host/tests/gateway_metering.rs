//! End-to-end: what each key used and the subscription's rate-limit windows, against the real
//! CLI (signed in with a subscription token, so that it reports the windows) and the scripted
//! Messages API — `GET /v1/usage` (JSON and CSV), the `anthropic-ratelimit-unified-*` headers,
//! `/metrics`, and a restart on the same session store.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ccwire_host::serve::GatewayOptions;
use ccwire_host::store::DirStore;
use ccwire_tests::{Match, Reply, Script, Usage};
use serde_json::{json, Value};
use support::*;

/// What each answer reports: at the CLI's list price for Sonnet 4.5, $0.0045.
const TURN: Usage = Usage {
    input_tokens: 1000,
    output_tokens: 100,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
};

/// The five-hour window past its 75% warning, as the subscription's API says it.
fn script() -> Script {
    Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .when(Match::Any, Reply::text("Counted."))
        .usage(TURN)
        .header("anthropic-ratelimit-unified-status", "allowed_warning")
        .header("anthropic-ratelimit-unified-reset", "1893456000")
        .header(
            "anthropic-ratelimit-unified-representative-claim",
            "five_hour",
        )
        .header("anthropic-ratelimit-unified-5h-utilization", "0.8")
        .header("anthropic-ratelimit-unified-5h-reset", "1893456000")
        .header("anthropic-ratelimit-unified-5h-surpassed-threshold", "0.75")
}

fn configure(options: &mut GatewayOptions, store: &std::path::Path) {
    // A subscription's token, not an API key: the CLI reports its windows only then.
    options.env.retain(|(name, _)| name != "ANTHROPIC_API_KEY");
    (options.env).push(("CLAUDE_CODE_OAUTH_TOKEN".into(), "dummy".into()));
    options.env_remove.push("ANTHROPIC_API_KEY".into());
    options.engine.http.api_keys = vec!["alice".into(), "bob".into()];
    options.engine.http.admin_key = Some("root".into());
    options.store = Some(Arc::new(DirStore::new(store, Duration::from_secs(3600))));
}

async fn get(gw: &Gw, path: &str, key: &str) -> (u16, String, reqwest::header::HeaderMap) {
    let response = gw
        .http
        .get(gw.url(path))
        .header("authorization", format!("Bearer {key}"))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, response.text().await.unwrap(), headers)
}

async fn usage(gw: &Gw, key: &str) -> Value {
    let (status, body, _) = get(gw, "/v1/usage", key).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_key_s_usage_and_the_subscription_s_windows_are_served_and_kept() {
    let store = tempfile::tempdir().unwrap();
    let mut gw = Gw::start_with(script(), |o| configure(o, store.path())).await;
    let turn = |text: &str| anthropic(json!([{"role": "user", "content": text}]));
    let response = gw.post("/v1/messages", &turn("hello"), Some("alice")).await;
    assert_eq!(response.status(), 200);
    let header = |name: &str| {
        let name = format!("anthropic-ratelimit-unified-{name}");
        (response.headers().get(&name)).map(|v| v.to_str().unwrap().to_owned())
    };
    // The windows the CLI reported reach the client as the Anthropic API's headers.
    assert_eq!(header("status").as_deref(), Some("allowed_warning"));
    assert_eq!(header("representative-claim").as_deref(), Some("five_hour"));
    assert_eq!(header("5h-utilization").as_deref(), Some("0.8"));
    assert_eq!(header("5h-reset").as_deref(), Some("1893456000"));
    let (status, _, _) = gw
        .call("/v1/messages", &turn("hi from bob"), Some("bob"))
        .await;
    assert_eq!(status, 200);

    // alice sees her own turn, at the CLI's own cost; the windows with it.
    let mine = usage(&gw, "alice").await;
    let rows = mine["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{mine}");
    let row = &rows[0];
    assert_eq!(row["model"], MODEL);
    assert_eq!(
        (&row["turns"], &row["input_tokens"]),
        (&json!(1), &json!(1000))
    );
    assert_eq!(row["output_tokens"], 100);
    assert_eq!(row["cost_usd"], 0.0045, "{row}");
    let windows = mine["windows"].as_array().unwrap();
    let five_hour = (windows.iter())
        .find(|w| w["kind"] == "five_hour")
        .expect("{mine}");
    assert_eq!(five_hour["utilization"], 0.8);
    assert_eq!(five_hour["status"], "allowed_warning");
    assert!(five_hour["credential"]
        .as_str()
        .unwrap()
        .starts_with("oauth-"));
    // The operator sees both keys', as CSV too, and the windows in /metrics.
    let all = usage(&gw, "root").await;
    assert_eq!(all["total"]["turns"], 2, "{all}");
    assert_eq!(all["total"]["cost_usd"], 0.009, "{all}");
    let (status, csv, headers) = get(&gw, "/v1/usage?format=csv", "root").await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/csv; charset=utf-8");
    assert_eq!(csv.lines().count(), 3, "{csv}");
    let (_, metrics, _) = get(&gw, "/metrics", "root").await;
    assert!(metrics.contains("window=\"five_hour\"} 0.8\n"), "{metrics}");
    assert!(
        metrics.contains("\nccwire_cost_usd_total 0.009\n"),
        "{metrics}"
    );

    // A restarted gateway on the same store serves what the old one kept.
    gw.restart(|o| configure(o, store.path())).await;
    let after = usage(&gw, "root").await;
    assert_eq!(after["data"], all["data"]);
    let kinds: Vec<&Value> = (after["windows"].as_array().unwrap().iter())
        .map(|w| &w["kind"])
        .collect();
    assert!(kinds.contains(&&json!("five_hour")), "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_over_its_daily_token_quota_gets_a_429_naming_its_reset_and_another_goes_on() {
    let store = tempfile::tempdir().unwrap();
    let quota = |o: &mut GatewayOptions| {
        configure(o, store.path());
        let alice = ccwire_core::gateway::tenant_id("alice");
        (o.engine.quotas).insert(alice, "tokens/day=1000".parse().unwrap());
    };
    let mut gw = Gw::start_with(script(), quota).await;
    let turn = |text: &str| anthropic(json!([{"role": "user", "content": text}]));
    // Under the quota a turn goes on, whatever it takes (1100 tokens).
    let (status, _, body) = gw.call("/v1/messages", &turn("one"), Some("alice")).await;
    assert_eq!(status, 200, "{body}");
    let response = gw.post("/v1/messages", &turn("two"), Some("alice")).await;
    assert_eq!(response.status(), 429);
    let headers = response.headers().clone();
    assert_eq!(headers["x-should-retry"], "false");
    assert_eq!(headers["x-ccwire-quota"], "tokens/day=1000");
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&retry), "{retry}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "this key has used 1100 tokens of its quota of 1000 tokens per day; it resets at "
        ) && message.ends_with("T00:00:00Z"),
        "{message}"
    );
    let (status, _, _) = gw.call("/v1/messages", &turn("hi"), Some("bob")).await;
    assert_eq!(status, 200);
    // The quota holds across a restart: the store has what alice used.
    gw.restart(quota).await;
    let (status, _, body) = gw.call("/v1/messages", &turn("three"), Some("alice")).await;
    assert_eq!(status, 429, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_window_is_a_429_that_says_when_and_the_windows_show_it() {
    let store = tempfile::tempdir().unwrap();
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .on_prompt(
            "PLEASE-LIMIT",
            Reply::error(
                429,
                "rate_limit_error",
                "This request would exceed your limit",
            ),
        )
        .header("anthropic-ratelimit-unified-status", "rejected")
        .header("anthropic-ratelimit-unified-reset", "1893456000")
        .header(
            "anthropic-ratelimit-unified-representative-claim",
            "five_hour",
        )
        .header("anthropic-ratelimit-unified-5h-utilization", "1.0")
        .header("anthropic-ratelimit-unified-5h-reset", "1893456000")
        .header("anthropic-ratelimit-unified-5h-status", "rejected")
        .when(Match::Any, Reply::text("Counted."))
        .usage(TURN);
    let gw = Gw::start_with(script, |o| configure(o, store.path())).await;
    let turn = |text: &str| anthropic(json!([{"role": "user", "content": text}]));
    let (status, _, _) = gw.call("/v1/messages", &turn("hello"), Some("alice")).await;
    assert_eq!(status, 200);
    let response = gw
        .post("/v1/messages", &turn("PLEASE-LIMIT now"), Some("alice"))
        .await;
    assert_eq!(response.status(), 429);
    let headers = response.headers().clone();
    assert_eq!(headers["anthropic-ratelimit-unified-status"], "rejected");
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(retry > 86_400, "until 2030: {retry}");
    let usage = usage(&gw, "root").await;
    let unified = (usage["windows"].as_array().unwrap().iter())
        .find(|w| w["kind"] == "unified")
        .expect("the account's status");
    assert_eq!(unified["status"], "rejected", "{usage}");
    let (_, metrics, _) = get(&gw, "/metrics", "root").await;
    assert!(
        metrics.contains("window=\"unified\",status=\"rejected\"} 1"),
        "{metrics}"
    );
}

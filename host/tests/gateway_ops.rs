//! End-to-end: operating `ccwire serve` — draining on SIGTERM and on `POST /admin/drain`,
//! keep-alives on a slow stream — through the `ccwire` binary or its server, in front of the
//! real CLI and the scripted model.

mod support;

use std::time::Duration;

use ccwire_tests::{Match, Reply, Script};
use serde_json::{json, Value};
use support::*;

async fn post(http: &reqwest::Client, addr: &str, path: &str, body: &Value) -> (u16, Value) {
    let response = http
        .post(format!("http://{addr}{path}"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The held turn's continuation: the first request's messages, the tool calls, their results.
fn with_results(first: &Value, response: &Value) -> Value {
    let mut messages = first["messages"].as_array().unwrap().clone();
    messages.push(json!({"role": "assistant", "content": response["content"]}));
    messages.push(json!({"role": "user", "content": results_for(response)}));
    let mut body = first.clone();
    body["messages"] = json!(messages);
    body
}

fn not_running(pids: &[u32]) -> bool {
    pids.iter().all(|p| !alive(*p))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_new_conversations_are_refused_held_turns_finish_then_it_exits() {
    let fake = ccwire_tests::FakeAnthropic::start(script()).await;
    let home = ccwire_tests::cli::OfflineHome::new();
    let mut serve = ServeProcess::start(&home, &fake, &["--drain-grace", "60"], &[]).await;
    let http = reqwest::Client::new();
    let addr = serve.addr.clone();
    let idle = anthropic(json!([{"role": "user", "content": "an idle conversation"}]));
    assert_eq!(post(&http, &addr, "/v1/messages", &idle).await.0, 200);
    let held = anthropic(json!([{"role": "user", "content": "PLEASE-LOOKUP both"}]));
    let mut held_body = held.clone();
    held_body["tools"] = json!([lookup_tool()]);
    let (status, calls) = post(&http, &addr, "/v1/messages", &held_body).await;
    assert_eq!(
        (status, calls["stop_reason"].as_str()),
        (200, Some("tool_use"))
    );
    let clis = serve.cli_pids();
    assert_eq!(clis.len(), 2);

    let pid = nix::unistd::Pid::from_raw(serve.child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    // The idle conversation's CLI ends; the held one stays for its results.
    eventually("the idle CLI closed", || serve.cli_pids().len() == 1).await;
    let new = anthropic(json!([{"role": "user", "content": "a new conversation"}]));
    let response = http
        .post(format!("http://{addr}/v1/messages"))
        .json(&new)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
    let (status, answer) = post(
        &http,
        &addr,
        "/v1/messages",
        &with_results(&held_body, &calls),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["stop_reason"], "end_turn",
        "the held turn finished: {answer}"
    );
    // Nothing runs any more: the gateway exits by itself, well before the grace.
    let status = tokio::time::timeout(Duration::from_secs(20), serve.child.wait())
        .await
        .expect("ccwire serve exits once drained")
        .unwrap();
    assert!(status.success(), "{status}");
    eventually("every CLI ended", || not_running(&clis)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_drain_needs_the_admin_key_and_stops_the_gateway() {
    let fake = ccwire_tests::FakeAnthropic::start(script()).await;
    let home = ccwire_tests::cli::OfflineHome::new();
    let serve = ServeProcess::start(&home, &fake, &[], &[("CCWIRE_ADMIN_KEY", "s3cret")]).await;
    let http = reqwest::Client::new();
    let addr = serve.addr.clone();
    let hello = anthropic(json!([{"role": "user", "content": "hello"}]));
    assert_eq!(post(&http, &addr, "/v1/messages", &hello).await.0, 200);
    let clis = serve.cli_pids();
    let drain = |key: Option<&'static str>| {
        let mut request = http
            .post(format!("http://{addr}/admin/drain"))
            .header("content-type", "application/json")
            .body("{}");
        if let Some(key) = key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        request.send()
    };
    assert_eq!(drain(None).await.unwrap().status().as_u16(), 401);
    assert_eq!(drain(Some("wrong")).await.unwrap().status().as_u16(), 401);
    let accepted = drain(Some("s3cret")).await.unwrap();
    assert_eq!(accepted.status().as_u16(), 202);
    let body: Value = accepted.json().await.unwrap();
    assert_eq!(body["draining"], true, "{body}");
    let mut child = serve.child;
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("ccwire serve exits once drained")
        .unwrap();
    assert!(status.success(), "{status}");
    eventually("every CLI ended", || not_running(&clis)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_admin_key_admin_drain_is_refused() {
    let gw = Gw::start(|_| {}).await;
    let response = gw
        .http
        .post(gw.url("/admin/drain"))
        .header("authorization", "Bearer anything")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    assert_eq!(gw.health().await["status"], "ok", "still serving");
    gw.stop().await;
}

/// A stream the model is slow to fill carries keep-alives between its events, in each API's
/// form, and still ends whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_stream_carries_keep_alives() {
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .when_slow(
            Match::Any,
            Reply::text("slow but steady"),
            Duration::from_millis(400),
        );
    let gw = Gw::start_with(script, |o| o.engine.ping_every_ms = 150).await;
    let mut request = anthropic(json!([{"role": "user", "content": "take your time"}]));
    request["stream"] = json!(true);
    let response = gw.post("/v1/messages", &request, None).await;
    let text = response.text().await.unwrap();
    let pings = text.matches("event: ping\n").count();
    assert!(pings >= 2, "{text}");
    assert!(
        text.contains("slow but steady") || text.contains("slow"),
        "{text}"
    );
    assert!(
        text.trim_end()
            .ends_with(r#"data: {"type":"message_stop"}"#),
        "{text}"
    );
    let request = json!({"model": "gpt-4o", "stream": true,
        "messages": [{"role": "user", "content": "take your time too"}]});
    let response = gw.post("/v1/chat/completions", &request, None).await;
    let text = response.text().await.unwrap();
    assert!(text.matches(": ping\n\n").count() >= 2, "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    gw.stop().await;
}

/// With `--approvals http`, the model's Bash call waits for a person: it is listed for the
/// caller's key only, allowed over HTTP it runs (the file exists), denied it does not and the
/// model is told why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enabled_tool_waits_for_a_person_s_approval_over_http() {
    let script = bash_calls(&[
        ("PLEASE-TOUCH", "touch approved.txt", "Create a file"),
        ("PLEASE-REMOVE", "touch denied.txt", "Create another file"),
    ]);
    let gw = Gw::start_with(script, |o| {
        o.engine.http.api_keys = vec!["alice".into(), "bob".into()];
        o.engine.enabled_tools = vec!["Bash".into()];
        o.engine.approvals = true;
    })
    .await;
    let answer = |id: String, decision: Value| {
        gw.http
            .post(gw.url(&format!("/v1/approvals/{id}")))
            .header("x-api-key", "alice")
            .json(&decision)
            .send()
    };
    let turn = |prompt: &'static str| {
        let body = anthropic(json!([{"role": "user", "content": prompt}]));
        let request = gw
            .http
            .post(gw.url("/v1/messages"))
            .header("x-api-key", "alice")
            .json(&body)
            .send();
        tokio::spawn(async move { request.await.unwrap().json::<Value>().await.unwrap() })
    };

    let allowed = turn("PLEASE-TOUCH a file");
    let waiting = gw.approvals_once_asked("alice").await;
    assert_eq!(waiting.len(), 1, "the Bash call waits for a person");
    assert_eq!(waiting[0]["tool_name"], "Bash");
    assert_eq!(waiting[0]["input"]["command"], "touch approved.txt");
    assert!(
        gw.approvals("bob").await.is_empty(),
        "another key sees nothing"
    );
    let workdir = gw.home.workdir();
    assert!(!workdir.join("approved.txt").exists(), "nothing ran yet");
    let id = waiting[0]["id"].as_str().unwrap().to_owned();
    let response = answer(id.clone(), json!({"behavior": "allow"}))
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body = allowed.await.unwrap();
    assert_eq!(body["stop_reason"], "end_turn", "{body}");
    assert!(
        workdir.join("approved.txt").exists(),
        "the allowed command ran"
    );
    // Health, to a tenant: its own conversations, the CLI's release, not the gateway's.
    let health = |key: &'static str| {
        let request = gw.http.get(gw.url("/health")).header("x-api-key", key);
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let (alice, bob) = (health("alice").await, health("bob").await);
    assert_eq!(
        (alice["status"].as_str(), alice["sessions"].as_u64()),
        (Some("ok"), Some(1)),
        "{alice}"
    );
    assert_eq!(bob["sessions"].as_u64(), Some(0), "{bob}");
    for seen in [&alice, &bob] {
        assert!(
            seen["cli"].get("path").is_none() && seen.get("pool").is_none(),
            "{seen}"
        );
        assert!(seen["cli"]["version"].is_string(), "{seen}");
    }
    let again = answer(id, json!({"behavior": "allow"})).await.unwrap();
    assert_eq!(again.status().as_u16(), 404, "an approval is answered once");

    let denied = turn("PLEASE-REMOVE please");
    let waiting = gw.approvals_once_asked("alice").await;
    let id = waiting[0]["id"].as_str().unwrap().to_owned();
    let decision = json!({"behavior": "deny", "message": "Not on this machine."});
    assert_eq!(answer(id, decision).await.unwrap().status().as_u16(), 200);
    let body = denied.await.unwrap();
    assert_eq!(body["stop_reason"], "end_turn", "{body}");
    assert!(
        !workdir.join("denied.txt").exists(),
        "the denied command did not run"
    );
    let told = gw.fake.model_calls().last().unwrap().last_user_text();
    assert!(
        told.contains("Not on this machine."),
        "the model was told: {told}"
    );
    gw.stop().await;
}

/// With `--console`, a live conversation is listed for its key with its state, and its stream
/// shows the real CLI's turn as it goes: the Bash call waiting for a person, then its run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_live_conversation_and_its_approval_as_they_happen() {
    let script = bash_calls(&[(
        "PLEASE-WATCH",
        "touch watched.txt && echo watched-by-the-console",
        "Create a file",
    )]);
    let gw = Gw::start_with(script, |o| {
        o.engine.http.api_keys = vec!["alice".into(), "bob".into()];
        o.engine.enabled_tools = vec!["Bash".into()];
        o.engine.approvals = true;
        o.engine.console = true;
    })
    .await;
    let get = |path: String, key: &'static str| {
        gw.http.get(gw.url(&path)).header("x-api-key", key).send()
    };
    let body = anthropic(json!([{"role": "user", "content": "PLEASE-WATCH this"}]));
    let request = gw
        .http
        .post(gw.url("/v1/messages"))
        .header("x-api-key", "alice")
        .json(&body)
        .send();
    let turn = tokio::spawn(async move { request.await.unwrap().json::<Value>().await.unwrap() });
    let waiting = gw.approvals_once_asked("alice").await;
    let approval = waiting[0]["id"].as_str().unwrap().to_owned();

    let list: Value = get("/v1/conversations".into(), "alice")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = &list["data"][0];
    assert_eq!(listed["state"], "waiting_for_approval", "{list}");
    assert_eq!(listed["approvals"], json!([approval]));
    assert!(listed["model"].is_string(), "{listed}");
    let id = listed["id"].as_str().unwrap().to_owned();
    assert_eq!(waiting[0]["conversation"], id, "the approval names it");
    let theirs: Value = get("/v1/conversations".into(), "bob")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(theirs["data"], json!([]));
    let path = format!("/v1/conversations/{id}/events");
    assert_eq!(
        get(path.clone(), "bob").await.unwrap().status().as_u16(),
        404
    );

    let mut stream = get(path, "alice").await.unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let mut seen = String::new();
    let mut read_until = async |marker: &str, seen: &mut String| {
        while !seen.contains(marker) {
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), stream.chunk())
                .await
                .expect("the stream goes on")
                .unwrap()
                .expect("the stream is open");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    // What the turn did so far comes first.
    read_until("\"type\":\"permission_request\"", &mut seen).await;
    assert!(seen.starts_with("event: conversation\n"), "{seen}");
    let allowed = gw
        .http
        .post(gw.url(&format!("/v1/approvals/{approval}")))
        .header("x-api-key", "alice")
        .json(&json!({"behavior": "allow"}))
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status().as_u16(), 200);
    read_until("\"type\":\"turn_complete\"", &mut seen).await;
    assert!(seen.contains("\"type\":\"tool_result\""), "{seen}");
    assert!(
        seen.contains("\"content\":\"watched-by-the-console\""),
        "the command ran: {seen}"
    );
    let body = turn.await.unwrap();
    assert_eq!(body["stop_reason"], "end_turn", "{body}");
    gw.stop().await;
}

//! End-to-end with the real CLI: no request holds another up. While one tenant sends a request
//! with 150,000 tools (which the CLI lists from the gateway's MCP server) and then a history of
//! 32 MiB (which matches nothing, so the gateway writes it as the transcript a new CLI resumes),
//! another tenant's live conversation goes on and `/health` answers, each within a stated
//! bound. Before the work of such requests left the engine's lock (the CLI's `tools/list`
//! answered from JSON value copies, the history's prefix hashes and its transcript made while
//! the engine waited), `/health` waited up to 5 s.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccwire_tests::cli::OfflineHome;
use ccwire_tests::{big_requests, FakeAnthropic};
use serde_json::Value;
use support::*;

/// The longest `/health` may take while the big requests are served: about a millisecond on
/// its own, at most 0.25 s here in a debug build on two cores, and 4–5 s before the work of
/// such requests left the engine's lock.
const HEALTH_BOUND: Duration = Duration::from_millis(1500);
/// The longest a turn of the other tenant's live conversation may take meanwhile: about 40 ms
/// on its own, at most 0.75 s here (its CLI shares the cores with the big requests' CLIs and
/// the fake model), and 4–5 s before.
const TURN_BOUND: Duration = Duration::from_millis(3000);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_request_holds_up_neither_another_tenant_nor_health() {
    let fake = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let state = tempfile::tempdir().unwrap();
    let max_body = (64 * 1024 * 1024).to_string();
    let serve = ServeProcess::start(
        &home,
        &fake,
        &[
            "--state-dir",
            state.path().to_str().unwrap(),
            "--sandbox",
            "off",
            "--api-key",
            "tenant-a",
            "--api-key",
            "tenant-b",
            "--max-body",
            &max_body,
        ],
        &[],
    )
    .await;
    let url = format!("http://{}", serve.addr);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap();
    // Tenant A's conversation has its CLI before anything is measured.
    let mut messages = Vec::new();
    turn_as(
        &http,
        &url,
        Some("tenant-a"),
        &mut messages,
        "Hello, who are you?",
    )
    .await;

    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let health = Arc::new(Mutex::new(Vec::<Duration>::new()));
    let probes = tokio::spawn({
        let (http, url, done, health) = (http.clone(), url.clone(), done.clone(), health.clone());
        async move {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let sent = Instant::now();
                let response = http.get(format!("{url}/health")).send().await.unwrap();
                assert_eq!(response.status(), 200);
                health.lock().unwrap().push(sent.elapsed());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    let live = tokio::spawn({
        let (http, url, done) = (http.clone(), url.clone(), done.clone());
        async move {
            let mut turns = Vec::new();
            let mut n = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let sent = Instant::now();
                let kinds = turn_as(
                    &http,
                    &url,
                    Some("tenant-a"),
                    &mut messages,
                    &format!("And turn {n}?"),
                )
                .await;
                assert_eq!(kinds[0].0, "continued", "{kinds:?}");
                turns.push(sent.elapsed());
            }
            turns
        }
    });

    let mut took = Vec::new();
    for body in [
        big_requests::with_tools(MODEL, 150_000),
        big_requests::with_history(MODEL, 32 * 1024 * 1024),
    ] {
        let sent = Instant::now();
        let response = http
            .post(format!("{url}/v1/messages"))
            .header("x-api-key", "tenant-b")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap();
        // The model API takes requests of at most 32 MB: what the CLI sends for these is
        // larger, and its refusal comes back as the API's own 413.
        assert!(
            status == 200 || (status == 413 && answer["error"]["type"] == "request_too_large"),
            "{status} {answer}"
        );
        took.push(sent.elapsed());
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    probes.await.unwrap();
    let turns = live.await.unwrap();
    let health = health.lock().unwrap().clone();

    let slowest = |v: &[Duration]| v.iter().max().copied().unwrap_or_default();
    eprintln!(
        "big requests took {took:?}; {} health probes, slowest {:?}; {} live turns, slowest {:?}",
        health.len(),
        slowest(&health),
        turns.len(),
        slowest(&turns)
    );
    assert!(
        health.len() >= 10 && turns.len() >= 5,
        "measured throughout"
    );
    assert!(
        slowest(&health) <= HEALTH_BOUND,
        "/health took {:?} while the big requests were served",
        slowest(&health)
    );
    assert!(
        slowest(&turns) <= TURN_BOUND,
        "a live turn took {:?} while the big requests were served",
        slowest(&turns)
    );
    serve.stop().await;
}

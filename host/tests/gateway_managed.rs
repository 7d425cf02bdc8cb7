//! End-to-end: the Managed Agents API's resources in `ccwire serve` outlive it — kept in the
//! session store (a directory, or Redis shared by the gateways of a cluster) and read back by
//! a restarted gateway, or by another gateway of the cluster once the first is gone.

mod support;

use ccwire_tests::cli::OfflineHome;
use ccwire_tests::{FakeAnthropic, RedisServer};
use serde_json::{json, Value};
use support::*;

/// A request of the API as the SDKs send it: `(status, x-ccwire-node, JSON)`.
async fn call(
    http: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String, Value) {
    let mut request = http
        .request(method, format!("{base}{path}"))
        .header("x-api-key", "key-one")
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "managed-agents-2026-04-01");
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let node = header(&response, "x-ccwire-node");
    let status = response.status().as_u16();
    (status, node, response.json().await.unwrap())
}

/// `ccwire serve`'s arguments for a gateway with the state directory `state` and one key.
fn one_key_args(state: &std::path::Path) -> [&str; 6] {
    let state = state.to_str().unwrap();
    [
        "--state-dir",
        state,
        "--sandbox",
        "off",
        "--api-key",
        "key-one",
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_and_environments_outlive_a_restart() {
    let fake = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    let state = tempfile::tempdir().unwrap();
    let args = one_key_args(state.path());
    let gateway = ServeProcess::start(&home, &fake, &args, &[]).await;
    let base = format!("http://{}", gateway.addr);
    let body = json!({"name": "Kept", "model": "claude-sonnet-4-6"});
    let (status, _, agent) = call(
        &http,
        &base,
        reqwest::Method::POST,
        "/v1/agents",
        Some(body),
    )
    .await;
    assert_eq!(status, 200, "{agent}");
    let id = agent["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/agents/{id}");
    let update = json!({"version": 1, "system": "Second version."});
    let (_, _, v2) = call(&http, &base, reqwest::Method::POST, &path, Some(update)).await;
    let (_, _, env) = call(
        &http,
        &base,
        reqwest::Method::POST,
        "/v1/environments",
        Some(json!({"name": "dev"})),
    )
    .await;
    let gone = call(
        &http,
        &base,
        reqwest::Method::POST,
        "/v1/environments",
        Some(json!({"name": "gone"})),
    )
    .await
    .2;
    let gone_path = format!("/v1/environments/{}", gone["id"].as_str().unwrap());
    call(&http, &base, reqwest::Method::DELETE, &gone_path, None).await;
    gateway.stop().await;

    let gateway = ServeProcess::start(&home, &fake, &args, &[]).await;
    let base = format!("http://{}", gateway.addr);
    let (status, _, back) = call(&http, &base, reqwest::Method::GET, &path, None).await;
    assert_eq!((status, &back), (200, &v2));
    let (_, _, v1) = call(
        &http,
        &base,
        reqwest::Method::GET,
        &format!("{path}?version=1"),
        None,
    )
    .await;
    assert_eq!(v1, agent);
    let (_, _, envs) = call(&http, &base, reqwest::Method::GET, "/v1/environments", None).await;
    assert_eq!(envs["data"], json!([env]), "the deleted one stays deleted");
    // The next version follows the kept ones.
    let update = json!({"version": 2, "system": "Third."});
    let (_, _, v3) = call(&http, &base, reqwest::Method::POST, &path, Some(update)).await;
    assert_eq!(v3["version"], 3);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_s_resources_are_served_by_one_gateway_of_a_cluster_and_taken_over() {
    let redis = RedisServer::start();
    let fake = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    let url = redis.url();
    let states: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut gateways = Vec::new();
    for (state, name) in states.iter().zip(["one", "two"]) {
        let args = [
            "--state-dir",
            state.path().to_str().unwrap(),
            "--sandbox",
            "off",
            "--store",
            &url,
            "--advertise",
            "127.0.0.1",
            "--node",
            name,
            "--api-key",
            "key-one",
        ];
        gateways.push(ServeProcess::start(&home, &fake, &args, &[]).await);
    }
    let bases: Vec<String> = gateways
        .iter()
        .map(|g| format!("http://{}", g.addr))
        .collect();
    let body = json!({"name": "Shared", "model": "claude-sonnet-4-6"});
    let (status, node, agent) = call(
        &http,
        &bases[0],
        reqwest::Method::POST,
        "/v1/agents",
        Some(body),
    )
    .await;
    assert_eq!((status, node.as_str()), (200, "one"), "{agent}");
    let path = format!("/v1/agents/{}", agent["id"].as_str().unwrap());
    // Asked of gateway two, answered by gateway one, which serves this tenant's resources.
    let (status, node, seen) = call(&http, &bases[1], reqwest::Method::GET, &path, None).await;
    assert_eq!((status, node.as_str(), &seen), (200, "one", &agent));
    let update = json!({"version": 1, "description": "Updated through gateway two."});
    let (_, node, v2) = call(&http, &bases[1], reqwest::Method::POST, &path, Some(update)).await;
    assert_eq!((node.as_str(), v2["version"].as_u64()), ("one", Some(2)));

    // Gateway one dies: gateway two takes the tenant over, from what Redis keeps.
    let one = gateways.remove(0);
    one.kill().await;
    let (status, node, seen) = call(&http, &bases[1], reqwest::Method::GET, &path, None).await;
    assert_eq!((status, node.as_str(), &seen), (200, "two", &v2));
    let update = json!({"version": 2, "description": "Third."});
    let (_, _, v3) = call(&http, &bases[1], reqwest::Method::POST, &path, Some(update)).await;
    assert_eq!(v3["version"], 3);
    drop(gateways);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_the_store_cannot_keep_is_a_503_to_retry_not_a_success() {
    let fake = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    let state = tempfile::tempdir().unwrap();
    let args = one_key_args(state.path());
    let gateway = ServeProcess::start(&home, &fake, &args, &[]).await;
    let base = format!("http://{}", gateway.addr);
    let agents = "/v1/agents";
    let body = json!({"name": "Kept", "model": "claude-sonnet-4-6"});
    let (status, _, _) = call(&http, &base, reqwest::Method::POST, agents, Some(body)).await;
    assert_eq!(status, 200);
    // The store's directory for the tenant's resources made unwritable: a file in its place.
    let tenant = std::fs::read_dir(state.path().join("store"))
        .unwrap()
        .flatten()
        .find(|e| e.path().join("managed").is_dir())
        .expect("the tenant's resources in the store")
        .path();
    let managed = tenant.join("managed");
    std::fs::rename(&managed, tenant.join("kept-aside")).unwrap();
    std::fs::write(&managed, b"not a directory").unwrap();
    let body = json!({"name": "Lost", "model": "claude-sonnet-4-6"});
    let (status, _, error) = call(&http, &base, reqwest::Method::POST, agents, Some(body)).await;
    assert_eq!(status, 503, "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("could not keep it"), "{message}");
    // The store back, the retry (after the `retry-after: 2` it was given) is kept.
    std::fs::remove_file(&managed).unwrap();
    std::fs::rename(tenant.join("kept-aside"), &managed).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let body = json!({"name": "Again", "model": "claude-sonnet-4-6"});
    let (status, _, again) = call(&http, &base, reqwest::Method::POST, agents, Some(body)).await;
    assert_eq!(status, 200, "{again}");
    let kept = std::fs::read_dir(&managed).unwrap().count();
    assert_eq!(kept, 2, "the first agent and the retry");
    gateway.stop().await;
}

//! End-to-end: a tenant key made over `/v1/keys` against the real CLI — it works at once, a
//! restarted gateway still takes it (kept as a digest in the session store), revoked it is
//! refused — and `--managed-keys` serves keys made at run time alone.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ccwire_host::serve::GatewayOptions;
use ccwire_host::store::DirStore;
use serde_json::{json, Value};
use support::*;

fn configure(options: &mut GatewayOptions, store: &std::path::Path, managed: bool) {
    if !managed {
        options.engine.http.api_keys = vec!["alice".into()];
    }
    options.engine.http.managed_keys = managed;
    options.engine.http.admin_key = Some("root".into());
    options.store = Some(Arc::new(DirStore::new(store, Duration::from_secs(3600))));
}

async fn admin(gw: &Gw, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
    let response = gw
        .http
        .request(method, gw.url(path))
        .header("authorization", "Bearer root")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_made_over_the_api_works_at_once_outlives_a_restart_and_stops_when_revoked() {
    for managed in [false, true] {
        let store = tempfile::tempdir().unwrap();
        let mut gw = Gw::start(|o| configure(o, store.path(), managed)).await;
        let (status, made) = admin(
            &gw,
            reqwest::Method::POST,
            "/v1/keys",
            json!({"label": "ci"}),
        )
        .await;
        assert_eq!(status, 201, "{made}");
        let key = made["key"].as_str().unwrap().to_owned();
        let hello = anthropic(json!([{"role": "user", "content": "hello"}]));
        let (status, _, body) = gw.call("/v1/messages", &hello, Some(&key)).await;
        assert_eq!(status, 200, "{body}");
        let kept = std::fs::read_to_string(
            store
                .path()
                .join("keys")
                .join(format!("{}.json", made["id"].as_str().unwrap())),
        )
        .unwrap();
        assert!(!kept.contains(&key[4..]), "the store keeps no key: {kept}");
        // A gateway started again on the store takes it from its first request.
        gw.restart(|o| configure(o, store.path(), managed)).await;
        let (status, _, body) = gw.call("/v1/messages", &hello, Some(&key)).await;
        assert_eq!(status, 200, "{body}");
        let path = format!("/v1/keys/{}", made["id"].as_str().unwrap());
        let (status, _) = admin(&gw, reqwest::Method::DELETE, &path, Value::Null).await;
        assert_eq!(status, 200);
        let (status, _, body) = gw.call("/v1/messages", &hello, Some(&key)).await;
        assert_eq!(status, 401, "{body}");
        // Without a key, nothing is served, even with --managed-keys and no --api-key.
        let (status, _, _) = gw.call("/v1/messages", &hello, None).await;
        assert_eq!(status, 401);
    }
}

//! Tenant keys at run time in simulation: made, listed, labelled, capped and revoked over
//! `/v1/keys` with the admin key, working at once; kept in the session store (digests only)
//! and learned by another gateway from it.

mod sim;
use sim::*;

fn gateway() -> Sim {
    let config = GatewayConfig {
        store: true,
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into()],
            admin_key: Some("root".into()),
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    };
    let mut sim = Sim::new(config);
    sim.store = Some(SimStore::default());
    sim
}

/// A `/v1/keys` request with `key`: status and body.
fn keys(sim: &mut Sim, key: &str, method: &str, path: &str, body: &str) -> (u16, Value) {
    let auth = format!("Bearer {key}");
    let id = sim
        .http(
            method,
            path,
            &[JSON, ("authorization", auth.as_str())],
            body,
        )
        .expect("admitted");
    let response = sim.response(id);
    let value = serde_json::from_str(&response.text()).unwrap_or(Value::Null);
    (response.status, value)
}

/// A turn through the HTTP face with `key`: its status (`None`: refused at admission, 401).
fn turn(sim: &mut Sim, key: &str, text: &str) -> u16 {
    let body = anthropic(json!([{"role": "user", "content": text}]), false).to_string();
    let id = sim.http("POST", "/v1/messages", &[JSON, ("x-api-key", key)], &body);
    id.map_or(401, |id| sim.response(id).status)
}

#[test]
fn a_key_made_over_the_api_works_at_once_and_stops_when_revoked() {
    let mut sim = gateway();
    let (status, made) = keys(&mut sim, "root", "POST", "/v1/keys", r#"{"label": "ci"}"#);
    assert_eq!(status, 201, "{made}");
    let secret = made["key"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("ccw_") && secret.len() == 68, "{secret}");
    let id = made["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (made["label"].as_str(), made["source"].as_str()),
        (Some("ci"), Some("api"))
    );
    // The store keeps its digest, never the key.
    let kept = sim.store.as_ref().unwrap().keys[&id].clone();
    assert!(!kept.contains(&secret[4..]), "{kept}");
    assert!(kept.contains("\"sha256\""), "{kept}");
    assert_eq!(turn(&mut sim, &secret, "Hi"), 200);
    // Listed beside the keys given at start, never with the key itself.
    let (_, list) = keys(&mut sim, "root", "GET", "/v1/keys", "");
    let ids: Vec<&str> = (list["data"].as_array().unwrap().iter())
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [tenant_id("alice").as_str(), id.as_str()]);
    assert!(!list.to_string().contains(&secret));
    assert_eq!(list["data"][1]["conversations"], 1);
    // Its conversation's usage is its own key's.
    let usage = console_json(&mut sim, &secret, "/v1/usage");
    assert_eq!(usage["key"], id);
    // Revoked: refused at once, its CLI closed.
    let path = format!("/v1/keys/{id}");
    let (status, gone) = keys(&mut sim, "root", "DELETE", &path, "");
    assert_eq!(status, 200, "{gone}");
    assert_eq!(sim.closed.len(), 1);
    assert_eq!(turn(&mut sim, &secret, "Again"), 401);
    assert!(!sim.store.as_ref().unwrap().keys.contains_key(&id));
    let (status, _) = keys(&mut sim, "root", "GET", &path, "");
    assert_eq!(status, 404);
    // The keys given at start keep working, and cannot be revoked here.
    assert_eq!(turn(&mut sim, "alice", "Still"), 200);
    let alice = format!("/v1/keys/{}", tenant_id("alice"));
    let (status, refused) = keys(&mut sim, "root", "DELETE", &alice, "");
    assert_eq!(status, 400);
    assert!(
        refused.to_string().contains("restart without it"),
        "{refused}"
    );
}

#[test]
fn a_quota_set_over_the_api_holds_at_once_for_any_key() {
    let mut sim = gateway();
    let alice = format!("/v1/keys/{}", tenant_id("alice"));
    let (status, set) = keys(
        &mut sim,
        "root",
        "PATCH",
        &alice,
        r#"{"quota": "tokens/day=10"}"#,
    );
    assert_eq!(status, 200, "{set}");
    assert_eq!(set["quota"], "tokens/day=10");
    assert_eq!(turn(&mut sim, "alice", "One"), 200);
    assert_eq!(turn(&mut sim, "alice", "Two"), 429);
    let (status, cleared) = keys(&mut sim, "root", "PATCH", &alice, r#"{"quota": null}"#);
    assert_eq!((status, &cleared["quota"]), (200, &Value::Null));
    assert_eq!(turn(&mut sim, "alice", "Three"), 200);
    let (status, bad) = keys(
        &mut sim,
        "root",
        "PATCH",
        &alice,
        r#"{"quota": "tokens/year=1"}"#,
    );
    assert_eq!(status, 400);
    assert!(
        bad.to_string().contains("is not day, week or month"),
        "{bad}"
    );
    // A key made with a quota has it from the start.
    let (_, made) = keys(
        &mut sim,
        "root",
        "POST",
        "/v1/keys",
        r#"{"quota": "tokens/day=1"}"#,
    );
    let secret = made["key"].as_str().unwrap().to_owned();
    assert_eq!(turn(&mut sim, &secret, "One"), 200);
    assert_eq!(turn(&mut sim, &secret, "Two"), 429);
}

#[test]
fn only_the_admin_key_manages_keys_and_a_gateway_without_keys_or_store_makes_none() {
    let mut sim = gateway();
    let (status, _) = keys(&mut sim, "alice", "GET", "/v1/keys", "");
    assert_eq!(status, 401);
    let (status, _) = keys(&mut sim, "root", "POST", "/v1/keys", r#"{"owner": 1}"#);
    assert_eq!(status, 400, "an unknown field is refused");
    // A store that cannot keep the key: a 503, and the key is not handed out.
    sim.store.as_mut().unwrap().down = Some(true);
    let (status, failed) = keys(&mut sim, "root", "POST", "/v1/keys", "{}");
    assert_eq!(status, 503, "{failed}");
    assert!(failed.get("key").is_none());
    assert!(failed.to_string().contains("so it is undone"), "{failed}");
    // Without keys, without an admin key or without a store, none is made.
    let mut keyless = Sim::new(GatewayConfig {
        store: true,
        http: ccwire_core::gateway::HttpConfig {
            admin_key: Some("root".into()),
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    keyless.store = Some(SimStore::default());
    let (status, why) = keys(&mut keyless, "root", "POST", "/v1/keys", "{}");
    assert_eq!(status, 400);
    assert!(why.to_string().contains("--managed-keys"), "{why}");
    let mut no_store = Sim::new(GatewayConfig {
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into()],
            admin_key: Some("root".into()),
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    let (status, why) = keys(&mut no_store, "root", "POST", "/v1/keys", "{}");
    assert_eq!(status, 400);
    assert!(why.to_string().contains("--no-store"), "{why}");
    let mut no_admin = Sim::new(GatewayConfig {
        store: true,
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into()],
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    no_admin.store = Some(SimStore::default());
    let (status, _) = keys(&mut no_admin, "root", "GET", "/v1/keys", "");
    assert_eq!(status, 403);
}

#[test]
fn managed_keys_need_a_key_from_the_first_request_and_an_admin_key_to_start() {
    let managed = |admin: Option<&str>| {
        Gateway::new(GatewayConfig {
            store: true,
            http: ccwire_core::gateway::HttpConfig {
                admin_key: admin.map(str::to_owned),
                managed_keys: true,
                loopback: false,
                listener: "0.0.0.0:8787".into(),
                ..ccwire_core::gateway::HttpConfig::default()
            },
            ..GatewayConfig::default()
        })
    };
    let error = managed(None).unwrap_err().to_string();
    assert!(
        error.contains("--managed-keys needs an admin key"),
        "{error}"
    );
    let gateway = managed(Some("root")).expect("no --api-key needed");
    let mut sim = Sim::new(GatewayConfig::default());
    sim.gateway = gateway;
    sim.store = Some(SimStore::default());
    let host = [JSON, ("host", "gw.example")];
    let body = anthropic(json!([{"role": "user", "content": "Hi"}]), false).to_string();
    assert!(
        sim.http("POST", "/v1/messages", &host, &body).is_none(),
        "a key is needed"
    );
}

#[test]
fn another_gateway_learns_the_keys_from_the_store() {
    let mut one = gateway();
    let (_, made) = keys(
        &mut one,
        "root",
        "POST",
        "/v1/keys",
        r#"{"label": "shared"}"#,
    );
    let secret = made["key"].as_str().unwrap().to_owned();
    let mut other = gateway();
    assert_eq!(turn(&mut other, &secret, "Hi"), 401, "not read yet");
    let records: Vec<String> = one.store.as_ref().unwrap().keys.values().cloned().collect();
    other.gateway.handle_keys_loaded(other.now, &records);
    assert_eq!(turn(&mut other, &secret, "Hi"), 200);
    let (_, listed) = keys(&mut other, "root", "GET", "/v1/keys", "");
    assert_eq!(listed["data"][1]["label"], "shared");
    // Revoked on the first, the other stops taking it once it reads the store again, and
    // closes its conversation's CLI.
    let path = format!("/v1/keys/{}", made["id"].as_str().unwrap());
    keys(&mut one, "root", "DELETE", &path, "");
    let records: Vec<String> = one.store.as_ref().unwrap().keys.values().cloned().collect();
    other.gateway.handle_keys_loaded(other.now, &records);
    other.run();
    assert_eq!(other.closed.len(), 1);
    assert_eq!(turn(&mut other, &secret, "Again"), 401);
}

#[test]
fn keys_read_from_the_store_do_not_undo_a_change_it_has_not_kept_yet() {
    let mut sim = gateway();
    // A store that has not answered yet: the new key's answer waits.
    sim.store.as_mut().unwrap().down = Some(false);
    let auth = [JSON, ("authorization", "Bearer root")];
    let made = sim.http("POST", "/v1/keys", &auth, "{}").unwrap();
    assert!(!sim.response(made).ended);
    // Keys read from the store before it kept the new one: the new one stays.
    sim.gateway.handle_keys_loaded(sim.now, &[]);
    sim.store.as_mut().unwrap().down = None;
    sim.gateway
        .handle_store(sim.now, StoreAnswer::Kept { request: made });
    sim.run();
    let response = sim.response(made);
    assert_eq!(response.status, 201);
    let secret = response.json()["key"].as_str().unwrap().to_owned();
    let id = response.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(turn(&mut sim, &secret, "Hi"), 200);
    // Revoked while a read of the store still has it: it stays revoked.
    let record = serde_json::json!({"id": id, "sha256": sha256_hex(&secret), "created_ms": 1});
    sim.store.as_mut().unwrap().down = Some(false);
    let path = format!("/v1/keys/{id}");
    let revoked = sim.http("DELETE", &path, &auth, "").unwrap();
    sim.gateway
        .handle_keys_loaded(sim.now, &[record.to_string()]);
    sim.gateway
        .handle_store(sim.now, StoreAnswer::Kept { request: revoked });
    sim.run();
    assert_eq!(sim.response(revoked).status, 200);
    sim.store.as_mut().unwrap().down = None;
    assert_eq!(turn(&mut sim, &secret, "Again"), 401);
    // A revocation the store could not keep is undone: the key works, and the retry revokes.
    let (_, made) = keys(&mut sim, "root", "POST", "/v1/keys", "{}");
    let secret = made["key"].as_str().unwrap().to_owned();
    let path = format!("/v1/keys/{}", made["id"].as_str().unwrap());
    sim.store.as_mut().unwrap().down = Some(true);
    let (status, _) = keys(&mut sim, "root", "DELETE", &path, "");
    assert_eq!(status, 503);
    sim.store.as_mut().unwrap().down = None;
    assert_eq!(turn(&mut sim, &secret, "Still"), 200);
    let (status, _) = keys(&mut sim, "root", "DELETE", &path, "");
    assert_eq!(status, 200);
    assert_eq!(turn(&mut sim, &secret, "Gone"), 401);
}

fn sha256_hex(secret: &str) -> String {
    ccwire_core::api::guard::digest(secret)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

//! The gateway's HTTP face: what it admits from a request's head, and how each route answers
//! through the gateway's outputs.

use ccwire_core::gateway::{
    Admission, BodyError, ConfigError, Gateway, GatewayConfig, GatewayOutput, HttpConfig, HttpHead,
    StoreAnswer, StoreAsk,
};
use serde_json::{json, Value};

/// A gateway with this HTTP face and `config` otherwise.
fn with_http(http: HttpConfig, config: GatewayConfig) -> Gateway {
    Gateway::new(GatewayConfig { http, ..config }).expect("a loopback gateway")
}

fn front(http: HttpConfig) -> Gateway {
    with_http(http, GatewayConfig::default())
}

fn admit(front: &Gateway, method: &str, path: &str, headers: &[(&str, &str)]) -> Admission {
    front.admit(&HttpHead {
        method,
        path,
        query: "",
        headers,
    })
}

/// A refusal's status, a header and its JSON body.
fn refused(admission: Admission, header: &str) -> (u16, Option<String>, Value) {
    let Admission::Respond(r) = admission else {
        panic!("admitted: {admission:?}");
    };
    let value = r
        .headers
        .iter()
        .find(|(n, _)| n == header)
        .map(|(_, v)| v.clone());
    let body = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, value, body)
}

/// A whole response of `request` from the gateway's outputs: status, headers, body. (A
/// Managed Agents change it asks the store to keep is kept.)
fn answer(gateway: &mut Gateway, request: u64) -> (u16, Vec<(String, String)>, Vec<u8>) {
    answer_of(kept_outputs(gateway), request)
}

/// The gateway's outputs, each Managed Agents change it asks the store to keep kept.
fn kept_outputs(gateway: &mut Gateway) -> Vec<GatewayOutput> {
    let mut outputs: Vec<GatewayOutput> = std::iter::from_fn(|| gateway.poll_output()).collect();
    let mut at = 0;
    while at < outputs.len() {
        if let GatewayOutput::Store(StoreAsk::Managed {
            request: Some(request),
            ..
        }) = outputs[at]
        {
            gateway.handle_store(1, StoreAnswer::Kept { request });
            outputs.extend(std::iter::from_fn(|| gateway.poll_output()));
        }
        at += 1;
    }
    outputs
}

/// A whole response of `request` among `outputs`.
fn answer_of(outputs: Vec<GatewayOutput>, request: u64) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let (mut status, mut headers, mut body, mut ended) = (0, Vec::new(), Vec::new(), false);
    for output in outputs {
        match output {
            GatewayOutput::Respond {
                request: r,
                status: s,
                headers: h,
            } if r == request => (status, headers) = (s, h),
            GatewayOutput::Body { request: r, bytes } if r == request => {
                body.extend_from_slice(&bytes);
            }
            GatewayOutput::End { request: r } if r == request => ended = true,
            _ => {}
        }
    }
    assert!(ended, "the response of {request} did not end");
    (status, headers, body)
}

const JSON: (&str, &str) = ("content-type", "application/json");

#[test]
fn the_head_decides_refusals_before_any_body_is_read() {
    let f = front(HttpConfig {
        api_keys: vec!["k".into()],
        ..HttpConfig::default()
    });
    let key = ("x-api-key", "k");
    // Unknown path: 404 in the shape of the path's API.
    let (status, _, body) = refused(admit(&f, "GET", "/v2/nothing", &[key]), "");
    assert_eq!(status, 404);
    assert_eq!(body["error"]["type"], "not_found_error");
    // An endpoint of the APIs the gateway does not offer says why.
    let (status, _, body) = refused(admit(&f, "POST", "/v1/responses/compact", &[key]), "");
    assert_eq!(status, 404);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("remote compaction is not offered"),
        "{message}"
    );
    // Known path, wrong method: 405 naming the method it takes.
    let (status, allow, body) = refused(admit(&f, "GET", "/v1/chat/completions", &[key]), "allow");
    assert_eq!((status, allow.as_deref()), (405, Some("POST")));
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("takes POST"));
    // A body that is not JSON, on an API route: 415 (what a web page sends without preflight).
    let plain = ("content-type", "text/plain");
    let (status, _, _) = refused(admit(&f, "POST", "/v1/messages", &[key, plain]), "");
    assert_eq!(status, 415);
    // No key or a wrong one: 401.
    let (status, _, _) = refused(admit(&f, "POST", "/v1/messages", &[JSON]), "");
    assert_eq!(status, 401);
    let wrong = ("authorization", "Bearer nope");
    let (status, _, _) = refused(admit(&f, "GET", "/v1/models", &[wrong]), "");
    assert_eq!(status, 401);
    // A foreign origin, before anything else (even on an unknown path).
    let evil = ("origin", "https://evil.example");
    let (status, cors, _) = refused(
        admit(&f, "GET", "/v2/nothing", &[evil]),
        "access-control-allow-origin",
    );
    assert_eq!((status, cors), (403, None));
    // A DNS-rebinding host name on a loopback listener.
    let rebound = ("host", "attacker.example:8080");
    let (status, _, _) = refused(admit(&f, "GET", "/health", &[rebound]), "");
    assert_eq!(status, 403);
    // A body declared over the limit: 413 at once, in the API's shape, and the connection
    // closes (the body may still come); one within it is read.
    let huge = ("content-length", "99999999999");
    let (status, close, body) = refused(
        admit(&f, "POST", "/v1/messages", &[key, JSON, huge]),
        "connection",
    );
    assert_eq!((status, close.as_deref()), (413, Some("close")));
    assert_eq!(body["error"]["type"], "request_too_large");
    let (status, _, body) = refused(
        admit(&f, "POST", "/v1/chat/completions", &[key, JSON, huge]),
        "",
    );
    assert_eq!(status, 413);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("larger than"));
    let fits = ("content-length", "1000");
    assert!(matches!(
        admit(&f, "POST", "/v1/messages", &[key, JSON, fits]),
        Admission::Admit { .. }
    ));
    // Health needs no key; the API routes admit the key's tenant.
    assert_eq!(
        admit(&f, "GET", "/health", &[]),
        Admission::Admit {
            tenant: String::new(),
            cors: Vec::new()
        }
    );
    assert_eq!(
        admit(&f, "POST", "/v1/messages", &[key, JSON]),
        Admission::Admit {
            tenant: "k".into(),
            cors: Vec::new()
        }
    );
    // The approvals check the key themselves (the admin key answers any tenant's).
    assert_eq!(
        admit(&f, "POST", "/v1/approvals/ap_1", &[key, JSON]),
        Admission::Admit {
            tenant: String::new(),
            cors: Vec::new()
        }
    );
}

#[test]
fn an_allowed_origin_gets_its_preflight_and_cors_headers() {
    let app = "http://app.example:3000";
    let f = front(HttpConfig {
        allow_origins: vec![app.into()],
        ..HttpConfig::default()
    });
    let origin = ("origin", app);
    let preflight = admit(
        &f,
        "OPTIONS",
        "/v1/messages",
        &[
            origin,
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "content-type, x-api-key"),
        ],
    );
    let Admission::Respond(r) = preflight else {
        panic!("{preflight:?}")
    };
    assert_eq!(r.status, 204);
    assert!(r
        .headers
        .contains(&("access-control-allow-origin".into(), app.into())));
    assert!(r.headers.contains(&(
        "access-control-allow-headers".into(),
        "content-type, x-api-key".into()
    )));
    // A header no client sends: refused, and the page learns nothing.
    let odd = admit(
        &f,
        "OPTIONS",
        "/v1/messages",
        &[
            origin,
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "x-forwarded-for"),
        ],
    );
    let (status, cors, _) = refused(odd, "access-control-allow-origin");
    assert_eq!((status, cors), (403, None));
    // The page's own request is admitted with the headers it may read; its refusals carry
    // them too, so the page can read why.
    let Admission::Admit { cors, .. } = admit(&f, "POST", "/v1/messages", &[origin, JSON]) else {
        panic!()
    };
    assert!(cors.contains(&("access-control-allow-origin".into(), app.into())));
    let (status, cors, _) = refused(
        admit(&f, "GET", "/nothing", &[origin]),
        "access-control-allow-origin",
    );
    assert_eq!((status, cors.as_deref()), (404, Some(app)));
}

#[test]
fn a_public_listener_needs_a_key_and_names_the_tools_that_run_code() {
    let public = |http: HttpConfig, tools: &[&str]| {
        Gateway::new(GatewayConfig {
            http: HttpConfig {
                listener: "0.0.0.0:80".into(),
                loopback: false,
                ..http
            },
            enabled_tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            ..GatewayConfig::default()
        })
    };
    let error =
        public(HttpConfig::default(), &["Bash", "Read"]).expect_err("no key on a public address");
    assert_eq!(
        error,
        ConfigError::NoKey {
            listener: "0.0.0.0:80".into(),
            code_tools: vec!["Bash".into()]
        }
    );
    assert!(error
        .to_string()
        .contains("--enable-tool Bash would let anyone"));
    let keyed = HttpConfig {
        api_keys: vec!["k".into()],
        ..HttpConfig::default()
    };
    assert!(public(keyed, &[]).is_ok());
    let bad = HttpConfig {
        allow_origins: vec!["*".into()],
        ..HttpConfig::default()
    };
    assert!(matches!(
        Gateway::new(GatewayConfig {
            http: bad,
            ..GatewayConfig::default()
        }),
        Err(ConfigError::Allowance(_))
    ));
}

#[test]
fn the_routes_answer_through_the_endpoint() {
    let mut e = front(HttpConfig {
        admin_key: Some("admin".into()),
        max_body: 64,
        drain_grace_ms: 7000,
        ..HttpConfig::default()
    });
    e.set_cli(json!({"found": true, "version": "2.1.330"}));
    let handle = |e: &mut Gateway,
                  id,
                  method,
                  path,
                  headers: &[(&str, &str)],
                  body: Result<&[u8], BodyError>| {
        let head = HttpHead {
            method,
            path,
            query: "",
            headers,
        };
        e.handle_http(1, id, &head, "", body)
    };

    handle(&mut e, 1, "GET", "/health", &[], Ok(b""));
    let (status, _, body) = answer(&mut e, 1);
    let health: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 200);
    assert_eq!(health["cli"]["version"], "2.1.330");
    assert_eq!(
        (
            health["sessions"].as_u64(),
            health["held_tool_calls"].as_u64()
        ),
        (Some(0), Some(0))
    );

    handle(&mut e, 2, "GET", "/v1/models", &[], Ok(b""));
    let (_, _, body) = answer(&mut e, 2);
    let models: Value = serde_json::from_slice(&body).unwrap();
    assert!(models["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["id"] == "sonnet"));

    handle(&mut e, 3, "GET", "/metrics", &[], Ok(b""));
    let (status, headers, body) = answer(&mut e, 3);
    assert_eq!(status, 200);
    assert!(headers[0].1.starts_with("text/plain; version=0.0.4"));
    assert!(String::from_utf8(body).unwrap().contains("ccwire_sessions"));

    // A body over the limit, or unreadable: 413 and 400 in the API's shape.
    handle(
        &mut e,
        4,
        "POST",
        "/v1/chat/completions",
        &[JSON],
        Err(BodyError::TooLarge),
    );
    let (status, _, body) = answer(&mut e, 4);
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 413);
    assert_eq!(
        error["error"]["message"],
        "the request body is larger than 64 bytes"
    );
    handle(
        &mut e,
        5,
        "POST",
        "/v1/messages",
        &[JSON],
        Err(BodyError::Unreadable("reset".into())),
    );
    assert_eq!(answer(&mut e, 5).0, 400);

    // An approval that does not exist.
    handle(
        &mut e,
        6,
        "POST",
        "/v1/approvals/ap_9",
        &[JSON],
        Ok(b"{\"behavior\":\"allow\"}"),
    );
    assert_eq!(answer(&mut e, 6).0, 404);

    // The admin drain: refused without the admin key, then accepted.
    handle(
        &mut e,
        7,
        "POST",
        "/admin/drain",
        &[("authorization", "Bearer nope")],
        Ok(b""),
    );
    assert_eq!(answer(&mut e, 7).0, 401);
    handle(
        &mut e,
        8,
        "POST",
        "/admin/drain",
        &[("authorization", "Bearer admin")],
        Ok(b""),
    );
    let outputs: Vec<GatewayOutput> = std::iter::from_fn(|| e.poll_output()).collect();
    assert!(
        outputs.contains(&GatewayOutput::DrainRequested),
        "the host is told to exit once drained"
    );
    let (status, _, body) = answer_of(outputs, 8);
    let drain: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, drain["grace_seconds"].as_u64()), (202, Some(7)));
    assert!(e.is_drained());
}

#[test]
fn token_counts_come_from_the_cli_s_model_api_or_an_estimate() {
    let body = json!({"model": "sonnet", "messages": [{"role": "user", "content": "Hello there, how are you?"}]})
        .to_string();
    let head = HttpHead {
        method: "POST",
        path: "/v1/messages/count_tokens",
        query: "",
        headers: &[JSON, ("anthropic-beta", "b1")],
    };

    // No key in the CLI's environment: the estimate, and nothing to send.
    let mut plain = front(HttpConfig::default());
    plain.handle_http(0, 1, &head, "", Ok(body.as_bytes()));
    let (_, headers, answered) = answer(&mut plain, 1);
    assert!(headers.contains(&("x-ccwire-token-count".into(), "estimate".into())));
    let estimate = serde_json::from_slice::<Value>(&answered).unwrap()["input_tokens"].clone();
    assert!(estimate.as_u64() > Some(0), "{estimate}");

    // A key the CLI gets: the model API counts, with the client's version and beta headers.
    let mut counted = front(HttpConfig::default());
    counted.count_tokens_upstream(|name| match name {
        "ANTHROPIC_BASE_URL" => Some("http://127.0.0.1:9/".into()),
        "ANTHROPIC_AUTH_TOKEN" => Some("tok".into()),
        _ => None,
    });
    let fetch = |e: &mut Gateway, id| {
        e.handle_http(0, id, &head, "", Ok(body.as_bytes()));
        match e.poll_output() {
            Some(GatewayOutput::Fetch {
                request,
                url,
                headers,
                body: sent,
            }) => {
                assert_eq!(request, id);
                assert_eq!(sent, body.as_bytes(), "the client's body goes upstream");
                assert!(e.poll_output().is_none(), "no answer before the count");
                (url, headers)
            }
            other => panic!("not a fetch: {other:?}"),
        }
    };
    let (url, headers) = fetch(&mut counted, 2);
    assert_eq!(url, "http://127.0.0.1:9/v1/messages/count_tokens");
    for header in [
        ("authorization", "Bearer tok"),
        ("anthropic-version", "2023-06-01"),
        ("anthropic-beta", "b1"),
    ] {
        assert!(
            headers.contains(&(header.0.into(), header.1.into())),
            "{header:?}"
        );
    }
    counted.handle_fetched(1, 2, Some(br#"{"input_tokens": 42}"#));
    let (_, headers, answered) = answer(&mut counted, 2);
    assert!(headers.contains(&("x-ccwire-token-count".into(), "upstream".into())));
    assert_eq!(
        serde_json::from_slice::<Value>(&answered).unwrap()["input_tokens"],
        42
    );
    // An answer without a count, or none: the estimate.
    for (id, upstream) in [(3, Some(b"not json".as_slice())), (4, None)] {
        fetch(&mut counted, id);
        counted.handle_fetched(1, id, upstream);
        let (_, headers, answered) = answer(&mut counted, id);
        assert!(headers.contains(&("x-ccwire-token-count".into(), "estimate".into())));
        assert_eq!(
            serde_json::from_slice::<Value>(&answered).unwrap()["input_tokens"],
            estimate
        );
    }
    // The client went away: a late answer is dropped.
    fetch(&mut counted, 5);
    counted.handle_client_gone(1, 5);
    counted.handle_fetched(2, 5, Some(br#"{"input_tokens": 42}"#));
    assert_eq!(counted.poll_output(), None);
}

#[test]
fn the_cli_s_environment_is_the_endpoint_s_to_decide() {
    let config = GatewayConfig {
        cli_env: vec![("ANTHROPIC_BASE_URL".into(), "http://fake".into())],
        cli_env_remove: vec!["ANTHROPIC_API_KEY".into()],
        ..GatewayConfig::default()
    };
    let host = |name: &str| Some(format!("host's {name}"));
    assert_eq!(
        config.cli_var("ANTHROPIC_BASE_URL", host).as_deref(),
        Some("http://fake")
    );
    assert_eq!(config.cli_var("ANTHROPIC_API_KEY", host), None);
    assert_eq!(config.cli_var("MCP_TOOL_TIMEOUT", host), None);
    assert_eq!(config.cli_var("HOME", host).as_deref(), Some("host's HOME"));
}

#[test]
fn a_key_sees_its_own_metrics_and_health_says_only_its_status_without_one() {
    let mut e = front(HttpConfig {
        api_keys: vec!["a".into(), "b".into()],
        admin_key: Some("admin".into()),
        ..HttpConfig::default()
    });
    let mut id = 0;
    let mut get = |e: &mut Gateway, path: &str, headers: &[(&str, &str)], tenant: &str| {
        id += 1;
        let head = HttpHead {
            method: "GET",
            path,
            query: "",
            headers,
        };
        e.handle_http(1, id, &head, tenant, Ok(b"".as_slice()));
        answer(e, id)
    };
    // Tenant a sends two requests the gateway refuses, tenant b one.
    for (n, tenant) in [(1, "a"), (2, "a"), (3, "b")] {
        let head = HttpHead {
            method: "POST",
            path: "/v1/messages",
            query: "",
            headers: &[JSON],
        };
        e.handle_http(1, 100 + n, &head, tenant, Ok(b"{}".as_slice()));
        assert_eq!(answer(&mut e, 100 + n).0, 400);
    }
    let series = r#"ccwire_requests_total{api="anthropic",status="400"}"#;
    let text = |answer: (u16, Vec<(String, String)>, Vec<u8>)| {
        assert_eq!(answer.0, 200);
        String::from_utf8(answer.2).unwrap()
    };
    let a = text(get(&mut e, "/metrics", &[("x-api-key", "a")], ""));
    assert!(a.contains(&format!("{series} 2\n")), "{a}");
    assert!(
        !a.contains("ccwire_cli_spawns_total"),
        "no gateway-wide series: {a}"
    );
    let b = text(get(
        &mut e,
        "/metrics",
        &[("authorization", "Bearer b")],
        "",
    ));
    assert!(b.contains(&format!("{series} 1\n")), "{b}");
    let all = text(get(
        &mut e,
        "/metrics",
        &[("authorization", "Bearer admin")],
        "",
    ));
    assert!(all.contains(&format!("{series} 3\n")), "{all}");
    assert!(all.contains("ccwire_cli_spawns_total"));
    assert_eq!(get(&mut e, "/metrics", &[], "").0, 401);
    assert_eq!(get(&mut e, "/metrics", &[("x-api-key", "c")], "").0, 401);

    // Health: the status alone without a key, the details with one.
    let json = |answer: (u16, Vec<(String, String)>, Vec<u8>)| {
        (
            answer.0,
            serde_json::from_slice::<Value>(&answer.2).unwrap(),
        )
    };
    let (status, bare) = json(get(&mut e, "/health", &[], ""));
    assert_eq!((status, bare), (200, json!({"status": "ok"})));
    // A tenant: its own conversations and the CLI's release; the admin: the whole gateway.
    e.set_cli(json!({"found": true, "path": "/opt/claude", "version": "2.1.330"}));
    let (_, known) = json(get(&mut e, "/health", &[("x-api-key", "a")], ""));
    assert_eq!(
        known,
        json!({"status": "ok", "cli": {"found": true, "version": "2.1.330"}, "sessions": 0, "held_tool_calls": 0})
    );
    let (_, all) = json(get(
        &mut e,
        "/health",
        &[("authorization", "Bearer admin")],
        "",
    ));
    assert_eq!(all["cli"]["path"], "/opt/claude");
    assert_eq!(all["pool"], 0);
    // Draining, it answers 503 for a load balancer.
    e.drain(2, 1000);
    let (status, bare) = json(get(&mut e, "/health", &[], ""));
    assert_eq!((status, bare), (503, json!({"status": "draining"})));
}

#[test]
fn draining_a_new_conversation_gets_its_503_at_once_and_none_waits() {
    let mut e = with_http(
        HttpConfig::default(),
        GatewayConfig {
            max_concurrent: 0,
            ..GatewayConfig::default()
        },
    );
    let body = br#"{"model":"sonnet","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}"#;
    let head = HttpHead {
        method: "POST",
        path: "/v1/messages",
        query: "",
        headers: &[JSON],
    };
    // No room: the request waits in the queue.
    e.handle_http(1, 1, &head, "", Ok(body.as_slice()));
    assert!(e.poll_output().is_none(), "it waits for a turn");
    // The drain answers it, and a new one, at once.
    e.drain(2, 30_000);
    let (status, headers, _) = answer(&mut e, 1);
    assert_eq!(status, 503);
    assert!(headers.iter().any(|(n, v)| n == "retry-after" && v == "1"));
    e.handle_http(3, 2, &head, "", Ok(body.as_slice()));
    assert_eq!(answer(&mut e, 2).0, 503);
}

/// The Managed Agents API: `(status, headers, JSON)` of a request of `tenant`.
fn managed(
    e: &mut Gateway,
    tenant: &str,
    method: &str,
    target: &str,
    body: Value,
) -> (u16, Vec<(String, String)>, Value) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1000);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let head = HttpHead {
        method,
        path,
        query,
        headers: &[JSON],
    };
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    e.handle_http(1, id, &head, tenant, Ok(bytes.as_slice()));
    let (status, headers, body) = answer(e, id);
    (status, headers, serde_json::from_slice(&body).unwrap())
}

#[test]
fn agents_have_versions_pages_and_tenants() {
    let mut e = front(HttpConfig::default());
    let agent = json!({"name": "Coder", "model": "claude-sonnet-4-6", "system": "Be brief.",
        "tools": [{"type": "agent_toolset_20260401",
                   "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}]},
                  {"type": "custom", "name": "lookup", "description": "Looks up.",
                   "input_schema": {"type": "object", "properties": {}}}],
        "metadata": {"team": "a"}});
    let (status, _, created) = managed(&mut e, "alice", "POST", "/v1/agents", agent);
    assert_eq!(status, 200, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("agent_"), "{id}");
    assert_eq!(
        (created["version"].as_u64(), created["model"].clone()),
        (Some(1), json!({"id": "claude-sonnet-4-6"}))
    );
    let configs = created["tools"][0]["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 8, "every built-in tool, resolved");
    assert_eq!(configs[0]["permission_policy"]["type"], "always_ask");
    assert_eq!(configs[1]["permission_policy"]["type"], "always_allow");
    assert!(created["created_at"].as_str().unwrap().ends_with('Z'));

    // What a session's CLI would take on its command line is bounded, with a 400 that says so.
    let servers: Vec<Value> = (0..17)
        .map(|i| json!({"type": "url", "name": format!("s{i}"), "url": "https://mcp.example/"}))
        .collect();
    let toolsets: Vec<Value> = (0..17)
        .map(|i| json!({"type": "mcp_toolset", "mcp_server_name": format!("s{i}")}))
        .collect();
    let many = json!({"name": "Many", "model": "claude-sonnet-4-6", "mcp_servers": servers,
        "tools": toolsets});
    let (status, _, error) = managed(&mut e, "alice", "POST", "/v1/agents", many);
    assert_eq!(status, 400, "{error}");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("mcp_servers: at most 16"));
    let long = json!({"name": "Long", "model": "claude-sonnet-4-6",
        "mcp_servers": [{"type": "url", "name": "s", "url": format!("https://{}", "x".repeat(3000))}],
        "tools": [{"type": "mcp_toolset", "mcp_server_name": "s"}]});
    let (status, _, error) = managed(&mut e, "alice", "POST", "/v1/agents", long);
    assert_eq!(status, 400, "{error}");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains(".url: at most 2048"));
    let configs: Vec<Value> = (0..129).map(|i| json!({"name": format!("t{i}")})).collect();
    let crowded = json!({"name": "Crowded", "model": "claude-sonnet-4-6",
        "mcp_servers": [{"type": "url", "name": "s", "url": "https://mcp.example/"}],
        "tools": [{"type": "mcp_toolset", "mcp_server_name": "s", "configs": configs}]});
    let (status, _, error) = managed(&mut e, "alice", "POST", "/v1/agents", crowded);
    assert_eq!(status, 400, "{error}");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("at most 128 configs"));

    // Another tenant sees none of it.
    let (status, _, _) = managed(
        &mut e,
        "bob",
        "GET",
        &format!("/v1/agents/{id}"),
        Value::Null,
    );
    assert_eq!(status, 404);
    let (_, _, list) = managed(&mut e, "bob", "GET", "/v1/agents", Value::Null);
    assert_eq!(list["data"], json!([]));

    // An update makes a version; one against an older version is a conflict the SDK does not
    // retry; one that changes nothing makes none.
    let update =
        json!({"version": 1, "system": "Be thorough.", "metadata": {"team": null, "x": "y"}});
    let (status, _, v2) = managed(
        &mut e,
        "alice",
        "POST",
        &format!("/v1/agents/{id}"),
        update.clone(),
    );
    assert_eq!((status, v2["version"].as_u64()), (200, Some(2)), "{v2}");
    assert_eq!(v2["metadata"], json!({"x": "y"}));
    let (status, headers, conflict) =
        managed(&mut e, "alice", "POST", &format!("/v1/agents/{id}"), update);
    assert_eq!(status, 409, "{conflict}");
    assert_eq!(conflict["error"]["type"], "conflict_error");
    assert!(headers.contains(&("x-should-retry".into(), "false".into())));
    let same = json!({"system": "Be thorough."});
    let (_, _, unchanged) = managed(&mut e, "alice", "POST", &format!("/v1/agents/{id}"), same);
    assert_eq!(unchanged["version"].as_u64(), Some(2));
    let (_, _, v1) = managed(
        &mut e,
        "alice",
        "GET",
        &format!("/v1/agents/{id}?version=1"),
        Value::Null,
    );
    assert_eq!(v1["system"], "Be brief.");
    let (_, _, versions) = managed(
        &mut e,
        "alice",
        "GET",
        &format!("/v1/agents/{id}/versions"),
        Value::Null,
    );
    let numbers: Vec<u64> = versions["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["version"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [2, 1]);

    // Pages: newest first, `next_page` until the last, which has none.
    for i in 0..4 {
        let body = json!({"name": format!("A{i}"), "model": "claude-haiku-4-5"});
        managed(&mut e, "alice", "POST", "/v1/agents", body);
    }
    let mut names = Vec::new();
    let mut target = "/v1/agents?limit=2".to_owned();
    loop {
        let (status, _, page) = managed(&mut e, "alice", "GET", &target, Value::Null);
        assert_eq!(status, 200, "{page}");
        names.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["name"].as_str().unwrap().to_owned()),
        );
        match page["next_page"].as_str() {
            Some(next) => target = format!("/v1/agents?limit=2&page={next}"),
            None => break,
        }
    }
    assert_eq!(names, ["A3", "A2", "A1", "A0", "Coder"]);

    // Archived: gone from the list unless asked for, still readable, no longer updatable.
    let (_, _, archived) = managed(
        &mut e,
        "alice",
        "POST",
        &format!("/v1/agents/{id}/archive"),
        Value::Null,
    );
    assert!(archived["archived_at"].is_string());
    let (_, _, list) = managed(&mut e, "alice", "GET", "/v1/agents?limit=100", Value::Null);
    assert_eq!(list["data"].as_array().unwrap().len(), 4);
    let (_, _, list) = managed(
        &mut e,
        "alice",
        "GET",
        "/v1/agents?limit=100&include_archived=true",
        Value::Null,
    );
    assert_eq!(list["data"].as_array().unwrap().len(), 5);
    let (status, _, _) = managed(
        &mut e,
        "alice",
        "POST",
        &format!("/v1/agents/{id}"),
        json!({"name": "X"}),
    );
    assert_eq!(status, 400);

    // What a local Claude Code cannot do is refused, saying so.
    for (field, value) in [
        ("skills", json!([{"type": "anthropic", "skill_id": "xlsx"}])),
        ("multiagent", json!({"type": "multiagent_20261001"})),
        (
            "execution_identity",
            json!({"type": "aws_role", "role_arn": "arn:x"}),
        ),
    ] {
        let mut body = json!({"name": "N", "model": "m"});
        body[field] = value;
        let (status, _, error) = managed(&mut e, "alice", "POST", "/v1/agents", body);
        assert_eq!(status, 400);
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(field)
                && (message.contains("not supported") || message.contains("only")),
            "{message}"
        );
    }
    let body = json!({"name": "N", "model": "m", "mcp_servers": [{"type": "url", "name": "docs", "url": "https://x"}]});
    let (status, _, error) = managed(&mut e, "alice", "POST", "/v1/agents", body);
    assert_eq!(status, 400, "an MCP server no toolset uses: {error}");
}

#[test]
fn environments_are_local_and_say_what_cannot_apply() {
    let mut e = front(HttpConfig::default());
    let (status, headers, env) = managed(
        &mut e,
        "alice",
        "POST",
        "/v1/environments",
        json!({"name": "dev", "config": {"type": "cloud", "networking": {"type": "limited", "allowed_hosts": ["x.com"]},
               "packages": {"pip": ["pandas"]}}}),
    );
    assert_eq!(status, 200, "{env}");
    assert_eq!(env["config"]["packages"]["pip"], json!(["pandas"]));
    let warning = headers
        .iter()
        .find(|(n, _)| n == "x-ccwire-warning")
        .map(|(_, v)| v.clone())
        .unwrap();
    assert!(
        warning.contains("config.networking (limited)") && warning.contains("config.packages.pip"),
        "{warning}"
    );
    let id = env["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("env_"));

    let (status, _, error) = managed(
        &mut e,
        "alice",
        "POST",
        "/v1/environments",
        json!({"name": "remote", "config": {"type": "self_hosted"}}),
    );
    assert_eq!(status, 400);
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("self_hosted"));
    let (status, _, error) = managed(
        &mut e,
        "alice",
        "POST",
        &format!("/v1/environments/{id}"),
        json!({"config": {"type": "self_hosted"}}),
    );
    assert_eq!(
        (status, error["error"]["details"]["error_code"].as_str()),
        (400, Some("invalid_config_type_change"))
    );
    let (_, _, updated) = managed(
        &mut e,
        "alice",
        "POST",
        &format!("/v1/environments/{id}"),
        json!({"description": "mine", "metadata": {"k": "v"}}),
    );
    assert_eq!(
        (
            updated["description"].as_str(),
            updated["metadata"]["k"].as_str()
        ),
        (Some("mine"), Some("v"))
    );
    let (status, _, error) = managed(
        &mut e,
        "bob",
        "GET",
        &format!("/v1/environments/{id}"),
        Value::Null,
    );
    assert_eq!(
        (status, error["error"]["details"]["error_code"].as_str()),
        (404, Some("environment_not_found"))
    );

    managed(
        &mut e,
        "alice",
        "POST",
        &format!("/v1/environments/{id}/archive"),
        Value::Null,
    );
    let (status, _, error) = managed(
        &mut e,
        "alice",
        "POST",
        &format!("/v1/environments/{id}"),
        json!({"name": "x"}),
    );
    assert_eq!(
        (status, error["error"]["details"]["error_code"].as_str()),
        (400, Some("environment_archived"))
    );
    let (status, _, deleted) = managed(
        &mut e,
        "alice",
        "DELETE",
        &format!("/v1/environments/{id}"),
        Value::Null,
    );
    assert_eq!(
        (status, deleted),
        (200, json!({"id": id, "type": "environment_deleted"}))
    );
    let (_, _, list) = managed(
        &mut e,
        "alice",
        "GET",
        "/v1/environments?include_archived=true",
        Value::Null,
    );
    assert_eq!(list, json!({"data": [], "next_page": null}));
}

#[test]
fn managed_resources_are_kept_in_the_store_and_read_back_after_a_restart() {
    let config = || GatewayConfig {
        store: true,
        ..GatewayConfig::default()
    };
    let mut e = with_http(HttpConfig::default(), config());
    let head = HttpHead {
        method: "POST",
        path: "/v1/agents",
        query: "",
        headers: &[JSON],
    };
    let body = json!({"name": "Kept", "model": "claude-sonnet-4-6"}).to_string();
    // The tenant's resources are read first; a store that fails is a 503 to retry.
    e.handle_http(1, 1, &head, "alice", Ok(body.as_bytes()));
    let outputs: Vec<GatewayOutput> = std::iter::from_fn(|| e.poll_output()).collect();
    assert!(
        matches!(
            &outputs[..],
            [GatewayOutput::Store(StoreAsk::LoadManaged {
                request: 1,
                ..
            })]
        ),
        "{outputs:?}"
    );
    e.handle_store(
        1,
        StoreAnswer::ManagedLoaded {
            request: 1,
            resources: None,
        },
    );
    let (status, headers, _) = answer(&mut e, 1);
    assert_eq!(status, 503);
    assert!(headers.contains(&("retry-after".into(), "2".into())));

    e.handle_http(1, 2, &head, "alice", Ok(body.as_bytes()));
    let _ = std::iter::from_fn(|| e.poll_output()).count();
    e.handle_store(
        1,
        StoreAnswer::ManagedLoaded {
            request: 2,
            resources: Some(Vec::new()),
        },
    );
    let outputs: Vec<GatewayOutput> = std::iter::from_fn(|| e.poll_output()).collect();
    assert!(
        !outputs
            .iter()
            .any(|o| matches!(o, GatewayOutput::End { .. })),
        "the answer ends once the store has kept the agent: {outputs:?}"
    );
    e.handle_store(1, StoreAnswer::Kept { request: 2 });
    let outputs: Vec<GatewayOutput> = outputs.into_iter().chain(kept_outputs(&mut e)).collect();
    let kept: Vec<(String, String, Option<String>)> = outputs
        .iter()
        .filter_map(|o| match o {
            GatewayOutput::Store(StoreAsk::Managed { kind, id, json, .. }) => {
                Some((kind.clone(), id.clone(), json.clone()))
            }
            _ => None,
        })
        .collect();
    let (_, _, created) = answer_of(outputs, 2);
    let created: Value = serde_json::from_slice(&created).unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        (kept[0].0.as_str(), kept[0].1.as_str()),
        ("agent", id.as_str())
    );
    let update = json!({"system": "Now with a system prompt."});
    let (_, _, v2) = managed(&mut e, "alice", "POST", &format!("/v1/agents/{id}"), update);
    assert_eq!(v2["version"], 2);
    // A change the store cannot keep is a 503 to retry, not a success a restart would undo.
    let path = format!("/v1/agents/{id}");
    let head = HttpHead {
        method: "POST",
        path: &path,
        query: "",
        headers: &[JSON],
    };
    let body = json!({"system": "Kept?"}).to_string();
    e.handle_http(1, 3, &head, "alice", Ok(body.as_bytes()));
    let outputs: Vec<GatewayOutput> = std::iter::from_fn(|| e.poll_output()).collect();
    assert!(!outputs
        .iter()
        .any(|o| matches!(o, GatewayOutput::End { .. })));
    e.handle_store(1, StoreAnswer::NotKept { request: 3 });
    let (status, headers, body) = answer(&mut e, 3);
    assert_eq!(status, 503);
    assert!(
        headers.contains(&("retry-after".to_owned(), "2".to_owned())),
        "{headers:?}"
    );
    let body: Value = serde_json::from_slice(&body).unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("could not keep it"), "{message}");
    // A restarted gateway reads the agent back, versions and all.
    let mut restarted = with_http(HttpConfig::default(), config());
    let get = HttpHead {
        method: "GET",
        path: &format!("/v1/agents/{id}"),
        query: "version=1",
        headers: &[],
    };
    restarted.handle_http(1, 7, &get, "alice", Ok(b"".as_slice()));
    let _ = std::iter::from_fn(|| restarted.poll_output()).count();
    let stored = json!({"order": 1, "data": [created.clone(), v2.clone()]}).to_string();
    restarted.handle_store(
        1,
        StoreAnswer::ManagedLoaded {
            request: 7,
            resources: Some(vec![("agent".into(), stored)]),
        },
    );
    let (status, _, body) = answer(&mut restarted, 7);
    let v1: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, v1), (200, created));
}

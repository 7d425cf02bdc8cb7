//! End-to-end: what `ccwire serve` refuses before anything runs — requests borne by web pages
//! (a foreign `Origin`, a cross-site fetch, a DNS-rebinding `Host`), bodies that are not JSON,
//! tool names and image data the API would refuse — and what it opens when the operator asks.
//! Every refusal is checked to have spawned no CLI and sent nothing to the model.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A response as read off the socket.
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Sends one HTTP/1.1 request exactly as given (any `Host`, any headers), as a browser or an
/// attacker's page would, and reads the whole response.
async fn raw(gw: &Gw, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Raw {
    let addr = gw.server().addr();
    let mut request = format!("{method} {path} HTTP/1.1\r\nconnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        request += &format!("host: {addr}\r\n");
    }
    for (name, value) in headers {
        request += &format!("{name}: {value}\r\n");
    }
    request += &format!("content-length: {}\r\n\r\n{body}", body.len());
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).await.unwrap();
        bytes
    };
    let bytes = tokio::time::timeout(Duration::from_secs(60), exchange)
        .await
        .expect("an answer in time");
    let text = String::from_utf8(bytes).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_owned()))
        .collect();
    let body = if text.contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Raw {
        status,
        headers,
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out += &rest[..size];
        body = &rest[size + 2..];
    }
    out
}

fn hello() -> String {
    anthropic(json!([{"role": "user", "content": "PLEASE-GREET the guard"}])).to_string()
}

fn hello_openai() -> String {
    json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "PLEASE-GREET the guard"}]})
        .to_string()
}

const JSON: (&str, &str) = ("content-type", "application/json");

/// What a request is, its method, path, headers and body, and the status it must get.
type Case<'a> = (
    &'a str,
    &'a str,
    &'a str,
    Vec<(&'a str, &'a str)>,
    &'a str,
    u16,
);

/// Nothing was spawned and the model heard nothing.
async fn assert_nothing_ran(gw: &Gw, what: &str) {
    assert!(
        gw.server().session_pids().is_empty(),
        "{what}: a CLI was spawned"
    );
    assert!(
        gw.fake.requests().is_empty(),
        "{what}: the model was called"
    );
    let health = gw.health().await;
    assert_eq!(health["sessions"], 0, "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_borne_and_malformed_requests_are_refused_before_anything_runs() {
    let gw = Gw::start(|_| {}).await;
    let port = gw.server().addr().port();
    let evil_host = format!("evil.example:{port}");
    let anthropic_body = hello();
    let openai_body = hello_openai();
    let cases: Vec<Case<'_>> = vec![
        (
            "a page's text/plain POST (no preflight)",
            "POST",
            "/v1/messages",
            vec![
                ("origin", "http://evil.example"),
                ("content-type", "text/plain"),
            ],
            &anthropic_body,
            403,
        ),
        (
            "a page's form POST",
            "POST",
            "/v1/messages",
            vec![
                ("origin", "http://evil.example"),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            &anthropic_body,
            403,
        ),
        (
            "a page's JSON fetch",
            "POST",
            "/v1/chat/completions",
            vec![("origin", "https://evil.example"), JSON],
            &openai_body,
            403,
        ),
        (
            "a sandboxed frame (Origin: null)",
            "POST",
            "/v1/messages",
            vec![("origin", "null"), JSON],
            &anthropic_body,
            403,
        ),
        (
            "a page on the gateway's own address",
            "POST",
            "/v1/messages",
            vec![("origin", "http://127.0.0.1:8787"), JSON],
            &anthropic_body,
            403,
        ),
        (
            "a cross-site fetch without Origin",
            "POST",
            "/v1/messages",
            vec![("sec-fetch-site", "cross-site"), JSON],
            &anthropic_body,
            403,
        ),
        (
            "a DNS-rebinding host",
            "POST",
            "/v1/messages",
            vec![("host", &evil_host), JSON],
            &anthropic_body,
            403,
        ),
        (
            "a DNS-rebinding page reading /health",
            "GET",
            "/health",
            vec![("host", &evil_host)],
            "",
            403,
        ),
        (
            "a preflight from a foreign origin",
            "OPTIONS",
            "/v1/messages",
            vec![
                ("origin", "http://evil.example"),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", "content-type, x-api-key"),
            ],
            "",
            403,
        ),
        (
            "text/plain without a browser",
            "POST",
            "/v1/messages",
            vec![("content-type", "text/plain")],
            &anthropic_body,
            415,
        ),
        (
            "a form encoding without a browser",
            "POST",
            "/v1/chat/completions",
            vec![("content-type", "application/x-www-form-urlencoded")],
            &openai_body,
            415,
        ),
        (
            "no content type",
            "POST",
            "/v1/messages",
            vec![],
            &anthropic_body,
            415,
        ),
    ];
    for (what, method, path, headers, body, status) in &cases {
        let response = raw(&gw, method, path, headers, body).await;
        assert_eq!(response.status, *status, "{what}: {}", response.body);
        let error = response.json();
        if path.starts_with("/v1/chat") {
            assert!(
                error["error"]["message"].is_string(),
                "{what}: OpenAI shape: {error}"
            );
            assert!(error.get("type").is_none(), "{what}: {error}");
        } else {
            assert_eq!(error["type"], "error", "{what}: Anthropic shape: {error}");
            let expected = if *status == 403 {
                "permission_error"
            } else {
                "invalid_request_error"
            };
            assert_eq!(error["error"]["type"], expected, "{what}");
        }
        assert!(
            response.header("access-control-allow-origin").is_none(),
            "{what}"
        );
    }
    let refusal = raw(&gw, "POST", "/v1/messages", &cases[0].3, &anthropic_body).await;
    assert!(
        refusal.body.contains("--allow-origin http://evil.example"),
        "the refusal says how to open it: {}",
        refusal.body
    );
    let rebinding = raw(&gw, "GET", "/health", &[("host", &evil_host)], "").await;
    assert!(
        rebinding.body.contains("--allow-host evil.example"),
        "{}",
        rebinding.body
    );
    let media = raw(
        &gw,
        "POST",
        "/v1/messages",
        &[("content-type", "text/plain")],
        &anthropic_body,
    )
    .await;
    assert!(media.body.contains("application/json"), "{}", media.body);

    // Tool names and image data the real API refuses: a 400 naming the tool or the field.
    let bad_tool = json!({"model": MODEL, "max_tokens": 64,
        "tools": [lookup_tool(), {"name": "read file", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "PLEASE-GREET"}]});
    let (status, _, body) = gw.call("/v1/messages", &bad_tool, None).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("tools.1.name: \"read file\""),
        "{body}"
    );
    let bad_tool = json!({"model": "gpt-4o",
        "tools": [{"type": "function", "function": {"name": "fs.read", "parameters": {"type": "object"}}}],
        "messages": [{"role": "user", "content": "PLEASE-GREET"}]});
    let (status, _, body) = gw.call("/v1/chat/completions", &bad_tool, None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "tools[0].function.name", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"fs.read\""),
        "{body}"
    );
    let bad_image = json!({"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "PLEASE-LOOK"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "not*base64"}},
    ]}]});
    let (status, _, body) = gw.call("/v1/messages", &bad_image, None).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("messages.0.content.1.source.data: "),
        "{body}"
    );
    let bad_image = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,%%%%"}},
    ]}]});
    let (status, _, body) = gw.call("/v1/chat/completions", &bad_image, None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["param"], "messages[0].content[0].image_url.url",
        "{body}"
    );

    assert_nothing_ran(&gw, "after every refusal").await;

    // The same request as a client sends it (JSON, no browser headers) goes through, on
    // every loopback name: the refusals above were about what they carried.
    for host in ["localhost", "127.0.0.1", "[::1]"] {
        let host = format!("{host}:{port}");
        let health = raw(&gw, "GET", "/health", &[("host", &host)], "").await;
        assert_eq!(health.status, 200, "{host}");
    }
    let ok = raw(&gw, "POST", "/v1/messages", &[JSON], &anthropic_body).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(text_of(&ok.json()).contains("PLEASE-GREET"), "{}", ok.body);
    assert_eq!(gw.server().session_pids().len(), 1);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_origin_and_host_are_served_with_cors_and_nothing_else_is() {
    let app = "http://app.example:3000";
    let gw = Gw::start(|o| {
        o.engine.http.allow_origins = vec![format!("{app}/")];
        o.engine.http.allow_hosts = vec!["devbox.local".into()];
    })
    .await;
    let port = gw.server().addr().port();

    // The preflight the SDKs' browser builds cause.
    let wanted = "content-type, x-api-key, anthropic-version, \
                  anthropic-dangerous-direct-browser-access, x-stainless-os, x-stainless-retry-count";
    let preflight = raw(
        &gw,
        "OPTIONS",
        "/v1/messages",
        &[
            ("origin", app),
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", wanted),
        ],
        "",
    )
    .await;
    assert_eq!(preflight.status, 204, "{}", preflight.body);
    assert_eq!(preflight.header("access-control-allow-origin"), Some(app));
    assert_eq!(
        preflight.header("access-control-allow-methods"),
        Some("GET, POST")
    );
    assert_eq!(
        preflight.header("access-control-allow-headers"),
        Some(
            wanted
                .split(',')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(", ")
                .as_str()
        )
    );
    // Only for that origin, and only for the headers the SDKs send.
    for (origin, headers, what) in [
        ("http://app.example:3001", "content-type", "another port"),
        ("https://app.example:3000", "content-type", "another scheme"),
        (
            app,
            "content-type, x-forwarded-for",
            "a header no SDK sends",
        ),
    ] {
        let refused = raw(
            &gw,
            "OPTIONS",
            "/v1/messages",
            &[
                ("origin", origin),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", headers),
            ],
            "",
        )
        .await;
        assert_eq!(refused.status, 403, "{what}");
        assert!(
            refused.header("access-control-allow-origin").is_none(),
            "{what}"
        );
    }

    // The page's request itself: answered, with the headers a page may read.
    let body = hello();
    let ok = raw(
        &gw,
        "POST",
        "/v1/messages",
        &[("origin", app), ("sec-fetch-site", "cross-site"), JSON],
        &body,
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.header("access-control-allow-origin"), Some(app));
    assert!(
        ok.header("access-control-expose-headers")
            .unwrap()
            .contains("x-ccwire-session"),
        "{:?}",
        ok.headers
    );
    assert_eq!(ok.header("x-ccwire-session"), Some("new"));
    assert!(text_of(&ok.json()).contains("PLEASE-GREET"));
    // Still JSON only, and other origins still refused.
    let plain = raw(
        &gw,
        "POST",
        "/v1/messages",
        &[("origin", app), ("content-type", "text/plain")],
        &body,
    )
    .await;
    assert_eq!(plain.status, 415);
    let other = raw(
        &gw,
        "POST",
        "/v1/messages",
        &[("origin", "http://evil.example"), JSON],
        &body,
    )
    .await;
    assert_eq!(other.status, 403);

    // The allowed host name, with any port; other names still refused.
    let host = format!("devbox.local:{port}");
    assert_eq!(
        raw(&gw, "GET", "/health", &[("host", &host)], "")
            .await
            .status,
        200
    );
    let other = format!("devbox.local.evil.example:{port}");
    assert_eq!(
        raw(&gw, "GET", "/health", &[("host", &other)], "")
            .await
            .status,
        403
    );
    assert_eq!(
        gw.server().session_pids().len(),
        1,
        "only the allowed request ran"
    );
    gw.stop().await;
}

fn environ(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap()
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_its_tools_inherit_no_gateway_secret() {
    use ccwire_tests::{FakeAnthropic, Match, Reply, Script};
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .on_tool_result(Reply::Echo)
        .on_prompt(
            "PLEASE-PRINT-ENV",
            Reply::tool(
                "Bash",
                json!({"command": "env", "description": "Print the environment"}),
            ),
        )
        .when(Match::Any, Reply::Echo);
    let fake = FakeAnthropic::start(script).await;
    let home = ccwire_tests::cli::OfflineHome::new();
    let serve = ServeProcess::start(
        &home,
        &fake,
        &[
            "--enable-tool",
            "Bash",
            "--strip-env",
            "MY_TOKEN",
            "--strip-env",
            "VAULT_*",
            "--pass-env",
            "KEEP_*",
            "--pass-env",
            "VAULT_*",
        ],
        &[
            ("CCWIRE_API_KEYS", "key-of-tenant-a,key-of-tenant-b"),
            ("MY_TOKEN", "secret-token"),
            ("VAULT_SECRET_ID", "secret-vault"),
            ("KEEP_ME", "kept-value"),
            ("AWS_SECRET_ACCESS_KEY", "secret-aws"),
            ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "4096"),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let body = anthropic(json!([{"role": "user", "content": "PLEASE-PRINT-ENV"}]));
    let response = http
        .post(format!("http://{}/v1/messages", serve.addr))
        .header("x-api-key", "key-of-tenant-a")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer = text_of(&response.json().await.unwrap());

    // What the model's Bash call printed: the environment a tool runs in.
    assert!(
        answer.contains("KEEP_ME=kept-value"),
        "the tool's env output: {answer}"
    );
    assert!(answer.contains("ANTHROPIC_BASE_URL="), "{answer}");
    // The one `CCWIRE_` variable it sees is the mark of its session (no secret).
    let answer = (answer.lines())
        .filter(|l| !l.starts_with("CCWIRE_GATEWAY_SESSION="))
        .collect::<Vec<_>>()
        .join("\n");
    // Claude Code's own settings pass; anything else only when passed by name, and a name
    // stripped is stripped even when passed.
    assert!(
        answer.contains("CLAUDE_CODE_MAX_OUTPUT_TOKENS=4096"),
        "{answer}"
    );
    for secret in [
        "key-of-tenant",
        "CCWIRE_",
        "secret-token",
        "secret-vault",
        "secret-aws",
    ] {
        assert!(!answer.contains(secret), "a tool saw {secret}: {answer}");
    }
    // And the CLI's own environment.
    let pids = serve.cli_pids();
    assert_eq!(pids.len(), 1, "one CLI for the conversation");
    let env = environ(pids[0]);
    assert!(env.iter().any(|v| v == "KEEP_ME=kept-value"), "{env:?}");
    for var in &env {
        assert!(
            (!var.starts_with("CCWIRE_") || var.starts_with("CCWIRE_GATEWAY_SESSION="))
                && !var.starts_with("MY_TOKEN=")
                && !var.starts_with("VAULT_"),
            "the CLI inherited {var}"
        );
    }
    serve.stop().await;
}

#[test]
fn serve_refuses_to_start_where_it_would_be_open() {
    let serve = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_ccwire"))
            .arg("serve")
            .args(args)
            .env_remove("CCWIRE_API_KEYS")
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, stderr) = serve(&[
        "--listen",
        "0.0.0.0:0",
        "--enable-tool",
        "Bash",
        "--enable-tool",
        "Read",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("without an API key"), "{stderr}");
    assert!(
        stderr.contains("--enable-tool Bash would let anyone"),
        "the reason names the tool: {stderr}"
    );
    for (origin, reason) in [
        ("*", "name each origin"),
        ("null", "null origin"),
        ("app.example", "scheme://host[:port]"),
    ] {
        let (code, stderr) = serve(&["--listen", "127.0.0.1:0", "--allow-origin", origin]);
        assert_eq!(code, Some(2), "{origin}: {stderr}");
        assert!(stderr.contains(reason), "{origin}: {stderr}");
    }
}

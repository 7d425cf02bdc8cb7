//! No way out of a tenant's sandbox, tried as a hostile tenant with a valid key and the Bash
//! tool would, through the real CLI: links planted in its own directories never send the
//! gateway elsewhere, its tools reach the model API and nothing else on the machine, and they
//! see none of the gateway's variables and none of the operator's files in `/etc`.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ccwire_host::sandbox::SandboxMode;
use ccwire_host::serve::{GatewayOptions, Server};
use ccwire_host::store::{ConversationStore, DirStore};
use ccwire_tests::redis::RedisServer;
use ccwire_tests::{Match, Reply, Script};
use serde_json::json;
use support::{bash, session_header, Gw, MODEL};

const CANARY: &str = "CCWIRE_TEST_CANARY_SECRET_d41c";

/// A gateway with the sandbox on, tenant directories under `state`, two keys and Bash.
fn sandboxed(o: &mut GatewayOptions, state: &Path) {
    o.state_dir = Some(state.to_owned());
    o.sandbox = SandboxMode::On;
    o.cwd = None;
    o.engine.http.api_keys = vec!["key-a".into(), "key-b".into()];
    o.engine.enabled_tools = vec!["Bash".into()];
}

/// What Bash printed, without the fake model's echo.
fn printed(out: &str) -> &str {
    let out = out.trim().trim_start_matches("You said: ");
    out.split("\n\n<system-reminder>")
        .next()
        .unwrap_or(out)
        .trim()
}

/// The gateway's port, a Redis server's and the fake model's are out of reach of a tenant's
/// tools, directly or through the proxy; the model API is reached through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_s_tools_reach_the_model_api_and_nothing_else() {
    let state = tempfile::tempdir().unwrap();
    let redis = RedisServer::start();
    let redis_port = redis.url().rsplit(':').next().unwrap().to_owned();
    let gw = Gw::start(|o| sandboxed(o, state.path())).await;
    let gateway_port = gw.server().addr().port().to_string();
    let fake = gw.fake.base_url();
    let fake_port = fake
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();

    for port in [&gateway_port, &redis_port, &fake_port] {
        // Straight to the port: the sandbox's loopback is its own.
        let out = bash(
            &gw,
            "key-a",
            &format!(
                "(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo REACHED || echo REFUSED"
            ),
        )
        .await;
        assert!(
            printed(&out).contains("REFUSED") && !out.contains("REACHED"),
            "{port}: {out}"
        );
    }
    for port in [&gateway_port, &redis_port] {
        // Through the proxy, as a tool that honours HTTPS_PROXY would.
        let out = bash(
            &gw,
            "key-a",
            &format!(
                "exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n' >&3 && head -c 12 <&3"
            ),
        )
        .await;
        assert!(out.contains("HTTP/1.1 403"), "{port}: {out}");
    }
    // What the proxy does carry: the model API (here the fake one, over plain HTTP), for the
    // CLI as for a tool.
    let out = bash(
        &gw,
        "key-a",
        &format!(
            "exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'GET {fake}/health HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n' >&3 && head -c 12 <&3"
        ),
    )
    .await;
    assert!(!out.contains("403"), "the model API is reached: {out}");
    let out = bash(&gw, "key-a", "echo $HTTPS_PROXY").await;
    assert!(out.contains("127.0.0.1:3128"), "{out}");
    // The store's data is untouched and no key of it was read.
    let keys = redis_keys(&redis).await;
    assert!(keys.is_empty(), "{keys:?}");
    gw.stop().await;
}

async fn redis_keys(redis: &RedisServer) -> Vec<String> {
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// The gateway's own variables reach no tool unless passed; `/etc` holds only what programs
/// need, with the sandbox's own users.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_s_tools_see_no_variable_of_the_gateway_and_no_operator_file_in_etc() {
    // Read by the gateway at its start (it makes the list of what passes then).
    std::env::set_var(CANARY, "planted-by-the-operator");
    std::env::set_var("CCWIRE_TEST_PASSED_d41c", "passed-on-purpose");
    let state = tempfile::tempdir().unwrap();
    let gw = Gw::start(|o| {
        sandboxed(o, state.path());
        o.pass_env = vec!["CCWIRE_TEST_PASSED_*".into()];
    })
    .await;
    let out = bash(&gw, "key-a", "env | cut -d= -f1 | sort | tr '\\n' ' '").await;
    assert!(!out.contains(CANARY), "{out}");
    assert!(
        out.contains("PATH") && out.contains("ANTHROPIC_BASE_URL"),
        "{out}"
    );
    // `CCWIRE_*` never passes, even when asked.
    assert!(!out.contains("CCWIRE_TEST_PASSED"), "{out}");

    let out = bash(&gw, "key-a", "ls -A /etc | tr '\\n' ' '").await;
    let listed: Vec<&str> = printed(&out).split_whitespace().collect();
    assert!(
        listed.contains(&"passwd") && listed.contains(&"hosts"),
        "{out}"
    );
    for name in &listed {
        assert!(
            ccwire_host::sandbox::ETC.contains(name) || ["passwd", "group"].contains(name),
            "/etc/{name} is in the sandbox: {out}"
        );
    }
    for secret in [
        "environment",
        "npmrc",
        "pip.conf",
        "gitconfig",
        "wgetrc",
        "default",
        "profile.d",
        "shadow",
        "machine-id",
    ] {
        assert!(!listed.contains(&secret), "/etc/{secret}: {out}");
    }
    let out = bash(&gw, "key-a", "cat /etc/passwd | cut -d: -f1 | tr '\\n' ' '").await;
    assert_eq!(printed(&out), "root ccwire nobody", "{out}");
    std::env::remove_var(CANARY);
    gw.stop().await;
}

/// A sandboxed gateway with a session store in `store`, whose model runs `bash` (the Bash
/// tool's input) when the prompt says `prompt`, and echoes otherwise.
async fn with_store_running(
    state: &Path,
    store: &Path,
    prompt: &str,
    bash: serde_json::Value,
) -> Gw {
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .on_tool_result(Reply::Echo)
        .on_prompt(prompt, Reply::tool("Bash", bash))
        .when(Match::Any, Reply::Echo);
    let store: Arc<dyn ConversationStore> =
        Arc::new(DirStore::new(store, Duration::from_secs(3600)));
    Gw::start_with(script, |o| {
        sandboxed(o, state);
        o.store = Some(store);
    })
    .await
}

/// The files in `dir`.
fn written(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect()
}

/// A tenant replaces the directory of its stored conversation's transcript with a link to a
/// directory outside the sandbox, then makes the gateway resume the conversation (same
/// history, another system prompt): the gateway writes nothing there, and goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_planted_where_a_transcript_is_resumed_is_not_followed() {
    let state = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let target = outside.path().display().to_string();
    let plant = format!(
        "cd $HOME/.claude/projects && for d in ./*/; do d=${{d%/}}; mv \"$d\" \"$d.moved\" && ln -s {target} \"$d\"; done; ls -l | tr '\\n' ' '"
    );
    let gw = with_store_running(
        state.path(),
        store_dir.path(),
        "PLANT",
        json!({"command": plant, "description": "Plant"}),
    )
    .await;
    let first = json!({"model": MODEL, "max_tokens": 1024, "system": "One.",
        "messages": [{"role": "user", "content": "PLANT"}]});
    let (status, _, answer) = gw.call("/v1/messages", &first, Some("key-a")).await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer.to_string().contains(&target),
        "the link is planted: {answer}"
    );
    let second = json!({"model": MODEL, "max_tokens": 1024, "system": "Two.",
    "messages": [
        {"role": "user", "content": "PLANT"},
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": "And now?"},
    ]});
    let response = gw.post("/v1/messages", &second, Some("key-a")).await;
    let status = response.status().as_u16();
    let kind = session_header(&response);
    let body = response.text().await.unwrap();
    let written = written(outside.path());
    assert!(
        written.is_empty(),
        "the gateway wrote {written:?} ({status} {kind}: {body})"
    );
    // The gateway goes on serving, this tenant too.
    let out = bash(&gw, "key-a", "echo still-here").await;
    assert!(out.contains("still-here"), "{out}");
    gw.stop().await;
}

/// The same, raced: one of the tenant's CLIs swaps its transcripts' directory for a link and
/// back again, over and over, while the gateway resumes another of its conversations (whose
/// transcript goes to that directory) again and again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_swapped_in_and_out_while_transcripts_are_resumed_is_never_followed() {
    let state = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let target = outside.path().display().to_string();
    // A job of the Bash tool's own (`run_in_background`), which lives as long as its CLI.
    let race = format!(
        "cd \"$HOME/.claude/projects/$(pwd | sed 's/[^A-Za-z0-9]/-/g')\" && cd .. && d=$(basename \"$OLDPWD\") && \
         echo racing && while :; do mv -- \"$d\" \"$d.real\"; ln -s {target} -- \"$d\" 2>/dev/null || ln -s {target} \"./$d\"; sleep 0.02; rm -f -- \"$d\"; mv -- \"$d.real\" \"$d\"; sleep 0.02; done"
    );
    let gw = with_store_running(
        state.path(),
        store_dir.path(),
        "RACE",
        json!({"command": race, "description": "Race", "run_in_background": true}),
    )
    .await;
    let racer = json!({"model": MODEL, "max_tokens": 1024,
        "messages": [{"role": "user", "content": "RACE"}]});
    let (status, _, answer) = gw.call("/v1/messages", &racer, Some("key-a")).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer.to_string().contains("in background"), "{answer}");
    let mut messages = vec![json!({"role": "user", "content": "Hello"})];
    let mut kinds = Vec::new();
    for round in 0..12 {
        let request = json!({"model": MODEL, "max_tokens": 1024,
            "system": format!("Round {round}."), "messages": messages});
        let response = gw.post("/v1/messages", &request, Some("key-a")).await;
        kinds.push((response.status().as_u16(), session_header(&response)));
        let answer: serde_json::Value = response.json().await.unwrap_or_default();
        let content = answer
            .get("content")
            .cloned()
            .unwrap_or_else(|| json!("(none)"));
        messages.push(json!({"role": "assistant", "content": content}));
        messages.push(json!({"role": "user", "content": format!("And {round}?")}));
        let written = written(outside.path());
        assert!(
            written.is_empty(),
            "round {round}: the gateway wrote {written:?} ({kinds:?})"
        );
    }
    assert!(
        kinds.iter().any(|(_, kind)| kind == "resumed"),
        "the gateway resumed conversations meanwhile: {kinds:?}"
    );
    gw.stop().await;
}

/// A tenant's other CLIs cannot reach a Managed Agents session's directory: it lives beside
/// their working directory, not in it, and no link planted where it used to be is used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_s_directory_is_out_of_reach_of_the_tenant_s_other_clis() {
    let state = tempfile::tempdir().unwrap();
    let gw = Gw::start(|o| sandboxed(o, state.path())).await;
    let out = bash(
        &gw,
        "key-a",
        "pwd; ls .. 2>&1 | tr '\\n' ' '; ls ../../sessions 2>&1 | tr '\\n' ' '",
    )
    .await;
    let work = printed(&out).lines().next().unwrap_or_default().to_owned();
    assert!(work.ends_with("/work"), "{out}");
    let tenant = Path::new(&work).parent().unwrap();
    // Inside the sandbox the tenant's directory holds only what is bound there.
    assert!(!out.contains("sessions "), "{out}");
    // The directories the gateway made are real directories, and a link where a session's
    // directory would go is refused, not followed.
    std::fs::create_dir_all(tenant.join("sessions")).unwrap();
    std::os::unix::fs::symlink("/", tenant.join("sessions/sesn_planted")).unwrap();
    let made = ccwire_host::beneath::make_dir_below(
        &state.path().join("tenants"),
        &tenant.join("sessions/sesn_planted"),
    );
    assert!(made.is_err(), "a link is not a session's directory");
    gw.stop().await;
}

/// Without a working sandbox a gateway that runs code tools, or serves several keys, does not
/// start unless the operator says `--sandbox off`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_sandbox_a_multi_tenant_gateway_with_tools_does_not_start() {
    let state = tempfile::tempdir().unwrap();
    let broken = |o: &mut GatewayOptions| {
        o.state_dir = Some(state.path().to_owned());
        o.sandbox = SandboxMode::Auto;
        // A relay that is not there: the sandbox cannot work.
        o.sandbox_relay = Some(state.path().join("no-such-ccwire"));
        o.engine.enabled_tools = vec!["Bash".into()];
    };
    let mut options = GatewayOptions::default();
    broken(&mut options);
    let refused = Server::start("127.0.0.1:0".parse().unwrap(), options).await;
    let error = refused.err().expect("refused").to_string();
    assert!(error.contains("--sandbox off"), "{error}");
    let mut options = GatewayOptions::default();
    broken(&mut options);
    options.engine.enabled_tools.clear();
    options.engine.http.api_keys = vec!["key-a".into()];
    assert!(Server::start("127.0.0.1:0".parse().unwrap(), options)
        .await
        .is_err());
    // Said outright, it starts; and with neither tools nor keys, `auto` starts unsandboxed.
    let mut options = GatewayOptions::default();
    broken(&mut options);
    options.sandbox = SandboxMode::Off;
    let server = Server::start("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    server.shutdown().await;
    let mut options = GatewayOptions::default();
    broken(&mut options);
    options.engine.enabled_tools.clear();
    let server = Server::start("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    server.shutdown().await;
}

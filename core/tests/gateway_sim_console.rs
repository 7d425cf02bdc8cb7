//! The gateway engine in simulation ([`sim`]): the console's view — live and stored
//! conversations, their chunks, approvals, charts and held calls.

mod sim;

use sim::*;

/// A gateway with the console and approvals, Bash enabled, keys `alice` and `bob` and the
/// admin key `root`.
fn console_sim() -> Sim {
    Sim::new(GatewayConfig {
        console: true,
        approvals: true,
        enabled_tools: vec!["Bash".to_owned()],
        approval_timeout_ms: 60_000,
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into(), "bob".into()],
            admin_key: Some("root".into()),
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    })
}

#[test]
fn the_console_lists_a_key_s_live_conversations_and_streams_their_chunks() {
    let mut sim = console_sim();
    let turn = bash(&mut sim, "alice", "ls");

    // Alice sees her conversation, waiting for a person; Bob nothing; the admin all.
    let list = console_json(&mut sim, "alice", "/v1/conversations");
    let listed = &list["data"][0];
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(listed["state"], "waiting_for_approval");
    assert_eq!(listed["tenant"], ccwire_core::gateway::tenant_id("alice"));
    let approval = sim.gateway.approvals("alice")["data"][0]["id"].clone();
    assert_eq!(listed["approvals"], json!([approval]));
    let id = listed["id"].as_str().unwrap().to_owned();
    assert_eq!(
        console_json(&mut sim, "bob", "/v1/conversations")["data"],
        json!([])
    );
    assert_eq!(
        console_json(&mut sim, "root", "/v1/conversations")["data"][0]["id"],
        id
    );
    let (status, _, _) = console(&mut sim, "nobody", "/v1/conversations");
    assert_eq!(status, 401);

    // Its stream starts with the conversation and its turn so far, then goes on.
    let path = format!("/v1/conversations/{id}/events");
    assert_eq!(console(&mut sim, "bob", &path).0, 404);
    let (status, text, stream) = console(&mut sim, "alice", &path);
    assert_eq!(status, 200);
    assert!(text.starts_with("event: conversation\ndata: {"), "{text}");
    assert!(text.contains("\"type\":\"user_prompt\""), "{text}");
    assert!(text.contains("\"type\":\"permission_request\""), "{text}");
    let id_str = approval.as_str().unwrap().to_owned();
    answer(&mut sim, "alice", &id_str, json!({"behavior": "allow"})).unwrap();
    assert!(sim.response(turn).ended);
    let text = sim.response(stream).text();
    assert!(text.contains("\"type\":\"tool_result\""), "{text}");
    assert!(text.contains("\"type\":\"turn_complete\""), "{text}");
    let list = console_json(&mut sim, "alice", "/v1/conversations");
    assert_eq!(list["data"][0]["state"], "idle");

    // Closed: the stream says so and ends.
    let session = *sim.specs.keys().next().unwrap();
    sim.gateway.close(sim.now, session);
    sim.run();
    assert!(sim.response(stream).ended);
    assert!(sim.response(stream).text().contains("event: closed\n"));
}

#[test]
fn an_approval_names_its_conversation_as_the_console_does_and_no_server_path() {
    let mut sim = Sim::new(GatewayConfig {
        console: true,
        approvals: true,
        enabled_tools: vec!["Bash".to_owned()],
        approval_timeout_ms: 60_000,
        tenant_root: Some("/state/tenants/".into()),
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into(), "bob".into()],
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    let alice = ccwire_core::gateway::tenant_id("alice");
    let blocked = format!("/state/tenants/{alice}/work/notes.txt");
    bash(
        &mut sim,
        "alice",
        &format!("touch notes.txt | blocked: {blocked}"),
    );
    bash(&mut sim, "bob", "touch motd | blocked: /etc/motd");

    let approval = &sim.gateway.approvals("alice")["data"][0];
    let listed = console_json(&mut sim, "alice", "/v1/conversations");
    assert_eq!(
        approval["conversation"], listed["data"][0]["id"],
        "{approval}"
    );
    assert!(
        approval["conversation"]
            .as_str()
            .is_some_and(|c| c.len() == 36),
        "the conversation's UUID, no counter: {approval}"
    );
    assert_eq!(approval["blocked_path"], "work/notes.txt");
    assert!(
        !approval.to_string().contains("/state/tenants"),
        "{approval}"
    );
    // A path outside the tenant's directory is as the CLI gave it.
    let theirs = &sim.gateway.approvals("bob")["data"][0];
    assert_eq!(theirs["blocked_path"], "/etc/motd");
    assert_ne!(theirs["conversation"], approval["conversation"]);
}

#[test]
fn without_the_console_its_routes_are_not_there() {
    let mut sim = with_keys(false);
    let (status, body, _) = console(&mut sim, "alice", "/v1/conversations");
    assert_eq!(status, 404);
    assert!(body.contains("--console"), "{body}");
}

#[test]
fn the_console_lists_conversations_no_cli_runs_and_shows_their_stored_transcripts() {
    let mut sim = with_store(GatewayConfig {
        console: true,
        limits: Limits {
            hibernate_after_ms: 60_000,
            ..Limits::default()
        },
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into(), "bob".into()],
            admin_key: Some("root".into()),
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    let first = sim.send(
        Api::Anthropic,
        "alice",
        anthropic(
            json!([{"role": "user", "content": "Remember PINEAPPLE"}]),
            false,
        ),
    );
    assert_eq!(sim.response(first).status, 200);
    let list = console_json(&mut sim, "alice", "/v1/conversations");
    assert_eq!(
        list["data"].as_array().unwrap().len(),
        1,
        "live, listed once: {list}"
    );
    assert_eq!(list["data"][0]["state"], "idle");
    let id = list["data"][0]["id"].as_str().unwrap().to_owned();

    // Hibernated: listed from the store, with why and when.
    sim.advance(60_000);
    assert_eq!(sim.gateway.session_count(), 0);
    let list = console_json(&mut sim, "alice", "/v1/conversations");
    let listed = &list["data"][0];
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(
        (&listed["id"], &listed["state"], &listed["closed"]),
        (&json!(id), &json!("hibernated"), &json!("hibernated"))
    );
    let tenant = ccwire_core::gateway::tenant_id("alice");
    assert_eq!(listed["tenant"], tenant);
    assert!(listed["last_active_ms"].as_u64().unwrap() > 0, "{listed}");
    assert_eq!(
        console_json(&mut sim, "bob", "/v1/conversations")["data"],
        json!([])
    );
    // The live ones alone: the store is not asked.
    assert_eq!(
        console_json(&mut sim, "alice", "/v1/conversations?live=only")["data"],
        json!([])
    );
    assert_eq!(
        console_json(&mut sim, "root", "/v1/conversations")["data"][0]["id"],
        id
    );

    // Its stream is its stored transcript's chunks, then its end; another key's is a 404
    // whichever tenant it names.
    let path = format!("/v1/conversations/{id}/events");
    let (status, text, stream) = console(&mut sim, "alice", &path);
    assert_eq!(status, 200, "{text}");
    assert!(text.starts_with("event: conversation\ndata: {"), "{text}");
    assert!(
        text.contains("\"type\":\"user_text\",\"text\":\"Remember PINEAPPLE\""),
        "{text}"
    );
    assert!(
        text.ends_with(&format!("event: closed\ndata: {{\"id\":\"{id}\"}}\n\n")),
        "{text}"
    );
    assert!(sim.response(stream).ended);
    assert_eq!(console(&mut sim, "bob", &path).0, 404);
    let theirs = format!("{path}?tenant={tenant}");
    assert_eq!(console(&mut sim, "bob", &theirs).0, 404);
    let (status, text, _) = console(&mut sim, "root", &theirs);
    assert_eq!(status, 200);
    assert!(text.contains("Remember PINEAPPLE"), "{text}");
    assert_eq!(
        console(&mut sim, "root", &path).0,
        404,
        "the admin names the tenant"
    );
    assert_eq!(
        console(&mut sim, "alice", "/v1/conversations/nope/events").0,
        404
    );

    // Resumed: live again, listed once.
    let back = json!([{"role": "user", "content": "Remember PINEAPPLE"},
                      {"role": "assistant", "content": "echo: Remember PINEAPPLE"},
                      {"role": "user", "content": "Again"}]);
    let again = sim.send(Api::Anthropic, "alice", anthropic(back, false));
    assert_eq!(
        sim.response(again).header("x-ccwire-session"),
        Some("resumed")
    );
    let list = console_json(&mut sim, "alice", "/v1/conversations");
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(
        (&list["data"][0]["id"], &list["data"][0]["state"]),
        (&json!(id), &json!("idle"))
    );
}

#[test]
fn the_console_s_charts_count_each_key_s_turns_tokens_and_added_latency_per_ten_seconds() {
    let mut sim = Sim::new(GatewayConfig {
        console: true,
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into(), "bob".into()],
            admin_key: Some("root".into()),
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    let say = |text: &str| anthropic(json!([{"role": "user", "content": text}]), false);
    sim.advance(5_000);
    sim.send(Api::Anthropic, "alice", say("One"));
    sim.advance(20_000);
    sim.send(Api::Anthropic, "alice", say("Two"));
    sim.send(Api::Anthropic, "bob", say("Three"));
    let stats = |sim: &mut Sim, key: &str| console_json(sim, key, "/v1/stats");

    let mine = stats(&mut sim, "alice");
    assert_eq!(mine["bucket_ms"], 10_000);
    let buckets = mine["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 60, "ten minutes");
    let turns: Vec<u64> = buckets
        .iter()
        .map(|b| b["turns"].as_u64().unwrap())
        .collect();
    // One turn in the bucket of 0:05, one in that of 0:25 (the last, now).
    assert_eq!(turns.iter().sum::<u64>(), 2);
    assert_eq!((turns[57], turns[58], turns[59]), (1, 0, 1), "{turns:?}");
    let last = &buckets[59];
    assert!(last["tokens"]["output"].as_u64().unwrap() > 0, "{last}");
    assert!(
        last["added_ms_avg"].is_u64() && last["added_ms_max"].is_u64(),
        "{last}"
    );
    assert!(buckets[58]["added_ms_avg"].is_null());
    assert_eq!(last["added_count"], 1, "one response: {last}");
    assert_eq!(last["added_ms_sum"], last["added_ms_avg"]);
    assert!(
        last.get("pool_hits").is_none(),
        "the pool is the operator's"
    );
    assert!(mine["now"].get("pool").is_none());
    assert_eq!(mine["now"]["conversations"], 2, "{mine}");
    // A bucket starts on its ten seconds (Unix ms).
    let (a, b) = (
        buckets[58]["at_ms"].as_u64().unwrap(),
        last["at_ms"].as_u64().unwrap(),
    );
    assert_eq!(b - a, 10_000);

    let theirs = stats(&mut sim, "bob");
    let turns: u64 = (theirs["buckets"].as_array().unwrap().iter())
        .map(|b| b["turns"].as_u64().unwrap())
        .sum();
    assert_eq!((turns, &theirs["now"]["conversations"]), (1, &json!(1)));
    let all = stats(&mut sim, "root");
    let turns: u64 = (all["buckets"].as_array().unwrap().iter())
        .map(|b| b["turns"].as_u64().unwrap())
        .sum();
    assert_eq!(turns, 3);
    assert!(all["now"]["pool"].is_object(), "{all}");
    assert!(all["buckets"][59]["pool_misses"].is_u64());
    assert_eq!(console(&mut sim, "nobody", "/v1/stats").0, 401);

    // Ten minutes on, the old buckets are gone.
    sim.advance(600_000);
    let later = stats(&mut sim, "alice");
    let turns: u64 = (later["buckets"].as_array().unwrap().iter())
        .map(|b| b["turns"].as_u64().unwrap())
        .sum();
    assert_eq!(turns, 0);
}

#[test]
fn the_console_lists_held_client_calls_with_their_deadlines() {
    let mut sim = Sim::new(GatewayConfig {
        console: true,
        limits: ccwire_core::gateway::Limits {
            held_call_timeout_ms: 30_000,
            ..ccwire_core::gateway::Limits::default()
        },
        ..GatewayConfig::default()
    });
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    sim.send(Api::Anthropic, "", anthropic(ask, false));
    sim.advance(2_000);
    let list = console_json(&mut sim, "", "/v1/conversations");
    let listed = &list["data"][0];
    assert_eq!(listed["state"], "waiting_for_client_tool", "{listed}");
    assert_eq!(listed["held_tool_calls"], 1);
    let held = &listed["held"][0];
    assert_eq!(held["tool_use_id"], "toolu_1");
    let (since, deadline) = (
        held["since_ms"].as_u64().unwrap(),
        held["deadline_ms"].as_u64().unwrap(),
    );
    assert_eq!(deadline - since, 30_000, "{held}");
}

/// Several Managed Agents sessions whose tool confirmations and several conversations whose
/// held calls all fall due at one instant, run twice: the same inputs give the same outputs,
/// byte for byte, in the same order (no map's iteration order decides what comes first).
#[test]
fn the_same_inputs_give_the_same_outputs_when_many_deadlines_fall_together() {
    fn scenario() -> Vec<String> {
        let mut sim = Sim::new(GatewayConfig {
            enabled_tools: vec!["Bash".to_owned()],
            tenant_root: Some("/state/tenants".to_owned()),
            approval_timeout_ms: 60_000,
            http: ccwire_core::gateway::HttpConfig {
                api_keys: vec!["alice".into(), "bob".into()],
                ..ccwire_core::gateway::HttpConfig::default()
            },
            ..GatewayConfig::default()
        });
        let agent = json!({"name": "Shell", "model": "sonnet", "tools": [
            {"type": "agent_toolset_20260401",
             "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}]}]});
        for _ in 0..6 {
            let session = new_session(&mut sim, agent.clone(), json!({}));
            let events = format!("/v1/sessions/{}/events", session["id"].as_str().unwrap());
            let say = json!({"events": [{"type": "user.message",
                "content": [{"type": "text", "text": "bash: ls"}]}]});
            managed(&mut sim, "alice", "POST", &events, say);
        }
        for (tenant, key) in [("alice", "a"), ("bob", "b"), ("alice", "c"), ("bob", "d")] {
            let ask = json!([{"role": "user", "content": format!("lookup: {key}")}]);
            sim.send(Api::Anthropic, tenant, anthropic(ask, false));
        }
        assert_eq!(sim.gateway.held_count(), 4);
        // Every confirmation's and every held call's deadline passes in one step.
        sim.advance(10 * 60 * 1000);
        assert_eq!(sim.gateway.held_count(), 0);
        sim.trace
    }
    let (one, two) = (scenario(), scenario());
    assert_eq!(one.len(), two.len());
    for (i, (a, b)) in one.iter().zip(&two).enumerate() {
        assert_eq!(a, b, "line {i} of the trace differs");
    }
}

/// An id the gateway could not have made (`..`, `*`, a NUL, an admin's odd `?tenant=`) is no
/// conversation: a 404 at once, the session store not asked (a store would answer such a key
/// with an error, and the client be told to retry).
#[test]
fn an_odd_conversation_id_is_a_404_without_asking_the_store() {
    let mut sim = with_store(GatewayConfig {
        console: true,
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into()],
            admin_key: Some("root".into()),
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    let asked = |sim: &Sim| {
        (sim.trace.iter())
            .filter(|l| l.contains("\"ask\":\"load\""))
            .count()
    };
    for (key, path) in [
        ("alice", "/v1/conversations/../events"),
        ("alice", "/v1/conversations/*/events"),
        ("alice", "/v1/conversations/%00/events"),
        (
            "alice",
            "/v1/conversations/ABCDEF00-0000-0000-0000-000000000000/events",
        ),
        (
            "root",
            "/v1/conversations/00000000-0000-0000-0000-000000000000/events?tenant=..",
        ),
    ] {
        let (status, body, _) = console(&mut sim, key, path);
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(asked(&sim), 0, "{path}: the store was not asked");
    }
    // A well-formed id the store does not keep is asked for, and not found.
    let (status, body, _) = console(
        &mut sim,
        "alice",
        "/v1/conversations/00000000-0000-0000-0000-000000000000/events",
    );
    assert_eq!(status, 404, "{body}");
    assert_eq!(asked(&sim), 1);
}

/// The operator's console: the admin key lists and streams every tenant's approvals (each
/// naming its tenant) and answers any of them; a tenant's key only its own; no key nothing.
#[test]
fn the_admin_key_sees_and_answers_every_tenant_s_approvals() {
    let mut sim = console_sim();
    let root = [("authorization", "Bearer root")];
    let stream = sim.http("GET", "/v1/approvals/events", &root, "").unwrap();
    let alices = bash(&mut sim, "alice", "ls");
    let bobs = bash(&mut sim, "bob", "pwd");

    let all = console_json(&mut sim, "root", "/v1/approvals");
    let mut tenants: Vec<String> = (all["data"].as_array().unwrap().iter())
        .map(|a| a["tenant"].as_str().unwrap().to_owned())
        .collect();
    tenants.sort();
    let mut expected = ["alice", "bob"].map(ccwire_core::gateway::tenant_id);
    expected.sort();
    assert_eq!(tenants, expected, "{all}");
    let own = console_json(&mut sim, "bob", "/v1/approvals");
    assert_eq!(own["data"].as_array().unwrap().len(), 1, "{own}");
    assert_eq!(
        own["data"][0].get("tenant"),
        None,
        "a tenant is not told its own id"
    );
    assert_eq!(console(&mut sim, "nobody", "/v1/approvals").0, 401);
    // Both came on the operator's stream.
    let text = sim.response(stream).text();
    assert_eq!(text.matches("event: approval\n").count(), 2, "{text}");

    // The operator answers Bob's; Alice cannot answer it, nor Bob Alice's.
    let bob_id = own["data"][0]["id"].as_str().unwrap().to_owned();
    let alice_id = (all["data"].as_array().unwrap().iter())
        .find(|a| a["id"] != bob_id.as_str())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let post = |sim: &mut Sim, key: &str, id: &str| {
        let auth = format!("Bearer {key}");
        let headers = [JSON, ("authorization", auth.as_str())];
        let path = format!("/v1/approvals/{id}");
        let request = sim
            .http("POST", &path, &headers, r#"{"behavior": "allow"}"#)
            .unwrap();
        sim.response(request).status
    };
    assert_eq!(post(&mut sim, "alice", &bob_id), 404);
    assert_eq!(post(&mut sim, "bob", &alice_id), 404);
    assert_eq!(post(&mut sim, "root", &bob_id), 200);
    assert!(sim.response(bobs).ended);
    assert!(!sim.response(alices).ended);
    let text = sim.response(stream).text();
    assert!(text.contains("event: resolved\n"), "{text}");
    assert_eq!(post(&mut sim, "alice", &alice_id), 200);
    assert!(sim.response(alices).ended);
}

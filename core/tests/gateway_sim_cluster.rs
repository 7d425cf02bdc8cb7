//! Where a request goes when gateways share a cluster: what the engine decides from a
//! request and the registry's answer, without a registry (the host only asks it and moves
//! the bytes).

mod sim;

use ccwire_core::gateway::{
    fans_out, prepare, Admission, FanOut, Held, Holder, HttpHead, Placed, Placement, RouteKey,
};
use serde_json::json;
use sim::*;

/// The placement of a `method` request to `path` with `body`, as tenant `key` (admitted as
/// the host admits it, its body prepared as the host prepares it).
fn placement(sim: &Sim, key: &str, method: &str, path: &str, body: &str) -> Option<Placement> {
    placed_for(sim, key, method, path, body).0
}

/// [`placement`], with the tenant the key is.
fn placed_for(
    sim: &Sim,
    key: &str,
    method: &str,
    path: &str,
    body: &str,
) -> (Option<Placement>, String) {
    let auth = format!("Bearer {key}");
    let headers = [JSON, ("authorization", auth.as_str())];
    let head = HttpHead {
        method,
        path,
        query: "",
        headers: &headers,
    };
    let Admission::Admit { tenant, .. } = sim.gateway.admit(&head) else {
        panic!("{path} is admitted");
    };
    let prepared = prepare(path, &tenant, body.as_bytes());
    let placement = sim.gateway.placement(&head, &tenant, prepared.as_ref());
    (placement, tenant)
}

#[test]
fn each_request_is_placed_by_the_key_its_holder_serves_and_a_draining_gateway_claims_nothing() {
    let mut sim = with_keys(false);
    let first = anthropic(json!([{"role": "user", "content": "hi"}]), false).to_string();
    let next = anthropic(
        json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hi"},
               {"role": "user", "content": "again"}]),
        false,
    )
    .to_string();
    let new = placement(&sim, "alice", "POST", "/v1/messages", &first).unwrap();
    assert_eq!(
        (new.key, new.held, new.claim),
        (RouteKey::New, Held::Conversation, true)
    );
    let going_on = placement(&sim, "alice", "POST", "/v1/messages", &next).unwrap();
    assert!(matches!(going_on.key, RouteKey::Conversation(_)));
    // The same conversation of another tenant is another key.
    let bobs = placement(&sim, "bob", "POST", "/v1/messages", &next).unwrap();
    assert_ne!(bobs.key, going_on.key);
    // An approval lives where its CLI waits: never claimed.
    let approval = placement(&sim, "alice", "POST", "/v1/approvals/appr_1", "{}").unwrap();
    assert_eq!((approval.held, approval.claim), (Held::Approval, false));
    // One gateway serves each tenant's Managed Agents resources.
    let agents = placement(&sim, "alice", "POST", "/v1/agents", "{}").unwrap();
    let sessions = placement(&sim, "alice", "GET", "/v1/sessions", "").unwrap();
    assert_eq!((agents.held, agents.claim), (Held::Managed, true));
    assert_eq!(agents.key, sessions.key);
    // A request the gateway cannot read, and the routes every gateway answers, stay here.
    assert_eq!(placement(&sim, "alice", "POST", "/v1/messages", "{"), None);
    assert_eq!(placement(&sim, "alice", "GET", "/v1/models", ""), None);

    for (holder, placed) in [
        (Holder::Other, Placed::ToHolder),
        (Holder::Here { taken: true }, Placed::Here),
        (Holder::Here { taken: false }, Placed::Here),
        (Holder::Unknown, Placed::Here),
    ] {
        assert_eq!(sim.gateway.placed(&going_on, "alice", holder), placed);
    }

    // Draining, the gateway claims nothing and passes on what it would start or hold, but an
    // approval's answer, which only it can take.
    sim.gateway.drain(sim.now, 60_000);
    let new = placement(&sim, "alice", "POST", "/v1/messages", &first).unwrap();
    assert!(!new.claim);
    let here = Holder::Here { taken: false };
    assert_eq!(sim.gateway.placed(&new, "alice", here), Placed::ToAnyOther);
    let approval = placement(&sim, "alice", "POST", "/v1/approvals/appr_1", "{}").unwrap();
    assert_eq!(sim.gateway.placed(&approval, "alice", here), Placed::Here);
    assert_eq!(
        sim.gateway.placed(&new, "alice", Holder::Other),
        Placed::ToHolder
    );
}

#[test]
fn a_gateway_that_takes_a_tenant_over_reads_its_resources_again() {
    let mut sim = with_keys(true);
    let agent = json!({"name": "a", "model": "claude-sonnet-4-5"});
    let (status, _) = managed(&mut sim, "alice", "POST", "/v1/agents", agent);
    assert_eq!(status, 200);
    // Meanwhile another gateway, which served alice while this one's lease had lapsed, made
    // an agent of hers: the store has it, this gateway's memory not.
    let (tenant, _, id) = sim
        .store
        .as_ref()
        .unwrap()
        .managed
        .keys()
        .next()
        .unwrap()
        .clone();
    let theirs = sim.store.as_ref().unwrap().managed[&(tenant.clone(), "agent".into(), id)]
        .replace("agent_", "agent_0");
    let other = theirs.replace("\"name\":\"a\"", "\"name\":\"made elsewhere\"");
    (sim.store.as_mut().unwrap().managed)
        .insert((tenant, "agent".into(), "agent_0x".into()), other);
    let names = |sim: &mut Sim| {
        let (_, list) = managed(sim, "alice", "GET", "/v1/agents", json!(null));
        let mut names: Vec<String> = (list["data"].as_array().unwrap().iter())
            .map(|a| a["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&mut sim), ["a"]);
    let (agents, alice) = placed_for(&sim, "alice", "GET", "/v1/agents", "");
    // Its claim was another's until now.
    let placed = (sim.gateway).placed(&agents.unwrap(), &alice, Holder::Here { taken: true });
    assert_eq!(placed, Placed::Here);
    assert_eq!(names(&mut sim), ["a", "made elsewhere"]);
}

#[test]
fn the_cluster_wide_answers_are_the_lists_and_the_approvals_stream() {
    assert_eq!(fans_out("/v1/approvals"), Some(FanOut::List));
    assert_eq!(fans_out("/v1/conversations"), Some(FanOut::List));
    assert_eq!(fans_out("/v1/stats"), Some(FanOut::List));
    assert_eq!(fans_out("/v1/approvals/events"), Some(FanOut::Events));
    assert_eq!(fans_out("/v1/messages"), None);
    assert_eq!(fans_out("/v1/agents"), None);
}

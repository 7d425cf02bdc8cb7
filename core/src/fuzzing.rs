//! What the fuzz targets in `fuzz/` run, here so that the committed inputs replay through the
//! same code in the ordinary test suite. Not a part of the API.
//!
//! Each function takes the fuzzer's bytes, drives one part of the core with them and asserts
//! what a host relies on; a panic is a finding.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::response::{EncoderOptions, ResponseEncoder};
use crate::api::{anthropic, openai, responses, Api, ApiError, ApiErrorKind};
use crate::conversation::HistoryHasher;
use crate::gateway::{
    Admission, Gateway, GatewayConfig, GatewayOutput, HttpConfig, HttpHead, RequestId, SessionId,
    StoreAnswer, StoreAsk,
};
use crate::mcp::McpCallResult;
use crate::play::Player;
use crate::{
    Chunk, Delivery, Output, PermissionDecision, Replayer, Session, SessionConfig, Timeouts,
    UserMessage,
};

/// Splits `data` into operations: an op byte, a length byte, then that many payload bytes.
fn ops(mut data: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    std::iter::from_fn(move || {
        let (&op, tail) = data.split_first()?;
        let len = usize::from(tail.first().copied().unwrap_or(0));
        let tail = tail.get(1..).unwrap_or(&[]);
        let (payload, after) = tail.split_at(len.min(tail.len()));
        data = after;
        Some((op, payload))
    })
}

/// Every chunk serializes to JSON that parses.
fn check_chunk(chunk: &Chunk) {
    serde_json::from_str::<Value>(&chunk.to_json()).expect("chunk JSON parses");
}

/// Framing and the observer session: arbitrary bytes, split at a step taken from the input,
/// fed as both directions, with timeouts, end of output and an exit.
pub fn session(data: &[u8]) {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    let mut session = Session::observer(SessionConfig {
        line_limit: 4096,
        ..SessionConfig::default()
    });
    let step = usize::from(shape % 31) + 1;
    let mut now = 0;
    for (i, piece) in rest.chunks(step).enumerate() {
        now += u64::from(shape);
        if i % 7 == 6 {
            session.handle_stdin(now, piece);
        } else {
            session.handle_stdout(now, piece);
        }
        drain_session(&mut session, None);
        if shape & 0x80 != 0 && i % 5 == 4 {
            session.handle_timeout(now);
        }
    }
    session.handle_stdout_eof(now);
    if shape & 1 == 1 {
        session.handle_process_exit(now, Some(1), None);
    }
    drain_session(&mut session, None);
    serde_json::to_string(session.tool_wait()).expect("the tool wait serializes");
}

/// Drains a session, checking every chunk and every write; request ids the CLI asked are
/// collected into `asked`.
fn drain_session(session: &mut Session, mut asked: Option<&mut Vec<String>>) {
    while let Some(output) = session.poll_output() {
        match output {
            Output::Chunk(chunk) => {
                check_chunk(&chunk);
                if let (
                    Some(asked),
                    Chunk::PermissionRequest { request_id, .. }
                    | Chunk::HookRequest { request_id, .. }
                    | Chunk::McpToolCall { request_id, .. }
                    | Chunk::ElicitationRequest { request_id, .. }
                    | Chunk::DialogRequest { request_id, .. },
                ) = (asked.as_deref_mut(), &chunk)
                {
                    asked.push(request_id.clone());
                }
            }
            Output::Write(bytes) => {
                let line = bytes.strip_suffix(b"\n").expect("a write is a whole line");
                assert!(!line.contains(&b'\n'), "a write is one line");
                let frame: Value = serde_json::from_slice(line).expect("a write is JSON");
                assert!(frame["type"].is_string(), "a write has a type");
            }
        }
    }
}

/// Transcript replay of arbitrary bytes, whole and split in two: both give the same chunks;
/// every chunk written in ASCII is the same JSON value. And when the bytes are JSON, their
/// canonical form is kept as it is when canonicalized again.
pub fn replay(data: &[u8]) {
    if let Some(json) = std::str::from_utf8(data)
        .ok()
        .and_then(|text| crate::Json::parse(text).ok())
    {
        assert_eq!(
            crate::json::canonicalize(json.get()),
            None,
            "canonical text is canonical"
        );
    }
    let chunks = crate::replay(data);
    for chunk in &chunks {
        let mut ascii = Vec::new();
        let mut serializer =
            serde_json::Serializer::with_formatter(&mut ascii, crate::AsciiFormatter);
        serde::Serialize::serialize(chunk, &mut serializer).expect("chunks serialize");
        assert!(ascii.is_ascii());
        // (A lone surrogate escape, which JavaScript reads and serde_json's `Value` does not,
        // is compared by JavaScript in the package's tests.)
        if let Ok(plain) = serde_json::from_str::<Value>(&chunk.to_json()) {
            let read: Value = serde_json::from_slice(&ascii).expect("ASCII chunk JSON reads back");
            assert_eq!(read, plain, "the same JSON value in ASCII");
        }
    }
    let whole: Vec<String> = chunks.iter().map(Chunk::to_json).collect();
    let at = data
        .first()
        .map_or(0, |b| usize::from(*b) % (data.len() + 1));
    let mut replayer = Replayer::new();
    replayer.push(&data[..at]);
    replayer.push(&data[at..]);
    replayer.finish();
    let split: Vec<String> = std::iter::from_fn(|| replayer.poll_chunk())
        .map(|c| c.to_json())
        .collect();
    assert_eq!(
        whole, split,
        "replay does not depend on how the bytes arrive"
    );
}

/// The driver session with CLI output and host actions in any order: answers to requests the
/// CLI made and to ids it never sent, prompts, interrupts, control requests, timeouts, end of
/// output and exit. Every write to the CLI is one JSON line; every request the CLI makes is
/// settled at most once (a second answer is refused).
pub fn driver(data: &[u8]) {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    let timeout = |bit: u8| (shape & bit != 0).then_some(u64::from(shape) * 10);
    let mut session = Session::driver(SessionConfig {
        line_limit: 8192,
        seed: u64::from(shape),
        timeouts: Timeouts {
            permission_ms: timeout(1),
            hook_ms: timeout(2),
            mcp_call_ms: timeout(4),
            request_ms: timeout(8),
            elicitation_ms: timeout(16),
            dialog_ms: timeout(32),
        },
        elicitations: shape & 64 != 0,
        mcp_servers: serde_json::from_value(serde_json::json!([
            {"name": "app", "tools": [{"name": "lookup", "inputSchema": {"type": "object"}}]}
        ]))
        .expect("the server list parses"),
    });
    let mut asked: Vec<String> = Vec::new();
    let mut now = 0u64;
    let mut ended = false;
    for (op, payload) in ops(rest) {
        let pick = usize::from(payload.first().copied().unwrap_or(0));
        let id = asked.get(pick % asked.len().max(1)).cloned();
        let text = String::from_utf8_lossy(payload).into_owned();
        match op % 12 {
            0..=3 => session.handle_stdout(now, payload),
            4 => {
                if let Some(id) = id {
                    let first = session.respond_permission(now, &id, PermissionDecision::allow());
                    let again =
                        session.respond_permission(now, &id, PermissionDecision::deny("no"));
                    assert!(
                        !matches!((first, again), (Ok(Delivery::Sent), Ok(Delivery::Sent))),
                        "a request is answered once"
                    );
                }
            }
            5 => {
                if let Some(id) = id {
                    let _ = match pick % 3 {
                        0 => session.respond_hook(now, &id, serde_json::json!({})),
                        1 => session.respond_elicitation(
                            now,
                            &id,
                            serde_json::json!({"action": "accept"}),
                        ),
                        _ => session.respond_user_dialog(
                            now,
                            &id,
                            serde_json::json!({"behavior": "cancelled"}),
                        ),
                    };
                }
            }
            6 => {
                if let Some(id) = id {
                    let _ = session.respond_mcp(now, &id, McpCallResult::text(text));
                }
            }
            7 => {
                let target = id.unwrap_or(text);
                let _ = session.respond_error(now, &target, "no");
                let _ =
                    session.respond_permission(now, "req_never_sent", PermissionDecision::allow());
            }
            8 => {
                let _ = match pick % 4 {
                    0 => session
                        .send_user_message(now, UserMessage::text(text))
                        .map(|()| String::new()),
                    1 => session.interrupt(now),
                    2 => session.set_model(now, Some(&text)),
                    _ => session.send_control(now, "mcp_status", serde_json::Map::new()),
                };
            }
            9 => {
                now += u64::from(shape) * (pick as u64 + 1);
                session.handle_timeout(now);
            }
            10 => {
                if let Some((at, _)) = session.poll_timeout() {
                    now = now.max(at);
                    session.handle_timeout(now);
                }
            }
            _ => {
                if pick % 3 == 0 {
                    session.handle_process_exit(now, Some(i32::from(payload.len() as u8)), None);
                } else if !ended {
                    session.handle_stdout_eof(now);
                }
                ended = true;
            }
        }
        drain_session(&mut session, Some(&mut asked));
        if let Some((at, _)) = session.poll_timeout() {
            assert!(at < u64::MAX, "a deadline is a time");
        }
    }
    serde_json::to_string(session.tool_wait()).expect("the tool wait serializes");
}

/// Each API's request parser on arbitrary bytes: a request that parses has a conversation
/// whose history hash is the same however it is computed.
pub fn api_requests(data: &[u8]) {
    for parsed in [
        anthropic::parse_request(data),
        openai::parse_request(data),
        responses::parse_request(data),
    ] {
        let Ok(request) = parsed else { continue };
        let conversation = &request.conversation;
        let n = conversation.history_len();
        let Some(hash) = conversation.history_hash("t") else {
            assert_eq!(n, 0, "a history has a hash");
            continue;
        };
        let mut hasher = HistoryHasher::new("t");
        for message in &conversation.messages[..n] {
            hasher.extend(std::slice::from_ref(message));
        }
        assert_eq!(hasher.finish(), hash, "a message at a time hashes alike");
        assert_ne!(
            conversation.history_hash("u"),
            Some(hash),
            "tenants hash apart"
        );
        conversation.tool_signature();
    }
}

/// Two requests (split at the first `0xff`, each parsed by the API its first byte picks):
/// their histories hash alike exactly when their canonical forms are equal.
pub fn history(data: &[u8]) {
    let (a, b) = match data.iter().position(|b| *b == 0xff) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => return,
    };
    let parse = |bytes: &[u8]| {
        let (&pick, body) = bytes.split_first()?;
        let parsed = match pick % 3 {
            0 => anthropic::parse_request(body),
            1 => openai::parse_request(body),
            _ => responses::parse_request(body),
        };
        parsed.ok().map(|r| r.conversation)
    };
    let (Some(a), Some(b)) = (parse(a), parse(b)) else {
        return;
    };
    let (Some(hash_a), Some(hash_b)) = (a.history_hash("t"), b.history_hash("t")) else {
        return;
    };
    let equal = a.messages[..a.history_len()] == b.messages[..b.history_len()];
    assert_eq!(
        hash_a == hash_b,
        equal,
        "equal hashes ⇔ equal canonical forms"
    );
}

/// The response encoders of the three APIs, streaming and not, on the chunks a transcript
/// (arbitrary bytes) replays to, optionally failed at a point the input picks. Every SSE frame
/// is well formed (`event:`/`data:` lines, JSON data, a blank line after); Anthropic frames
/// name their data's type; Responses events number in order; a finished response has a body.
pub fn encoders(data: &[u8]) {
    let Some((&shape, transcript)) = data.split_first() else {
        return;
    };
    let chunks = crate::replay(transcript);
    let fail_at = (shape & 0x80 != 0).then(|| usize::from(shape & 0x7f));
    for api in [Api::Anthropic, Api::OpenAi, Api::Responses] {
        for stream in [false, true] {
            let mut encoder = ResponseEncoder::new(EncoderOptions {
                api,
                stream,
                model: "m".to_owned(),
                id: None,
                created: 0,
                include_usage: shape & 1 != 0,
                client_tools: BTreeMap::from([(
                    "mcp__client__lookup".to_owned(),
                    "lookup".to_owned(),
                )]),
                client_tool_prefix: (shape & 2 != 0).then(|| "mcp__".to_owned()),
                previous_response_id: None,
                store: shape & 4 != 0,
                show_thinking: shape & 8 != 0,
                structured: None,
                echo: Default::default(),
            });
            let mut sequence = None;
            for (i, chunk) in chunks.iter().enumerate() {
                let frames = if fail_at == Some(i) {
                    encoder.fail(ApiError::new(ApiErrorKind::Api, "failed"))
                } else {
                    encoder.push(chunk)
                };
                assert!(stream || frames.is_empty(), "frames only when streaming");
                for frame in &frames {
                    check_frame(api, frame, &mut sequence);
                }
                if i % 16 == 15 && stream {
                    check_frame(api, &encoder.ping(), &mut sequence);
                }
            }
            if let Some(body) = encoder.body() {
                serde_json::to_string(&body).expect("the body serializes");
            }
            serde_json::to_string(&encoder.message()).expect("the message serializes");
            encoder.usage();
        }
    }
}

/// One SSE frame: `event:` and `data:` lines, then a blank line.
fn check_frame(api: Api, frame: &str, sequence: &mut Option<u64>) {
    let body = frame
        .strip_suffix("\n\n")
        .expect("a frame ends with a blank line");
    if body.starts_with(':') {
        return;
    }
    let mut event = None;
    let mut data = None;
    for line in body.split('\n') {
        if let Some(name) = line.strip_prefix("event: ") {
            assert!(event.replace(name).is_none(), "one event line");
        } else if let Some(json) = line.strip_prefix("data: ") {
            assert!(data.replace(json).is_none(), "one data line");
        } else {
            panic!("a frame line is event: or data: ({line:?})");
        }
    }
    let data = data.expect("a frame has data");
    if data == "[DONE]" {
        assert_eq!(
            api,
            Api::OpenAi,
            "[DONE] ends Chat Completions streams only"
        );
        return;
    }
    let value: Value = serde_json::from_str(data).expect("frame data is JSON");
    match api {
        Api::Anthropic => {
            assert_eq!(
                value["type"].as_str(),
                event,
                "the event names its data's type"
            );
        }
        Api::Responses => {
            assert_eq!(
                value["type"].as_str(),
                event,
                "the event names its data's type"
            );
            if let Some(n) = value["sequence_number"].as_u64() {
                assert!(
                    sequence.is_none_or(|last| n > last),
                    "events number in order"
                );
                *sequence = Some(n);
            }
        }
        Api::OpenAi => assert!(event.is_none(), "Chat Completions frames are data only"),
    }
}

/// The transcript player on an arbitrary tape (the bytes before the first `0xff`) and host
/// input (the rest, split at every `0xfe`).
pub fn play(data: &[u8]) {
    let (tape, input) = match data.iter().position(|b| *b == 0xff) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let Ok(mut player) = Player::new(tape, data.len().is_multiple_of(2), None) else {
        return;
    };
    for (now, piece) in input.split(|b| *b == 0xfe).enumerate() {
        player.handle_stdin(now as u64, piece);
        while player.poll_output().is_some() {}
    }
    player.handle_stdin_eof(u64::MAX / 2);
    while player.poll_output().is_some() {}
}

/// The gateway engine driven by arbitrary operations — requests of the three APIs, CLI
/// output, exits, spawn failures, clients gone, approvals, a drain, time — checking what every
/// host relies on: a request gets one head before any body, and one end; nothing is written to
/// a CLI that was never started or was closed.
pub fn gateway(data: &[u8]) {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    let keys = if shape & 16 != 0 {
        vec!["k".to_owned()]
    } else {
        Vec::new()
    };
    let mut gateway = Gateway::new(GatewayConfig {
        pool: usize::from(shape % 3),
        max_sessions: 4,
        max_concurrent: 3,
        max_queue: 2,
        approvals: shape & 4 != 0,
        enabled_tools: vec!["Bash".to_owned()],
        publish_index: shape & 8 != 0,
        console: shape & 64 != 0,
        store: shape & 128 != 0,
        // A quota some turns cross (each line counts with its newline).
        store_quota: (shape & 2 != 0).then_some(600),
        http: HttpConfig {
            api_keys: keys,
            admin_key: Some("a".to_owned()),
            allow_origins: vec!["http://app.example".to_owned()],
            max_body: 2048,
            ..HttpConfig::default()
        },
        ..GatewayConfig::default()
    })
    .expect("a loopback gateway");
    if shape & 32 != 0 {
        gateway.count_tokens_upstream(|name| (name == "ANTHROPIC_API_KEY").then(|| "x".into()));
    }
    let mut fetches = Vec::new();
    let mut store = FuzzStore::default();
    let mut now = 0;
    let mut next_request: RequestId = 0;
    let mut responses: BTreeMap<RequestId, (bool, bool)> = BTreeMap::new();
    let mut clis: BTreeMap<SessionId, bool> = BTreeMap::new();
    for (op, payload) in ops(rest) {
        let pick = usize::from(payload.first().copied().unwrap_or(0));
        let live: Vec<SessionId> = clis
            .iter()
            .filter(|(_, open)| **open)
            .map(|(s, _)| *s)
            .collect();
        let open_requests: Vec<RequestId> = responses
            .iter()
            .filter(|(_, (_, ended))| !ended)
            .map(|(r, _)| *r)
            .collect();
        match op % 9 {
            0..=2 => {
                next_request += 1;
                responses.insert(next_request, (false, false));
                let api = [Api::Anthropic, Api::OpenAi, Api::Responses][usize::from(op % 3)];
                gateway.handle_request(now, next_request, api, "t", payload);
            }
            3 | 4 => {
                if let Some(&session) = live.get(pick % live.len().max(1)) {
                    gateway.handle_stdout(now, session, payload);
                }
            }
            5 => {
                now += u64::from(shape) * 1000 + (pick as u64) * 60_000;
                gateway.handle_timeout(now);
            }
            6 => {
                if let Some(&request) = open_requests.get(pick % open_requests.len().max(1)) {
                    gateway.handle_client_gone(now, request);
                    responses.remove(&request);
                }
            }
            7 => {
                if let Some(&session) = live.get(pick % live.len().max(1)) {
                    if pick % 2 == 0 {
                        gateway.handle_exit(now, session, Some(1), None, "gone");
                    } else {
                        gateway.handle_spawn_failed(now, session, "gone");
                    }
                    clis.insert(session, false);
                }
            }
            _ => {
                if pick % 5 == 0 {
                    gateway.drain(now, 1_000);
                } else if pick % 5 == 1 {
                    next_request += 1;
                    http_request(
                        &mut gateway,
                        now,
                        next_request,
                        pick,
                        payload,
                        &mut responses,
                    );
                } else {
                    let list = gateway.approvals("t");
                    if let Some(id) = list["data"][0]["id"].as_str() {
                        let _ = gateway.answer_approval(now, "t", id, payload);
                    }
                    let _ = gateway.answer_approval(now, "t", "appr_none", payload);
                }
            }
        }
        while let Some(output) = gateway.poll_output() {
            if let GatewayOutput::Fetch { request, .. } = output {
                fetches.push(request);
            }
            check(&output, &mut responses, &mut clis);
            store.keep(output);
        }
        // The session store answers what was asked of it (or fails, when the payload says so).
        store.answer(&mut gateway, now, pick % 7 == 3);
        // The model API answers each count, when the payload says so, or fails.
        for request in fetches.drain(..) {
            let answer = (pick % 2 == 0).then_some(payload);
            gateway.handle_fetched(now, request, answer);
        }
        while let Some(output) = gateway.poll_output() {
            check(&output, &mut responses, &mut clis);
            store.keep(output);
        }
        assert!(gateway.poll_timeout().is_none_or(|(at, _)| at < u64::MAX));
    }
    assert!(
        gateway.metrics().contains("ccwire_sessions"),
        "metrics render"
    );
}

/// A session store in memory for [`gateway`]: what the gateway kept, and what it asked and
/// has not been answered yet.
#[derive(Default)]
struct FuzzStore {
    records: Vec<crate::gateway::ConversationRecord>,
    transcripts: BTreeMap<String, Vec<String>>,
    asked: Vec<GatewayOutput>,
    /// Requests whose response waits for a record kept.
    kept: Vec<RequestId>,
    /// The bytes of each tenant's transcripts.
    usage: BTreeMap<String, u64>,
}

impl FuzzStore {
    /// Keeps what an output writes; remembers what it asks.
    fn keep(&mut self, output: GatewayOutput) {
        match output {
            GatewayOutput::Store(StoreAsk::Append { key, entries }) => {
                let lines = self.transcripts.entry(key.id).or_default();
                lines.extend(entries.iter().map(|e| e.get().to_owned()));
                let added: usize = entries.iter().map(|e| e.get().len() + 1).sum();
                *self.usage.entry(key.tenant.clone()).or_default() += added as u64;
                self.asked
                    .push(GatewayOutput::Store(StoreAsk::Usage { tenant: key.tenant }));
            }
            GatewayOutput::Store(StoreAsk::Save { record, request }) => {
                self.records.retain(|r| r.key != record.key);
                if let Some(request) = request {
                    self.kept.push(request);
                }
                self.records.push(record);
            }
            GatewayOutput::Store(StoreAsk::Managed {
                request: Some(request),
                ..
            }) => self.kept.push(request),
            asked @ (GatewayOutput::Store(StoreAsk::Find { .. })
            | GatewayOutput::Store(StoreAsk::FindResponse { .. })
            | GatewayOutput::Store(StoreAsk::LoadManaged { .. })
            | GatewayOutput::Store(StoreAsk::List { .. })
            | GatewayOutput::Store(StoreAsk::Load { .. })
            | GatewayOutput::Store(StoreAsk::Usage { .. })) => self.asked.push(asked),
            _ => {}
        }
    }

    /// Answers everything asked so far, or fails it all (`fail`).
    fn answer(&mut self, gateway: &mut Gateway, now: u64, fail: bool) {
        for request in std::mem::take(&mut self.kept) {
            let answer = if fail {
                StoreAnswer::NotKept { request }
            } else {
                StoreAnswer::Kept { request }
            };
            gateway.handle_store(now, answer);
        }
        for asked in std::mem::take(&mut self.asked) {
            match asked {
                GatewayOutput::Store(StoreAsk::Find {
                    request,
                    tenant,
                    hash,
                }) if !fail => {
                    let found = (self.records.iter())
                        .find(|r| r.key.tenant == tenant && r.hash == hash)
                        .cloned();
                    gateway.handle_store(
                        now,
                        StoreAnswer::Found {
                            request,
                            record: found,
                        },
                    );
                }
                GatewayOutput::Store(StoreAsk::Find { request, .. })
                | GatewayOutput::Store(StoreAsk::FindResponse { request, .. }) => {
                    gateway.handle_store(now, StoreAnswer::LookupFailed { request });
                }
                GatewayOutput::Store(StoreAsk::LoadManaged { request, .. }) => {
                    gateway.handle_store(
                        now,
                        StoreAnswer::ManagedLoaded {
                            request,
                            resources: (!fail).then(Vec::new),
                        },
                    );
                }
                GatewayOutput::Store(StoreAsk::List {
                    request,
                    tenant,
                    limit,
                }) => {
                    let listed = (self.records.iter())
                        .filter(|r| tenant.as_ref().is_none_or(|t| r.key.tenant == *t))
                        .take(limit)
                        .cloned()
                        .collect();
                    gateway.handle_store(
                        now,
                        StoreAnswer::Listed {
                            request,
                            records: (!fail).then_some(listed),
                        },
                    );
                }
                GatewayOutput::Store(StoreAsk::Load { request, key }) => {
                    let lines = if fail {
                        Err(())
                    } else {
                        Ok(self.transcripts.get(&key.id).cloned())
                    };
                    gateway.handle_store(now, StoreAnswer::TranscriptLoaded { request, lines });
                }
                // (A store that fails says nothing; one that works has forgotten some.)
                GatewayOutput::Store(StoreAsk::Usage { tenant }) if !fail => {
                    let used = self.usage.entry(tenant.clone()).or_default();
                    *used = *used * 3 / 4;
                    let bytes = *used;
                    gateway.handle_store(now, StoreAnswer::Usage { tenant, bytes });
                }
                _ => {}
            }
        }
    }
}

/// An HTTP request through the front: the path (and its query), then `name: value` header
/// lines, then the body, from the payload; the method from `pick`.
fn http_request(
    gateway: &mut Gateway,
    now: u64,
    request: RequestId,
    pick: usize,
    payload: &[u8],
    responses: &mut BTreeMap<RequestId, (bool, bool)>,
) {
    let text = String::from_utf8_lossy(payload);
    let mut lines = text.split('\n');
    let first = lines.next().unwrap_or_default();
    let (path, query) = first.split_once('?').unwrap_or((first, ""));
    let headers: Vec<(String, String)> = lines
        .by_ref()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let body = lines.collect::<Vec<_>>().join("\n");
    let pairs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let method = ["GET", "POST", "OPTIONS", "DELETE"][pick / 5 % 4];
    let head = HttpHead {
        method,
        path,
        query,
        headers: &pairs,
    };
    match gateway.admit(&head) {
        Admission::Respond(r) => {
            assert!((200..600).contains(&r.status), "a status");
            if r.status >= 400 {
                let error: Value = serde_json::from_slice(&r.body).expect("a JSON error body");
                assert!(error["error"]["message"].is_string(), "{error}");
            }
        }
        Admission::Admit { tenant, .. } => {
            responses.insert(request, (false, false));
            gateway.handle_http(now, request, &head, &tenant, Ok(body.as_bytes()));
        }
    }
}

fn check(
    output: &GatewayOutput,
    responses: &mut BTreeMap<RequestId, (bool, bool)>,
    clis: &mut BTreeMap<SessionId, bool>,
) {
    match output {
        GatewayOutput::Spawn { session, .. } => {
            assert!(
                clis.insert(*session, true).is_none(),
                "one spawn per session"
            );
        }
        GatewayOutput::Write { session, .. } => {
            assert_eq!(clis.get(session), Some(&true), "writes go to a live CLI");
        }
        GatewayOutput::Close { session } => {
            clis.insert(*session, false);
        }
        GatewayOutput::Respond { request, .. } => {
            if let Some(state) = responses.get_mut(request) {
                assert!(!state.0, "one head per response");
                state.0 = true;
            }
        }
        GatewayOutput::Body { request, .. } => {
            if let Some(state) = responses.get(request) {
                assert!(state.0 && !state.1, "a body between head and end");
            }
        }
        GatewayOutput::End { request } => {
            if let Some(state) = responses.get_mut(request) {
                assert!(state.0 && !state.1, "one end, after the head");
                state.1 = true;
            }
        }
        _ => {}
    }
}

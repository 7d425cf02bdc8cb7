//! The Redis session store against a real `redis-server`: what one gateway keeps another
//! finds, tenants apart, keys that expire, and a server that goes away and comes back.

use std::time::{Duration, Instant};

use ccwire_core::gateway::{ConversationKey, ConversationRecord, RecordState};
use ccwire_host::store::{is_superseded, ConversationStore, RedisStore};
use ccwire_tests::RedisServer;

fn record(tenant: &str, id: &str, hash: &str) -> ConversationRecord {
    ConversationRecord {
        key: ConversationKey {
            tenant: tenant.to_owned(),
            id: id.to_owned(),
        },
        hash: hash.to_owned(),
        pending: Vec::new(),
        transcript: format!("/home/{id}.jsonl"),
        state: RecordState::Live,
        saved_ms: 1,
        model: None,
    }
}

fn lines(texts: &[&str]) -> Vec<String> {
    texts
        .iter()
        .map(|t| serde_json::json!({ "uuid": t }).to_string())
        .collect()
}

#[tokio::test]
async fn what_one_gateway_keeps_another_finds_by_its_latest_hash_only() {
    let redis = RedisServer::start();
    let one = RedisStore::connect(&redis.url(), Duration::from_secs(3600))
        .await
        .unwrap();
    let other = RedisStore::connect(&redis.url(), Duration::from_secs(3600))
        .await
        .unwrap();
    let key = record("t1", "c1", "h1").key;
    one.append(&key, lines(&["a", "b"])).await.unwrap();
    one.save(&record("t1", "c1", "h1")).await.unwrap();
    // A batch retried after its answer was lost is not appended twice.
    one.append(&key, lines(&["c"])).await.unwrap();
    one.append(&key, lines(&["c"])).await.unwrap();
    one.save(&record("t1", "c1", "h2")).await.unwrap();

    assert_eq!(other.find("t1", "h1").await.unwrap(), None, "an old hash");
    let found = other.find("t1", "h2").await.unwrap().expect("the record");
    assert_eq!(found, record("t1", "c1", "h2"));
    assert_eq!(
        other.load(&key).await.unwrap(),
        Some(lines(&["a", "b", "c"]))
    );
    // Another tenant finds nothing under the same hash, nor reads the transcript by id.
    assert_eq!(other.find("t2", "h2").await.unwrap(), None);
    let theirs = ConversationKey {
        tenant: "t2".to_owned(),
        id: "c1".to_owned(),
    };
    assert_eq!(other.load(&theirs).await.unwrap(), None);

    other
        .save_response("t1", "resp_1", "{\"x\":1}".to_owned())
        .await
        .unwrap();
    assert_eq!(
        one.load_response("t1", "resp_1").await.unwrap().as_deref(),
        Some("{\"x\":1}")
    );
    assert_eq!(one.load_response("t2", "resp_1").await.unwrap(), None);
    one.save_pool("{\"pool\":[]}".to_owned()).await.unwrap();
    assert_eq!(
        other.load_pool().await.unwrap().as_deref(),
        Some("{\"pool\":[]}")
    );
    // Keys that are not names never reach the server.
    let error = one.find("t1", "../h").await.unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}

#[tokio::test]
async fn a_gateway_whose_conversation_another_resumed_writes_nothing_more_to_it() {
    let redis = RedisServer::start();
    let url = redis.url();
    let connect = || RedisStore::connect(&url, Duration::from_secs(3600));
    let (one, two) = (connect().await.unwrap(), connect().await.unwrap());
    let key = record("t1", "c1", "h1").key;
    one.append(&key, lines(&["a", "b"])).await.unwrap();
    one.save(&record("t1", "c1", "h1")).await.unwrap();

    // Gateway two resumes the conversation (gateway one is thought gone) and goes on.
    assert_eq!(two.load(&key).await.unwrap(), Some(lines(&["a", "b"])));
    two.append(&key, lines(&["c2"])).await.unwrap();
    two.save(&record("t1", "c1", "h2")).await.unwrap();

    // Gateway one's stale CLI writes: refused, nothing of it kept.
    let refused = one.append(&key, lines(&["c1"])).await.unwrap_err();
    assert!(is_superseded(&refused), "{refused}");
    assert!(refused.to_string().contains("c1"), "{refused}");
    let refused = one.save(&record("t1", "c1", "h1-stale")).await.unwrap_err();
    assert!(is_superseded(&refused), "{refused}");
    assert_eq!(one.find("t1", "h1-stale").await.unwrap(), None);
    assert_eq!(
        one.find("t1", "h2").await.unwrap(),
        Some(record("t1", "c1", "h2"))
    );

    // Gateway one resumes it in turn: its writes count again, and two's are refused.
    assert_eq!(
        one.load(&key).await.unwrap(),
        Some(lines(&["a", "b", "c2"]))
    );
    one.append(&key, lines(&["d"])).await.unwrap();
    assert!(is_superseded(
        &two.append(&key, lines(&["e"])).await.unwrap_err()
    ));
    assert_eq!(
        two.load(&key).await.unwrap(),
        Some(lines(&["a", "b", "c2", "d"]))
    );
    // An error that is not the fencing's is no `Superseded`.
    let bad = ConversationKey {
        tenant: "t1".to_owned(),
        id: "not a key".to_owned(),
    };
    assert!(!is_superseded(
        &one.append(&bad, lines(&["x"])).await.unwrap_err()
    ));
}

#[tokio::test]
async fn a_conversation_left_alone_past_the_ttl_is_forgotten_by_redis() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url(), Duration::from_secs(1))
        .await
        .unwrap();
    let key = record("t1", "c1", "h1").key;
    store.append(&key, lines(&["a"])).await.unwrap();
    store.save(&record("t1", "c1", "h1")).await.unwrap();
    assert!(store.find("t1", "h1").await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert_eq!(store.find("t1", "h1").await.unwrap(), None);
    assert_eq!(store.load(&key).await.unwrap(), None);
}

#[tokio::test]
async fn each_tenant_s_transcripts_are_counted_once_across_gateways_until_they_expire() {
    let redis = RedisServer::start();
    let ttl = Duration::from_secs(3);
    let one = RedisStore::connect(&redis.url(), ttl).await.unwrap();
    let other = RedisStore::connect(&redis.url(), ttl).await.unwrap();
    let c1 = record("t1", "c1", "h1").key;
    let c2 = record("t1", "c2", "h2").key;
    // Each line counts with its newline: `{"uuid":"a"}` is 12 bytes.
    assert_eq!(one.append(&c1, lines(&["a", "b"])).await.unwrap(), 26);
    // A batch retried after its answer was lost is not counted twice.
    assert_eq!(one.append(&c1, lines(&["b"])).await.unwrap(), 26);
    assert_eq!(
        other
            .append(&record("t2", "c1", "h1").key, lines(&["a"]))
            .await
            .unwrap(),
        13,
        "another tenant's own"
    );
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(
        other.append(&c2, lines(&["c"])).await.unwrap(),
        39,
        "both gateways' writes"
    );
    // c1, last written more than the time-to-live ago, has expired: it no longer counts.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert_eq!(one.load(&c1).await.unwrap(), None);
    assert_eq!(one.append(&c2, lines(&["d"])).await.unwrap(), 26);
    assert_eq!(
        other.usage("t1").await.unwrap(),
        26,
        "asked without a write"
    );
    assert_eq!(
        other.usage("t3").await.unwrap(),
        0,
        "a tenant with nothing kept"
    );
}

#[tokio::test]
async fn a_server_gone_fails_calls_quickly_and_one_back_has_what_it_acknowledged() {
    let mut redis = RedisServer::start();
    // The URL's password is sent (a server that needs none refuses it) and never shown.
    let url = redis.url().replace("redis://", "redis://:not-shown@");
    let error = RedisStore::connect(&url, Duration::from_secs(3600))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("redis://***@127.0.0.1"),
        "{error}"
    );
    assert!(!error.to_string().contains("not-shown"), "{error}");
    let store = RedisStore::connect(&redis.url(), Duration::from_secs(3600))
        .await
        .unwrap();
    let key = record("t1", "c1", "h1").key;
    store.append(&key, lines(&["a"])).await.unwrap();
    store.save(&record("t1", "c1", "h1")).await.unwrap();

    redis.stop();
    let start = Instant::now();
    let error = store.find("t1", "h1").await.unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(15), "{error}");
    assert!(error.to_string().contains("Redis session store"), "{error}");

    redis.restart();
    let mut found = None;
    for _ in 0..50 {
        if let Ok(record) = store.find("t1", "h1").await {
            found = record;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        found,
        Some(record("t1", "c1", "h1")),
        "kept across the restart"
    );
    assert_eq!(store.load(&key).await.unwrap(), Some(lines(&["a"])));
}

#[tokio::test]
async fn a_server_that_does_not_answer_is_a_clear_error_at_start() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    redis.stop();
    let error = RedisStore::connect(&url, Duration::from_secs(60))
        .await
        .unwrap_err();
    assert!(error.to_string().contains(&url), "{error}");
    let error = RedisStore::connect("redis://", Duration::from_secs(60))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("Redis"), "{error}");
}

/// What the console asks of a store: the conversations saved last first, a tenant's or every
/// tenant's, and a transcript read without taking the conversation over.
pub async fn lists_and_peeks(store: &dyn ConversationStore) {
    let saved = |tenant: &str, id: &str, at: u64| {
        let mut record = record(tenant, id, &format!("h-{id}"));
        record.saved_ms = at;
        record.model = Some("claude-sonnet-4-5".to_owned());
        record
    };
    for (tenant, id, at) in [("t1", "a", 1_000), ("t1", "b", 3_000), ("t2", "c", 2_000)] {
        store
            .append(&saved(tenant, id, at).key, lines(&[id]))
            .await
            .unwrap();
        store.save(&saved(tenant, id, at)).await.unwrap();
    }
    let ids = |records: Vec<ConversationRecord>| -> Vec<String> {
        records.into_iter().map(|r| r.key.id).collect()
    };
    assert_eq!(ids(store.list(Some("t1"), 10).await.unwrap()), ["b", "a"]);
    assert_eq!(ids(store.list(None, 10).await.unwrap()), ["b", "c", "a"]);
    assert_eq!(ids(store.list(None, 2).await.unwrap()), ["b", "c"]);
    assert_eq!(
        ids(store.list(Some("t3"), 10).await.unwrap()),
        Vec::<String>::new()
    );
    let listed = store.list(Some("t2"), 10).await.unwrap();
    assert_eq!(listed, [saved("t2", "c", 2_000)], "the whole record");
    // Saved again: first.
    store.save(&saved("t1", "a", 4_000)).await.unwrap();
    assert_eq!(ids(store.list(Some("t1"), 10).await.unwrap()), ["a", "b"]);

    let key = saved("t1", "a", 4_000).key;
    assert_eq!(store.peek(&key).await.unwrap(), Some(lines(&["a"])));
    // A peek takes nothing over: the writer goes on.
    store.append(&key, lines(&["a2"])).await.unwrap();
    assert_eq!(store.peek(&key).await.unwrap(), Some(lines(&["a", "a2"])));
    let theirs = ConversationKey {
        tenant: "t2".to_owned(),
        id: "a".to_owned(),
    };
    assert_eq!(store.peek(&theirs).await.unwrap(), None);
}

#[tokio::test]
async fn the_console_lists_conversations_saved_last_first_and_peeks_at_transcripts() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url(), Duration::from_secs(3600))
        .await
        .unwrap();
    lists_and_peeks(&store).await;
    let dir = tempfile::tempdir().unwrap();
    let store = ccwire_host::store::DirStore::new(dir.path(), Duration::from_secs(3600));
    lists_and_peeks(&store).await;
}

/// What two gateways add to one key's row of a day sums; a window is replaced only by one
/// observed later, whichever gateway writes last.
#[tokio::test]
async fn usage_from_two_gateways_sums_and_the_latest_window_wins() {
    use ccwire_core::gateway::usage::{Tally, Window};
    let redis = RedisServer::start();
    let url = redis.url();
    let connect = || RedisStore::connect(&url, Duration::from_secs(3600));
    let (one, other) = (connect().await.unwrap(), connect().await.unwrap());
    let turn = |input, cost| Tally {
        turns: 1,
        input_tokens: input,
        output_tokens: 5,
        cost_nano_usd: cost,
        ..Tally::default()
    };
    one.add_usage("2026-11-28", "ka", "claude-sonnet-4-5", turn(10, 100))
        .await
        .unwrap();
    other
        .add_usage("2026-11-28", "ka", "claude-sonnet-4-5", turn(20, 200))
        .await
        .unwrap();
    other
        .add_usage("2026-11-29", "kb", "claude-haiku-4-5", turn(1, 1))
        .await
        .unwrap();
    let rows = one
        .read_usage("2026-11-28", "2026-11-29", None)
        .await
        .unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        (rows[0].key.as_str(), rows[0].day.as_str()),
        ("ka", "2026-11-28")
    );
    assert_eq!(rows[0].tally.turns, 2);
    assert_eq!(rows[0].tally.input_tokens, 30);
    assert_eq!(rows[0].tally.cost_nano_usd, 300);
    // A key's own rows, and a range that leaves a day out.
    let theirs = one
        .read_usage("2026-11-28", "2026-11-29", Some("kb"))
        .await
        .unwrap();
    assert_eq!(theirs.len(), 1);
    assert!(one
        .read_usage("2026-11-27", "2026-11-28", Some("kb"))
        .await
        .unwrap()
        .is_empty());
    let window = |utilization, observed_ms| Window {
        credential: "oauth-1".into(),
        kind: "five_hour".into(),
        status: Some("allowed_warning".into()),
        utilization: Some(utilization),
        resets_at: Some(1_893_456_000),
        surpassed_threshold: None,
        claim: None,
        disabled_reason: None,
        observed_ms,
    };
    one.keep_window(&window(0.9, 2_000)).await.unwrap();
    other.keep_window(&window(0.8, 1_000)).await.unwrap();
    assert_eq!(other.windows().await.unwrap(), [window(0.9, 2_000)]);
}

/// A key's record one gateway keeps another reads; forgotten, it is gone for both.
#[tokio::test]
async fn key_records_are_shared_and_forgotten() {
    let redis = RedisServer::start();
    let url = redis.url();
    let connect = || RedisStore::connect(&url, Duration::from_secs(1));
    let (one, other) = (connect().await.unwrap(), connect().await.unwrap());
    one.save_key("ka", Some("{\"id\":\"ka\"}".into()))
        .await
        .unwrap();
    one.save_key("kb", Some("{\"id\":\"kb\"}".into()))
        .await
        .unwrap();
    one.save_key("ka", Some("{\"id\":\"ka\",\"label\":\"x\"}".into()))
        .await
        .unwrap();
    // Kept past the store's time-to-live: keys do not expire.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let mut kept = other.load_keys().await.unwrap();
    kept.sort();
    assert_eq!(kept, ["{\"id\":\"ka\",\"label\":\"x\"}", "{\"id\":\"kb\"}"]);
    other.save_key("kb", None).await.unwrap();
    assert_eq!(one.load_keys().await.unwrap().len(), 1);
}

//! Chunks read back (the `deserialize` feature, for hosts that hand chunks back to a response
//! encoder): every chunk of every recorded transcript reads back to the same JSON value.
#![cfg(feature = "deserialize")]

mod common;

use ccwire_core::{replay, Chunk};
use common::corpus;

#[test]
fn every_chunk_of_the_corpus_reads_back_to_the_same_value() {
    let mut types = std::collections::BTreeSet::new();
    for (name, bytes) in corpus() {
        for chunk in replay(&bytes) {
            let json = serde_json::to_string(&chunk).unwrap();
            let back: Chunk =
                serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}: {e}: {json}"));
            // The same JSON value (a number reads as the double it is, as in JavaScript).
            let again = serde_json::to_string(&back).unwrap();
            let value = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
            assert_eq!(value(&again), value(&json), "{name}");
            types.insert(chunk.kind());
        }
    }
    assert!(types.len() >= 20, "{types:?}");
}

#[test]
fn a_chunk_a_host_wrote_may_leave_out_what_is_empty() {
    let chunk: Chunk =
        serde_json::from_str(r#"{"type":"tool_result","id":"t","is_error":false}"#).unwrap();
    let Chunk::ToolResult {
        content,
        server,
        parent_tool_use_id,
        ..
    } = chunk
    else {
        panic!()
    };
    assert!(content.is_null() && !server && parent_tool_use_id.is_none());
    let missing = serde_json::from_str::<Chunk>(r#"{"type":"text_delta","index":0,"text":"x"}"#);
    assert!(missing
        .unwrap_err()
        .to_string()
        .contains("missing field `message_id`"));
    assert!(serde_json::from_str::<Chunk>(r#"{"type":"nope"}"#).is_err());
}

#[test]
fn the_typed_notices_read_back_to_the_same_value() {
    for (frame, _) in common::notice_frames() {
        for chunk in replay(format!("{{\"dir\":\"out\",\"msg\":{frame}}}\n").as_bytes()) {
            let json = serde_json::to_value(&chunk).unwrap();
            let back: Chunk = serde_json::from_value(json.clone()).unwrap();
            assert_eq!(serde_json::to_value(&back).unwrap(), json, "{frame}");
        }
    }
}

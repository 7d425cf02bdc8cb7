//! One golden chunk file per corpus transcript, reviewed as a diff (`cargo insta review`).

mod common;

#[test]
fn replay() {
    insta::glob!("../../tests/corpus", "*.jsonl", |path| {
        let bytes = std::fs::read(path).unwrap();
        let chunks = ccwire_core::replay(&bytes);
        insta::assert_snapshot!(common::to_jsonl(&chunks));
    });
}

//! Every committed fuzz input (`fuzz/regressions/<target>/`) replayed through what its fuzz
//! target does, on every test run.

use std::path::Path;

use ccwire_core::{Output, Replayer, Session, SessionConfig};

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

fn drain(session: &mut Session) {
    while let Some(output) = session.poll_output() {
        if let Output::Chunk(chunk) = output {
            serde_json::from_str::<serde_json::Value>(&chunk.to_json()).expect("chunk JSON parses");
        }
    }
}

#[test]
fn session_inputs_are_handled() {
    let inputs = inputs("session");
    assert!(!inputs.is_empty());
    for (name, data) in inputs {
        let Some((&shape, rest)) = data.split_first() else {
            continue;
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
            drain(&mut session);
            if shape & 0x80 != 0 && i % 5 == 4 {
                session.handle_timeout(now);
            }
        }
        session.handle_stdout_eof(now);
        if shape & 1 == 1 {
            session.handle_process_exit(now, Some(1), None);
        }
        drain(&mut session);
        serde_json::to_string(session.tool_wait()).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn replay_inputs_give_the_same_chunks_whole_and_split() {
    let inputs = inputs("replay");
    assert!(!inputs.is_empty());
    for (name, data) in inputs {
        let whole: Vec<String> = ccwire_core::replay(&data)
            .iter()
            .map(|c| c.to_json())
            .collect();
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
        assert_eq!(whole, split, "{name}");
    }
}

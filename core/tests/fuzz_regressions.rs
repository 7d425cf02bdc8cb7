//! Every committed fuzz input replayed through what its fuzz target runs, on every test run:
//! the regressions (`fuzz/regressions/<target>/`, inputs that once crashed a target or that it
//! must keep handling) and the corpora the campaigns kept (`fuzz/corpus/<target>/`).

use std::path::Path;

use ccwire_core::fuzzing;

/// The committed inputs of `target`, in name order.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut files = Vec::new();
    for kind in ["regressions", "corpus"] {
        let Ok(dir) = std::fs::read_dir(root.join(kind).join(target)) else {
            continue;
        };
        files.extend(dir.map(|e| e.unwrap().path()));
    }
    files.sort();
    files
        .into_iter()
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

fn replay(target: &str, run: fn(&[u8])) {
    let inputs = inputs(target);
    assert!(!inputs.is_empty(), "{target}: no committed inputs");
    for (name, data) in inputs {
        if std::panic::catch_unwind(|| run(&data)).is_err() {
            panic!("{name} fails");
        }
    }
}

#[test]
fn session() {
    replay("session", fuzzing::session);
}

#[test]
fn replay_() {
    replay("replay", fuzzing::replay);
}

#[test]
fn driver() {
    replay("driver", fuzzing::driver);
}

#[test]
fn api_requests() {
    replay("api_requests", fuzzing::api_requests);
}

#[test]
fn history() {
    replay("history", fuzzing::history);
}

#[test]
fn encoders() {
    replay("encoders", fuzzing::encoders);
}

#[test]
fn gateway() {
    replay("gateway", fuzzing::gateway);
}

#[test]
fn play() {
    replay("play", fuzzing::play);
}

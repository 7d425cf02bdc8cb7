//! Every committed fuzz input replayed through what its fuzz target runs, on every test run:
//! the regressions (`fuzz/regressions/<target>/`, inputs that once crashed a target or that it
//! must keep handling) and the corpus the campaigns kept (`fuzz/corpus/<target>.tar.gz`).

use std::io::Read;
use std::path::Path;

use ccwire_core::fuzzing;

/// The committed inputs of `target`, in name order.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut inputs = Vec::new();
    if let Ok(dir) = std::fs::read_dir(root.join("regressions").join(target)) {
        for entry in dir {
            let path = entry.unwrap().path();
            inputs.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
    let corpus = root.join("corpus").join(format!("{target}.tar.gz"));
    if let Ok(file) = std::fs::File::open(&corpus) {
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let name = format!("{}:{}", corpus.display(), entry.path().unwrap().display());
            let mut data = Vec::new();
            entry.read_to_end(&mut data).unwrap();
            inputs.push((name, data));
        }
    }
    inputs.sort();
    inputs
}

fn replay(target: &str, run: fn(&[u8])) {
    let inputs = inputs(target);
    assert!(!inputs.is_empty(), "{target}: no committed inputs");
    eprintln!("{target}: {} inputs", inputs.len());
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

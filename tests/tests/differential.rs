//! Three-way differential replay: every corpus transcript through the core natively, through
//! `tests/wasm-entry` compiled to wasm32 and run under wasmtime, and through the npm package
//! under Node. The three chunk streams must be byte-identical.
//!
//! Prerequisites (`scripts/test.sh` provides them; a missing one fails the test):
//! - the wasm32-unknown-unknown target (the module is built here, or taken from
//!   `CCWIRE_WASM_ENTRY` when that names a built `ccwire_wasm_entry.wasm`);
//! - `node` and the built package (`npm ci && npm run build` in `bindings/`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use wasmtime::{Engine, Instance, Module, Store, TypedFunc};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

fn corpus() -> Vec<PathBuf> {
    let dir = workspace().join("tests/corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the corpus folder exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "only {} corpus transcripts", files.len());
    files
}

fn native(transcript: &[u8]) -> String {
    let mut out = String::new();
    for chunk in ccwire_core::replay(transcript) {
        out.push_str(&chunk.to_json());
        out.push('\n');
    }
    out
}

/// The C-ABI module: built into its own target directory, so the build does not wait for the
/// lock of the `cargo test` that runs this.
fn wasm_module() -> PathBuf {
    if let Some(path) = std::env::var_os("CCWIRE_WASM_ENTRY") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "CCWIRE_WASM_ENTRY names {}, which does not exist",
            path.display()
        );
        return path;
    }
    let root = workspace();
    let target = root.join("target/differential");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&root)
        .args([
            "build",
            "--quiet",
            "-p",
            "ccwire-wasm-entry",
            "--target",
            "wasm32-unknown-unknown",
            "--profile",
            "wasm-release",
            "--target-dir",
        ])
        .arg(&target)
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "building ccwire-wasm-entry for wasm32-unknown-unknown failed \
         (is the target installed? `rustup target add wasm32-unknown-unknown`)"
    );
    target.join("wasm32-unknown-unknown/wasm-release/ccwire_wasm_entry.wasm")
}

struct WasmReplay {
    store: Store<()>,
    instance: Instance,
    alloc: TypedFunc<u32, u32>,
    free: TypedFunc<(u32, u32), ()>,
    replay: TypedFunc<(u32, u32), u64>,
}

impl WasmReplay {
    fn load(path: &Path) -> WasmReplay {
        let engine = Engine::default();
        let module = Module::from_file(&engine, path).expect("the module compiles");
        assert_eq!(
            module.imports().len(),
            0,
            "the core's wasm module must import nothing"
        );
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("the module instantiates");
        let alloc = instance
            .get_typed_func(&mut store, "ccwire_alloc")
            .expect("ccwire_alloc");
        let free = instance
            .get_typed_func(&mut store, "ccwire_free")
            .expect("ccwire_free");
        let replay = instance
            .get_typed_func(&mut store, "ccwire_replay")
            .expect("ccwire_replay");
        WasmReplay {
            store,
            instance,
            alloc,
            free,
            replay,
        }
    }

    fn replay(&mut self, transcript: &[u8]) -> String {
        let len = u32::try_from(transcript.len()).expect("a transcript under 4 GiB");
        let memory = self
            .instance
            .get_memory(&mut self.store, "memory")
            .expect("the module exports its memory");
        let ptr = self.alloc.call(&mut self.store, len).expect("alloc");
        memory
            .write(&mut self.store, ptr as usize, transcript)
            .expect("the input fits");
        let packed = self
            .replay
            .call(&mut self.store, (ptr, len))
            .expect("replay");
        let (out_ptr, out_len) = ((packed >> 32) as u32, packed as u32);
        let mut out = vec![0; out_len as usize];
        memory
            .read(&self.store, out_ptr as usize, &mut out)
            .expect("the output is in memory");
        self.free.call(&mut self.store, (ptr, len)).expect("free");
        self.free
            .call(&mut self.store, (out_ptr, out_len))
            .expect("free");
        String::from_utf8(out).expect("chunks are UTF-8")
    }
}

fn npm(files: &[PathBuf]) -> BTreeMap<String, String> {
    let script = workspace().join("tests/differential/replay-npm.mjs");
    let output = Command::new("node")
        .arg(&script)
        .args(files)
        .output()
        .expect("`node` must be on PATH for the differential test");
    assert!(
        output.status.success(),
        "the npm replay failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the npm replay prints a JSON object")
}

/// Panics with the first differing chunk of two chunk streams.
fn assert_same(name: &str, what: &str, expected: &str, actual: &str) {
    if expected == actual {
        return;
    }
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let at = (0..e.len().max(a.len()))
        .find(|&i| e.get(i) != a.get(i))
        .unwrap_or(0);
    panic!(
        "{name}: {what} differs from native at chunk {at} ({} vs {} chunks)\n  native: {}\n  {what}: {}",
        e.len(),
        a.len(),
        e.get(at).unwrap_or(&"<none>"),
        a.get(at).unwrap_or(&"<none>"),
    );
}

#[test]
fn native_wasmtime_and_npm_replay_the_corpus_identically() {
    let files = corpus();
    let mut wasm = WasmReplay::load(&wasm_module());
    let npm = npm(&files);
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(file).unwrap();
        let expected = native(&bytes);
        assert!(!expected.is_empty(), "{name}: no chunks");
        assert_same(&name, "wasmtime", &expected, &wasm.replay(&bytes));
        let from_node = npm
            .get(&name)
            .unwrap_or_else(|| panic!("{name}: the npm replay did not report it"));
        assert_same(&name, "npm", &expected, from_node);
    }
}

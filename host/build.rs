//! Gives the `ccwire` binary what `ccwire --version` says beside the version: the target it was
//! built for and the commit it was built from.
//!
//! The commit is `CCWIRE_COMMIT` when set (release builds set it), else the commit `cargo
//! publish` recorded in the crate's `.cargo_vcs_info.json` (a crate from a registry), else the
//! `HEAD` of the checkout it is built in, else `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=CCWIRE_TARGET={target}");
    println!("cargo:rerun-if-env-changed=CCWIRE_COMMIT");
    let commit = std::env::var("CCWIRE_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .map(|c| short(c.trim()))
        .or_else(from_vcs_info)
        .or_else(from_checkout)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CCWIRE_COMMIT={commit}");
}

/// A commit id as `--version` shows it: 12 hex digits (a longer id is cut there).
fn short(commit: &str) -> String {
    if commit.len() > 12 && commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        commit[..12].to_owned()
    } else {
        commit.to_owned()
    }
}

/// `HEAD` of the checkout the crate is built in, shortened to 12 digits; the build runs again
/// when `HEAD` moves.
fn from_checkout() -> Option<String> {
    let git = |args: &[&str]| {
        let out = Command::new("git").args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    // Only files that exist: cargo runs a build script every time for one that does not.
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for path in &watched {
        if let Some(file) = git(&["rev-parse", "--path-format=absolute", "--git-path", path]) {
            if Path::new(&file).exists() {
                println!("cargo:rerun-if-changed={file}");
            }
        }
    }
    Some(commit)
}

/// The commit `cargo publish` wrote into the packaged crate.
fn from_vcs_info() -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let text = std::fs::read_to_string(Path::new(&dir).join(".cargo_vcs_info.json")).ok()?;
    let info: serde_json::Value = serde_json::from_str(&text).ok()?;
    let sha = info.pointer("/git/sha1")?.as_str()?;
    (sha.len() >= 12 && sha.bytes().all(|b| b.is_ascii_hexdigit())).then(|| short(sha))
}

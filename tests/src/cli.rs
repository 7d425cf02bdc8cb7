//! The real Claude Code CLI, installed by `scripts/install-cli.sh`, run offline.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// The CLI executable: `CCWIRE_CLAUDE`, else the project's install under `tests/.cli/`.
///
/// # Panics
/// With the install command when the CLI is not installed.
pub fn claude_path() -> PathBuf {
    if let Some(path) = std::env::var_os("CCWIRE_CLAUDE").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cli/node_modules/.bin/claude");
    assert!(
        path.exists(),
        "the Claude Code CLI is not installed at {}; run scripts/install-cli.sh",
        path.display()
    );
    path
}

/// The Codex CLI executable: `CCWIRE_CODEX`, else the project's install under `tests/.codex/`.
///
/// # Panics
/// With the install command when Codex is not installed.
pub fn codex_path() -> PathBuf {
    if let Some(path) = std::env::var_os("CCWIRE_CODEX").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(".codex/node_modules/.bin/codex");
    assert!(
        path.exists(),
        "the Codex CLI is not installed at {}; run scripts/install-codex.sh",
        path.display()
    );
    path
}

/// A private home for one CLI run: `HOME`, `TMPDIR` and `CLAUDE_CODE_TMPDIR` inside a fresh
/// temporary directory, removed when dropped.
pub struct OfflineHome {
    dir: TempDir,
}

impl OfflineHome {
    /// Creates the directories.
    ///
    /// # Panics
    /// When the temporary directory cannot be made.
    pub fn new() -> OfflineHome {
        let dir = tempfile::Builder::new()
            .prefix("ccwire-cli-")
            .tempdir()
            .expect("a temp dir");
        std::fs::create_dir_all(dir.path().join("tmp")).expect("a tmp dir");
        std::fs::create_dir_all(dir.path().join("work")).expect("a work dir");
        OfflineHome { dir }
    }

    /// The home directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A working directory for the CLI inside the home.
    pub fn workdir(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// The environment the CLI needs to run offline against `base_url`.
    pub fn env(&self, base_url: &str) -> Vec<(String, String)> {
        let home = self.path().display().to_string();
        let tmp = self.path().join("tmp").display().to_string();
        vec![
            ("HOME".into(), home),
            ("TMPDIR".into(), tmp.clone()),
            ("CLAUDE_CODE_TMPDIR".into(), tmp),
            ("ANTHROPIC_BASE_URL".into(), base_url.to_owned()),
            ("ANTHROPIC_API_KEY".into(), "dummy".into()),
            (
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
                "1".into(),
            ),
            ("DISABLE_TELEMETRY".into(), "1".into()),
            ("DISABLE_AUTOUPDATER".into(), "1".into()),
            ("CLAUDE_CODE_SDK_READS_SESSION_STATE".into(), "1".into()),
        ]
    }
}

impl Default for OfflineHome {
    fn default() -> Self {
        OfflineHome::new()
    }
}

/// Inherited variables that must not reach the CLI in tests (they would point it elsewhere).
pub fn inherited_to_remove() -> Vec<String> {
    std::env::vars()
        .map(|(k, _)| k)
        .filter(|k| {
            (k.starts_with("ANTHROPIC_") || k.starts_with("CLAUDE") || k.starts_with("OTEL_"))
                && k != "CCWIRE_CLAUDE"
        })
        .collect()
}

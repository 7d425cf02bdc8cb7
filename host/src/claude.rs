//! Finding the `claude` executable and building its command line (docs/PROTOCOL.md §2).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The environment variable naming the CLI executable.
pub const CLAUDE_ENV: &str = "CCWIRE_CLAUDE";

pub use ccwire_core::args::TESTED_CLI_VERSION;

/// The CLI could not be found.
#[derive(Debug, thiserror::Error)]
#[error(
    "the Claude Code CLI was not found ({searched}); install it with \
     `npm install -g @anthropic-ai/claude-code@{TESTED_CLI_VERSION}`, or name the executable: \
     `ClaudeOptions::claude` in Rust, `--claude PATH` for the ccwire command, or the \
     {CLAUDE_ENV} variable"
)]
pub struct CliNotFound {
    searched: String,
}

/// Finds the CLI: an explicit path, then `CCWIRE_CLAUDE`, then `claude` on `PATH`.
///
/// # Errors
/// [`CliNotFound`] naming the install command.
pub fn find_cli(explicit: Option<&Path>) -> Result<PathBuf, CliNotFound> {
    if let Some(path) = explicit {
        return existing(path).ok_or_else(|| CliNotFound {
            searched: format!("{} does not exist", path.display()),
        });
    }
    if let Some(path) = std::env::var_os(CLAUDE_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return existing(&path).ok_or_else(|| CliNotFound {
            searched: format!("{CLAUDE_ENV}={} does not exist", path.display()),
        });
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path_var) {
        // Only absolute PATH entries: a relative one would resolve against the cwd.
        if !dir.is_absolute() {
            continue;
        }
        if let Some(found) = existing(&dir.join("claude")) {
            return Ok(found);
        }
    }
    Err(CliNotFound {
        searched: format!("no path given, no {CLAUDE_ENV}, no `claude` on PATH"),
    })
}

fn existing(path: &Path) -> Option<PathBuf> {
    path.is_file().then(|| path.to_path_buf())
}

pub use ccwire_core::args::{CliArgs, SystemPrompt, Thinking};

/// How to start the CLI: the executable, its arguments, and the working directory and
/// environment of its process.
#[derive(Debug, Clone, Default)]
pub struct ClaudeOptions {
    /// The executable; found with [`find_cli`] when `None`.
    pub claude: Option<PathBuf>,
    /// The CLI's settings: its command line ([`CliArgs::to_args`]) and the fields of its
    /// `initialize` request ([`CliArgs::initialize`]), the same for every host.
    pub args: CliArgs,
    /// The working directory.
    pub cwd: Option<PathBuf>,
    /// Variables added to the CLI's environment.
    pub env: Vec<(OsString, OsString)>,
    /// Variables removed from the CLI's environment.
    pub env_remove: Vec<OsString>,
}

impl ClaudeOptions {
    /// Variables to set, and to remove, in the CLI's environment.
    pub fn env_changes(&self) -> (Vec<(OsString, OsString)>, Vec<OsString>) {
        // A parent Claude Code session would make the child think it is nested.
        let mut remove = vec![OsString::from("CLAUDECODE")];
        remove.extend(self.env_remove.iter().cloned());
        let mut set = vec![(
            OsString::from("CLAUDE_CODE_SDK_READS_SESSION_STATE"),
            OsString::from("1"),
        )];
        set.extend(self.env.iter().cloned());
        (set, remove)
    }
}

/// The version the CLI at `path` reports (`claude --version`), if it answers within 20 s.
pub async fn cli_version(path: &std::path::Path) -> Option<String> {
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        tokio::process::Command::new(path)
            .arg("--version")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.split_whitespace().next().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_explicit_path_names_the_install_command() {
        let err = find_cli(Some(Path::new("/nonexistent/claude"))).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/nonexistent/claude"), "{text}");
        assert!(
            text.contains("npm install -g @anthropic-ai/claude-code@2.1.332"),
            "{text}"
        );
    }

    #[test]
    fn the_cli_never_thinks_it_runs_inside_another_claude_code() {
        let options = ClaudeOptions {
            env: vec![("A".into(), "1".into())],
            env_remove: vec!["B".into()],
            ..ClaudeOptions::default()
        };
        let (set, remove) = options.env_changes();
        assert_eq!(remove, [OsString::from("CLAUDECODE"), "B".into()]);
        assert_eq!(set.last(), Some(&("A".into(), "1".into())));
    }
}

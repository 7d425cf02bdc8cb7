//! Spawning and supervising the CLI process.
//!
//! The CLI runs in its own process group so that teardown reaches the commands its tools started
//! too (those still in the group: the Bash tool starts each command in a session of its own,
//! whose background jobs only [`crate::tree`]'s sweep or the gateway's sandbox end). Teardown
//! follows docs/PROTOCOL.md §2.7: close stdin (the CLI flushes its session file after
//! EOF), wait a grace period, SIGTERM the group, wait, SIGKILL. Dropping a [`CliProcess`] that
//! was not shut down kills the group at once, so no process outlives its owner.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::claude::{find_cli, ClaudeOptions, CliNotFound};

/// How much of the CLI's stderr is kept for error messages.
const STDERR_TAIL: usize = 8 * 1024;

/// Starting the CLI failed.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// No executable.
    #[error(transparent)]
    NotFound(#[from] CliNotFound),
    /// The executable could not be started.
    #[error("cannot start {path}: {source}")]
    Io {
        /// The executable.
        path: String,
        /// Why.
        source: io::Error,
    },
}

/// How the process ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExitInfo {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

impl From<ExitStatus> for ExitInfo {
    fn from(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        ExitInfo {
            code: status.code(),
            signal: status.signal(),
        }
    }
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (_, Some(sig)) => write!(f, "killed by signal {sig}"),
            (Some(code), None) => write!(f, "exit code {code}"),
            (None, None) => f.write_str("unknown exit status"),
        }
    }
}

/// The last bytes the CLI wrote to stderr.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<u8>>>);

impl StderrTail {
    /// The kept text (lossy UTF-8), trimmed.
    pub fn text(&self) -> String {
        let bytes: Vec<u8> = self
            .0
            .lock()
            .expect("not poisoned")
            .iter()
            .copied()
            .collect();
        String::from_utf8_lossy(&bytes).trim().to_owned()
    }

    fn push(&self, data: &[u8]) {
        let mut tail = self.0.lock().expect("not poisoned");
        tail.extend(data);
        let excess = tail.len().saturating_sub(STDERR_TAIL);
        tail.drain(..excess);
    }
}

/// A running CLI process with piped stdin and stdout.
#[derive(Debug)]
pub struct CliProcess {
    child: Child,
    pid: u32,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: StderrTail,
    /// The task that reads stderr into the tail.
    stderr_read: Option<tokio::task::JoinHandle<()>>,
    exited: Option<ExitInfo>,
    group_killed: bool,
}

impl CliProcess {
    /// Starts the CLI as `options` say.
    ///
    /// # Errors
    /// [`SpawnError`] when the executable is missing or cannot start.
    pub fn spawn(options: &ClaudeOptions) -> Result<CliProcess, SpawnError> {
        let path = find_cli(options.claude.as_deref())?;
        let (set, remove) = options.env_changes();
        CliProcess::spawn_command(
            &path,
            options.args.to_args(),
            options.cwd.as_deref(),
            set,
            remove,
        )
    }

    /// Starts `path` with exactly these arguments, in `cwd`, with the variables in `set` added
    /// to (and those in `remove` removed from) the inherited environment.
    ///
    /// # Errors
    /// [`SpawnError::Io`] when the executable cannot start.
    pub fn spawn_command<A, K, V, R>(
        path: &Path,
        args: impl IntoIterator<Item = A>,
        cwd: Option<&Path>,
        set: impl IntoIterator<Item = (K, V)>,
        remove: impl IntoIterator<Item = R>,
    ) -> Result<CliProcess, SpawnError>
    where
        A: AsRef<OsStr>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
        R: AsRef<OsStr>,
    {
        let mut command = Command::new(path);
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        die_with_parent(&mut command);
        if let Some(cwd) = cwd {
            command.current_dir(cwd).env("PWD", cwd);
        }
        for key in remove {
            command.env_remove(key);
        }
        command.envs(set);
        let mut child = crate::tree::spawn_own(&mut command).map_err(|source| SpawnError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let pid = child.id().expect("a just-spawned child has a pid");
        let stderr = StderrTail::default();
        let mut stderr_read = None;
        if let Some(mut pipe) = child.stderr.take() {
            let tail = stderr.clone();
            stderr_read = Some(tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    tracing::trace!(target: "ccwire::stderr", "{}", String::from_utf8_lossy(&buf[..n]));
                    tail.push(&buf[..n]);
                }
            }));
        }
        tracing::debug!(pid, path = %path.display(), "started the CLI");
        Ok(CliProcess {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            pid,
            stderr,
            stderr_read,
            exited: None,
            group_killed: false,
        })
    }

    /// The process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Takes the stdin pipe.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// Takes the stdout pipe.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// The last bytes of stderr.
    pub fn stderr(&self) -> &StderrTail {
        &self.stderr
    }

    /// Waits for the process to end.
    ///
    /// # Errors
    /// When waiting fails.
    pub async fn wait(&mut self) -> io::Result<ExitInfo> {
        if let Some(info) = self.exited {
            return Ok(info);
        }
        let info = ExitInfo::from(self.child.wait().await?);
        crate::tree::disown(self.pid);
        // What it wrote last, read before its end is reported (a moment at most: a process it
        // left behind may hold the pipe open).
        if let Some(read) = self.stderr_read.take() {
            let _ = tokio::time::timeout(Duration::from_millis(200), read).await;
        }
        self.exited = Some(info);
        Ok(info)
    }

    /// Ends the process: stdin closed, `grace` to exit by itself, then SIGTERM to its group,
    /// five seconds, then SIGKILL.
    ///
    /// # Errors
    /// When waiting fails.
    pub async fn shutdown(&mut self, grace: Duration) -> io::Result<ExitInfo> {
        drop(self.stdin.take());
        if let Ok(done) = tokio::time::timeout(grace, self.wait()).await {
            self.signal_group(Signal::SIGKILL);
            return done;
        }
        self.signal_group(Signal::SIGTERM);
        if let Ok(done) = tokio::time::timeout(Duration::from_secs(5), self.wait()).await {
            self.signal_group(Signal::SIGKILL);
            return done;
        }
        self.signal_group(Signal::SIGKILL);
        self.wait().await
    }

    /// Asks the process group to end (SIGTERM).
    pub fn terminate(&mut self) {
        self.signal_group(Signal::SIGTERM);
    }

    /// Kills the process group at once.
    pub fn kill(&mut self) {
        self.signal_group(Signal::SIGKILL);
    }

    fn signal_group(&mut self, signal: Signal) {
        if self.group_killed {
            return;
        }
        // The group outlives its leader when a tool's command is still running; errors mean the
        // group is already gone.
        let _ = killpg(Pid::from_raw(self.pid as i32), signal);
        self.group_killed = signal == Signal::SIGKILL;
    }
}

/// Has the CLI killed when ccwire dies, even by SIGKILL, when no code of ccwire runs to end
/// it (Linux: the parent-death signal). A CLI would end on its stdin closing anyway; one that
/// hangs would not.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_parent(command: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec and only makes one system
    // call (prctl), which is async-signal-safe; it touches no memory of the parent's.
    unsafe {
        command
            .pre_exec(|| nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from));
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: &mut Command) {}

impl Drop for CliProcess {
    fn drop(&mut self) {
        self.signal_group(Signal::SIGKILL);
        crate::tree::disown(self.pid);
    }
}

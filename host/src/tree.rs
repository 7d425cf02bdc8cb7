//! The processes a gateway's CLI leaves behind, and their end.
//!
//! The CLI's Bash tool runs each command in a session of its own (`setsid`), so a job it
//! backgrounds leaves the CLI's process group and outlives the CLI, reparented to init. Outside
//! the sandbox the gateway therefore starts every CLI with a variable naming the gateway and
//! the session ([`MARKER_ENV`]), which whatever its tools run inherits, and once the CLI has
//! ended it kills every process still carrying that mark ([`sweep_session`]). A gateway killed
//! by SIGKILL runs no code to do so: `ccwire serve` starts a [`Watchdog`], a process of its
//! own that notices the gateway's end and kills what its CLIs left; and the next gateway to
//! start kills the marked processes of gateways that are no longer running
//! ([`sweep_orphans`]), should the watchdog have been killed too. In the sandbox none of this
//! is needed: each CLI has its own PID namespace, which ends with the CLI or the gateway.
//!
//! A process that drops the variable from its environment before it starts others escapes the
//! mark; the sandbox is the boundary, this is the clean-up outside it. Linux only (it reads
//! `/proc`); elsewhere the sweeps find nothing.

use std::collections::HashSet;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The variable every CLI of the gateway is started with:
/// `<gateway pid>.<its start time>.<server number>/<session>`.
pub const MARKER_ENV: &str = "CCWIRE_GATEWAY_SESSION";

/// The children of this process that [`crate::process::CliProcess`] waits for: the reaper of
/// adopted orphans leaves them alone.
static OWN: Mutex<Option<HashSet<u32>>> = Mutex::new(None);

/// The marks of one gateway's CLIs.
#[derive(Debug, Clone)]
pub struct Marks {
    gateway: String,
}

impl Marks {
    /// Marks of a gateway of this process, distinct from those of every other gateway, of this
    /// process or another, running or not.
    pub fn new() -> Marks {
        static SERVERS: AtomicU64 = AtomicU64::new(0);
        let n = SERVERS.fetch_add(1, Ordering::Relaxed);
        Marks {
            gateway: format!("{}.{n}", gateway_id()),
        }
    }

    /// The value of [`MARKER_ENV`] for the CLI of `session`.
    pub fn of(&self, session: u64) -> String {
        format!("{}/{session}", self.gateway)
    }

    /// Kills every process marked by this gateway, whichever its session; returns how many.
    pub fn sweep_all(&self) -> usize {
        sweep(|mark| {
            mark.split_once('/')
                .is_some_and(|(gateway, _)| gateway == self.gateway)
        })
    }
}

impl Default for Marks {
    fn default() -> Self {
        Marks::new()
    }
}

/// Kills every process marked `mark` (a value of [`Marks::of`]); returns how many.
pub fn sweep_session(mark: &str) -> usize {
    let killed = sweep(|m| m == mark);
    if killed > 0 {
        tracing::info!(mark, killed, "killed what a CLI's tools left running");
    }
    killed
}

/// Kills every process marked by a gateway that no longer runs (one that was SIGKILLed, or
/// died before it could sweep); returns how many.
pub fn sweep_orphans() -> usize {
    let killed = sweep(|mark| {
        let gateway = mark.split_once('/').map_or(mark, |(g, _)| g);
        gateway_running(gateway) == Some(false)
    });
    if killed > 0 {
        tracing::info!(
            killed,
            "killed what the CLIs of gateways no longer running left"
        );
    }
    killed
}

/// A process that outlives its gateway by a moment: when the gateway ends, however it ends
/// (SIGKILL included), it kills every process the gateway's CLIs marked, and exits.
///
/// It is the gateway's executable started again with arguments that make it [`watch`]: its
/// standard input is a pipe that only the gateway holds open, so that the end of the
/// gateway is the end of that input. It runs in a process group of its own, so that a
/// signal to the gateway's group (Ctrl-C in a terminal) leaves it to do its work.
#[derive(Debug)]
pub struct Watchdog {
    _pipe: std::process::ChildStdin,
}

impl Watchdog {
    /// Starts `program` with `args` (which must make it call [`watch`] with this process's
    /// [`gateway_id`]) as the watchdog of this process.
    ///
    /// # Errors
    /// When the process cannot be started.
    pub fn start(program: &std::path::Path, args: &[String]) -> io::Result<Watchdog> {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .process_group(0)
            .spawn()?;
        let pipe = child.stdin.take().expect("piped");
        // Reaped by whoever adopts it once the gateway has ended; reaped here if it ends
        // first (the reaper of adopted orphans waits for any child it does not own).
        drop(child);
        Ok(Watchdog { _pipe: pipe })
    }
}

/// This process, as a watchdog names it: `<pid>.<start time>` (the process, not just its
/// pid, which the system may give another process later).
pub fn gateway_id() -> String {
    let pid = std::process::id();
    format!("{pid}.{}", Stat::of(pid).map_or(0, |s| s.start))
}

/// Whether the process `id` names (`<pid>.<start time>`, and whatever follows) still runs;
/// `None` when `id` names none.
fn gateway_running(id: &str) -> Option<bool> {
    let mut parts = id.split('.');
    let pid = parts.next()?.parse::<u32>().ok()?;
    let start = parts.next()?.parse::<u64>().ok()?;
    Some(Stat::of(pid).is_some_and(|s| s.start == start && s.running()))
}

/// The work of a [`Watchdog`]: waits for the end of standard input, then for the end of the
/// gateway `gateway` (a [`gateway_id`]), kills every process its CLIs marked and returns how
/// many.
pub fn watch(gateway: &str) -> usize {
    use std::io::Read;
    let mut sink = [0u8; 64];
    let mut input = io::stdin().lock();
    while !matches!(input.read(&mut sink), Ok(0) | Err(_)) {}
    // The gateway's descriptors close as it exits, a moment before it has ended.
    for _ in 0..500 {
        if gateway_running(gateway) != Some(true) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let prefix = format!("{gateway}.");
    let killed = sweep(|mark| mark.starts_with(&prefix));
    if killed > 0 {
        tracing::info!(killed, "killed what the CLIs of an ended gateway left");
    }
    killed
}

/// SIGKILLs every process (but this one and its ancestors) whose mark `doomed` says, pass
/// after pass until one finds none left (a process may start others while it is swept).
fn sweep(doomed: impl Fn(&str) -> bool) -> usize {
    if !cfg!(target_os = "linux") {
        return 0;
    }
    let spared = ancestors();
    let mut killed = 0;
    for _ in 0..8 {
        let mut found = 0;
        for pid in pids() {
            if spared.contains(&pid) || !marker(pid).is_some_and(|m| doomed(&m)) {
                continue;
            }
            let target = nix::unistd::Pid::from_raw(pid as i32);
            if nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGKILL).is_ok() {
                tracing::debug!(pid, "killed a process a CLI left behind");
                found += 1;
            }
        }
        if found == 0 {
            break;
        }
        killed += found;
    }
    killed
}

#[cfg(feature = "serve")]
/// Makes this process the reaper of the orphans of its descendants (Linux's child subreaper)
/// and reaps them as they end, so that a CLI's leftover processes end under the gateway (and
/// not as zombies). Only for a process whose children are all
/// [`CliProcess`](crate::process::CliProcess)es once it is called: any other child that ends
/// is reaped here, not by whoever spawned it.
///
/// # Errors
/// When the process cannot become a subreaper or watch SIGCHLD.
pub(crate) fn adopt_orphans() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::set_child_subreaper(true)?;
        let mut ended = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())?;
        tokio::spawn(async move {
            loop {
                let _ = tokio::task::spawn_blocking(reap_adopted).await;
                if ended.recv().await.is_none() {
                    break;
                }
            }
        });
    }
    Ok(())
}

#[cfg(all(feature = "serve", target_os = "linux"))]
/// Reaps the children of this process that have ended and that no
/// [`CliProcess`](crate::process::CliProcess) waits for.
fn reap_adopted() {
    use nix::sys::wait::{waitpid, WaitPidFlag};
    let own = OWN.lock().expect("not poisoned");
    for pid in children() {
        let mine = own.as_ref().is_some_and(|o| o.contains(&pid));
        if mine || Stat::of(pid).is_none_or(|s| s.running()) {
            continue;
        }
        let target = nix::unistd::Pid::from_raw(pid as i32);
        if let Ok(status) = waitpid(target, Some(WaitPidFlag::WNOHANG)) {
            tracing::debug!(pid, ?status, "reaped an orphan of a CLI");
        }
    }
}

/// Spawns `command` as a child the reaper of adopted orphans leaves alone.
pub(crate) fn spawn_own(
    command: &mut tokio::process::Command,
) -> io::Result<tokio::process::Child> {
    let mut own = OWN.lock().expect("not poisoned");
    let child = command.spawn()?;
    if let Some(pid) = child.id() {
        own.get_or_insert_with(HashSet::new).insert(pid);
    }
    Ok(child)
}

/// Forgets a child of [`spawn_own`] that has been waited for (or dropped).
pub(crate) fn disown(pid: u32) {
    if let Some(own) = OWN.lock().expect("not poisoned").as_mut() {
        own.remove(&pid);
    }
}

/// What `/proc/<pid>/stat` says of a process.
struct Stat {
    state: char,
    ppid: u32,
    /// When it started, in clock ticks after boot: with the pid, it names one process.
    start: u64,
}

impl Stat {
    fn of(pid: u32) -> Option<Stat> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name, in parentheses, may hold anything: the fields follow its last `)`.
        let mut fields = text.rsplit_once(')')?.1.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let ppid = fields.next()?.parse().ok()?;
        let start = fields.nth(17)?.parse().ok()?;
        Some(Stat { state, ppid, start })
    }

    /// Not ended (a zombie has ended, whether or not it has been reaped).
    fn running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Every process id in `/proc`.
fn pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

#[cfg(all(feature = "serve", target_os = "linux"))]
/// The children of this process (of any of its threads).
fn children() -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for task in tasks.flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        pids.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    pids
}

/// This process and its ancestors, which a sweep never kills (a gateway started by a tool of
/// another gateway's CLI carries that gateway's mark).
fn ancestors() -> HashSet<u32> {
    let mut spared = HashSet::new();
    let mut pid = std::process::id();
    while pid > 1 && spared.insert(pid) {
        let Some(stat) = Stat::of(pid) else { break };
        pid = stat.ppid;
    }
    spared
}

/// The value of [`MARKER_ENV`] in the environment a process started with, when readable.
fn marker(pid: u32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{MARKER_ENV}=");
    environ
        .split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))
        .map(|value| String::from_utf8_lossy(value).into_owned())
}

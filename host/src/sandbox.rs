//! The OS sandbox of the gateway's CLIs: on Linux, each CLI runs under bubblewrap (`bwrap`)
//! with the system read-only, only its tenant's directories writable, and the rest of the
//! machine — the gateway's home and state, other tenants, the processes outside — out of sight.
//!
//! What the sandbox holds, in order of the arguments [`Sandbox::wrap`] gives:
//! - `/usr` read-only (with `/bin`, `/lib`… as on the host: links into it, or bound read-only);
//! - an empty `/etc` with only what programs need to run, resolve names and speak TLS bound in
//!   read-only ([`ETC`]): no `shadow`, no SSH keys, nothing the operator added;
//! - the CLI's executable at [`CLI_INSIDE`], read-only (a script CLI: its directory, at its
//!   own path);
//! - a fresh `/proc` (its own process namespace: no other process is visible), a minimal
//!   `/dev`, an empty `/tmp`;
//! - the tenant's home, working and temporary directories, writable, at their own paths;
//! - its own user namespace with an unprivileged uid and no capabilities, no nested user
//!   namespaces, a new session (no terminal to inject into);
//! - the network of the host (the CLI reaches the model API).
//!
//! The sandbox ends with the gateway: `--die-with-parent` kills it when the gateway dies,
//! even by SIGKILL, and the end of its first process ends every process in it (tools'
//! background commands included).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Whether the gateway's CLIs run sandboxed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum SandboxMode {
    /// Where bubblewrap works (Linux, `bwrap` installed, user namespaces allowed); otherwise
    /// the CLIs run unsandboxed and the gateway says so at start.
    #[default]
    Auto,
    /// Always; the gateway does not start when the sandbox cannot work.
    On,
    /// Never.
    Off,
}

/// Where the CLI's executable is inside the sandbox.
pub const CLI_INSIDE: &str = "/opt/ccwire/claude";

/// The files and directories of `/etc` a sandboxed CLI sees (each when present): the dynamic
/// loader's, users and groups, name resolution, TLS roots, time zones, the shells' and tools'
/// defaults, and Claude Code's managed settings.
pub const ETC: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "resolv.conf",
    "hosts",
    "host.conf",
    "gai.conf",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "crypto-policies",
    "gnutls",
    "localtime",
    "timezone",
    "zoneinfo",
    "alternatives",
    "bash.bashrc",
    "profile",
    "profile.d",
    "inputrc",
    "environment",
    "shells",
    "terminfo",
    "mime.types",
    "magic",
    "os-release",
    "services",
    "protocols",
    "gitconfig",
    "hostname",
    "machine-id",
    "locale.alias",
    "default",
    "npmrc",
    "pip.conf",
    "wgetrc",
    "xdg",
    "claude-code",
];

/// The uid and gid a sandboxed CLI runs as (it has no capabilities either way).
const SANDBOX_UID: &str = "1000";

/// A working bubblewrap, found and tried.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
    /// `/bin`, `/lib`…: `(path, Some(link target))` for a link, `(path, None)` for a directory.
    top: Vec<(String, Option<String>)>,
}

/// Why the sandbox cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("the sandbox cannot run here: {0}")]
pub struct SandboxError(String);

impl SandboxError {
    /// An error that says `why`.
    pub fn new(why: impl Into<String>) -> SandboxError {
        SandboxError(why.into())
    }
}

impl Sandbox {
    /// The sandbox `mode` asks for: `None` for `off`, and for `auto` where it cannot work
    /// (with the reason, for the operator).
    ///
    /// # Errors
    /// With `on`, why bubblewrap cannot run here (not installed, no user namespaces…).
    pub async fn for_mode(
        mode: SandboxMode,
    ) -> Result<(Option<Sandbox>, Option<String>), SandboxError> {
        if mode == SandboxMode::Off {
            return Ok((None, None));
        }
        match Sandbox::find().await {
            Ok(sandbox) => Ok((Some(sandbox), None)),
            Err(e) if mode == SandboxMode::Auto => Ok((None, Some(e.0))),
            Err(e) => Err(e),
        }
    }

    /// Finds `bwrap` on `PATH` and checks that it can make the sandbox here.
    ///
    /// # Errors
    /// Not Linux, no `bwrap`, or `bwrap` cannot make the namespaces (its own words).
    pub async fn find() -> Result<Sandbox, SandboxError> {
        if !cfg!(target_os = "linux") {
            return Err(SandboxError("bubblewrap runs on Linux only".into()));
        }
        let bwrap = std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|dir| dir.join("bwrap"))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                SandboxError(
                    "bwrap is not installed (Debian and Ubuntu: apt install bubblewrap)".into(),
                )
            })?;
        let mut top = Vec::new();
        for dir in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
            match std::fs::read_link(dir) {
                Ok(target) => top.push((dir.to_owned(), Some(target.to_string_lossy().into()))),
                Err(_) if Path::new(dir).is_dir() => top.push((dir.to_owned(), None)),
                Err(_) => {}
            }
        }
        let sandbox = Sandbox { bwrap, top };
        // The real arguments around `true`, in a directory of its own.
        let probe =
            std::env::temp_dir().join(format!("ccwire-sandbox-probe-{}", std::process::id()));
        std::fs::create_dir_all(&probe).map_err(|e| SandboxError(e.to_string()))?;
        let dir = probe.to_string_lossy().into_owned();
        let (program, args) = sandbox.wrap(Path::new("/usr/bin/true"), &[], &[&dir], &dir);
        let output = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .await;
        let _ = std::fs::remove_dir_all(&probe);
        match output {
            Ok(out) if out.status.success() => Ok(sandbox),
            Ok(out) => Err(SandboxError(format!(
                "bwrap failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))),
            Err(e) => Err(SandboxError(format!(
                "cannot run {}: {e}",
                sandbox.bwrap.display()
            ))),
        }
    }

    /// The program and arguments that run `cli` with `args` in the sandbox, with `writable`
    /// directories (the tenant's) writable at their own paths and `cwd` the working
    /// directory. The environment is the spawned command's own.
    pub fn wrap(
        &self,
        cli: &Path,
        args: &[String],
        writable: &[&str],
        cwd: &str,
    ) -> (PathBuf, Vec<OsString>) {
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |items: &[&str]| a.extend(items.iter().map(OsString::from));
        push(&["--ro-bind", "/usr", "/usr"]);
        for (dir, link) in &self.top {
            match link {
                Some(target) => push(&["--symlink", target, dir]),
                None => push(&["--ro-bind", dir, dir]),
            }
        }
        push(&["--tmpfs", "/etc"]);
        for name in ETC {
            let path = format!("/etc/{name}");
            push(&["--ro-bind-try", &path, &path]);
        }
        push(&["--remount-ro", "/etc"]);
        // A script CLI (`#!…`) needs its directory (its package) at its own path; a binary is
        // bound alone, so nothing of the directories around it shows.
        let real = std::fs::canonicalize(cli).unwrap_or_else(|_| cli.to_owned());
        let script = {
            use std::io::Read;
            let mut start = [0u8; 2];
            std::fs::File::open(&real)
                .and_then(|mut f| f.read_exact(&mut start))
                .is_ok_and(|()| &start == b"#!")
        };
        let inside: OsString = if script {
            let dir = real.parent().unwrap_or(Path::new("/")).as_os_str();
            a.extend(["--ro-bind".into(), dir.into(), dir.into()]);
            real.clone().into()
        } else {
            a.extend(["--ro-bind".into(), real.clone().into(), CLI_INSIDE.into()]);
            CLI_INSIDE.into()
        };
        let mut push = |items: &[&str]| a.extend(items.iter().map(OsString::from));
        push(&["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
        for dir in writable {
            push(&["--bind", dir, dir]);
        }
        push(&["--chdir", cwd]);
        push(&[
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--unshare-user",
            "--uid",
            SANDBOX_UID,
            "--gid",
            SANDBOX_UID,
            "--disable-userns",
            "--cap-drop",
            "ALL",
            "--die-with-parent",
            "--new-session",
            "--",
        ]);
        a.push(inside);
        a.extend(args.iter().map(OsString::from));
        (self.bwrap.clone(), a)
    }
}

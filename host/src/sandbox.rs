//! The OS sandbox of the gateway's CLIs: on Linux, each CLI runs under bubblewrap (`bwrap`)
//! with the system read-only, only its tenant's directories writable, no network but a proxy
//! to the model API, and the rest of the machine — the gateway's home and state, other
//! tenants, the processes outside, the session store — out of sight and out of reach.
//!
//! What the sandbox holds, in order of the arguments [`Sandbox::wrap`] gives:
//! - `/usr` read-only (with `/bin`, `/lib`… as on the host: links into it, or bound read-only);
//! - an empty `/etc` with only what programs need to run, resolve names and speak TLS bound in
//!   read-only ([`ETC`]), and a `passwd` and `group` of the sandbox's own (`root`, the
//!   sandbox's user `ccwire`, `nobody`): no `shadow`, no SSH keys, none of the files operators
//!   fill with credentials (`environment`, `profile.d`, `npmrc`, `pip.conf`, `gitconfig`,
//!   `default/`…);
//! - the CLI's executable at [`CLI_INSIDE`], read-only (a script CLI: its directory, at its
//!   own path), and the `ccwire` executable at [`RELAY_INSIDE`];
//! - a fresh `/proc` (its own process namespace: no other process is visible), a minimal
//!   `/dev`, an empty `/tmp`;
//! - the gateway's run directory at [`RUN_INSIDE`], read-only: the proxy's socket;
//! - the tenant's home, working and temporary directories, writable, at their own paths
//!   (directories the gateway made without following a link, whose parents no tenant
//!   writes: [`crate::beneath`]);
//! - its own user namespace with an unprivileged uid and no capabilities, no nested user
//!   namespaces, a new session (no terminal to inject into);
//! - its own network namespace: a loopback interface and no route out. Its first process is
//!   the relay ([`crate::egress::relay`]), which carries connections to
//!   [`RELAY_ADDR`](crate::egress::RELAY_ADDR) to the gateway's proxy
//!   ([`crate::egress::Egress`]), which reaches the model API and the hosts the operator
//!   allowed only.
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
/// loader's, name resolution, TLS roots, time zones, the tools' data, and Claude Code's
/// managed settings. Nothing an operator usually fills with secrets: not `environment`,
/// `profile`, `profile.d`, `bash.bashrc`, `default/`, `npmrc`, `pip.conf`, `gitconfig`,
/// `wgetrc`; not the host's `passwd` and `group` (the sandbox has its own), `hostname` or
/// `machine-id`.
pub const ETC: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
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
    "shells",
    "terminfo",
    "mime.types",
    "magic",
    "os-release",
    "services",
    "protocols",
    "locale.alias",
    "claude-code",
];

/// Where the gateway's run directory (the proxy's socket, the sandbox's `passwd` and
/// `group`) is inside the sandbox.
pub const RUN_INSIDE: &str = "/run/ccwire";

/// Where the `ccwire` executable (the sandbox's first process, the relay) is inside the
/// sandbox.
pub const RELAY_INSIDE: &str = "/opt/ccwire/ccwire";

/// The name of the proxy's socket in the run directory.
pub const SOCKET: &str = "egress.sock";

/// The sandbox's own `/etc/passwd`: its user (uid [`SANDBOX_UID`]), and the users a process
/// may see as owners of files.
const PASSWD: &str = "root:x:0:0:root:/root:/usr/sbin/nologin\n\
ccwire:x:1000:1000:ccwire:/tmp:/bin/bash\n\
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";

/// The sandbox's own `/etc/group`.
const GROUP: &str = "root:x:0:\nccwire:x:1000:\nnogroup:x:65534:\n";

/// The uid and gid a sandboxed CLI runs as (it has no capabilities either way).
const SANDBOX_UID: &str = "1000";

/// A working bubblewrap, found and tried.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
    /// `/bin`, `/lib`…: `(path, Some(link target))` for a link, `(path, None)` for a directory.
    top: Vec<(String, Option<String>)>,
    /// The gateway's run directory, bound at [`RUN_INSIDE`].
    run: PathBuf,
    /// The `ccwire` executable, bound at [`RELAY_INSIDE`].
    relay: PathBuf,
}

/// What a sandbox is made with.
#[derive(Debug, Clone)]
pub struct SandboxSetup {
    /// A directory of the gateway's own (made owner-only when missing) for the proxy's socket
    /// and the sandbox's `passwd` and `group`; its path must leave room for the socket's
    /// name within the 107 bytes a socket's path may have.
    pub run: PathBuf,
    /// The `ccwire` executable, whose `sandbox-relay` command is each sandbox's first process.
    pub relay: PathBuf,
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

    /// What it says.
    pub fn why(&self) -> &str {
        &self.0
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
        setup: &SandboxSetup,
    ) -> Result<(Option<Sandbox>, Option<String>), SandboxError> {
        if mode == SandboxMode::Off {
            return Ok((None, None));
        }
        match Sandbox::find(setup).await {
            Ok(sandbox) => Ok((Some(sandbox), None)),
            Err(e) if mode == SandboxMode::Auto => Ok((None, Some(e.0))),
            Err(e) => Err(e),
        }
    }

    /// Finds `bwrap` on `PATH`, makes the run directory, and checks that the whole sandbox
    /// (its namespaces, its network, its relay) works here.
    ///
    /// # Errors
    /// Not Linux, no `bwrap`, `bwrap` cannot make the namespaces (its own words), or the relay
    /// does not run.
    pub async fn find(setup: &SandboxSetup) -> Result<Sandbox, SandboxError> {
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
        let run = std::path::absolute(&setup.run).unwrap_or_else(|_| setup.run.clone());
        if run.join(SOCKET).as_os_str().len() > 107 {
            return Err(SandboxError(format!(
                "the run directory's path is too long for a socket: {}",
                run.display()
            )));
        }
        let made = (|| {
            crate::store::private_dir(&run)?;
            let dir = crate::beneath::Dir::open(&run)?;
            dir.write_atomically("passwd", PASSWD.as_bytes())?;
            dir.write_atomically("group", GROUP.as_bytes())?;
            crate::beneath::make_dir_below(&run, &run.join("probe")).map(drop)
        })();
        made.map_err(|e| SandboxError(format!("cannot make {}: {e}", run.display())))?;
        if !setup.relay.is_file() {
            return Err(SandboxError(format!(
                "the relay {} is not there",
                setup.relay.display()
            )));
        }
        let sandbox = Sandbox {
            bwrap,
            top,
            run: run.clone(),
            relay: setup.relay.clone(),
        };
        // The real arguments around `echo`, in a directory of its own: what it prints says
        // the relay is `ccwire`'s and ran it.
        let probe = run.join("probe").to_string_lossy().into_owned();
        let said = "ccwire-sandbox-probe";
        let (program, args) = sandbox.wrap(
            Path::new("/usr/bin/echo"),
            &[said.to_owned()],
            &[&probe],
            &probe,
        );
        let output = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(std::time::Duration::from_secs(30), output)
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("it did not end within 30 s")));
        match output {
            Ok(out) if out.status.success() && out.stdout.trim_ascii() == said.as_bytes() => {
                Ok(sandbox)
            }
            Ok(out) if out.status.success() => Err(SandboxError(format!(
                "{} is not a ccwire executable whose sandbox-relay runs a command",
                setup.relay.display()
            ))),
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

    /// Where the proxy a sandboxed process reaches ([`crate::egress::Egress`]) must serve.
    pub fn socket(&self) -> PathBuf {
        self.run.join(SOCKET)
    }

    /// The program and arguments that run `cli` with `args` in the sandbox, with `writable`
    /// directories (the tenant's) writable at their own paths and `cwd` the working
    /// directory. The environment is the spawned command's own; it should hold
    /// [`crate::egress::proxy_env`].
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
        for name in ["passwd", "group"] {
            a.extend([
                "--ro-bind".into(),
                self.run.join(name).into(),
                format!("/etc/{name}").into(),
            ]);
        }
        let mut push = |items: &[&str]| a.extend(items.iter().map(OsString::from));
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
        a.extend([
            "--ro-bind".into(),
            self.relay.clone().into(),
            RELAY_INSIDE.into(),
        ]);
        let mut push = |items: &[&str]| a.extend(items.iter().map(OsString::from));
        push(&["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
        a.extend([
            "--ro-bind".into(),
            self.run.clone().into(),
            RUN_INSIDE.into(),
        ]);
        let mut push = |items: &[&str]| a.extend(items.iter().map(OsString::from));
        for dir in writable {
            push(&["--bind", dir, dir]);
        }
        push(&["--chdir", cwd]);
        push(&[
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-net",
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
            RELAY_INSIDE,
            "sandbox-relay",
            &format!("{RUN_INSIDE}/{SOCKET}"),
            "--",
        ]);
        a.push(inside);
        a.extend(args.iter().map(OsString::from));
        (self.bwrap.clone(), a)
    }
}

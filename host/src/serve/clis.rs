//! The CLI processes: their start (in the sandbox, with the tenant's directories made
//! without following a link), their output read into the gateway, their end, and the memory
//! they take.

use super::*;

/// Every two seconds, the memory the CLIs take (their process trees' proportional set size);
/// over `budget`, the gateway hibernates as many idle CLIs as the excess is worth. Ends with
/// the gateway.
pub(super) async fn memory_watch(app: std::sync::Weak<App>, budget: u64) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tick.tick().await;
        let Some(app) = app.upgrade() else {
            return;
        };
        let pids: Vec<u32> = app.core().clis.values().map(|c| c.pid).collect();
        let pids: Vec<u32> = pids.into_iter().filter(|p| *p != 0).collect();
        if pids.is_empty() {
            continue;
        }
        let used = tokio::task::spawn_blocking({
            let pids = pids.clone();
            move || pids.iter().map(|p| tree_pss(*p)).sum::<u64>()
        })
        .await
        .unwrap_or(0);
        if used <= budget {
            continue;
        }
        let each = (used / pids.len() as u64).max(1);
        let over = (used - budget).div_ceil(each) as usize;
        let closed = app.input(|gateway, now| gateway.hibernate_idle(now, over));
        if closed > 0 {
            tracing::info!(
                used_mib = used >> 20,
                budget_mib = budget >> 20,
                closed,
                "over the memory budget: idle CLIs hibernated"
            );
        }
    }
}

/// The proportional set size of a process and its descendants, in bytes (0 where unreadable).
pub(super) fn tree_pss(pid: u32) -> u64 {
    let own = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("Pss:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024);
    let children: u64 = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|children| {
            children
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .map(tree_pss)
        .sum();
    own + children
}

/// Why a CLI did not start: in full for the log, and without the gateway's paths for the
/// client.
pub(super) struct SpawnFailure {
    pub(super) detail: String,
    pub(super) reason: String,
}

/// The directory of the tenants' directories in the state directory `dir`.
pub(super) fn tenant_root(dir: &Path) -> PathBuf {
    std::path::absolute(dir)
        .unwrap_or_else(|_| dir.to_owned())
        .join("tenants")
}

/// Reads a CLI's stdout into the gateway until it ends, then reports its exit. Once the
/// gateway has closed the session (its stdin closed), its output is no longer read and it has
/// [`CLOSE_GRACE`] to exit by itself. Once it has ended, what its tools left running is killed.
pub(super) async fn run_cli(
    app: Arc<App>,
    session: SessionId,
    mut process: CliProcess,
    mut stdout: ChildStdout,
    mut closed: tokio::task::JoinHandle<()>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut trace = Vec::new();
    loop {
        tokio::select! {
            read = stdout.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    trace_lines("<", &mut trace, &buf[..n]);
                    app.input(|gateway, now| gateway.handle_stdout(now, session, &buf[..n]));
                }
            },
            _ = &mut closed => break,
        }
    }
    drop(stdout);
    let exit = process.shutdown(CLOSE_GRACE).await.unwrap_or_else(|error| {
        tracing::warn!(session, %error, "cannot wait for a Claude Code session");
        crate::process::ExitInfo::default()
    });
    let stderr = process.stderr().text();
    tracing::info!(session, ?exit, stderr = %stderr.trim_end(), "a Claude Code session ended");
    // In the sandbox its PID namespace ended with it, and everything in it.
    if app.sandbox.is_none() {
        let mark = app.marks.of(session);
        let _ = tokio::task::spawn_blocking(move || crate::tree::sweep_session(&mark)).await;
    }
    app.input(|gateway, now| {
        gateway.handle_exit(now, session, exit.code, exit.signal, &stderr);
    });
    let mut core = app.core();
    core.clis.remove(&session);
    core.working.remove(&session);
}

/// Deletes a deleted Managed Agents session's directory ([`GatewayOutput::RemoveDir`]) once
/// no CLI process works in it any more (one closed just before has [`CLOSE_GRACE`] to exit).
/// Only a directory of a session under the tenants' root is deleted.
pub(super) async fn remove_when_unused(app: Arc<App>, path: String) {
    let root = app.tenant_root();
    let inside = root.is_some_and(|root| {
        Path::new(&path).starts_with(&root) && path.contains("/sessions/") && !path.contains("..")
    });
    if !inside {
        tracing::warn!(path, "not a session's directory: left alone");
        return;
    }
    let deadline = tokio::time::Instant::now() + CLOSE_GRACE + Duration::from_secs(10);
    while app.core().working.values().any(|cwd| *cwd == path) {
        if tokio::time::Instant::now() > deadline {
            tracing::warn!(
                path,
                "a CLI still works in a deleted session's directory: left alone"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    match tokio::fs::remove_dir_all(&path).await {
        Ok(()) => tracing::info!(path, "deleted a deleted session's directory"),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => tracing::warn!(path, %error, "cannot delete a deleted session's directory"),
    }
}

/// Logs whole lines read (`<`) or written (`>`) at TRACE (`ccwire::wire`), keeping a partial
/// line for later.
pub(super) fn trace_lines(direction: &str, partial: &mut Vec<u8>, bytes: &[u8]) {
    if tracing::enabled!(target: "ccwire::wire", tracing::Level::TRACE) {
        partial.extend_from_slice(bytes);
        let end = partial
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        for line in partial.drain(..end).as_slice().split(|b| *b == b'\n') {
            if !line.is_empty() {
                let line = String::from_utf8_lossy(line);
                tracing::trace!(target: "ccwire::wire", "{direction} {line}");
            }
        }
    }
}

impl App {
    /// Starts a CLI that resumes a stored conversation, once its transcript is written where
    /// the CLI reads it; what the gateway writes to it meanwhile waits.
    pub(super) fn spawn_resumed(
        self: &Arc<Self>,
        core: &mut Core,
        session: SessionId,
        spec: CliSpec,
    ) {
        let Some(resume) = spec.resume.clone() else {
            return;
        };
        let (lines, to_write) = mpsc::unbounded_channel::<Vec<u8>>();
        core.clis.insert(
            session,
            Cli {
                stdin: lines,
                pid: 0,
            },
        );
        let (done, written) = tokio::sync::oneshot::channel();
        let home = spec.tenant.as_ref().map(|d| PathBuf::from(&d.home));
        match resume.written.clone() {
            None => self.to_store(StoreOp::Resume {
                spec: resume.clone(),
                home,
                done,
            }),
            Some(history) => {
                // A history the gateway writes: its lines made here, off the engine's lock, kept
                // in the store before its CLI starts (beside the store's worker: a new
                // conversation's first lines, which can be tens of megabytes, hold up no other
                // conversation's writes) and written where the CLI reads them.
                let store = self.options.store.clone();
                let (key, path) = (resume.key.clone(), resume.path.clone());
                let usage = self.clone();
                tokio::spawn(async move {
                    let made = tokio::task::spawn_blocking(move || history.lines()).await;
                    let Ok(entries) = made else {
                        let _ = done.send(Err(NotResumed::failed("the transcript was not made")));
                        return;
                    };
                    let lines: Vec<String> = entries.iter().map(|e| e.get().to_owned()).collect();
                    drop(entries);
                    if let Some(store) = store {
                        let kept = tokio::time::timeout(
                            super::store_worker::STORE_TIMEOUT,
                            store.append(&key, lines.clone()),
                        )
                        .await;
                        let error = match kept {
                            Ok(Ok(bytes)) => {
                                if usage.options.engine.store_quota.is_some() {
                                    let tenant = key.tenant.clone();
                                    usage.input(|gateway, now| {
                                        let answer = StoreAnswer::Usage { tenant, bytes };
                                        gateway.handle_store(now, answer)
                                    });
                                }
                                None
                            }
                            Ok(Err(error)) => Some(error.to_string()),
                            Err(_) => Some("the session store did not answer in time".to_owned()),
                        };
                        if let Some(error) = error {
                            let _ = done.send(Err(NotResumed::unavailable(error)));
                            return;
                        }
                    }
                    let written = tokio::task::spawn_blocking(move || {
                        materialize(&lines, &PathBuf::from(&path), &key.id, home.as_deref())
                    })
                    .await;
                    let written = match written {
                        Ok(written) => written.map_err(|e| NotResumed::failed(e.to_string())),
                        Err(e) => Err(NotResumed::failed(e.to_string())),
                    };
                    let _ = done.send(written);
                });
            }
        }
        let app = self.clone();
        tokio::spawn(async move {
            let written = written
                .await
                .unwrap_or_else(|_| Err(NotResumed::unavailable("the session store stopped")));
            app.input_core(|core, now| {
                // Closed meanwhile (its client went away).
                if !core.clis.contains_key(&session) {
                    return;
                }
                if let Err(NotResumed {
                    detail,
                    unavailable: true,
                }) = &written
                {
                    let id = &resume.key.id;
                    tracing::warn!(session, error = %detail, "cannot read conversation {id} from the session store");
                    core.clis.remove(&session);
                    core.gateway.handle_store(now, StoreAnswer::ResumeUnavailable { session });
                    return;
                }
                let started = written
                    .map_err(|error| SpawnFailure {
                        detail: format!(
                            "cannot resume conversation {}: {}",
                            resume.key.id, error.detail
                        ),
                        reason: "the stored conversation cannot be read".to_owned(),
                    })
                    .and_then(|()| app.spawn(core, session, &spec, Some(to_write)));
                if let Err(failure) = started {
                    let error = &failure.detail;
                    tracing::warn!(session, %error, "cannot start a Claude Code session");
                    core.clis.remove(&session);
                    core.gateway
                        .handle_spawn_failed(now, session, &failure.reason);
                }
            });
        });
    }

    /// Starts a session's CLI and the tasks that move its bytes.
    pub(super) fn spawn(
        self: &Arc<Self>,
        core: &mut Core,
        session: SessionId,
        spec: &CliSpec,
        writes: Option<mpsc::UnboundedReceiver<Vec<u8>>>,
    ) -> Result<(), SpawnFailure> {
        let path = self.claude.clone().map_err(|detail| SpawnFailure {
            detail,
            reason: "the gateway has no Claude Code CLI".to_owned(),
        })?;
        if let (Some(dirs), Some(root)) = (&spec.tenant, self.tenant_root()) {
            // A Managed Agents session's own working directory is beside the tenant's.
            let own_cwd = (spec.cwd.as_ref()).filter(|cwd| {
                !dirs.sessions.is_empty() && cwd.starts_with(&format!("{}/", dirs.sessions))
            });
            // Each made or opened one component at a time, no link followed: the bubblewrap
            // binds below are of directories whose every parent the gateway alone writes.
            let made = crate::store::private_dir(&root).and_then(|()| {
                [&dirs.home, &dirs.work, &dirs.tmp]
                    .into_iter()
                    .chain(own_cwd)
                    .try_for_each(|dir| {
                        crate::beneath::make_dir_below(&root, Path::new(dir)).map(drop)
                    })
            });
            made.map_err(|e| SpawnFailure {
                detail: format!(
                    "cannot make the tenant directories under {}: {e}",
                    root.display()
                ),
                reason: format!("cannot make the conversation's directories: {e}"),
            })?;
        }
        let cwd = spec.cwd.as_deref().map(Path::new);
        let mark = (MARKER_ENV.to_owned(), self.marks.of(session));
        let proxy = match (&self.egress, &spec.tenant) {
            (Some(egress), Some(_)) => {
                for url in &spec.egress {
                    egress.allow_url(url);
                }
                crate::egress::proxy_env()
            }
            _ => Vec::new(),
        };
        let set = spec.env.iter().cloned().chain(proxy).chain([mark]);
        let (program, args) = match (&self.sandbox, &spec.tenant) {
            (Some(sandbox), Some(dirs)) => {
                let mut writable = vec![dirs.home.as_str(), dirs.work.as_str(), dirs.tmp.as_str()];
                writable.extend(spec.cwd.as_deref().filter(|c| *c != dirs.work));
                let cwd = spec.cwd.as_deref().unwrap_or(&dirs.work);
                sandbox.wrap(&path, &spec.args, &writable, cwd)
            }
            _ => (path, spec.args.iter().map(Into::into).collect()),
        };
        let mut process = CliProcess::spawn_command(&program, &args, cwd, set, &spec.env_remove)
            .map_err(|e| SpawnFailure {
                reason: match &e {
                    crate::process::SpawnError::Io { source, .. } => source.to_string(),
                    crate::process::SpawnError::NotFound(_) => {
                        "the gateway has no Claude Code CLI".to_owned()
                    }
                },
                detail: e.to_string(),
            })?;
        let pid = process.pid();
        let (Some(mut stdin), Some(stdout)) = (process.take_stdin(), process.take_stdout()) else {
            return Err(SpawnFailure {
                detail: "the CLI's pipes are missing".to_owned(),
                reason: "the CLI's pipes are missing".to_owned(),
            });
        };
        let (lines, mut to_write) = match writes {
            Some(waiting) => (None, waiting),
            None => {
                let (lines, to_write) = mpsc::unbounded_channel::<Vec<u8>>();
                (Some(lines), to_write)
            }
        };
        // Ends (dropping stdin, which closes it) once the session is closed.
        let closed = tokio::spawn(async move {
            let mut open = true;
            while let Some(bytes) = to_write.recv().await {
                open = open && stdin.write_all(&bytes).await.is_ok();
            }
        });
        match lines {
            Some(lines) => {
                core.clis.insert(session, Cli { stdin: lines, pid });
            }
            None => {
                if let Some(cli) = core.clis.get_mut(&session) {
                    cli.pid = pid;
                }
            }
        }
        tracing::info!(session, pid, "started a Claude Code session");
        if let Some(cwd) = &spec.cwd {
            core.working.insert(session, cwd.clone());
        }
        let task = tokio::spawn(run_cli(self.clone(), session, process, stdout, closed));
        let mut tasks = self.tasks.lock().expect("tasks lock");
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
        Ok(())
    }
}

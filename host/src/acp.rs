//! `ccwire acp`: Claude Code for editors that speak the Agent Client Protocol. The editor's
//! JSON-RPC on stdin and stdout, one CLI per session; the protocol is the core's
//! `ccwire_core::acp::Agent`; this is its IO (docs/ACP.md).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccwire_core::acp::{AcpOutput, Agent, AgentConfig, CliId, TranscriptHead};
use ccwire_core::args::CliArgs;
use ccwire_core::framing::{Frame, LineFramer};
use ccwire_host::record::{Direction, TranscriptWriter};
use ccwire_host::{ClaudeOptions, CliProcess};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Arguments of `ccwire acp`.
#[derive(Debug, clap::Args)]
pub struct AcpArgs {
    /// The `claude` executable (default: $CCWIRE_CLAUDE, then `claude` on PATH).
    #[arg(long)]
    claude: Option<PathBuf>,
    /// The model every session starts with (default: the CLI's).
    #[arg(long)]
    model: Option<String>,
    /// The permission mode sessions start in (`default`, `acceptEdits`, `plan`,
    /// `bypassPermissions`); the editor switches it per session.
    #[arg(long)]
    permission_mode: Option<String>,
    /// The settings files the CLI loads, comma-separated (`user`, `project`, `local`), with
    /// their CLAUDE.md files, hooks, skills and plugins; `""` for none.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        default_value = "user,project,local"
    )]
    setting_sources: Vec<String>,
    /// Write each session's CLI transcript to `DIR/<session id>.jsonl` (a session loaded
    /// again: `<session id>-1.jsonl`, …), as `ccwire record` writes one (`ccwire play` plays it
    /// back as the CLI).
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// Let the CLIs use their own Read, Write, Edit and Bash even where the editor offers its
    /// files and terminals (the CLI's permission rules, such as `Read(./.env)` in `deny`, name
    /// its own tools only).
    #[arg(long)]
    no_editor_tools: bool,
    /// Log in to Claude Code (`claude auth login`) in this terminal, then exit: what an editor
    /// runs for the `claude-login` authentication method.
    #[arg(long)]
    login: bool,
}

/// Runs `ccwire acp` until the editor closes its stdin and every CLI has ended.
pub fn acp(args: AcpArgs) -> ExitCode {
    if args.login {
        return login(args.claude.as_deref());
    }
    crate::run::init_tracing();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts");
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ccwire acp: {err}");
            ExitCode::FAILURE
        }
    }
}

/// What the loop waits for.
enum Event {
    Input(Vec<u8>),
    InputEof,
    CliOut(CliId, Vec<u8>),
    CliExit(CliId, Option<i32>, Option<i32>),
    /// A transcript read off the loop: the session's, or `None`.
    Transcript(String, Option<Vec<u8>>),
    /// The transcripts of a session list.
    Transcripts(u64, Vec<TranscriptHead>),
}

/// A running CLI: its stdin's writer, and how to ask it to end.
struct Cli {
    stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
    stop: Option<oneshot::Sender<()>>,
    record: Option<Recorder>,
}

type Recorder = Arc<Mutex<(TranscriptWriter<io::BufWriter<std::fs::File>>, Instant)>>;

async fn serve(args: AcpArgs) -> io::Result<()> {
    if let Some(dir) = &args.record {
        std::fs::create_dir_all(dir)?;
    }
    let mut id_key = [0u8; 32];
    getrandom::getrandom(&mut id_key).map_err(|e| io::Error::other(e.to_string()))?;
    let cli = CliArgs {
        model: args.model.clone(),
        permission_mode: args.permission_mode.clone(),
        setting_sources: args.setting_sources.clone(),
        ..CliArgs::default()
    };
    let mut agent = Agent::new(AgentConfig {
        cli,
        id_key,
        version: crate::cli::VERSION.to_owned(),
        editor_tools: !args.no_editor_tools,
        ..AgentConfig::default()
    });
    let start = Instant::now();
    let now = || start.elapsed().as_millis() as u64;
    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(read_input(tx.clone()));
    let mut stdout = tokio::io::stdout();
    let mut clis: BTreeMap<CliId, Cli> = BTreeMap::new();
    let mut input_open = true;
    loop {
        while let Some(output) = agent.poll_output() {
            match output {
                AcpOutput::Send(line) => stdout.write_all(&line).await?,
                AcpOutput::Spawn {
                    cli,
                    session_id,
                    cwd,
                    args: cli_args,
                } => {
                    let options = ClaudeOptions {
                        claude: args.claude.clone(),
                        args: *cli_args,
                        cwd: Some(cwd.into()),
                        ..ClaudeOptions::default()
                    };
                    match start_cli(cli, &options, &session_id, args.record.as_ref(), &tx) {
                        Ok(started) => {
                            clis.insert(cli, started);
                        }
                        Err(err) => {
                            tracing::error!(session = %session_id, "cannot start the CLI: {err}");
                            agent.handle_cli_exit(now(), cli, Some(127), None);
                        }
                    }
                }
                AcpOutput::Write { cli, bytes } => {
                    if let Some(running) = clis.get(&cli) {
                        if let Some(record) = &running.record {
                            record_lines(record, Direction::In, &bytes);
                        }
                        if let Some(stdin) = &running.stdin {
                            let _ = stdin.send(bytes);
                        }
                    }
                }
                // Files are read off the loop: a long transcript holds up no session.
                AcpOutput::ReadTranscript { session_id, cwd } => {
                    let tx = tx.clone();
                    tokio::task::spawn_blocking(move || {
                        let transcript = read_transcript(&session_id, &cwd);
                        let _ = tx.send(Event::Transcript(session_id, transcript));
                    });
                }
                AcpOutput::ListTranscripts {
                    list,
                    cwd,
                    skip,
                    take,
                } => {
                    let tx = tx.clone();
                    tokio::task::spawn_blocking(move || {
                        let found = list_transcripts(cwd.as_deref(), skip, take);
                        let _ = tx.send(Event::Transcripts(list, found));
                    });
                }
                AcpOutput::Stop { cli } => {
                    if let Some(running) = clis.get_mut(&cli) {
                        running.stdin = None;
                        if let Some(stop) = running.stop.take() {
                            let _ = stop.send(());
                        }
                    }
                }
                _ => {}
            }
        }
        stdout.flush().await?;
        if !input_open && clis.is_empty() {
            return Ok(());
        }
        let deadline = agent.poll_timeout();
        let sleep = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(start + Duration::from_millis(at)).await,
                None => std::future::pending().await,
            }
        };
        let event = tokio::select! {
            event = rx.recv() => event,
            () = sleep => {
                agent.handle_timeout(now());
                continue;
            }
        };
        match event.expect("the loop holds a sender") {
            Event::Input(bytes) => agent.handle_input(now(), &bytes),
            Event::InputEof => {
                input_open = false;
                agent.handle_input_eof(now());
            }
            Event::CliOut(cli, bytes) => agent.handle_cli_stdout(now(), cli, &bytes),
            Event::Transcript(session_id, transcript) => {
                agent.handle_transcript(now(), &session_id, transcript.as_deref());
            }
            Event::Transcripts(list, found) => agent.handle_transcript_list(now(), list, found),
            Event::CliExit(cli, code, signal) => {
                if let Some(record) = clis.remove(&cli).and_then(|c| c.record) {
                    let mut record = record.lock().expect("not poisoned");
                    let t = record.1.elapsed().as_millis() as u64;
                    if let Some(code) = code {
                        let _ = record.0.note(t, &format!("CLI exit code {code}"));
                    }
                }
                agent.handle_cli_exit(now(), cli, code, signal);
            }
        }
    }
}

/// `ccwire acp --login`: the CLI's own login, in the editor's terminal.
fn login(claude: Option<&std::path::Path>) -> ExitCode {
    let claude = match ccwire_host::find_cli(claude) {
        Ok(claude) => claude,
        Err(err) => {
            eprintln!("ccwire acp: {err}");
            return ExitCode::FAILURE;
        }
    };
    match std::process::Command::new(&claude)
        .args(["auth", "login"])
        .status()
    {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("ccwire acp: cannot run {}: {err}", claude.display());
            ExitCode::FAILURE
        }
    }
}

/// Where the CLI keeps its transcripts: `$CLAUDE_CONFIG_DIR/projects`, else
/// `~/.claude/projects`.
fn projects_dir() -> Option<PathBuf> {
    let config = match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".claude"),
    };
    Some(config.join("projects"))
}

/// The directory of `projects` the CLI names after work directory `cwd`: each character not
/// a letter or digit a dash.
fn project_dir(projects: &std::path::Path, cwd: &str) -> PathBuf {
    let name: String = cwd
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    projects.join(name)
}

/// The CLI's transcript of `session_id` (a UUID, checked by the agent) for work directory
/// `cwd`; else the one file of that name in another project directory (the CLI shortens long
/// names). `None` if there is none.
fn read_transcript(session_id: &str, cwd: &str) -> Option<Vec<u8>> {
    let projects = projects_dir()?;
    let file = format!("{session_id}.jsonl");
    if let Ok(bytes) = std::fs::read(project_dir(&projects, cwd).join(&file)) {
        return Some(bytes);
    }
    let found = std::fs::read_dir(&projects)
        .ok()?
        .flatten()
        .map(|dir| dir.path().join(&file))
        .find(|path| path.is_file())?;
    match std::fs::read(&found) {
        Ok(bytes) => Some(bytes),
        Err(err) => {
            tracing::warn!("cannot read {}: {err}", found.display());
            None
        }
    }
}

/// The CLI's transcripts of work directory `cwd` (`None`: of every project directory), the
/// most recently changed first, entries `skip..skip + take`, each with its first 256 KiB.
fn list_transcripts(cwd: Option<&str>, skip: usize, take: usize) -> Vec<TranscriptHead> {
    use std::io::Read;
    let Some(projects) = projects_dir() else {
        return Vec::new();
    };
    let dirs: Vec<PathBuf> = match cwd {
        Some(cwd) => vec![project_dir(&projects, cwd)],
        None => std::fs::read_dir(&projects)
            .into_iter()
            .flatten()
            .flatten()
            .map(|dir| dir.path())
            .collect(),
    };
    let mut files: Vec<(u64, String, PathBuf)> = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let Some(id) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let Some(id) = id.strip_suffix(".jsonl") else {
                continue;
            };
            let modified = (entry.metadata().ok())
                .filter(std::fs::Metadata::is_file)
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            if let Some(modified) = modified {
                files.push((modified.as_millis() as u64, id.to_owned(), path));
            }
        }
    }
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    (files.into_iter().skip(skip).take(take))
        .filter_map(|(modified_ms, session_id, path)| {
            let mut head = Vec::new();
            let file = std::fs::File::open(&path).ok()?;
            file.take(256 * 1024).read_to_end(&mut head).ok()?;
            Some(TranscriptHead {
                session_id,
                modified_ms,
                head,
            })
        })
        .collect()
}

/// The editor's bytes, until it closes stdin.
async fn read_input(tx: mpsc::UnboundedSender<Event>) {
    let mut stdin = tokio::io::stdin();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stdin.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if tx.send(Event::Input(buf[..n].to_vec())).is_err() {
                    return;
                }
            }
        }
    }
    let _ = tx.send(Event::InputEof);
}

/// Starts a CLI, with a task that writes its stdin and one that reads its stdout until it ends.
fn start_cli(
    cli: CliId,
    options: &ClaudeOptions,
    session_id: &str,
    record_dir: Option<&PathBuf>,
    tx: &mpsc::UnboundedSender<Event>,
) -> Result<Cli, Box<dyn std::error::Error>> {
    let record = match record_dir {
        Some(dir) => {
            let file = new_recording(dir, session_id)?;
            Some(Arc::new(Mutex::new((
                TranscriptWriter::new(io::BufWriter::new(file)),
                Instant::now(),
            ))))
        }
        None => None,
    };
    let mut process = CliProcess::spawn(options)?;
    tracing::info!(session = %session_id, pid = process.pid(), "started the CLI");
    let mut stdin = process.take_stdin().expect("piped");
    let (stdin_tx, mut stdin_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        while let Some(bytes) = stdin_rx.recv().await {
            if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                break;
            }
        }
    });
    let (stop_tx, stop_rx) = oneshot::channel();
    tokio::spawn(run_cli(cli, process, tx.clone(), stop_rx, record.clone()));
    Ok(Cli {
        stdin: Some(stdin_tx),
        stop: Some(stop_tx),
        record,
    })
}

/// A new file for a CLI's transcript: `DIR/<session id>.jsonl`, or for the CLI of a session
/// loaded again `DIR/<session id>-<n>.jsonl` (an earlier recording is never overwritten).
fn new_recording(dir: &std::path::Path, session_id: &str) -> io::Result<std::fs::File> {
    for n in 0u32.. {
        let name = match n {
            0 => format!("{session_id}.jsonl"),
            n => format!("{session_id}-{n}.jsonl"),
        };
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => {
                return Err(io::Error::new(
                    err.kind(),
                    format!("cannot write {}: {err}", path.display()),
                ))
            }
            Ok(file) => return Ok(file),
        }
    }
    unreachable!("a free name")
}

/// Passes a CLI's stdout to the loop until it ends, or until the loop asks it to stop; then
/// reports its exit.
async fn run_cli(
    cli: CliId,
    mut process: CliProcess,
    tx: mpsc::UnboundedSender<Event>,
    mut stop: oneshot::Receiver<()>,
    record: Option<Recorder>,
) {
    let mut stdout = process.take_stdout().expect("piped");
    let mut framer = LineFramer::default();
    let mut buf = vec![0u8; 64 * 1024];
    let mut stopping = false;
    loop {
        tokio::select! {
            read = stdout.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Some(record) = &record {
                        let mut record = record.lock().expect("not poisoned");
                        let t = record.1.elapsed().as_millis() as u64;
                        framer.push(&buf[..n], |frame| record_frame(&mut record.0, Direction::Out, t, frame));
                    }
                    let _ = tx.send(Event::CliOut(cli, buf[..n].to_vec()));
                }
            },
            _ = &mut stop, if !stopping => {
                stopping = true;
                break;
            }
        }
    }
    let exit = if stopping {
        process.shutdown(Duration::from_secs(2)).await
    } else {
        process.wait().await
    };
    let (code, signal) = match exit {
        Ok(info) => (info.code, info.signal),
        Err(_) => (None, None),
    };
    if code != Some(0) && !stopping {
        let stderr = process.stderr().text();
        tracing::warn!(?code, ?signal, "the CLI ended: {}", stderr.trim());
    }
    let _ = tx.send(Event::CliExit(cli, code, signal));
}

fn record_lines(record: &Recorder, dir: Direction, bytes: &[u8]) {
    let mut record = record.lock().expect("not poisoned");
    let t = record.1.elapsed().as_millis() as u64;
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let _ = record.0.line(dir, t, line);
    }
}

fn record_frame<W: Write>(
    writer: &mut TranscriptWriter<W>,
    dir: Direction,
    t: u64,
    frame: Frame<'_>,
) {
    let written = match frame {
        Frame::Line(line) => writer.line(dir, t, line),
        Frame::TooLong { bytes } => writer.too_long(dir, t, bytes),
    };
    if let Err(err) = written {
        tracing::error!("cannot write the transcript: {err}");
    }
}

//! `ccwire run` and `ccwire record`.

use std::ffi::OsString;
use std::io::{self, BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use ccwire_core::{Chunk, PermissionDecision, ToolStatus, UserMessage};
use ccwire_host::client::PermissionRequest;
use ccwire_host::record::{Direction, TranscriptWriter};
use ccwire_host::{ClaudeOptions, CliArgs, Client, ClientError, ClientOptions};
use clap::ValueEnum;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Arguments of `ccwire run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The prompt.
    prompt: String,
    /// Print chunks as JSON lines instead of text.
    #[arg(long)]
    json: bool,
    /// What to answer when the CLI asks permission to run a tool.
    #[arg(long, value_enum, default_value_t = PermissionMode::Ask)]
    permission: PermissionMode,
    /// The `claude` executable (default: $CCWIRE_CLAUDE, then `claude` on PATH).
    #[arg(long)]
    claude: Option<PathBuf>,
    /// The model.
    #[arg(long)]
    model: Option<String>,
    /// Write a transcript of the session to this file.
    #[arg(long)]
    record: Option<PathBuf>,
    /// Stop the CLI, and fail, when it writes nothing for this many seconds during the turn
    /// while it waits for nothing from ccwire (default: no limit; a long tool run can be
    /// silent).
    #[arg(long, value_name = "SECS")]
    stall_timeout: Option<f64>,
    /// The settings files the CLI loads, comma-separated (`user`, `project`, `local`), with
    /// their hooks, skills and plugins: by default the working directory's local settings only,
    /// where "a" (always) saves its rules; `""` for none.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        default_value = "local"
    )]
    setting_sources: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PermissionMode {
    /// Allow every tool.
    Allow,
    /// Deny every tool that asks.
    Deny,
    /// Ask on the terminal (deny when there is no terminal).
    Ask,
}

/// Arguments of `ccwire record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The transcript file to write.
    #[arg(long)]
    out: PathBuf,
    /// The `claude` executable (default: $CCWIRE_CLAUDE, then `claude` on PATH).
    #[arg(long)]
    claude: Option<PathBuf>,
    /// Arguments for the CLI (after `--`).
    #[arg(last = true)]
    args: Vec<OsString>,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
}

/// Resolves on SIGINT or SIGTERM, so the CLI can be torn down before ccwire exits.
async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "interrupted",
        _ = term.recv() => "terminated",
    }
}

/// Runs `ccwire run`.
pub fn run(args: RunArgs) -> ExitCode {
    let outcome = runtime().block_on(async {
        tokio::select! {
            outcome = run_prompt(args) => outcome,
            why = shutdown_signal() => Err(ClientError::Stopped(why)),
        }
    });
    // Leaving the runtime drops the client, which kills the CLI's process group.
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(err) => {
            eprintln!("ccwire run: {err}");
            ExitCode::from(1)
        }
    }
}

async fn run_prompt(args: RunArgs) -> Result<bool, ClientError> {
    let claude = ClaudeOptions {
        claude: args.claude.clone(),
        args: CliArgs {
            model: args.model.clone(),
            include_partial_messages: true,
            setting_sources: (args.setting_sources.iter())
                .filter(|s| !s.is_empty())
                .cloned()
                .collect(),
            ..CliArgs::default()
        },
        ..ClaudeOptions::default()
    };
    let mode = args.permission;
    let options = ClientOptions {
        claude,
        record: args.record.clone(),
        stall_timeout: args
            .stall_timeout
            .map(|s| std::time::Duration::from_secs_f64(s.max(0.0))),
        ..ClientOptions::default()
    }
    .on_permission(move |request| async move { decide(mode, request).await });
    let mut client = Client::connect(options).await?;
    let mut turn = client.send(UserMessage::text(args.prompt.clone())).await?;
    let mut view = TextView::default();
    let mut ok = false;
    while let Some(chunk) = turn.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(err) => {
                view.end_line();
                return Err(err);
            }
        };
        if args.json {
            println!("{}", chunk.to_json());
        } else {
            view.show(&chunk);
        }
        if let Chunk::TurnComplete { is_error, .. } = chunk {
            ok = !is_error;
        }
    }
    view.end_line();
    client.close().await;
    Ok(ok)
}

async fn decide(mode: PermissionMode, request: PermissionRequest) -> PermissionDecision {
    match mode {
        PermissionMode::Allow => PermissionDecision::allow(),
        PermissionMode::Deny => {
            PermissionDecision::deny("Denied by `ccwire run --permission deny`.")
        }
        PermissionMode::Ask => {
            // The CLI's suggestions (a rule for this command, a mode, a directory) are what
            // "always" saves: the CLI applies them, to the session or to the settings file each
            // names, so it does not ask again.
            let suggestions: Vec<Value> =
                request.suggestions.as_array().cloned().unwrap_or_default();
            let always = (!suggestions.is_empty())
                .then(|| describe_suggestions(&suggestions))
                .map(|what| format!(", a = always ({what})"))
                .unwrap_or_default();
            let question = format!(
                "\nAllow {} {}? [y = yes, N = no{always}] ",
                request.tool_name,
                serde_json::to_string(&request.input).unwrap_or_default()
            );
            let answer = tokio::task::spawn_blocking(move || ask(&question))
                .await
                .unwrap_or_default();
            match answer.as_str() {
                "y" | "yes" => PermissionDecision::allow(),
                "a" | "always" if !suggestions.is_empty() => PermissionDecision::Allow {
                    updated_input: None,
                    updated_permissions: suggestions,
                },
                _ => PermissionDecision::deny("The user refused this tool."),
            }
        }
    }
}

/// What permission suggestions would save, in words: `Bash(npm test:*) in the local settings`.
fn describe_suggestions(suggestions: &[Value]) -> String {
    let mut parts = Vec::new();
    for suggestion in suggestions {
        let what = match suggestion["type"].as_str() {
            Some("addRules" | "replaceRules") => suggestion["rules"]
                .as_array()
                .map(|rules| {
                    rules
                        .iter()
                        .map(|r| match r["ruleContent"].as_str() {
                            Some(content) => {
                                format!("{}({content})", r["toolName"].as_str().unwrap_or(""))
                            }
                            None => r["toolName"].as_str().unwrap_or("").to_owned(),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default(),
            Some("setMode") => format!("mode {}", suggestion["mode"].as_str().unwrap_or("")),
            Some("addDirectories") => format!("directories {}", suggestion["directories"]),
            Some(other) => other.to_owned(),
            None => continue,
        };
        let where_ = match suggestion["destination"].as_str() {
            Some("session") => "for this session".to_owned(),
            Some("localSettings") => "in the local settings".to_owned(),
            Some("projectSettings") => "in the project settings".to_owned(),
            Some("userSettings") => "in the user settings".to_owned(),
            Some(other) => format!("in {other}"),
            None => String::new(),
        };
        parts.push(format!("{what} {where_}").trim().to_owned());
    }
    parts.join("; ")
}

/// Asks on the terminal and returns the answer, trimmed and lowercase; no terminal means no
/// answer.
fn ask(question: &str) -> String {
    let Ok(tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return String::new();
    };
    if !tty.is_terminal() {
        return String::new();
    }
    let mut writer = &tty;
    let _ = writer.write_all(question.as_bytes());
    let mut answer = String::new();
    let _ = io::BufReader::new(&tty).read_line(&mut answer);
    answer.trim().to_lowercase()
}

/// Streams text to stdout and tool calls with their status as they change.
#[derive(Default)]
struct TextView {
    mid_line: bool,
    names: std::collections::HashMap<String, String>,
}

impl TextView {
    fn show(&mut self, chunk: &Chunk) {
        let mut out = io::stdout().lock();
        match chunk {
            Chunk::TextDelta {
                text,
                parent_tool_use_id: None,
                ..
            } => {
                let _ = out.write_all(text.as_bytes());
                self.mid_line = !text.ends_with('\n');
            }
            Chunk::ToolUse {
                id,
                name,
                complete: true,
                input,
                ..
            } => {
                self.names.insert(id.clone(), name.clone());
                self.line(&mut out, &format!("⏺ {name} {input}"));
            }
            Chunk::ToolStatus { id, status, reason } => {
                let name = self.names.get(id).cloned().unwrap_or_else(|| id.clone());
                let reason = reason
                    .map(|r| {
                        format!(
                            " ({})",
                            serde_json::to_value(r)
                                .unwrap_or_default()
                                .as_str()
                                .unwrap_or("")
                        )
                    })
                    .unwrap_or_default();
                if *status != ToolStatus::Pending {
                    self.line(&mut out, &format!("  {name}: {}{reason}", status.as_str()));
                }
            }
            Chunk::ToolResult {
                id,
                content,
                is_error,
                ..
            } => {
                let name = self.names.get(id).cloned().unwrap_or_else(|| id.clone());
                let mut text = content
                    .to_value()
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| content.to_string());
                if text.len() > 200 {
                    let mut end = 200;
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text.truncate(end);
                    text.push('…');
                }
                let mark = if *is_error { "✗" } else { "⎿" };
                self.line(
                    &mut out,
                    &format!("  {mark} {name}: {}", text.replace('\n', " ")),
                );
            }
            Chunk::TurnComplete {
                is_error: true,
                result,
                errors,
                ..
            } => {
                // The turn's error goes to stderr, as ccwire's own errors do: stdout keeps the
                // answer only.
                let text = result.clone().unwrap_or_else(|| errors.to_string());
                if self.mid_line {
                    let _ = out.write_all(b"\n");
                    self.mid_line = false;
                }
                let _ = out.flush();
                eprintln!("ccwire run: the turn failed: {text}");
            }
            _ => {}
        }
        let _ = out.flush();
    }

    fn line(&mut self, out: &mut impl Write, text: &str) {
        if self.mid_line {
            let _ = out.write_all(b"\n");
            self.mid_line = false;
        }
        let _ = writeln!(out, "{text}");
    }

    fn end_line(&mut self) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
    }
}

/// Runs `ccwire record`.
pub fn record(args: RecordArgs) -> ExitCode {
    let outcome = runtime().block_on(async {
        tokio::select! {
            outcome = record_session(args) => outcome,
            why = shutdown_signal() => Err(why.into()),
        }
    });
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("ccwire record: {err}");
            ExitCode::from(2)
        }
    }
}

async fn record_session(args: RecordArgs) -> Result<u8, Box<dyn std::error::Error>> {
    let path = ccwire_host::find_cli(args.claude.as_deref())?;
    let file = std::fs::File::create(&args.out)
        .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    let writer = std::sync::Arc::new(std::sync::Mutex::new(TranscriptWriter::new(
        io::BufWriter::new(file),
    )));
    let mut child = tokio::process::Command::new(&path)
        .args(&args.args)
        .process_group(0)
        .env_remove("CLAUDECODE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", path.display()))?;
    let start = tokio::time::Instant::now();
    let mut child_stdin = child.stdin.take().expect("piped");
    let mut child_stdout = child.stdout.take().expect("piped");

    let in_writer = writer.clone();
    let pump_in = tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let mut framer = ccwire_core::framing::LineFramer::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match stdin.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let now = start.elapsed().as_millis() as u64;
            framer.push(&buf[..n], |frame| {
                record_frame(&in_writer, Direction::In, now, frame)
            });
            if child_stdin.write_all(&buf[..n]).await.is_err() {
                break;
            }
            let _ = child_stdin.flush().await;
        }
        let now = start.elapsed().as_millis() as u64;
        framer.finish(|frame| record_frame(&in_writer, Direction::In, now, frame));
        let _ = in_writer
            .lock()
            .expect("not poisoned")
            .note(now, "stdin EOF from host; closing CLI stdin");
    });

    let mut stdout = tokio::io::stdout();
    let mut framer = ccwire_core::framing::LineFramer::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match child_stdout.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let now = start.elapsed().as_millis() as u64;
        framer.push(&buf[..n], |frame| {
            record_frame(&writer, Direction::Out, now, frame)
        });
        stdout.write_all(&buf[..n]).await?;
        stdout.flush().await?;
    }
    let now = start.elapsed().as_millis() as u64;
    framer.finish(|frame| record_frame(&writer, Direction::Out, now, frame));
    let status = child.wait().await?;
    pump_in.abort();
    // `ccwire play` exits with the recorded status.
    if let Some(code) = status.code() {
        let now = start.elapsed().as_millis() as u64;
        let _ = writer
            .lock()
            .expect("not poisoned")
            .note(now, &format!("CLI exit code {code}"));
    }
    let code = status.code().unwrap_or(1).clamp(0, 255) as u8;
    Ok(code)
}

fn record_frame<W: Write>(
    writer: &std::sync::Mutex<TranscriptWriter<W>>,
    dir: Direction,
    now: u64,
    frame: ccwire_core::framing::Frame<'_>,
) {
    let mut writer = writer.lock().expect("not poisoned");
    let written = match frame {
        ccwire_core::framing::Frame::Line(line) => writer.line(dir, now, line),
        ccwire_core::framing::Frame::TooLong { bytes } => writer.too_long(dir, now, bytes),
    };
    if let Err(err) = written {
        eprintln!("ccwire record: cannot write the transcript: {err}");
    }
}

/// Logs to stderr; `RUST_LOG` picks the level (default: info for ccwire, warn otherwise).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,ccwire_host=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

//! Command-line parsing and the subcommands.

use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use ccwire_core::api::response::{EncoderOptions, Outcome, ResponseEncoder};
use ccwire_core::api::Api;
use ccwire_core::{Chunk, ErrorKind, Replayer, SessionConfig};
use clap::{Parser, Subcommand};
use serde_json::json;

/// ccwire: the Claude Code SDK wire protocol, done once.
#[derive(Debug, Parser)]
#[command(name = "ccwire", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay a transcript through the core and print one chunk per line as JSON.
    Replay(ReplayArgs),
    /// Run one prompt through the Claude Code CLI and stream the answer.
    Run(crate::run::RunArgs),
    /// Run the CLI with the given arguments, pass stdin and stdout through, and write a
    /// transcript of both directions.
    Record(crate::run::RecordArgs),
}

#[derive(Debug, clap::Args)]
struct ReplayArgs {
    /// The transcript (`{"dir","t_ms","msg"}` lines or bare stream-json); `-` reads stdin.
    file: PathBuf,
    /// Print the state at the end of the input instead of the chunks.
    #[arg(long)]
    final_state: bool,
    /// Exit with status 1 when the input had malformed lines.
    #[arg(long)]
    strict: bool,
    /// The longest line accepted, in bytes.
    #[arg(long, default_value_t = ccwire_core::framing::DEFAULT_LINE_LIMIT)]
    line_limit: usize,
    /// What to print: the chunks, or the responses an HTTP client of `ccwire serve` would get
    /// (tools named `mcp__client__*` count as the client's tools).
    #[arg(long, value_enum, default_value_t = Format::Chunks)]
    format: Format,
}

/// Output formats of `ccwire replay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// One chunk per line as JSON.
    Chunks,
    /// Anthropic Messages API server-sent events, one response after another.
    AnthropicSse,
    /// OpenAI Chat Completions server-sent events, one response after another.
    OpenaiSse,
    /// Anthropic Messages API response bodies, one per line.
    AnthropicJson,
    /// OpenAI Chat Completions response bodies, one per line.
    OpenaiJson,
}

/// Turns the chunks of a replay into API responses, one after another.
struct Responses {
    api: Api,
    stream: bool,
    encoder: ResponseEncoder,
}

impl Responses {
    fn new(format: Format) -> Option<Responses> {
        let (api, stream) = match format {
            Format::Chunks => return None,
            Format::AnthropicSse => (Api::Anthropic, true),
            Format::OpenaiSse => (Api::OpenAi, true),
            Format::AnthropicJson => (Api::Anthropic, false),
            Format::OpenaiJson => (Api::OpenAi, false),
        };
        Some(Responses {
            api,
            stream,
            encoder: Self::encoder(api, stream),
        })
    }

    fn encoder(api: Api, stream: bool) -> ResponseEncoder {
        ResponseEncoder::new(EncoderOptions {
            api,
            stream,
            model: "claude-code".to_owned(),
            id: None,
            created: 0,
            include_usage: true,
            client_tools: Default::default(),
            client_tool_prefix: Some("mcp__client__".to_owned()),
        })
    }

    fn push(&mut self, chunk: &Chunk, out: &mut impl Write) -> io::Result<()> {
        for frame in self.encoder.push(chunk) {
            out.write_all(frame.as_bytes())?;
        }
        let Some(outcome) = self.encoder.outcome() else {
            return Ok(());
        };
        match (outcome, self.stream) {
            (Outcome::Failed(error), _) if !self.encoder.started() || !self.stream => {
                let body = error.body(self.api);
                match (self.api, self.stream) {
                    (Api::Anthropic, true) => writeln!(out, "event: error\ndata: {body}\n")?,
                    (Api::OpenAi, true) => writeln!(out, "data: {body}\n")?,
                    (_, false) => writeln!(out, "{body}")?,
                }
            }
            (_, false) => {
                if let Some(body) = self.encoder.body() {
                    writeln!(out, "{body}")?;
                }
            }
            (_, true) => {}
        }
        self.encoder = Self::encoder(self.api, self.stream);
        Ok(())
    }
}

/// Runs the command line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Replay(args) => replay(&args),
        Command::Run(args) => crate::run::run(args),
        Command::Record(args) => crate::run::record(args),
    }
}

fn replay(args: &ReplayArgs) -> ExitCode {
    let mut input: Box<dyn Read> = if args.file.as_os_str() == "-" {
        Box::new(io::stdin().lock())
    } else {
        match std::fs::File::open(&args.file) {
            Ok(file) => Box::new(file),
            Err(err) => {
                eprintln!("ccwire replay: cannot read {}: {err}", args.file.display());
                return ExitCode::from(2);
            }
        }
    };
    let config = SessionConfig {
        line_limit: args.line_limit,
        ..SessionConfig::default()
    };
    let mut replayer = Replayer::with_config(config);
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut buf = vec![0u8; 1 << 16];
    let mut bad_lines = 0usize;
    let mut responses = Responses::new(args.format).filter(|_| !args.final_state);
    let mut emit = |replayer: &mut Replayer, out: &mut BufWriter<_>| -> io::Result<()> {
        while let Some(chunk) = replayer.poll_chunk() {
            if is_bad_input(&chunk) {
                bad_lines += 1;
            }
            if let Some(responses) = responses.as_mut() {
                responses.push(&chunk, out)?;
            } else if !args.final_state {
                serde_json::to_writer(&mut *out, &chunk)?;
                out.write_all(b"\n")?;
            }
        }
        Ok(())
    };
    let result: io::Result<()> = (|| {
        loop {
            let n = match input.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            replayer.push(&buf[..n]);
            emit(&mut replayer, &mut out)?;
        }
        replayer.finish();
        emit(&mut replayer, &mut out)?;
        if args.final_state {
            let tools: serde_json::Map<String, serde_json::Value> = replayer
                .tool_statuses()
                .into_iter()
                .map(|(id, status)| (id, json!(status.as_str())))
                .collect();
            let state = json!({"tool_wait": replayer.tool_wait(), "tools": tools});
            serde_json::to_writer(&mut out, &state)?;
            out.write_all(b"\n")?;
        }
        out.flush()
    })();
    match result {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => return ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ccwire replay: {err}");
            return ExitCode::from(2);
        }
    }
    if args.strict && bad_lines > 0 {
        eprintln!("ccwire replay: {bad_lines} malformed line(s) in the input");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn is_bad_input(chunk: &Chunk) -> bool {
    matches!(
        chunk,
        Chunk::Error {
            kind: ErrorKind::MalformedLine
                | ErrorKind::InvalidMessage
                | ErrorKind::LineTooLong
                | ErrorKind::MalformedTranscriptLine,
            ..
        }
    )
}

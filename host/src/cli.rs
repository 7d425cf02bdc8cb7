//! Command-line parsing and the subcommands.

use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ccwire_core::api::replay::ReplayResponses;
use ccwire_core::api::Api;
use ccwire_core::gateway::fair_share;

/// The default of `--store-quota` for a gateway with several API keys.
const DEFAULT_STORE_QUOTA: u64 = 1 << 30;
use ccwire_core::{Chunk, ErrorKind, Replayer, SessionConfig};
use clap::{Parser, Subcommand};
use serde_json::json;

/// What `ccwire --version` says: the version, the target the binary was built for and the
/// commit it was built from (see `build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("CCWIRE_TARGET"),
    ", commit ",
    env!("CCWIRE_COMMIT"),
    ")"
);

/// ccwire: the Claude Code SDK wire protocol, done once.
#[derive(Debug, Parser)]
#[command(name = "ccwire", version = VERSION, about)]
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
    /// Serve the Anthropic Messages, OpenAI Chat Completions and Responses APIs over the CLI.
    Serve(Box<ServeArgs>),
    /// Play a recorded transcript as the `claude` executable, for the host that spawns it.
    Play(crate::play::PlayArgs),
    /// Serve the Agent Client Protocol on stdin and stdout, for editors (Zed, JetBrains,
    /// Neovim, Emacs): one Claude Code CLI per session (docs/ACP.md).
    Acp(crate::acp::AcpArgs),
    /// The watchdog `ccwire serve` starts: once the gateway named has ended, kills what its
    /// CLIs' tools left running.
    #[command(hide = true)]
    Watchdog {
        /// The gateway, as `<pid>.<start time>`.
        gateway: String,
    },
    /// The first process of each sandbox `ccwire serve` starts: relays the sandbox's
    /// connections to the gateway's proxy at SOCKET and runs COMMAND (the CLI).
    #[command(hide = true)]
    SandboxRelay {
        /// The proxy's socket.
        socket: PathBuf,
        /// The command to run, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// The address to listen on; any address but loopback needs an API key.
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: std::net::SocketAddr,
    /// An accepted API key (repeatable; also CCWIRE_API_KEYS, comma-separated). Without any,
    /// requests need no key.
    #[arg(long = "api-key")]
    api_keys: Vec<String>,
    /// The `claude` executable (default: $CCWIRE_CLAUDE, then `claude` on PATH).
    #[arg(long)]
    claude: Option<PathBuf>,
    /// Offer a built-in CLI tool (Read, Bash, …) to the model; it runs on this machine
    /// (repeatable). None are offered by default.
    #[arg(long = "enable-tool")]
    enable_tools: Vec<String>,
    /// Let the agents of the Managed Agents API use URL MCP servers (their `mcp_servers`):
    /// the gateway's machine connects to whatever URL a caller names there.
    #[arg(long)]
    allow_mcp_servers: bool,
    /// Serve the live console at /console and its data: the conversations a key sees (the
    /// admin key: every one) at GET /v1/conversations, each one's chunks at
    /// GET /v1/conversations/{id}/events, the last ten minutes' charts at GET /v1/stats.
    #[arg(long)]
    console: bool,
    /// Seconds a client tool call is held for the client's result.
    #[arg(long, default_value_t = 600.0)]
    held_call_timeout: f64,
    /// Seconds a conversation's CLI session may sit idle before it is closed (with the
    /// session store, the conversation is resumed when it comes back).
    #[arg(long, default_value_t = 1800.0)]
    idle_ttl: f64,
    /// Seconds an idle conversation's CLI lives before it is closed to free its memory; the
    /// conversation is resumed from the session store on its next request. Needs the store.
    #[arg(long, value_name = "SECS", default_value_t = 600.0)]
    hibernate_after: f64,
    /// The session store: where conversations are kept so that one whose CLI was closed
    /// (hibernated, expired, a restart) is resumed exactly. A directory (default: `store` in
    /// the state directory), or a Redis server's URL (`redis://[user:password@]host[:port][/db]`,
    /// `rediss://` with TLS, `redis+unix:///path`) that several gateways may share. Here a URL's
    /// password is in the process list, which every local user can read: give the URL in
    /// CCWIRE_STORE or --store-file instead.
    #[arg(long, value_name = "DIR|URL")]
    store: Option<String>,
    /// A file holding the session store's directory or URL (surrounding whitespace ignored).
    #[arg(long, value_name = "PATH")]
    store_file: Option<PathBuf>,
    /// Keep no session store: a conversation whose CLI was closed is rebuilt from the history
    /// its next request carries.
    #[arg(long, conflicts_with_all = ["store", "store_file"])]
    no_store: bool,
    /// Join the cluster of the gateways that share the Redis session store, reachable by the
    /// others at ADDR (`host:port`; `host` alone: with the port it listens on; or an
    /// `http(s)://` base URL): a request whose conversation another gateway runs is
    /// forwarded there. Needs `--store redis://…`.
    #[arg(long, value_name = "ADDR", conflicts_with = "no_store")]
    advertise: Option<String>,
    /// This gateway's name in the cluster (ASCII letters, digits, `-`, `_`; default: a random
    /// one); responses name it in `x-ccwire-node`.
    #[arg(long, value_name = "NAME", requires = "advertise")]
    node: Option<String>,
    /// The memory (MiB) the CLIs may take together: over it, the CLIs of conversations that
    /// wait for nothing are closed, least recently used first, and resumed on their next
    /// request.
    #[arg(long, value_name = "MIB")]
    memory_budget: Option<u64>,
    /// Seconds the session store keeps a conversation nobody continued.
    #[arg(long, value_name = "SECS", default_value_t = 7.0 * 24.0 * 3600.0)]
    store_ttl: f64,
    /// The most bytes the session store keeps of one API key's conversation transcripts: a
    /// turn of a key at or over it gets a 413 until its old conversations expire (default:
    /// with several keys, 1 GiB; 0: no limit).
    #[arg(long, value_name = "BYTES")]
    store_quota: Option<u64>,
    /// Tenant keys are made over `POST /v1/keys` with the admin key (kept in the session
    /// store): a key is needed even when no --api-key is given.
    #[arg(long)]
    managed_keys: bool,
    /// A key's quota, `KEY:LIMITS` (repeatable): KEY is the key's id (as `/v1/usage` names
    /// it), one of the `--api-key` keys, or `*` (every key without its own); LIMITS as in
    /// `tokens/day=2000000,cost/month=50,conversations=4` (tokens and cost per day, week or
    /// month; conversations at once).
    #[arg(long = "quota", value_name = "KEY:LIMITS")]
    quotas: Vec<String>,
    /// A file of quotas, one `KEY:LIMITS` a line (`#` starts a comment).
    #[arg(long, value_name = "PATH")]
    quota_file: Option<PathBuf>,
    /// The largest request body, in bytes.
    #[arg(long, default_value_t = 32 * 1024 * 1024)]
    max_body: usize,
    /// The most live CLI sessions (conversations); a new one over the cap closes the CLI of the
    /// conversation least recently used that waits for nothing, else gets a 429.
    #[arg(long, default_value_t = 64)]
    max_sessions: usize,
    /// The most responses produced at once; more requests wait in a queue.
    #[arg(long, default_value_t = 64)]
    max_concurrent: usize,
    /// The most responses produced at once for one API key (default: with several keys, half
    /// of --max-concurrent).
    #[arg(long)]
    max_concurrent_per_key: Option<usize>,
    /// The most live CLI sessions of one API key; a new conversation over it closes that key's
    /// conversation least recently used that waits for nothing, else gets a 429 (default: with
    /// several keys, half of --max-sessions, so that no key crowds the others out).
    #[arg(long)]
    max_sessions_per_key: Option<usize>,
    /// The most requests waiting for a free turn; one more gets a 429.
    #[arg(long, default_value_t = 256)]
    max_queue: usize,
    /// Seconds a request may wait in the queue before it gets a 429.
    #[arg(long, default_value_t = 30.0)]
    queue_timeout: f64,
    /// CLIs kept started ahead of need for new conversations with the settings of recent
    /// ones (they count toward --max-sessions).
    #[arg(long, default_value_t = 0)]
    pool: usize,
    /// How enabled tools get permission to run: `off` runs them outright; `http` makes each
    /// call wait for a person's answer (GET /v1/approvals, POST /v1/approvals/{id}).
    #[arg(long, value_enum, default_value_t = Approvals::Off)]
    approvals: Approvals,
    /// Seconds an approval (and a Managed Agents session's tool call, its
    /// user.tool_confirmation) waits for its answer before the tool is denied.
    #[arg(long, default_value_t = 300.0)]
    approval_timeout: f64,
    /// Seconds running turns have to finish when the gateway drains (SIGTERM, or
    /// POST /admin/drain).
    #[arg(long, default_value_t = 30.0)]
    drain_grace: f64,
    /// Seconds a client has to send a request's whole head once it began; then a 408 and the
    /// connection is closed.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    header_timeout: f64,
    /// Seconds a request's whole body has to arrive once its head did; then a 408.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    body_timeout: f64,
    /// Seconds a connection may stay open with no request in flight and no byte sent either
    /// way; then it is closed (streaming responses are never cut).
    #[arg(long, value_name = "SECS", default_value_t = 75.0)]
    idle_timeout: f64,
    /// The most connections open at once; one more gets a 503 (default: half the open-file
    /// limit, at most 8192).
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// The most connections open at once from one client address (an IPv6 client: its /64);
    /// one more gets a 503.
    #[arg(long, value_name = "N", default_value_t = 256)]
    max_connections_per_ip: usize,
    /// The key POST /admin/drain needs, as `Authorization: Bearer`. Here it is in the process
    /// list, which every local user can read: give it in CCWIRE_ADMIN_KEY or --admin-key-file
    /// instead.
    #[arg(long)]
    admin_key: Option<String>,
    /// A file holding the admin key (surrounding whitespace ignored).
    #[arg(long, value_name = "PATH")]
    admin_key_file: Option<PathBuf>,
    /// One working directory for every tenant's CLI, shared by all of them (default: each
    /// tenant its own, under the state directory).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Where each tenant (API key, and the keyless loopback caller) gets its own CLI home,
    /// working and temporary directories (default: $XDG_STATE_HOME/ccwire, else
    /// ~/.local/state/ccwire).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Run each CLI (and the tools it runs) in the OS sandbox: bubblewrap, with the system
    /// read-only and only its tenant's directories writable. `auto`: where it works here.
    #[arg(long, value_enum, default_value_t = ccwire_host::sandbox::SandboxMode::Auto)]
    sandbox: ccwire_host::sandbox::SandboxMode,
    /// The settings files each CLI loads, comma-separated: `user` (the tenant's home),
    /// `project`, `local` (the working directory's), with the hooks, skills, plugins and
    /// CLAUDE.md files they bring. None by default.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    setting_sources: Vec<String>,
    /// The model for requests that name a non-Claude model (e.g. `gpt-4o` from an OpenAI
    /// client); without it the CLI's default.
    #[arg(long)]
    default_model: Option<String>,
    /// Let pages of this web origin (`scheme://host[:port]`) use the gateway, with CORS
    /// (repeatable). Requests carrying any other `Origin` are refused.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origins: Vec<String>,
    /// Accept this name in the `Host` header on a loopback address, besides localhost,
    /// 127.0.0.1 and `[::1]` (repeatable). Other names are refused (DNS rebinding).
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_hosts: Vec<String>,
    /// Remove this variable (or every one starting with PREFIX, given as `PREFIX*`) from the
    /// environment the CLI and its tools inherit (repeatable). `CCWIRE_*` ones always are.
    #[arg(long = "strip-env", value_name = "NAME")]
    strip_env: Vec<String>,
    /// Let the CLI and its tools inherit this variable of the gateway's environment too (or
    /// every one starting with PREFIX, given as `PREFIX*`; repeatable). Without it they get
    /// what Claude Code needs only: PATH, the locale, the terminal, `ANTHROPIC_*`,
    /// `CLAUDE_CODE_*`, `DISABLE_*` and a few of its settings, the proxy and certificate
    /// variables.
    #[arg(long = "pass-env", value_name = "NAME")]
    pass_env: Vec<String>,
    /// Let the sandboxed CLIs and their tools reach HOST (at PORT, else 443) besides the model
    /// API, through the gateway's proxy (repeatable). Tools that honour HTTPS_PROXY use it.
    #[arg(long = "allow-egress", value_name = "HOST[:PORT]")]
    allow_egress: Vec<String>,
    /// For tests only, and only on a loopback address: make up ids (`resp_…`, `appr_…`) from
    /// this number instead of the OS's CSPRNG, so the same requests get the same bytes. Such
    /// ids can be guessed.
    #[arg(long, hide = true)]
    seed: Option<u64>,
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

/// How enabled tools get permission to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Approvals {
    /// They run outright.
    Off,
    /// Each call waits for a person's answer over HTTP.
    Http,
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
    /// OpenAI Responses API server-sent events, one response after another.
    ResponsesSse,
    /// OpenAI Responses API response bodies, one per line.
    ResponsesJson,
}

impl Format {
    /// The responses to print, for the formats that are not chunks.
    fn responses(self) -> Option<ReplayResponses> {
        let (api, stream) = match self {
            Format::Chunks => return None,
            Format::AnthropicSse => (Api::Anthropic, true),
            Format::OpenaiSse => (Api::OpenAi, true),
            Format::AnthropicJson => (Api::Anthropic, false),
            Format::OpenaiJson => (Api::OpenAi, false),
            Format::ResponsesSse => (Api::Responses, true),
            Format::ResponsesJson => (Api::Responses, false),
        };
        Some(ReplayResponses::new(api, stream))
    }
}

/// Runs the command line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Replay(args) => replay(&args),
        Command::Run(args) => crate::run::run(args),
        Command::Record(args) => crate::run::record(args),
        Command::Serve(args) => serve(*args),
        Command::Play(args) => crate::play::play(args),
        Command::Acp(args) => crate::acp::acp(args),
        Command::Watchdog { gateway } => {
            crate::run::init_tracing();
            ccwire_host::tree::watch(&gateway);
            ExitCode::SUCCESS
        }
        Command::SandboxRelay { socket, command } => {
            let code = ccwire_host::egress::relay(&socket, &command);
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    use ccwire_host::serve::{serve, GatewayOptions};
    crate::run::init_tracing();
    // Keys and the conversations' content live in this process: no other process of the same
    // user (a tool the CLI runs, say) may read its memory or environment through /proc.
    #[cfg(target_os = "linux")]
    if let Err(err) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!(%err, "cannot make the gateway's memory unreadable to other processes");
    }
    // Every conversation holds three pipes and a socket or two: a soft limit of 1024 open
    // files would cap the gateway near 250 conversations. The hard limit is the operator's.
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            if let Err(err) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::debug!(%err, "cannot raise the open-file limit");
            }
        }
    }
    let code_tools: Vec<&String> = args
        .enable_tools
        .iter()
        .filter(|t| ccwire_host::serve::CODE_TOOLS.contains(&t.as_str()))
        .collect();
    if !args.api_keys.is_empty() && !code_tools.is_empty() {
        eprintln!(
            "ccwire serve: warning: keys given with --api-key are in the process list, where \
             every local user and the enabled tools that run code can read them; \
             pass them in CCWIRE_API_KEYS instead"
        );
    }
    let key_in_argv = args.admin_key.is_some();
    let redacted = |url: &str| ccwire_host::store::RedisStore::redact(url) != url;
    let password_in_argv = args.store.as_deref().is_some_and(redacted);
    let admin_key = secret(
        "admin-key",
        args.admin_key,
        args.admin_key_file.as_deref(),
        "CCWIRE_ADMIN_KEY",
    );
    let store_at = if args.no_store {
        Ok(None)
    } else {
        secret(
            "store",
            args.store,
            args.store_file.as_deref(),
            "CCWIRE_STORE",
        )
    };
    let (admin_key, store_at) = match (admin_key, store_at) {
        (Ok(admin_key), Ok(store_at)) => (admin_key, store_at),
        (Err(why), _) | (_, Err(why)) => {
            eprintln!("ccwire serve: {why}");
            return ExitCode::from(2);
        }
    };
    if key_in_argv {
        eprintln!(
            "ccwire serve: warning: the key given with --admin-key is in the process list, where \
             every local user and the tools that run outside the sandbox can read it; \
             pass it in CCWIRE_ADMIN_KEY or --admin-key-file instead"
        );
    }
    if password_in_argv {
        eprintln!(
            "ccwire serve: warning: the password in the --store URL is in the process list, \
             where every local user and the tools that run outside the sandbox can read it; \
             pass the URL in CCWIRE_STORE or --store-file instead"
        );
    }
    if args.seed.is_some() && !args.listen.ip().is_loopback() {
        eprintln!(
            "ccwire serve: --seed makes ids guessable; it is for tests on a loopback address"
        );
        return ExitCode::from(2);
    }
    let mut api_keys = args.api_keys;
    if let Ok(keys) = std::env::var("CCWIRE_API_KEYS") {
        api_keys.extend(
            keys.split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_owned),
        );
    }
    let quotas = match quotas(&args.quotas, args.quota_file.as_deref(), &api_keys) {
        Ok(quotas) => quotas,
        Err(why) => {
            eprintln!("ccwire serve: {why}");
            return ExitCode::from(2);
        }
    };
    let seconds = |s: f64| (s.max(0.0) * 1000.0) as u64;
    let state_dir = args.state_dir.clone().unwrap_or_else(default_state_dir);
    let duration = |s: f64| std::time::Duration::from_millis(seconds(s));
    let mut options = GatewayOptions {
        claude: args.claude,
        engine: ccwire_core::gateway::GatewayConfig {
            limits: ccwire_core::gateway::Limits {
                held_call_timeout_ms: seconds(args.held_call_timeout),
                idle_ttl_ms: seconds(args.idle_ttl),
                hibernate_after_ms: if args.no_store {
                    u64::MAX
                } else {
                    seconds(args.hibernate_after)
                },
                ..ccwire_core::gateway::Limits::default()
            },
            max_sessions: args.max_sessions,
            enabled_tools: args.enable_tools,
            default_model: args.default_model,
            max_concurrent: args.max_concurrent,
            max_concurrent_per_key: (args.max_concurrent_per_key)
                .unwrap_or_else(|| fair_share(args.max_concurrent, api_keys.len())),
            max_sessions_per_key: (args.max_sessions_per_key)
                .unwrap_or_else(|| fair_share(args.max_sessions, api_keys.len())),
            store_quota: match args.store_quota {
                Some(0) => None,
                Some(bytes) => Some(bytes),
                None => (api_keys.len() > 1).then_some(DEFAULT_STORE_QUOTA),
            },
            quotas,
            max_queue: args.max_queue,
            queue_timeout_ms: seconds(args.queue_timeout),
            pool: args.pool,
            approvals: args.approvals == Approvals::Http,
            allow_mcp_servers: args.allow_mcp_servers,
            console: args.console,
            approval_timeout_ms: seconds(args.approval_timeout),
            setting_sources: args.setting_sources,
            http: ccwire_core::gateway::HttpConfig {
                api_keys,
                admin_key,
                managed_keys: args.managed_keys,
                allow_origins: args.allow_origins,
                allow_hosts: args.allow_hosts,
                max_body: args.max_body,
                drain_grace_ms: seconds(args.drain_grace),
                ..ccwire_core::gateway::HttpConfig::default()
            },
            ..ccwire_core::gateway::GatewayConfig::default()
        },
        conn: ccwire_host::serve::ConnOptions {
            header_timeout: duration(args.header_timeout),
            body_timeout: duration(args.body_timeout),
            idle_timeout: duration(args.idle_timeout),
            max_connections: args.max_connections,
            max_connections_per_ip: args.max_connections_per_ip,
            ..ccwire_host::serve::ConnOptions::default()
        },
        cwd: args.cwd,
        store: None,
        state_dir: Some(state_dir),
        memory_budget: args.memory_budget.map(|mib| mib << 20),
        cluster: None,
        sandbox: args.sandbox,
        env: Vec::new(),
        env_remove: args.strip_env,
        pass_env: args.pass_env,
        allow_egress: args.allow_egress,
        sandbox_relay: None,
        seed: args.seed,
    };
    // Outside the sandbox, what the CLIs' tools leave running dies with the gateway even when
    // the gateway is killed by SIGKILL.
    let _watchdog =
        if cfg!(target_os = "linux") && options.sandbox != ccwire_host::sandbox::SandboxMode::On {
            let args = ["watchdog".to_owned(), ccwire_host::tree::gateway_id()];
            std::env::current_exe()
                .and_then(|exe| ccwire_host::tree::Watchdog::start(&exe, &args))
                .inspect_err(|err| tracing::warn!(%err, "cannot start the gateway's watchdog"))
                .ok()
        } else {
            None
        };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("ccwire serve: {err}");
            return ExitCode::from(2);
        }
    };
    if !args.no_store {
        let ttl = duration(args.store_ttl);
        let store: std::sync::Arc<dyn ccwire_host::store::ConversationStore> = match &store_at {
            Some(url) if url.contains("://") => {
                match runtime.block_on(ccwire_host::store::RedisStore::connect(url, ttl)) {
                    Ok(store) => {
                        tracing::info!(store = store.url(), "the session store is a Redis server");
                        if let Some(advertise) = &args.advertise {
                            let joined = ccwire_host::cluster::Cluster::new(
                                &store,
                                args.node.as_deref(),
                                advertise,
                            );
                            match joined {
                                Ok(cluster) => options.cluster = Some(cluster),
                                Err(err) => {
                                    eprintln!("ccwire serve: --advertise: {err}");
                                    return ExitCode::from(2);
                                }
                            }
                        }
                        std::sync::Arc::new(store)
                    }
                    Err(err) => {
                        eprintln!("ccwire serve: {err}");
                        return ExitCode::from(2);
                    }
                }
            }
            _ if args.advertise.is_some() => {
                eprintln!(
                    "ccwire serve: --advertise: the gateways of a cluster share a Redis session \
                     store (--store redis://…)"
                );
                return ExitCode::from(2);
            }
            dir => std::sync::Arc::new(ccwire_host::store::DirStore::new(
                dir.as_ref()
                    .map(PathBuf::from)
                    .unwrap_or_else(|| options.state_dir.clone().unwrap_or_default().join("store")),
                ttl,
            )),
        };
        options.store = Some(store);
    }
    match runtime.block_on(serve(args.listen, options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ccwire serve: {err}");
            ExitCode::from(2)
        }
    }
}

/// A secret of `ccwire serve`: the value of `--{flag}`, else the content of `--{flag}-file`,
/// else the environment variable `var`; `None` when none gives a non-empty one. The command
/// line is readable by every local user: the file and the variable keep it off.
///
/// # Errors
/// Both `--{flag}` and `--{flag}-file` given, or a file that cannot be read or holds nothing;
/// the message never holds the secret.
fn secret(
    flag: &str,
    given: Option<String>,
    file: Option<&std::path::Path>,
    var: &str,
) -> Result<Option<String>, String> {
    match (given, file) {
        (Some(_), Some(_)) => Err(format!("--{flag} and --{flag}-file: give one of them")),
        (Some(value), None) => Ok(Some(value).filter(|v| !v.is_empty())),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--{flag}-file: cannot read {}: {e}", path.display()))?;
            match text.trim() {
                "" => Err(format!("--{flag}-file: {} is empty", path.display())),
                value => Ok(Some(value.to_owned())),
            }
        }
        (None, None) => Ok(std::env::var(var)
            .ok()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())),
    }
}

/// `$XDG_STATE_HOME/ccwire`, else `~/.local/state/ccwire`, else `.ccwire-state`.
fn default_state_dir() -> PathBuf {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(state) = var("XDG_STATE_HOME") {
        return state.join("ccwire");
    }
    match var("HOME") {
        Some(home) => home.join(".local/state/ccwire"),
        None => PathBuf::from(".ccwire-state"),
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
    let mut responses = args.format.responses().filter(|_| !args.final_state);
    let mut text = String::new();
    let mut emit = |replayer: &mut Replayer, out: &mut BufWriter<_>| -> io::Result<()> {
        while let Some(chunk) = replayer.poll_chunk() {
            if is_bad_input(&chunk) {
                bad_lines += 1;
            }
            if let Some(responses) = responses.as_mut() {
                text.clear();
                responses.push(&chunk, &mut text);
                out.write_all(text.as_bytes())?;
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

/// The quotas of `--quota` and `--quota-file`, by tenant id (`*` for every key without its
/// own); a key named by its secret must be one of `api_keys`.
fn quotas(
    given: &[String],
    file: Option<&Path>,
    api_keys: &[String],
) -> Result<std::collections::BTreeMap<String, ccwire_core::gateway::quota::Quota>, String> {
    use ccwire_core::gateway::tenant_id;
    let mut lines: Vec<(String, String)> = given
        .iter()
        .map(|q| ("--quota".to_owned(), q.clone()))
        .collect();
    if let Some(file) = file {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("--quota-file {}: {e}", file.display()))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if !line.is_empty() {
                lines.push((format!("{}:{}", file.display(), n + 1), line.to_owned()));
            }
        }
    }
    let mut quotas = std::collections::BTreeMap::new();
    for (whence, line) in lines {
        let (key, spec) = line
            .rsplit_once(':')
            .ok_or_else(|| format!("{whence}: {line:?} is not KEY:LIMITS"))?;
        let id = if key == "*" || ccwire_core::gateway::is_tenant_id(key) {
            key.to_owned()
        } else if api_keys.iter().any(|k| k == key) {
            tenant_id(key)
        } else {
            return Err(format!(
                "{whence}: the quota's key is neither `*`, a key's id (k and 24 hex digits, as \
                 /v1/usage names it) nor one of the --api-key keys"
            ));
        };
        let quota = spec.parse().map_err(|e| format!("{whence}: {e}"))?;
        quotas.insert(id, quota);
    }
    Ok(quotas)
}

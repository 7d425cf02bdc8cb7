//! End-to-end: the secrets of `ccwire serve` — the admin key and the session store's URL with
//! its Redis password — taken from files and the environment stay off its command line (which
//! every local user can read in `/proc/<pid>/cmdline`) and out of everything it prints; given on
//! the command line they work, with a warning; a file that cannot be read, or a secret given
//! twice, stops it before it serves.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccwire_tests::RedisServer;
use tokio::io::AsyncBufReadExt;

const REDIS_USER: &str = "gateway";
const REDIS_PASSWORD: &str = "redis-pw-7c41e9";
const ADMIN_KEY: &str = "admin-key-5d02b8";

/// `ccwire serve` on a free loopback port, with no secret in its environment but `env`'s;
/// what it prints is kept.
struct Serve {
    child: tokio::process::Child,
    addr: String,
    output: Arc<Mutex<String>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Serve {
    async fn start(state: &tempfile::TempDir, args: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_ccwire"));
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("CCWIRE_") {
                command.env_remove(name);
            }
        }
        let mut child = command
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--sandbox", "off", "--state-dir"])
            .arg(state.path().join("state"))
            .args(args)
            .env("CCWIRE_CLAUDE", ccwire_tests::cli::claude_path())
            // Every log line there is, a dependency's included.
            .env("RUST_LOG", "debug")
            .envs(env.iter().copied())
            .current_dir(state.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let output = Arc::new(Mutex::new(String::new()));
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let kept = output.clone();
        let reader = tokio::spawn(async move {
            let mut tx = Some(tx);
            let mut open = (true, true);
            while open != (false, false) {
                let line = tokio::select! {
                    line = stdout.next_line(), if open.0 => line.ok().flatten().or_else(|| {
                        open.0 = false;
                        None
                    }),
                    line = stderr.next_line(), if open.1 => line.ok().flatten().or_else(|| {
                        open.1 = false;
                        None
                    }),
                };
                let Some(line) = line else { continue };
                if let Some(addr) = line.strip_prefix("ccwire serve: listening on http://") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(addr.to_owned());
                    }
                }
                let mut kept = kept.lock().unwrap();
                kept.push_str(&line);
                kept.push('\n');
            }
        });
        let addr = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .expect("ccwire serve listens in time")
            .unwrap_or_else(|_| panic!("ccwire serve ended: {}", output.lock().unwrap()));
        Serve {
            child,
            addr,
            output,
            reader,
        }
    }

    /// Its command line, as any local user reads it.
    fn cmdline(&self) -> String {
        let pid = self.child.id().unwrap();
        let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        String::from_utf8_lossy(&bytes).replace('\0', " ")
    }

    /// `POST /admin/drain` with `key`: its status.
    async fn drain(&self, key: &str) -> u16 {
        reqwest::Client::new()
            .post(format!("http://{}/admin/drain", self.addr))
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    /// Waits for it to exit (drained), and returns all it printed.
    async fn exited(mut self) -> String {
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("ccwire serve exits once drained")
            .unwrap();
        assert!(status.success(), "{status}");
        self.reader.await.unwrap();
        let output = self.output.lock().unwrap().clone();
        output
    }
}

fn redis_url(redis: &RedisServer) -> String {
    redis
        .url()
        .replacen("://", &format!("://{REDIS_USER}:{REDIS_PASSWORD}@"), 1)
}

/// The session store as the gateway logs it: the Redis server, its password hidden.
fn redis_shown(redis: &RedisServer) -> String {
    redis
        .url()
        .replacen("://", &format!("://{REDIS_USER}:***@"), 1)
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in [REDIS_PASSWORD, ADMIN_KEY] {
        assert!(!text.contains(secret), "{what} holds {secret}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_in_files_are_taken_and_stay_off_the_command_line_and_the_output() {
    let redis = RedisServer::start_with_user(REDIS_USER, REDIS_PASSWORD);
    let state = tempfile::tempdir().unwrap();
    let (store_file, key_file) = (state.path().join("store"), state.path().join("admin-key"));
    std::fs::write(&store_file, format!("{}\n", redis_url(&redis))).unwrap();
    std::fs::write(&key_file, format!("  {ADMIN_KEY}\n")).unwrap();
    let serve = Serve::start(
        &state,
        &[
            "--store-file",
            store_file.to_str().unwrap(),
            "--admin-key-file",
            key_file.to_str().unwrap(),
        ],
        &[],
    )
    .await;

    assert_no_secret("the command line", &serve.cmdline());
    assert_eq!(serve.drain("not-the-key").await, 401);
    assert_eq!(serve.drain(ADMIN_KEY).await, 202, "the key is the file's");
    let output = serve.exited().await;
    assert!(
        output.contains(&redis_shown(&redis)),
        "the store is the file's Redis server, its password right: {output}"
    );
    assert!(!output.contains("process list"), "no warning: {output}");
    assert_no_secret("the output", &output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_in_the_environment_are_taken_and_stay_off_the_command_line_and_the_output() {
    let redis = RedisServer::start_with_user(REDIS_USER, REDIS_PASSWORD);
    let state = tempfile::tempdir().unwrap();
    let url = redis_url(&redis);
    let env = [
        ("CCWIRE_STORE", url.as_str()),
        ("CCWIRE_ADMIN_KEY", ADMIN_KEY),
    ];
    let serve = Serve::start(&state, &[], &env).await;

    assert_no_secret("the command line", &serve.cmdline());
    assert_eq!(
        serve.drain(ADMIN_KEY).await,
        202,
        "the key is the variable's"
    );
    let output = serve.exited().await;
    assert!(output.contains(&redis_shown(&redis)), "{output}");
    assert!(!output.contains("process list"), "no warning: {output}");
    assert_no_secret("the output", &output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_on_the_command_line_work_with_a_warning_and_are_never_printed() {
    let redis = RedisServer::start_with_user(REDIS_USER, REDIS_PASSWORD);
    let state = tempfile::tempdir().unwrap();
    let url = redis_url(&redis);
    let serve = Serve::start(&state, &["--store", &url, "--admin-key", ADMIN_KEY], &[]).await;

    assert_eq!(serve.drain(ADMIN_KEY).await, 202);
    let output = serve.exited().await;
    assert!(
        output.contains("warning: the key given with --admin-key is in the process list")
            && output.contains("CCWIRE_ADMIN_KEY or --admin-key-file instead"),
        "{output}"
    );
    assert!(
        output.contains("warning: the password in the --store URL is in the process list")
            && output.contains("CCWIRE_STORE or --store-file instead"),
        "{output}"
    );
    assert!(output.contains(&redis_shown(&redis)), "{output}");
    assert_no_secret("the output", &output);
}

#[test]
fn a_secret_given_twice_or_a_file_that_cannot_be_read_stops_it_before_it_serves() {
    let state = tempfile::tempdir().unwrap();
    let key_file = state.path().join("admin-key");
    std::fs::write(&key_file, ADMIN_KEY).unwrap();
    let empty = state.path().join("empty");
    std::fs::write(&empty, " \n").unwrap();
    let unreachable = state.path().join("unreachable");
    // Nothing listens on port 1.
    let url = format!("redis://{REDIS_USER}:{REDIS_PASSWORD}@127.0.0.1:1");
    std::fs::write(&unreachable, url).unwrap();
    let shown =
        format!("ccwire serve: the Redis session store at redis://{REDIS_USER}:***@127.0.0.1:1");
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let nothing = format!("ccwire serve: --admin-key-file: {} is empty", path(&empty));
    let serve = |args: &[String]| serve_exits(&state, args, &[]);
    let cases: [(Vec<String>, &str); 5] = [
        (
            vec![
                "--admin-key".into(),
                ADMIN_KEY.into(),
                "--admin-key-file".into(),
                path(&key_file),
            ],
            "ccwire serve: --admin-key and --admin-key-file: give one of them",
        ),
        (
            vec!["--store-file".into(), path(&state.path().join("missing"))],
            "ccwire serve: --store-file: cannot read",
        ),
        (vec!["--admin-key-file".into(), path(&empty)], &nothing),
        (
            vec![
                "--store".into(),
                "dir".into(),
                "--store-file".into(),
                path(&unreachable),
            ],
            "ccwire serve: --store and --store-file: give one of them",
        ),
        (vec!["--store-file".into(), path(&unreachable)], &shown),
    ];
    for (args, expected) in &cases {
        let (code, output) = serve(args);
        assert_eq!(code, Some(2), "{args:?}: {output}");
        assert!(output.contains(expected), "{args:?}: {output}");
        assert_no_secret("the output", &output);
    }
}

/// Several keys share the gateway fairly by default: each key at most half of the live
/// conversations and of the responses at once, and 1 GiB of the session store, as the
/// start-up lines say; one key alone, or caps given, as given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_keys_each_get_a_fair_share_of_the_caps_by_default() {
    let state = tempfile::tempdir().unwrap();
    let keys = [
        ("CCWIRE_API_KEYS", "key-one,key-two"),
        ("CCWIRE_ADMIN_KEY", ADMIN_KEY),
    ];
    let serve = Serve::start(&state, &["--max-sessions", "10"], &keys).await;
    assert_eq!(serve.drain(ADMIN_KEY).await, 202);
    let output = serve.exited().await;
    let line = "at most 10 live conversations and 64 responses at once; each key 5 and 32";
    assert!(output.contains(line), "{output}");
    let line = "the session store keeps at most 1073741824 bytes of each key's conversations";
    assert!(output.contains(line), "{output}");

    let state = tempfile::tempdir().unwrap();
    let args = ["--max-sessions-per-key", "9", "--max-sessions", "10"];
    let serve = Serve::start(&state, &args, &keys).await;
    assert_eq!(serve.drain(ADMIN_KEY).await, 202);
    let output = serve.exited().await;
    assert!(output.contains("; each key 9 and 32"), "{output}");

    let state = tempfile::tempdir().unwrap();
    let serve = Serve::start(&state, &["--store-quota", "5000"], &keys).await;
    assert_eq!(serve.drain(ADMIN_KEY).await, 202);
    let output = serve.exited().await;
    assert!(
        output.contains("keeps at most 5000 bytes of each key's"),
        "{output}"
    );

    let state = tempfile::tempdir().unwrap();
    let one = [
        ("CCWIRE_API_KEYS", "key-one"),
        ("CCWIRE_ADMIN_KEY", ADMIN_KEY),
    ];
    let serve = Serve::start(&state, &[], &one).await;
    assert_eq!(serve.drain(ADMIN_KEY).await, 202);
    let output = serve.exited().await;
    let line = "at most 64 live conversations and 64 responses at once; each key 64 and 64";
    assert!(output.contains(line), "{output}");
    assert!(
        !output.contains("bytes of each key's"),
        "no quota: {output}"
    );
}

/// Quotas given at start are said in the start-up lines, by key id (never the key); a quota
/// that does not read, or names no key, stops the gateway before it listens, saying why; so
/// does `--managed-keys` without an admin key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_and_managed_keys_are_checked_and_said_at_start() {
    let state = tempfile::tempdir().unwrap();
    let quota_file = state.path().join("quotas");
    std::fs::write(&quota_file, "# per key\n*:cost/month=5\n").unwrap();
    let keys = [
        ("CCWIRE_API_KEYS", "key-one,key-two"),
        ("CCWIRE_ADMIN_KEY", ADMIN_KEY),
    ];
    let quota_file = quota_file.to_str().unwrap().to_owned();
    let two = ccwire_core::gateway::tenant_id("key-two");
    let by_id = format!("{two}:tokens/week=5");
    let args = [
        "--quota",
        "key-one:tokens/day=100,conversations=2",
        "--quota",
        &by_id,
        "--quota-file",
        &quota_file,
    ];
    let serve = Serve::start(&state, &args, &keys).await;
    assert_eq!(serve.drain(ADMIN_KEY).await, 202);
    let output = serve.exited().await;
    let one = ccwire_core::gateway::tenant_id("key-one");
    let line = format!("quota of {one}: tokens/day=100,conversations=2");
    assert!(output.contains(&line), "{output}");
    assert!(output.contains("quota of *: cost/month=5"), "{output}");
    assert!(
        output.contains(&format!("quota of {two}: tokens/week=5")),
        "{output}"
    );
    assert!(
        !output.contains("key-one:"),
        "the key is not said: {output}"
    );

    let exits = |args: &[&str], env: &[(&str, &str)]| {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        serve_exits(&state, &args, env)
    };
    for (args, expected) in [
        (
            ["--quota", "key-one:tokens/year=1"],
            "is not day, week or month",
        ),
        (
            ["--quota", "nobody:tokens/day=1"],
            "nor one of the --api-key keys",
        ),
        (["--quota", "tokens/day=1"], "is not KEY:LIMITS"),
        (
            ["--quota", "K0123456789ABCDEF01234567:tokens/day=1"],
            "neither `*`, a key's id",
        ),
    ] {
        let (code, output) = exits(&args, &keys[..1]);
        assert_eq!(code, Some(2), "{args:?}: {output}");
        assert!(output.contains(expected), "{args:?}: {output}");
    }
    let (code, output) = exits(&["--managed-keys"], &[]);
    assert_eq!(code, Some(2), "{output}");
    assert!(
        output.contains("--managed-keys needs an admin key"),
        "{output}"
    );
}

/// `ccwire serve` with `args` and `env` (and none of the caller's CCWIRE_ variables) on a
/// loopback port, run until it exits: its exit code and what it printed.
fn serve_exits(
    state: &tempfile::TempDir,
    args: &[String],
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ccwire"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("CCWIRE_") {
            command.env_remove(name);
        }
    }
    let output = command
        .arg("serve")
        .args(["--listen", "127.0.0.1:0", "--sandbox", "off", "--state-dir"])
        .arg(state.path().join("state"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned()
            + &String::from_utf8_lossy(&output.stdout),
    )
}

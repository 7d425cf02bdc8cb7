//! A real Redis server (Debian's `redis-server`, installed by `scripts/setup.sh`) on a free
//! loopback port, for the tests of the Redis session store and of several gateways sharing
//! one.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` of the test's own: loopback only, its data in a temporary directory,
/// every write on disk before it is acknowledged (`appendfsync always`), so a restart keeps
/// what it acknowledged. Stopped when dropped.
pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// More configuration, as `redis-server` arguments.
    config: Vec<String>,
}

/// The `redis-server` to run: `$CCWIRE_REDIS_SERVER`, else the one on the `PATH`.
fn binary() -> PathBuf {
    std::env::var_os("CCWIRE_REDIS_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("redis-server"))
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers.
    ///
    /// # Panics
    /// When `redis-server` is not installed (`scripts/setup.sh` installs it) or does not
    /// start.
    pub fn start() -> RedisServer {
        RedisServer::start_with(Vec::new())
    }

    /// [`start`](Self::start) with the user `name`, whose password is `password`, besides
    /// the default user (who needs none): `redis://name:password@127.0.0.1:<port>` connects
    /// as that user, and a wrong password does not.
    ///
    /// # Panics
    /// As [`start`](Self::start).
    pub fn start_with_user(name: &str, password: &str) -> RedisServer {
        let user = [
            "--user",
            name,
            "on",
            &format!(">{password}"),
            "~*",
            "&*",
            "+@all",
        ];
        RedisServer::start_with(user.map(str::to_owned).to_vec())
    }

    fn start_with(config: Vec<String>) -> RedisServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut server = RedisServer {
            port,
            dir: tempfile::tempdir().expect("a directory"),
            child: None,
            config,
        };
        server.restart();
        server
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops the server at once (SIGKILL: what it acknowledged is on disk already).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again (after [`stop`](Self::stop)) on the same port and data, and
    /// waits until it answers.
    ///
    /// # Panics
    /// When it does not start.
    pub fn restart(&mut self) {
        self.stop();
        let child = Command::new(binary())
            .args(["--bind", "127.0.0.1", "--port"])
            .arg(self.port.to_string())
            .arg("--dir")
            .arg(self.dir.path())
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--protected-mode",
                "yes",
                "--daemonize",
                "no",
                "--logfile",
                "",
            ])
            .args(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}); scripts/setup.sh installs it",
                    binary().display()
                )
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if self.ping() {
                return;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server answers `PING` (in the Redis protocol, over a plain socket).
    pub fn ping(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut socket) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = socket.set_read_timeout(Some(Duration::from_secs(2)));
        let mut answer = [0u8; 7];
        socket.write_all(b"PING\r\n").is_ok()
            && socket.read_exact(&mut answer).is_ok()
            && &answer == b"+PONG\r\n"
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

//! The only way out of the sandbox's network: a proxy the gateway serves on a Unix socket,
//! which reaches the model API and the hosts the operator allowed, and nothing else.
//!
//! Each sandboxed CLI has a network namespace of its own, with a loopback interface and no
//! route anywhere: not to the machine's loopback (the gateway's port, the session store), not
//! to its network. In it, the sandbox's first process ([`relay`], the `ccwire` executable
//! started as `ccwire sandbox-relay`) listens on [`RELAY_ADDR`] and carries each connection to
//! the socket [`Egress`] serves, bound into the sandbox read-only; the CLI (and every tool
//! that honours them) gets `HTTPS_PROXY` and `HTTP_PROXY` naming that address
//! ([`proxy_env`]). The proxy outside takes `CONNECT host:port` (TLS, end to end: the proxy
//! sees no byte of it) and plain `http://` requests in absolute form, and carries only those
//! whose host and port are allowed ([`Allowed`]): the model API's (from the CLI's
//! `ANTHROPIC_BASE_URL`, else `api.anthropic.com:443`) and each `--allow-egress HOST[:PORT]`.
//! Anything else is answered `403` without a connection being made. Names are resolved
//! outside, by the gateway, when a request is allowed.

use std::convert::Infallible;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use axum::body::Body;
use axum::http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

/// Where the sandbox's relay listens, inside the sandbox's own network namespace.
pub const RELAY_ADDR: &str = "127.0.0.1:3128";

/// The variables that send a sandboxed CLI's traffic, and its tools', through the relay.
pub fn proxy_env() -> Vec<(String, String)> {
    let url = format!("http://{RELAY_ADDR}");
    ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]
        .into_iter()
        .map(|name| (name.to_owned(), url.clone()))
        .chain(["NO_PROXY", "no_proxy"].map(|name| (name.to_owned(), String::new())))
        .collect()
}

/// The hosts (and ports) the proxy reaches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowed(Vec<(String, u16)>);

impl Allowed {
    /// The model API of `base_url` (the CLI's `ANTHROPIC_BASE_URL`; `None`: Anthropic's),
    /// and each of `extra` (`HOST[:PORT]`, port 443 when none is given).
    ///
    /// # Errors
    /// A base URL or an entry that names no host, or an unreadable port.
    pub fn new(base_url: Option<&str>, extra: &[String]) -> Result<Allowed, String> {
        let base = base_url
            .filter(|u| !u.is_empty())
            .unwrap_or("https://api.anthropic.com");
        let url =
            reqwest::Url::parse(base).map_err(|e| format!("ANTHROPIC_BASE_URL {base}: {e}"))?;
        let host = url
            .host_str()
            .ok_or_else(|| format!("ANTHROPIC_BASE_URL {base} names no host"))?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| format!("ANTHROPIC_BASE_URL {base} names no port"))?;
        let mut hosts = vec![(normal(host), port)];
        for entry in extra {
            hosts.push(
                host_port(entry)
                    .ok_or_else(|| format!("--allow-egress {entry}: not HOST or HOST:PORT"))?,
            );
        }
        Ok(Allowed(hosts))
    }

    /// Whether `host` (a name or an address, as a client wrote it) at `port` is allowed.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = normal(host);
        self.0.iter().any(|(h, p)| *h == host && *p == port)
    }

    /// Allows the host and port of `url` too; `false` when it names none.
    pub fn add_url(&mut self, url: &str) -> bool {
        let Some((host, port)) = reqwest::Url::parse(url)
            .ok()
            .and_then(|u| Some((normal(u.host_str()?), u.port_or_known_default()?)))
        else {
            return false;
        };
        if !self.allows(&host, port) {
            self.0.push((host, port));
        }
        true
    }

    /// Each allowed `host:port`, for the operator.
    pub fn describe(&self) -> String {
        let hosts: Vec<String> = self.0.iter().map(|(h, p)| format!("{h}:{p}")).collect();
        hosts.join(", ")
    }
}

/// A host as compared: lower case, without the brackets of an IPv6 address or a final dot.
fn normal(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// `HOST[:PORT]` (an IPv6 address in brackets), port 443 when none is given.
fn host_port(entry: &str) -> Option<(String, u16)> {
    let url = reqwest::Url::parse(&format!("https://{entry}")).ok()?;
    let only_authority = url.path() == "/" && url.query().is_none() && url.username().is_empty();
    let host = url.host_str().filter(|_| only_authority)?;
    Some((normal(host), url.port_or_known_default()?))
}

/// The proxy: serves [`Allowed`] hosts on a Unix socket until dropped.
#[derive(Debug)]
pub struct Egress {
    socket: PathBuf,
    /// The socket's device and inode: its file is removed at the end only while it is this
    /// proxy's (a gateway started since on the same state directory has its own).
    bound: Option<(u64, u64)>,
    allowed: Arc<RwLock<Allowed>>,
    task: tokio::task::JoinHandle<()>,
}

impl Egress {
    /// Serves on a new socket at `socket` (what was there is removed first), owner-only.
    ///
    /// # Errors
    /// When the socket cannot be made.
    pub fn start(socket: &Path, allowed: Allowed) -> io::Result<Egress> {
        match std::fs::remove_file(socket) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = tokio::net::UnixListener::bind(socket)?;
        let bound = identity(socket);
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(io::Error::other)?;
        let allowed = Arc::new(RwLock::new(allowed));
        let shared = allowed.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (allowed, client) = (allowed.clone(), client.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        proxy(request, allowed.clone(), client.clone())
                    });
                    let served = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await;
                    if let Err(err) = served {
                        tracing::debug!(%err, "a sandbox's proxy connection ended in error");
                    }
                });
            }
        });
        Ok(Egress {
            socket: socket.to_owned(),
            bound,
            allowed: shared,
            task,
        })
    }

    /// Lets the sandboxes reach the host and port of `url` from now on (an MCP server the
    /// operator let callers name, `--allow-mcp-servers`).
    pub fn allow_url(&self, url: &str) {
        let added = self.allowed.write().expect("not poisoned").add_url(url);
        if !added {
            tracing::warn!(url, "an egress URL that names no host and port");
        }
    }

    /// What it reaches now.
    pub fn allowed(&self) -> Allowed {
        self.allowed.read().expect("not poisoned").clone()
    }

    /// The socket it serves on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        self.task.abort();
        if self.bound.is_some() && identity(&self.socket) == self.bound {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

/// The device and inode of the file at `path`, not following a link.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// One request of a sandboxed process.
async fn proxy(
    request: Request<Incoming>,
    allowed: Arc<RwLock<Allowed>>,
    client: reqwest::Client,
) -> Result<Response<Body>, Infallible> {
    let uri = request.uri().clone();
    let (Some(host), Some(port)) = (
        uri.host(),
        uri.port_u16().or(match uri.scheme_str() {
            Some("http") => Some(80),
            Some("https") => Some(443),
            _ => None,
        }),
    ) else {
        return Ok(refuse(
            StatusCode::BAD_REQUEST,
            "this is a proxy: CONNECT host:port, or a request in absolute form",
        ));
    };
    let allows = allowed.read().expect("not poisoned").allows(host, port);
    if !allows {
        tracing::info!(host, port, "refused a sandboxed process's connection");
        return Ok(refuse(
            StatusCode::FORBIDDEN,
            &format!("the gateway's sandbox does not reach {host}:{port}"),
        ));
    }
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    if request.method() == Method::CONNECT {
        let upstream = match tokio::net::TcpStream::connect((host.as_str(), port)).await {
            Ok(upstream) => upstream,
            Err(err) => {
                return Ok(refuse(
                    StatusCode::BAD_GATEWAY,
                    &format!("cannot reach {host}:{port}: {err}"),
                ))
            }
        };
        tokio::spawn(async move {
            let Ok(upgraded) = hyper::upgrade::on(request).await else {
                return;
            };
            let mut client_side = TokioIo::new(upgraded);
            let mut upstream = upstream;
            let _ = tokio::io::copy_bidirectional(&mut client_side, &mut upstream).await;
        });
        return Ok(Response::new(Body::empty()));
    }
    if uri.scheme_str() != Some("http") {
        return Ok(refuse(
            StatusCode::BAD_REQUEST,
            "only http:// requests are forwarded; https goes through CONNECT",
        ));
    }
    let (parts, body) = request.into_parts();
    let mut forwarded = client.request(parts.method, uri.to_string());
    for (name, value) in &parts.headers {
        if !hop_by_hop(name.as_str()) {
            forwarded = forwarded.header(name, value);
        }
    }
    let body = Body::new(body).into_data_stream();
    let answer = forwarded
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(err) => {
            return Ok(refuse(
                StatusCode::BAD_GATEWAY,
                &format!("cannot reach {host}:{port}: {err}"),
            ))
        }
    };
    let mut response = Response::builder().status(answer.status().as_u16());
    for (name, value) in answer.headers() {
        if !hop_by_hop(name.as_str()) {
            response = response.header(name.as_str(), value.as_bytes());
        }
    }
    Ok(response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap_or_else(|_| refuse(StatusCode::BAD_GATEWAY, "an unreadable answer")))
}

/// A header of one connection, not of the request it carries.
fn hop_by_hop(name: &str) -> bool {
    matches!(
        name.to_ascii_lowercase().as_str(),
        "connection"
            | "proxy-connection"
            | "keep-alive"
            | "proxy-authorization"
            | "proxy-authenticate"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
    )
}

/// An answer of the proxy's own.
fn refuse(status: StatusCode, why: &str) -> Response<Body> {
    let mut response = Response::new(Body::from(format!("{why}\n")));
    *response.status_mut() = status;
    response
}

/// The sandbox's first process (`ccwire sandbox-relay SOCKET -- COMMAND…`): listens on
/// [`RELAY_ADDR`] inside the sandbox's network namespace, carries each connection to the
/// gateway's proxy at `socket`, runs `command` (the CLI) with this process's standard input
/// and output, and returns its exit status once it has ended (128 + the signal that ended
/// it). Threads, not an async runtime: it stays small beside the CLI.
pub fn relay(socket: &Path, command: &[std::ffi::OsString]) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    let Some((program, args)) = command.split_first() else {
        eprintln!("ccwire sandbox-relay: no command to run");
        return 2;
    };
    let listener = match std::net::TcpListener::bind(RELAY_ADDR) {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("ccwire sandbox-relay: cannot listen on {RELAY_ADDR}: {err}");
            return 2;
        }
    };
    let mut child = match std::process::Command::new(program).args(args).spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln!(
                "ccwire sandbox-relay: cannot run {}: {err}",
                Path::new(program).display()
            );
            return 127;
        }
    };
    let socket = socket.to_owned();
    std::thread::spawn(move || {
        for inside in listener.incoming().flatten() {
            let socket = socket.clone();
            std::thread::spawn(move || {
                if let Ok(outside) = std::os::unix::net::UnixStream::connect(&socket) {
                    carry(inside, outside);
                }
            });
        }
    });
    match child.wait() {
        Ok(status) => status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(1),
        Err(_) => 1,
    }
}

/// Copies bytes both ways between a connection inside and the proxy outside until both ends
/// are done.
fn carry(inside: std::net::TcpStream, outside: std::os::unix::net::UnixStream) {
    use std::net::Shutdown;
    let (Ok(mut inside_read), Ok(mut outside_write)) = (inside.try_clone(), outside.try_clone())
    else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut inside_read, &mut outside_write);
        let _ = outside_write.shutdown(Shutdown::Write);
    });
    let (mut outside_read, mut inside_write) = (outside, inside);
    let _ = io::copy(&mut outside_read, &mut inside_write);
    let _ = inside_write.shutdown(Shutdown::Write);
    let _ = up.join();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_model_api_and_the_allowed_hosts_are_reached() {
        let allowed = Allowed::new(None, &["pypi.org".into(), "[::1]:8080".into()]).unwrap();
        assert!(allowed.allows("api.anthropic.com", 443));
        assert!(allowed.allows("API.Anthropic.com.", 443));
        assert!(!allowed.allows("api.anthropic.com", 80));
        assert!(allowed.allows("pypi.org", 443));
        assert!(allowed.allows("[::1]", 8080));
        assert!(!allowed.allows("127.0.0.1", 6379));
        assert!(!allowed.allows("evil.example", 443));
        let local = Allowed::new(Some("http://127.0.0.1:4000/prefix"), &[]).unwrap();
        assert!(local.allows("127.0.0.1", 4000));
        assert!(!local.allows("127.0.0.1", 4001));
        assert!(!local.allows("localhost", 4000));
        assert!(Allowed::new(None, &["a.example/path".into()]).is_err());
        assert!(Allowed::new(None, &["user@a.example".into()]).is_err());
        assert!(Allowed::new(Some("not a url"), &[]).is_err());
    }
}

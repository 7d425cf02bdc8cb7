//! The gateway's connections: an accept loop around hyper's HTTP/1.1 server that bounds what a
//! client can hold open. A request's head has [`ConnOptions::header_timeout`] once its first
//! byte came (then a 408 and the connection closes), a connection with no request in flight
//! and no byte either way is closed after [`ConnOptions::idle_timeout`], and connections over
//! the caps (overall, per client address) get a 503 at once. Responses that take long, or
//! stream for long, are never cut: the timers only run while no request is in flight.
//!
//! Shutdown stops accepting, lets every connection finish the response it is sending, and
//! closes idle ones.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::Router;
use ccwire_core::api::{Api, ApiError, ApiErrorKind};
use futures::task::AtomicWaker;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

/// How the gateway treats connections (`ccwire serve --header-timeout` and the like).
#[derive(Debug, Clone)]
pub struct ConnOptions {
    /// How long a client has to send a request's whole head once its first byte came; then
    /// it gets a 408 (`timeout_error`) and the connection is closed.
    pub header_timeout: Duration,
    /// How long a request's whole body may take to arrive once its head did; then it gets a
    /// 408 and the connection is closed.
    pub body_timeout: Duration,
    /// How long a connection may stay open with no request in flight and no byte either way
    /// (a new connection that sends nothing included); then it is closed.
    pub idle_timeout: Duration,
    /// The most connections open at once; one more gets a 503. `None`: half the open-file
    /// limit at start (the rest is for the CLIs' pipes), at most 8192.
    pub max_connections: Option<usize>,
    /// The most connections open at once from one client address (an IPv6 client: its /64);
    /// one more gets a 503.
    pub max_connections_per_ip: usize,
    /// The largest request head (request line and headers), in bytes; a larger one gets a 431.
    pub max_header_bytes: usize,
}

impl Default for ConnOptions {
    fn default() -> Self {
        ConnOptions {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(75),
            max_connections: None,
            max_connections_per_ip: 256,
            max_header_bytes: 64 * 1024,
        }
    }
}

/// The most connections by default, whatever the open-file limit.
const MAX_CONNECTIONS: usize = 8192;

/// How long a connection closed on the client (after an error answer, say) still reads and
/// drops what the client sends, so that the kernel does not reset the connection, which can
/// destroy the answer before the client has read it.
const LINGER: Duration = Duration::from_secs(2);

/// Serves `router` on `listener` until `shutdown` fires (or its sender is dropped); then it
/// stops accepting, lets every connection finish the response it is sending, and returns once
/// all are closed. A failed accept is logged and retried.
pub(super) async fn serve(
    listener: TcpListener,
    router: Router,
    options: ConnOptions,
    mut shutdown: oneshot::Receiver<()>,
) {
    let limits = Arc::new(Limits::new(&options));
    let mut http = http1::Builder::new();
    http.keep_alive(true)
        .max_header_size(options.max_header_bytes)
        // The head's deadline is the connection's own (hyper's closes without an answer, and
        // runs while a keep-alive connection is idle too).
        .header_read_timeout(None);
    let timeouts = Timeouts {
        header: options.header_timeout,
        idle: options.idle_timeout,
    };
    let (stop, stopped) = watch::channel(false);
    let mut connections = JoinSet::new();
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    accept_failed(err).await;
                    continue;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            _ = &mut shutdown => break,
        };
        // Without TCP_NODELAY a response's last small write can wait for the client's delayed
        // acknowledgement (tens of milliseconds).
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!(%err, "cannot set TCP_NODELAY");
        }
        match limits.admit(peer.ip()) {
            Ok(slot) => {
                let io = Guarded::new(tcp, slot, timeouts);
                let task = connection(io, http.clone(), router.clone(), stopped.clone());
                connections.spawn(task);
            }
            Err(error) => {
                tracing::debug!(%peer, %error, "refusing a connection");
                connections.spawn(refuse(tcp, error));
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    while connections.join_next().await.is_some() {}
}

/// Waits after a failed accept that is not about one connection (out of file descriptors,
/// say), so the loop does not spin.
async fn accept_failed(err: io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        err.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::warn!(%err, "cannot accept a connection");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Serves one connection until it ends, or until shutdown, which ends it once the response it
/// is sending is done.
async fn connection(
    io: Guarded,
    http: http1::Builder,
    router: Router,
    mut stopped: watch::Receiver<bool>,
) {
    let requests = io.requests.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let in_flight = InFlight::begin(&requests);
        let router = router.clone();
        async move {
            let response = router.oneshot(request.map(Body::new)).await?;
            Ok::<_, Infallible>(response.map(|body| Tracked {
                body,
                _in_flight: in_flight,
            }))
        }
    });
    let conn = http.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = async { let _ = stopped.wait_for(|stop| *stop).await; } => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(err) = result {
        tracing::debug!(%err, "a connection ended in error");
    }
}

/// Answers a connection over a cap with a 503, then closes it.
async fn refuse(mut tcp: TcpStream, error: ApiError) {
    let answer = raw_answer(&error);
    if let Ok(Ok(())) = tokio::time::timeout(LINGER, tcp.write_all(&answer)).await {
        linger(tcp).await;
    }
}

/// Closes a connection whose client may still be sending (see [`LINGER`]).
async fn linger(mut tcp: TcpStream) {
    let _ = tcp.shutdown().await;
    let mut scratch = [0u8; 4096];
    let drain = async { while matches!(tcp.read(&mut scratch).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// A whole HTTP/1.1 response carrying `error` in the Anthropic shape (the API of a request not
/// yet read is not known), which closes the connection.
fn raw_answer(error: &ApiError) -> Vec<u8> {
    let body = error.body(Api::Anthropic).to_string();
    let status = error.status();
    let reason = StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    let retry = error
        .retry_after
        .map(|s| format!("retry-after: {s}\r\n"))
        .unwrap_or_default();
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n{retry}connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The connections open, against the caps.
struct Limits {
    max: usize,
    max_per_ip: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    total: usize,
    by_ip: HashMap<IpAddr, usize>,
}

impl Limits {
    fn new(options: &ConnOptions) -> Limits {
        Limits {
            max: options
                .max_connections
                .unwrap_or_else(default_max_connections),
            max_per_ip: options.max_connections_per_ip,
            open: Mutex::new(Open::default()),
        }
    }

    /// A slot for a connection from `ip`, or the 503 it gets.
    fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, ApiError> {
        let ip = client_of(ip);
        let mut open = self.open.lock().expect("connections lock");
        let from_ip = open.by_ip.get(&ip).copied().unwrap_or(0);
        let refusal = if open.total >= self.max {
            Some(format!(
                "the gateway has too many connections open (at most {})",
                self.max
            ))
        } else if from_ip >= self.max_per_ip {
            Some(format!(
                "too many connections open from your address (at most {})",
                self.max_per_ip
            ))
        } else {
            None
        };
        if let Some(message) = refusal {
            return Err(ApiError::new(ApiErrorKind::Unavailable, message).retry_after(1));
        }
        open.total += 1;
        open.by_ip.insert(ip, from_ip + 1);
        Ok(Slot {
            limits: self.clone(),
            ip,
        })
    }
}

/// The address a connection counts against: an IPv4 client's own, an IPv6 client's /64 (a
/// host commonly has a whole one).
fn client_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let [a, b, c, d, ..] = v6.segments();
            IpAddr::V6(Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

fn default_max_connections() -> usize {
    use nix::sys::resource::{getrlimit, Resource};
    getrlimit(Resource::RLIMIT_NOFILE).map_or(MAX_CONNECTIONS, |(soft, _)| {
        usize::try_from(soft / 2).map_or(MAX_CONNECTIONS, |n| n.clamp(16, MAX_CONNECTIONS))
    })
}

/// An open connection, counted in [`Limits`] until dropped.
struct Slot {
    limits: Arc<Limits>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.limits.open.lock().expect("connections lock");
        open.total -= 1;
        if let Some(n) = open.by_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.by_ip.remove(&self.ip);
            }
        }
    }
}

/// A connection's requests, as its service sees them and its timers need them.
#[derive(Default)]
struct Requests {
    /// Requests whose response has not been sent whole.
    in_flight: AtomicUsize,
    /// Requests begun on the connection.
    started: AtomicU64,
    /// The connection's reader, woken when the last request in flight ends (its timers run).
    reader: AtomicWaker,
}

/// A request in flight, from its head read to its response's end.
struct InFlight(Arc<Requests>);

impl InFlight {
    fn begin(requests: &Arc<Requests>) -> InFlight {
        requests.started.fetch_add(1, Ordering::AcqRel);
        requests.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(requests.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.reader.wake();
        }
    }
}

/// A response body that keeps its request in flight until it is sent whole (or dropped).
struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[derive(Debug, Clone, Copy)]
struct Timeouts {
    header: Duration,
    idle: Duration,
}

/// What a connection's reader is doing.
enum Reading {
    /// Reading requests.
    Open,
    /// Writing an answer of its own (a 408), at `written` of it; then [`Reading::Ended`].
    Answering { answer: Vec<u8>, written: usize },
    /// Giving hyper the end of the stream, so it closes the connection.
    Ended,
}

/// A client's TCP stream with the connection's timers: they run in its reads while no request
/// is in flight (hyper is then waiting for a request's head).
struct Guarded {
    /// Held until drop, when a connection not shut down cleanly lingers.
    tcp: Option<TcpStream>,
    slot: Option<Slot>,
    requests: Arc<Requests>,
    timeouts: Timeouts,
    timer: Pin<Box<Sleep>>,
    /// The last byte read or written.
    last_io: Instant,
    /// [`Requests::started`] when the reader last looked.
    seen: u64,
    /// When the head of the next request began to arrive.
    head_since: Option<Instant>,
    reading: Reading,
    /// hyper shut the connection down (it ended cleanly).
    shut_down: bool,
}

impl Guarded {
    fn new(tcp: TcpStream, slot: Slot, timeouts: Timeouts) -> Guarded {
        let now = Instant::now();
        Guarded {
            tcp: Some(tcp),
            slot: Some(slot),
            requests: Arc::default(),
            timeouts,
            timer: Box::pin(tokio::time::sleep_until(now + timeouts.idle)),
            last_io: now,
            seen: 0,
            head_since: None,
            reading: Reading::Open,
            shut_down: false,
        }
    }

    fn tcp(&mut self) -> Pin<&mut TcpStream> {
        Pin::new(self.tcp.as_mut().expect("the stream is held until drop"))
    }

    /// Reads while open; with no request in flight, applies the head's or the idle deadline.
    fn poll_open(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.requests.reader.register(cx.waker());
        let started = self.requests.started.load(Ordering::Acquire);
        if started != self.seen {
            self.seen = started;
            self.head_since = None;
        }
        let idle = self.requests.in_flight.load(Ordering::Acquire) == 0;
        let before = buf.filled().len();
        let poll = self.tcp().poll_read(cx, buf);
        match &poll {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                self.last_io = Instant::now();
                if idle && self.head_since.is_none() {
                    self.head_since = Some(self.last_io);
                }
                return poll;
            }
            Poll::Pending if idle => {}
            _ => return poll,
        }
        let (deadline, head) = match self.head_since {
            Some(since) => (since + self.timeouts.header, true),
            None => (self.last_io + self.timeouts.idle, false),
        };
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        ready!(self.timer.as_mut().poll(cx));
        if head {
            tracing::debug!("a request's head did not arrive in time");
            let secs = self.timeouts.header.as_secs_f64();
            let message = format!("the request's headers did not arrive within {secs} s");
            let error = ApiError::new(ApiErrorKind::Timeout, message);
            self.reading = Reading::Answering {
                answer: raw_answer(&error),
                written: 0,
            };
        } else {
            tracing::trace!("closing an idle connection");
            self.reading = Reading::Ended;
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match &mut this.reading {
                Reading::Open => {
                    let before = buf.filled().len();
                    ready!(this.poll_open(cx, buf))?;
                    // Bytes, the client's end, or a deadline that changed what the reader does.
                    if buf.filled().len() > before || matches!(this.reading, Reading::Open) {
                        return Poll::Ready(Ok(()));
                    }
                }
                Reading::Answering { answer, written } => {
                    let tcp = Pin::new(this.tcp.as_mut().expect("held until drop"));
                    match ready!(tcp.poll_write(cx, &answer[*written..])) {
                        Ok(n) if n > 0 && *written + n < answer.len() => *written += n,
                        _ => this.reading = Reading::Ended,
                    }
                }
                Reading::Ended => return Poll::Ready(Ok(())),
            }
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = this.tcp().poll_write(cx, data);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            this.last_io = Instant::now();
        }
        poll
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = this.tcp().poll_write_vectored(cx, data);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            this.last_io = Instant::now();
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.as_ref().is_some_and(|t| t.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().tcp().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = this.tcp().poll_shutdown(cx);
        this.shut_down |= poll.is_ready();
        poll
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // hyper drops a connection it answered with an error (a 431, or the 408 above) without
        // shutting it down, the rest of the client's request unread.
        if self.shut_down {
            return;
        }
        let (Some(tcp), Ok(runtime)) = (self.tcp.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let slot = self.slot.take();
        runtime.spawn(async move {
            linger(tcp).await;
            drop(slot);
        });
    }
}

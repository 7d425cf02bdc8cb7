//! End-to-end: what `ccwire serve` lets a client hold — request heads and bodies that never
//! finish get a 408, idle connections are closed, connections over the caps get a 503, heads
//! too large a 431 — and that none of it touches well-behaved clients or running streams.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ccwire_host::serve::{ConnOptions, GatewayOptions};
use serde_json::Value;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A gateway with these connection options.
async fn start(conn: ConnOptions) -> Gw {
    Gw::start(|o: &mut GatewayOptions| o.conn = conn).await
}

/// Reads until the gateway closes the connection, for at most `within`.
/// A connection that sent a Messages request's head, declaring a body of `length` bytes, and
/// the first few bytes of it.
async fn body_begun(gw: &Gw, length: u64) -> TcpStream {
    let addr = gw.server().addr();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         anthropic-version: 2023-06-01\r\ncontent-length: {length}\r\n\r\n{{\"model\":"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    stream
}

async fn until_closed(stream: &mut TcpStream, within: Duration) -> String {
    let mut bytes = Vec::new();
    tokio::time::timeout(within, stream.read_to_end(&mut bytes))
        .await
        .expect("the gateway closes the connection in time")
        .expect("a clean close");
    String::from_utf8_lossy(&bytes).into_owned()
}

/// One whole response off a keep-alive connection (its body sized by `content-length`).
async fn one_response(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("an answer in time")
            .expect("a read");
        assert!(
            n > 0,
            "closed mid-response: {}",
            String::from_utf8_lossy(&bytes)
        );
        bytes.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&bytes);
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length = text[..end]
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")?
                    .parse()
                    .ok()
            })
            .unwrap_or(0usize);
        if bytes.len() >= end + 4 + length {
            return text.into_owned();
        }
    }
}

fn body_of(answer: &str) -> Value {
    let (_, body) = answer.split_once("\r\n\r\n").expect("a head");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

fn get_health(addr: SocketAddr, close: bool) -> String {
    let connection = if close { "close" } else { "keep-alive" };
    format!("GET /health HTTP/1.1\r\nhost: {addr}\r\nconnection: {connection}\r\n\r\n")
}

fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// Sends `head` a byte every 50 ms, never its end; returns what the gateway answered before
/// it closed the connection, and when.
async fn drip(addr: SocketAddr, head: String) -> (String, Duration) {
    let opened = Instant::now();
    let (mut read, mut write) = TcpStream::connect(addr).await.unwrap().into_split();
    let writer = tokio::spawn(async move {
        for byte in head.bytes() {
            if write.write_all(&[byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        write
    });
    let mut bytes = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), read.read_to_end(&mut bytes)).await;
    writer.abort();
    read.expect("the gateway closes the connection in time")
        .expect("a clean close");
    (
        String::from_utf8_lossy(&bytes).into_owned(),
        opened.elapsed(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_heads_get_a_408_and_are_closed_while_others_are_served() {
    let gw = start(ConnOptions {
        header_timeout: Duration::from_secs(1),
        max_connections_per_ip: 1000,
        ..ConnOptions::default()
    })
    .await;
    let addr = gw.server().addr();
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         anthropic-version: 2023-06-01\r\n"
    );
    let slow: Vec<_> = (0..300)
        .map(|_| tokio::spawn(drip(addr, head.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let started = Instant::now();
    let health = gw.http.get(gw.url("/health")).send().await.unwrap();
    let served_in = started.elapsed();

    assert_eq!(health.status(), 200);
    assert!(served_in < Duration::from_millis(500), "{served_in:?}");
    for task in slow {
        let (answer, after) = task.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
        assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
        assert_eq!(
            body_of(&answer)["error"]["type"],
            "timeout_error",
            "{answer}"
        );
        assert!(after >= Duration::from_millis(950), "{after:?}");
        assert!(after < Duration::from_secs(4), "{after:?}");
    }
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_leave_others_served_and_are_closed_after_the_idle_timeout() {
    raise_fd_limit();
    let gw = start(ConnOptions {
        idle_timeout: Duration::from_secs(2),
        max_connections: Some(5000),
        max_connections_per_ip: 5000,
        ..ConnOptions::default()
    })
    .await;
    let addr = gw.server().addr();
    let opened = Instant::now();
    let mut idle = Vec::with_capacity(2000);
    for _ in 0..2000 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }

    let started = Instant::now();
    let health = gw.http.get(gw.url("/health")).send().await.unwrap();
    let served_in = started.elapsed();
    assert_eq!(health.status(), 200);
    assert!(served_in < Duration::from_millis(500), "{served_in:?}");

    tokio::time::sleep(
        (opened + Duration::from_millis(1500)).saturating_duration_since(Instant::now()),
    )
    .await;
    let mut buf = [0u8; 16];
    let open = idle
        .iter()
        .filter(|s| matches!(s.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock))
        .count();
    assert_eq!(open, 2000, "closed before the idle timeout");
    let closes = idle
        .into_iter()
        .map(|mut s| async move { until_closed(&mut s, Duration::from_secs(5)).await });
    let answers = futures::future::join_all(closes).await;
    assert!(
        answers.iter().all(String::is_empty),
        "an idle connection got bytes"
    );
    assert!(
        opened.elapsed() < Duration::from_secs(6),
        "{:?}",
        opened.elapsed()
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keep_alive_connection_is_closed_once_idle_for_the_idle_timeout() {
    let gw = start(ConnOptions {
        idle_timeout: Duration::from_secs(1),
        ..ConnOptions::default()
    })
    .await;
    let addr = gw.server().addr();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // Requests 600 ms apart keep it open past the timeout.
    for i in 0..3 {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(600)).await;
        }
        stream
            .write_all(get_health(addr, false).as_bytes())
            .await
            .unwrap();
        let answer = one_response(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    }

    let idle_since = Instant::now();
    let rest = until_closed(&mut stream, Duration::from_secs(3)).await;

    assert_eq!(rest, "");
    assert!(
        idle_since.elapsed() >= Duration::from_millis(900),
        "{:?}",
        idle_since.elapsed()
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_stream_in_flight_outlives_the_idle_timeout() {
    let gw = start(ConnOptions {
        idle_timeout: Duration::from_millis(500),
        ..ConnOptions::default()
    })
    .await;
    let addr = gw.server().addr();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET /v1/approvals/events HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();

    let mut bytes = Vec::new();
    let still_open =
        tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut bytes)).await;

    let text = String::from_utf8_lossy(&bytes);
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    assert!(text.contains("text/event-stream"), "{text}");
    assert!(still_open.is_err(), "the stream was cut: {text}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_the_per_address_cap_gets_a_503_and_is_closed() {
    let gw = start(ConnOptions {
        max_connections_per_ip: 3,
        ..ConnOptions::default()
    })
    .await;
    let addr = gw.server().addr();
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(get_health(addr, false).as_bytes())
            .await
            .unwrap();
        assert!(one_response(&mut stream).await.starts_with("HTTP/1.1 200 "));
        held.push(stream);
    }

    let mut over = TcpStream::connect(addr).await.unwrap();
    let answer = until_closed(&mut over, Duration::from_secs(5)).await;

    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(answer.contains("\r\nretry-after: 1\r\n"), "{answer}");
    assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
    let body = body_of(&answer);
    assert_eq!(body["type"], "error", "{answer}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("your address"),
        "{answer}"
    );
    // A slot freed is a slot to use.
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut again = TcpStream::connect(addr).await.unwrap();
    again
        .write_all(get_health(addr, true).as_bytes())
        .await
        .unwrap();
    let answer = until_closed(&mut again, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_the_overall_cap_gets_a_503() {
    let gw = start(ConnOptions {
        max_connections: Some(2),
        ..ConnOptions::default()
    })
    .await;
    let addr = gw.server().addr();
    let _held = [
        TcpStream::connect(addr).await.unwrap(),
        TcpStream::connect(addr).await.unwrap(),
    ];
    tokio::time::sleep(Duration::from_millis(100)).await;

    let mut over = TcpStream::connect(addr).await.unwrap();
    let answer = until_closed(&mut over, Duration::from_secs(5)).await;

    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(answer.contains("\r\nretry-after: 1\r\n"), "{answer}");
    assert!(body_of(&answer)["error"]["message"]
        .as_str()
        .unwrap()
        .contains("too many connections"));
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stalls_gets_a_408() {
    let gw = start(ConnOptions {
        body_timeout: Duration::from_secs(1),
        ..ConnOptions::default()
    })
    .await;
    let sent = Instant::now();
    let mut stream = body_begun(&gw, 100).await;

    let answer = until_closed(&mut stream, Duration::from_secs(5)).await;

    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
    let body = body_of(&answer);
    assert_eq!(body["error"]["type"], "timeout_error", "{answer}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("within 1 s"),
        "{answer}"
    );
    assert!(
        sent.elapsed() >= Duration::from_millis(950),
        "{:?}",
        sent.elapsed()
    );
    assert!(gw.server().session_pids().is_empty());
    gw.stop().await;
}

/// A head that declares a body over the gateway's limit is answered from the head: the
/// gateway does not wait for a body it would refuse (here it would wait an hour).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_declared_too_large_gets_a_413_from_the_head() {
    let gw = start(ConnOptions {
        body_timeout: Duration::from_secs(3600),
        ..ConnOptions::default()
    })
    .await;
    let mut stream = body_begun(&gw, 99_999_999_999).await;

    let answer = until_closed(&mut stream, Duration::from_secs(30)).await;

    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
    let body = body_of(&answer);
    assert_eq!(body["error"]["type"], "request_too_large", "{answer}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_kb_header_gets_a_431() {
    let gw = start(ConnOptions::default()).await;
    let addr = gw.server().addr();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let big = "a".repeat(100 * 1024);
    let request = format!(
        "GET /health HTTP/1.1\r\nhost: {addr}\r\nx-big: {big}\r\nconnection: close\r\n\r\n"
    );
    let _ = stream.write_all(request.as_bytes()).await;

    let answer = until_closed(&mut stream, Duration::from_secs(5)).await;

    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    gw.stop().await;
}

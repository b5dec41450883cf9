//! Known answers of the WebSocket transport (`ws://`, `wss://`) against the built-in target's
//! `/ws/` paths: every ping answered and counted, the RTT of a known delay, a room's messages
//! to every member (members² of them); the upgrade's cookies and headers as the server saw
//! them, a refused upgrade counted by its status, a close frame as `ws_closed`, and wss through
//! a TLS front made at test time.

mod support;

use horde_engine::Snapshot;
use horde_metrics::MessageCounts;
use horde_target::{TargetConfig, TargetHandle};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use support::{
    closed_value, entries, latency, run_to_end, scenario_plan, step_error_kinds, step_errors, step_ok, step_requests,
};

fn target() -> TargetHandle {
    TargetHandle::start(TargetConfig::default()).expect("target starts")
}

fn ws_url(target: &TargetHandle, path: &str) -> String {
    format!("ws://{}{path}", target.local_addr())
}

fn messages(snapshots: &[Snapshot], step: &str) -> MessageCounts {
    let mut total = MessageCounts::default();
    for entry in entries(snapshots, step) {
        total.add(&entry.messages);
    }
    total
}

fn details(snapshots: &[Snapshot], step: &str) -> Vec<String> {
    entries(snapshots, step)
        .flat_map(|entry| entry.error_details.iter().map(|(kind, message, _)| format!("{kind}: {message}")))
        .collect()
}

fn ping_loop(think_ms: f64) -> Value {
    json!([
        {"type": "ping", "name": "rtt", "text": "ping {{ seq }}", "reply_seq": "ping (\\d+)", "timeout_ms": 1000,
         "think_time": {"type": "constant", "duration_ms": think_ms}}
    ])
}

#[test]
fn every_ping_over_a_websocket_is_answered_and_counted() {
    let target = target();
    let plan =
        scenario_plan(&ws_url(&target, "/ws/echo"), json!({"steps": ping_loop(5.0), "workload": closed_value(4, 1.0)}));
    let snapshots = run_to_end(&plan, 1);
    let pings = step_requests(&snapshots, "rtt");
    assert!(pings > 100, "only {pings} pings");
    assert_eq!(
        step_ok(&snapshots, "rtt"),
        pings,
        "{:?} {:?}",
        step_error_kinds(&snapshots, "rtt"),
        details(&snapshots, "rtt")
    );
    let counts = messages(&snapshots, "rtt");
    assert_eq!((counts.sent, counts.received, counts.late), (pings, pings, 0));
    assert_eq!(target.websocket_counts().ws_in.load(Ordering::Relaxed), pings, "the target saw each ping once");
    assert_eq!(latency(&snapshots, "rtt").len(), pings);
    assert_eq!(support::connections_opened(&snapshots), 4, "one connection per VU, kept");
    // "ping N" (6 bytes or more) in a frame: 6 header bytes out (masked), 2 in.
    let sent: u64 = entries(&snapshots, "rtt").map(|entry| entry.bytes_sent).sum();
    let received: u64 = entries(&snapshots, "rtt").map(|entry| entry.bytes_received).sum();
    assert!(sent >= 12 * pings && received >= 8 * pings, "{sent} bytes sent, {received} received");
}

#[test]
fn the_round_trip_of_a_known_delay_is_that_delay() {
    let target = target();
    let plan = scenario_plan(
        &ws_url(&target, "/ws/delay/20"),
        json!({"steps": ping_loop(5.0), "workload": closed_value(2, 1.0)}),
    );
    let snapshots = run_to_end(&plan, 1);
    let rtt = latency(&snapshots, "rtt");
    assert!(rtt.len() > 20, "only {} pings", rtt.len());
    assert_eq!(
        step_ok(&snapshots, "rtt"),
        step_requests(&snapshots, "rtt"),
        "{:?}",
        step_error_kinds(&snapshots, "rtt")
    );
    let (min_ms, median_ms) = (rtt.min() as f64 / 1000.0, rtt.value_at_quantile(0.5) as f64 / 1000.0);
    eprintln!("WebSocket, 20 ms server delay: RTT min {min_ms} ms, median {median_ms} ms over {} pings", rtt.len());
    assert!(min_ms >= 20.0, "min {min_ms} ms");
    assert!(median_ms <= 24.0, "median {median_ms} ms");
}

#[test]
fn a_rooms_messages_reach_every_member_squared() {
    let target = target();
    let players = 5u64;
    // Each member connects, waits for the others, sends once, then reads every member's message.
    let steps = json!([
        {"type": "connect", "name": "join"},
        {"type": "think", "think_time": {"type": "constant", "duration_ms": 400}},
        {"type": "send", "name": "move", "text": "move {{ vu }}"},
        {"type": "loop", "count": players, "steps": [{"type": "receive", "name": "moves", "match": "^move", "timeout_ms": 2000}]},
        {"type": "think", "think_time": {"type": "constant", "duration_ms": 60000}}
    ]);
    let mut plan = scenario_plan(
        &ws_url(&target, "/ws/rooms/arena"),
        json!({"steps": steps, "workload": closed_value(players, 1.5)}),
    );
    plan.graceful_stop_s = 1.0;
    let snapshots = run_to_end(&plan, 1);
    assert_eq!(step_ok(&snapshots, "join"), players);
    assert_eq!(step_ok(&snapshots, "move"), players);
    assert_eq!(step_ok(&snapshots, "moves"), players * players, "{:?}", step_error_kinds(&snapshots, "moves"));
    assert_eq!(messages(&snapshots, "moves").received, players * players);
    let counts = target.websocket_counts();
    assert_eq!(
        (counts.ws_in.load(Ordering::Relaxed), counts.ws_out.load(Ordering::Relaxed)),
        (players, players * players)
    );
}

#[test]
fn a_refused_upgrade_is_counted_by_its_status() {
    let target = target();
    let plan = scenario_plan(
        &ws_url(&target, "/ws/nowhere"),
        json!({"steps": ping_loop(0.0), "workload": closed_value(1, 0.3)}),
    );
    let snapshots = run_to_end(&plan, 1);
    let refused = step_errors(&snapshots, "rtt", "status_404");
    assert!(refused > 0 && refused == step_requests(&snapshots, "rtt"), "{:?}", step_error_kinds(&snapshots, "rtt"));
    assert!(
        details(&snapshots, "rtt").iter().any(|detail| detail.contains("refused: 404")),
        "{:?}",
        details(&snapshots, "rtt")
    );
}

/// A server that sets a cookie on `GET /login`, and on an upgrade answers 101, sends the
/// upgrade's request head as one text message, then closes with code 4001.
fn head_echoing_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || serve_heads(stream));
        }
    });
    address
}

fn serve_heads(mut stream: TcpStream) {
    let mut pending = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = pending.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..end + 4]).into_owned();
            pending.drain(..end + 4);
            if head.starts_with("GET /login") {
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\nSet-Cookie: session=abc123; Path=/\r\nContent-Length: 2\r\n\r\nok");
                continue;
            }
            let key = head
                .lines()
                .find_map(|line| line.strip_prefix("Sec-WebSocket-Key: "))
                .unwrap_or_default()
                .trim()
                .to_owned();
            let accept = horde_target::websocket_accept_key(key.as_bytes());
            let mut reply = format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n")
                .into_bytes();
            reply.extend_from_slice(&[0x81, 126]);
            reply.extend_from_slice(&(head.len() as u16).to_be_bytes());
            reply.extend_from_slice(head.as_bytes());
            reply.extend_from_slice(&[0x88, 5, 0x0F, 0xA1, b'b', b'y', b'e']);
            let _ = stream.write_all(&reply);
            // Reads until the client hangs up (its close reply included).
            while matches!(stream.read(&mut chunk), Ok(read) if read > 0) {}
            return;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(read) => pending.extend_from_slice(&chunk[..read]),
        }
    }
}

#[test]
fn the_upgrade_carries_the_jars_cookies_and_the_plans_headers_and_a_close_frame_is_ws_closed() {
    let address = head_echoing_server();
    let steps = json!([
        {"type": "http", "name": "login", "method": "GET", "path": "/login"},
        {"type": "connect", "name": "upgrade", "path": "/ws/game?vu={{ vu }}", "headers": {"X-Token": "t-{{ vu }}"}},
        {"type": "receive", "name": "head", "timeout_ms": 2000, "checks": [
            {"type": "body_contains", "text": "GET /ws/game?vu=0 HTTP/1.1"},
            {"type": "body_contains", "text": "Cookie: session=abc123"},
            {"type": "body_contains", "text": "X-Token: t-0"},
            {"type": "body_contains", "text": "X-Plan: p1"}]},
        {"type": "receive", "name": "after", "timeout_ms": 2000},
    ]);
    let mut plan = scenario_plan(&format!("ws://{address}"), json!({"steps": steps, "workload": closed_value(1, 0.3)}));
    plan.target.headers = vec![("X-Plan".into(), "p1".into())];
    let snapshots = run_to_end(&plan, 1);
    let (upgrades, heads, afters) =
        (step_requests(&snapshots, "upgrade"), step_requests(&snapshots, "head"), step_requests(&snapshots, "after"));
    // The run's end may fall between two steps of the last iteration.
    assert!(
        afters > 0 && upgrades - heads <= 1 && heads - afters <= 1,
        "{upgrades} upgrades, {heads} heads, {afters} afters"
    );
    assert_eq!(step_ok(&snapshots, "upgrade"), upgrades);
    assert_eq!(
        step_ok(&snapshots, "head"),
        heads,
        "{:?} {:?}",
        step_error_kinds(&snapshots, "head"),
        details(&snapshots, "head")
    );
    assert_eq!(step_errors(&snapshots, "after", "ws_closed"), afters, "{:?}", step_error_kinds(&snapshots, "after"));
    assert!(
        details(&snapshots, "after").iter().any(|detail| detail.contains("code 4001: bye")),
        "{:?}",
        details(&snapshots, "after")
    );
}

/// A TLS front (self-signed, made now) that passes each connection on to `backend` in clear.
fn tls_front(backend: SocketAddr) -> SocketAddr {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .expect("server certificate");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("non-blocking");
    let address = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let (Ok(mut tls), Ok(mut plain)) =
                        (acceptor.accept(stream).await, tokio::net::TcpStream::connect(backend).await)
                    else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
    });
    address
}

#[test]
fn wss_goes_through_tls_with_the_plans_trust() {
    let target = target();
    let front = tls_front(target.local_addr());
    let url = format!("wss://127.0.0.1:{}/ws/echo", front.port());
    let plan = scenario_plan(&url, json!({"steps": ping_loop(5.0), "workload": closed_value(2, 0.6)}));
    // A self-signed certificate: refused as TLS unless the plan says insecure.
    let snapshots = run_to_end(&plan, 1);
    assert!(step_errors(&snapshots, "rtt", "tls") > 0, "{:?}", step_error_kinds(&snapshots, "rtt"));
    let mut plan = plan;
    plan.target.insecure = true;
    let snapshots = run_to_end(&plan, 1);
    let pings = step_requests(&snapshots, "rtt");
    assert!(pings > 20, "only {pings} pings");
    assert_eq!(
        step_ok(&snapshots, "rtt"),
        pings,
        "{:?} {:?}",
        step_error_kinds(&snapshots, "rtt"),
        details(&snapshots, "rtt")
    );
    assert_eq!(target.websocket_counts().ws_in.load(Ordering::Relaxed), pings);
    std::thread::sleep(Duration::from_millis(10));
}

#[test]
fn a_ping_control_frame_is_answered_by_the_servers_pong() {
    let target = target();
    let steps = json!([
        {"type": "ping", "name": "rtt", "text": "{{ seq }}", "timeout_ms": 1000, "control_frame": true,
         "think_time": {"type": "constant", "duration_ms": 5.0}}
    ]);
    let plan =
        scenario_plan(&ws_url(&target, "/ws/delay/50"), json!({"steps": steps, "workload": closed_value(2, 0.6)}));
    let snapshots = run_to_end(&plan, 1);
    let pings = step_requests(&snapshots, "rtt");
    assert!(pings > 50, "only {pings} pings");
    assert_eq!(
        step_ok(&snapshots, "rtt"),
        pings,
        "{:?} {:?}",
        step_error_kinds(&snapshots, "rtt"),
        details(&snapshots, "rtt")
    );
    let counts = messages(&snapshots, "rtt");
    assert_eq!((counts.sent, counts.received), (pings, pings));
    // The WebSocket stack answers at once: the route's 50 ms delay is for messages only.
    assert!(latency(&snapshots, "rtt").value_at_quantile(0.5) < 20_000);
    assert_eq!(target.websocket_counts().ws_in.load(Ordering::Relaxed), 0, "a ping frame is no message");
}

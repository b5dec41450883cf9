//! Message targets that do not answer, against real sockets on loopback: a closed UDP or KCP port
//! (the kernel's ICMP port unreachable comes back) is refused, never lost; a peer that takes
//! messages and never answers is told apart from loss in the error's words; a ping over TCP is
//! late, never lost; a stream off the plan's framing says which protocol it broke.

mod support;

use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, UdpSocket};
use std::time::{Duration, Instant};
use support::{
    closed_value, entries, run_to_end, scenario_plan, step_error_kinds, step_errors, step_ok, step_requests,
};

/// A UDP port on 127.0.0.1 where nothing listens (bound, noted, released).
fn closed_udp_port() -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.local_addr().unwrap().port()
}

/// A message step's error details over the run, as "kind: message".
fn details(snapshots: &[horde_engine::Snapshot], step: &str) -> Vec<String> {
    entries(snapshots, step)
        .flat_map(|entry| entry.error_details.iter().map(|(kind, message, _)| format!("{kind}: {message}")))
        .collect()
}

fn hello_and_ping(url: &str, timeout_ms: f64, seconds: f64) -> horde_plan::Plan {
    let steps = json!([
        {"type": "send", "name": "hello", "text": "hello {{ seq }}"},
        {"type": "ping", "name": "rtt", "reply_seq": "pong (\\d+)", "timeout_ms": timeout_ms},
    ]);
    scenario_plan(url, json!({"steps": steps, "workload": closed_value(1, seconds)}))
}

fn received(snapshots: &[horde_engine::Snapshot]) -> u64 {
    snapshots.iter().flat_map(|snapshot| &snapshot.steps).map(|entry| entry.messages.received).sum()
}

/// A closed port answers every datagram with an ICMP port unreachable: the ping is refused in
/// those words, never lost, and the VU backs off as after a refused connect (not a new socket
/// and a refusal every few microseconds).
fn a_closed_datagram_port_is_refused(scheme: &str) {
    let url = format!("{scheme}://127.0.0.1:{}", closed_udp_port());
    let snapshots = run_to_end(&hello_and_ping(&url, 200.0, 1.0), 1);
    let kinds = step_error_kinds(&snapshots, "rtt");
    assert!(kinds.keys().all(|kind| kind == "refused") && kinds.contains_key("refused"), "{url}: {kinds:?}");
    let words = details(&snapshots, "rtt");
    assert!(words.iter().all(|line| line.contains("ICMP port unreachable") && line.contains(&url)), "{url}: {words:?}");
    assert_eq!(received(&snapshots), 0);
    let backoffs: u64 = snapshots.iter().map(|snapshot| snapshot.connect_backoffs).sum();
    assert!(backoffs > 0, "{url}: no back-off after a refusal");
    assert!(
        step_requests(&snapshots, "rtt") < 50,
        "{url}: {} pings in a second to a closed port",
        step_requests(&snapshots, "rtt")
    );
}

#[test]
fn a_closed_udp_port_is_refused_not_lost() {
    a_closed_datagram_port_is_refused("udp");
}

#[test]
fn a_closed_kcp_port_is_refused_not_lost() {
    a_closed_datagram_port_is_refused("kcp");
}

#[test]
fn a_udp_peer_that_never_answers_is_told_apart_from_loss() {
    // Bound, so no ICMP comes back; it reads nothing and answers nothing.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let url = format!("udp://{}", silent.local_addr().unwrap());
    let snapshots = run_to_end(&hello_and_ping(&url, 100.0, 0.6), 1);
    assert!(step_errors(&snapshots, "rtt", "lost") > 0, "{:?}", step_error_kinds(&snapshots, "rtt"));
    let words = details(&snapshots, "rtt");
    assert!(words.iter().all(|line| line.contains(&format!("nothing has come from {url}"))), "{words:?}");
    assert_eq!(step_ok(&snapshots, "hello"), step_requests(&snapshots, "hello"), "a datagram sent is sent");
    drop(silent);
}

/// A TCP server on loopback that accepts and answers each line with `answer` (none: never)
/// after `delay`; it keeps its connections for `life`.
fn tcp_server(
    answer: Option<fn(&str) -> String>,
    delay: Duration,
    life: Duration,
) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("tcp://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let server = std::thread::spawn(move || {
        let end = Instant::now() + life;
        let mut connections = Vec::new();
        while Instant::now() < end {
            if let Ok((stream, _)) = listener.accept() {
                stream.set_nonblocking(false).unwrap();
                let Some(answer) = answer else {
                    connections.push(stream);
                    continue;
                };
                connections.push(stream.try_clone().unwrap());
                std::thread::spawn(move || {
                    let mut writer = stream.try_clone().unwrap();
                    for line in BufReader::new(stream).lines() {
                        let Ok(line) = line else { return };
                        std::thread::sleep(delay);
                        if writer.write_all(format!("{}\n", answer(&line)).as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    (url, server)
}

#[test]
fn a_tcp_peer_that_accepts_and_never_answers_times_pings_out_in_those_words() {
    let (url, server) = tcp_server(None, Duration::ZERO, Duration::from_secs(3));
    let snapshots = run_to_end(&hello_and_ping(&url, 100.0, 0.6), 1);
    let kinds = step_error_kinds(&snapshots, "rtt");
    assert!(
        kinds.keys().all(|kind| kind == "timeout") && kinds.contains_key("timeout"),
        "TCP loses nothing: {kinds:?}"
    );
    let words = details(&snapshots, "rtt");
    assert!(words.iter().all(|line| line.contains(&format!("nothing has come from {url}"))), "{words:?}");
    assert_eq!(support::connections_opened(&snapshots), 1, "a silent peer keeps its connection");
    server.join().unwrap();
}

#[test]
fn a_tcp_ping_past_its_timeout_is_late_not_lost() {
    // Every pong comes 150 ms after its ping, which waits 50 ms: each ping times out, and its
    // pong, when it comes, is counted late.
    let pong: fn(&str) -> String = |line| line.replace("ping", "pong");
    let (url, server) = tcp_server(Some(pong), Duration::from_millis(150), Duration::from_secs(3));
    let steps = json!([{"type": "ping", "name": "rtt", "reply_seq": "pong (\\d+)", "timeout_ms": 50,
                        "think_time": {"type": "constant", "duration_ms": 200}}]);
    let snapshots = run_to_end(&scenario_plan(&url, json!({"steps": steps, "workload": closed_value(1, 1.0)})), 1);
    let pings = step_requests(&snapshots, "rtt");
    assert!(pings >= 3, "{pings} pings");
    assert_eq!(step_errors(&snapshots, "rtt", "timeout"), pings, "{:?}", step_error_kinds(&snapshots, "rtt"));
    let late: u64 = entries(&snapshots, "rtt").map(|entry| entry.messages.late).sum();
    assert!(late >= pings - 1, "{late} of {pings} pongs counted late");
    // Once the peer has answered, a ping without its reply is no longer from a silent peer.
    assert!(
        details(&snapshots, "rtt").iter().any(|line| !line.contains("nothing has come")),
        "{:?}",
        details(&snapshots, "rtt")
    );
    server.join().unwrap();
}

#[test]
fn a_stream_off_the_plans_framing_names_its_protocol() {
    // A length field announcing 4 GiB: no message of the plan's framing.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("tcp://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream.write_all(&[0xFF, 0xFF, 0xFF, 0xFF]).unwrap();
        std::thread::sleep(Duration::from_millis(500));
    });
    let steps = json!([{"type": "receive", "name": "welcome", "timeout_ms": 300},
                       {"type": "think", "think_time": {"type": "constant", "duration_ms": 60000}}]);
    let mut plan = scenario_plan(&url, json!({"steps": steps, "workload": closed_value(1, 0.3)}));
    plan.target.framing = Some(horde_plan::Framing::Length { bytes: 4, endian: horde_plan::Endian::Big, adjust: 0 });
    plan.graceful_stop_s = 0.5;
    let snapshots = run_to_end(&plan, 1);
    assert_eq!(step_errors(&snapshots, "welcome", "protocol"), 1, "{:?}", step_error_kinds(&snapshots, "welcome"));
    let words = details(&snapshots, "welcome");
    assert!(
        words[0].contains("tcp:// stream does not follow target.framing") && !words[0].contains("HTTP"),
        "{words:?}"
    );
    server.join().unwrap();
}

//! Every documented error kind, provoked on purpose: a failed request is counted under its kind,
//! the run goes on and finishes normally. Also response framings (chunked, close-delimited,
//! `Connection: close`, large bodies) and connection reuse.

mod support;

use horde_target::{TargetConfig, TargetHandle};
use std::time::Duration;
use support::{
    assert_accounting, bytes_received, closed, closed_port, connections_opened, custom_plan, error_kinds, get_step,
    latency, run_timed, send, total_ok, total_requests, RawServer,
};

fn target() -> TargetHandle {
    TargetHandle::start(TargetConfig::default()).expect("target starts")
}

/// The run's error kinds, as a sorted list of labels.
fn kinds(snapshots: &[horde_engine::Snapshot]) -> Vec<String> {
    error_kinds(snapshots).into_keys().collect()
}

#[test]
fn nothing_listening_is_refused() {
    let port = closed_port();
    let plan = custom_plan(&format!("http://127.0.0.1:{port}"), "", &get_step("/", Some(10.0)), &closed(2, 1.0), 1.0);
    let (snapshots, took) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 2, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), 0);
    assert_eq!(kinds(&snapshots), vec!["refused"]);
    assert_eq!(connections_opened(&snapshots), 0, "a refused connection is not an opened one");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_refused_target_without_think_time_does_not_hang_the_run() {
    // No think time: every VU retries at once; the engine must still end the run on time.
    let port = closed_port();
    let plan = custom_plan(&format!("http://127.0.0.1:{port}"), "", &get_step("/", None), &closed(3, 1.0), 1.0);
    let (snapshots, took) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    assert!(total_requests(&snapshots) >= 3);
    assert_eq!(total_ok(&snapshots), 0);
    assert_eq!(kinds(&snapshots), vec!["refused"]);
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn statuses_of_400_and_above_are_counted_by_code() {
    let target = target();
    let steps = r#"[{"name": "unavailable", "method": "GET", "path": "/status/503"},
                    {"name": "missing", "method": "GET", "path": "/status/404",
                     "think_time": {"type": "constant", "duration_ms": 5}}]"#;
    let plan = custom_plan(&target.base_url(), "", steps, &closed(2, 1.5), 2.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    assert_eq!(total_ok(&snapshots), 0);
    assert_eq!(kinds(&snapshots), vec!["status_404", "status_503"]);
    let by_step = |name: &str| -> u64 {
        snapshots.iter().flat_map(|s| s.steps.iter()).filter(|step| step.step == name).map(|step| step.requests).sum()
    };
    let errors = error_kinds(&snapshots);
    assert_eq!(errors["status_503"], by_step("unavailable"));
    assert_eq!(errors["status_404"], by_step("missing"));
    assert!(by_step("missing") >= 20, "only {} requests to /status/404", by_step("missing"));
    // A status error is a complete exchange: the connection stays usable.
    assert!(connections_opened(&snapshots) <= 4, "{} connections", connections_opened(&snapshots));
}

#[test]
fn a_slow_response_times_out_at_the_request_timeout() {
    let target = target();
    let plan = custom_plan(
        &target.base_url(),
        r#", "request_timeout_ms": 200"#,
        &get_step("/delay/2000", None),
        &closed(2, 2.0),
        2.0,
    );
    let (snapshots, took) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 6, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), 0);
    assert_eq!(kinds(&snapshots), vec!["timeout"]);
    // A timed-out request got no response: counted, never timed (its "latency" would be the
    // timeout, not the target's).
    assert!(latency(&snapshots, "get").is_empty(), "a timeout is not a latency result");
    // Each took the timeout: 2 VUs for 2 s at 200 ms each make about 20 requests.
    assert!(requests <= 24, "{requests} requests: more than 2 VUs can make at 200 ms each");
    // A timed-out connection is not reused: a new one per request.
    assert_eq!(connections_opened(&snapshots), requests);
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_connection_closed_without_an_answer_is_a_reset() {
    let server = RawServer::start(|_, _, _| false);
    let plan = custom_plan(&server.base_url(), "", &get_step("/", Some(10.0)), &closed(2, 1.0), 1.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 10, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), 0);
    assert_eq!(kinds(&snapshots), vec!["reset"]);
    assert_eq!(
        server.requests(),
        requests,
        "every request reached the server once (no silent retry on a new connection)"
    );
}

#[test]
fn a_response_cut_mid_head_is_a_reset() {
    let server = RawServer::start(|stream, _, _| {
        send(stream, b"HTTP/1.1 200 OK\r\nContent-Le");
        false
    });
    let plan = custom_plan(&server.base_url(), "", &get_step("/", Some(10.0)), &closed(2, 1.0), 1.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    assert!(total_requests(&snapshots) >= 10);
    assert_eq!(total_ok(&snapshots), 0);
    assert_eq!(kinds(&snapshots), vec!["reset"]);
}

#[test]
fn a_response_cut_mid_body_is_a_reset() {
    let server = RawServer::start(|stream, _, _| {
        send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly a part");
        false
    });
    let plan = custom_plan(&server.base_url(), "", &get_step("/", Some(10.0)), &closed(2, 1.0), 1.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    assert!(total_requests(&snapshots) >= 10);
    assert_eq!(total_ok(&snapshots), 0);
    assert_eq!(kinds(&snapshots), vec!["reset"]);
}

#[test]
fn garbage_instead_of_a_response_is_a_protocol_error() {
    let server = RawServer::start(|stream, _, _| {
        send(stream, b"GARBAGE\r\n\r\n");
        true
    });
    let plan = custom_plan(&server.base_url(), "", &get_step("/", Some(10.0)), &closed(2, 1.0), 1.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 10, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), 0);
    assert_eq!(kinds(&snapshots), vec!["protocol"]);
    // A connection that spoke garbage is dropped, never reused.
    assert_eq!(connections_opened(&snapshots), requests);
}

#[test]
fn a_bad_content_length_is_a_protocol_error() {
    let server = RawServer::start(|stream, _, _| {
        send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: twelve\r\n\r\nhello world!");
        true
    });
    let plan = custom_plan(&server.base_url(), "", &get_step("/", Some(10.0)), &closed(1, 1.0), 1.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    assert!(total_requests(&snapshots) >= 5);
    assert_eq!(total_ok(&snapshots), 0);
    assert_eq!(kinds(&snapshots), vec!["protocol"]);
}

const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";

#[test]
fn a_chunked_response_is_read_to_its_end_and_the_connection_reused() {
    let server = RawServer::start(|stream, _, _| {
        send(stream, CHUNKED);
        true
    });
    let vus = 3;
    let plan = custom_plan(&server.base_url(), "", &get_step("/", Some(5.0)), &closed(vus, 1.5), 2.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 30, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
    assert_eq!(bytes_received(&snapshots), requests * CHUNKED.len() as u64, "every byte of every response counted");
    assert_eq!(connections_opened(&snapshots), vus, "one kept-alive connection per VU");
    assert_eq!(server.connections(), vus);
}

#[test]
fn a_chunked_response_sent_byte_by_byte_is_read_to_its_end() {
    let server = RawServer::start(|stream, _, _| {
        for byte in CHUNKED.chunks(1) {
            send(stream, byte);
        }
        true
    });
    let plan = custom_plan(&server.base_url(), "", &get_step("/", Some(5.0)), &closed(2, 1.0), 2.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 10, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
    assert_eq!(bytes_received(&snapshots), requests * CHUNKED.len() as u64);
    assert_eq!(connections_opened(&snapshots), 2);
}

#[test]
fn connection_close_responses_open_one_connection_per_request() {
    const CLOSING: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    let server = RawServer::start(|stream, _, _| {
        send(stream, CLOSING);
        false
    });
    let plan = custom_plan(&server.base_url(), "", &get_step("/", Some(5.0)), &closed(2, 1.5), 2.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 20, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
    assert_eq!(connections_opened(&snapshots), requests);
    assert_eq!(server.connections(), requests);
    assert_eq!(bytes_received(&snapshots), requests * CLOSING.len() as u64);
}

#[test]
fn a_body_delimited_by_close_is_read_to_its_end() {
    const UNTIL_CLOSE: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nthe body ends when the connection does";
    let server = RawServer::start(|stream, _, _| {
        send(stream, UNTIL_CLOSE);
        false
    });
    let plan = custom_plan(&server.base_url(), "", &get_step("/", Some(5.0)), &closed(2, 1.0), 2.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 10, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
    assert_eq!(connections_opened(&snapshots), requests);
    assert_eq!(bytes_received(&snapshots), requests * UNTIL_CLOSE.len() as u64);
}

#[test]
fn a_kept_alive_connection_closed_by_the_server_is_retried_transparently() {
    // The response promises keep-alive but the server hangs up right after it: the next request
    // meets a dead connection before any response byte and is sent again on a new one.
    let server = RawServer::start(|stream, _, _| {
        send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        false
    });
    let plan = custom_plan(&server.base_url(), "", &get_step("/", Some(20.0)), &closed(2, 1.5), 2.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 10, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
    assert_eq!(connections_opened(&snapshots), requests, "each request on a fresh connection");
    assert_eq!(server.requests(), requests, "the dead connection carried no request to the server");
}

#[test]
fn large_bodies_are_counted_in_bytes_received() {
    let target = target();
    let plan = custom_plan(&target.base_url(), "", &get_step("/bytes/100000", Some(5.0)), &closed(2, 1.5), 2.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 20, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
    let received = bytes_received(&snapshots);
    let per_request = received as f64 / requests as f64;
    // 100 000 body bytes plus a response head of a few dozen to a few hundred bytes.
    assert!((100_000.0..=101_024.0).contains(&per_request), "{per_request} bytes per response");
    assert!(connections_opened(&snapshots) <= 4);
}

#[test]
fn an_unresolvable_host_is_a_dns_error() {
    // `.invalid` never resolves (RFC 2606). A sandbox whose resolver misbehaves may make this a
    // connect failure or a timeout; whatever it is, nothing succeeds and the run ends.
    let plan = custom_plan(
        "http://does-not-exist.invalid:80",
        r#", "connect_timeout_ms": 3000"#,
        &get_step("/", Some(50.0)),
        &closed(1, 1.0),
        1.0,
    );
    let (snapshots, took) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    assert!(total_requests(&snapshots) >= 1);
    assert_eq!(total_ok(&snapshots), 0);
    let kinds = kinds(&snapshots);
    assert!(
        kinds == vec!["dns"] || kinds.iter().all(|kind| kind == "dns" || kind == "connect" || kind == "timeout"),
        "{kinds:?}"
    );
    eprintln!("unresolvable host gave {:?}", error_kinds(&snapshots));
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

#[test]
fn a_100_continue_followed_by_the_response_in_one_packet_is_ok() {
    // The interim response and the final one arrive in the same read. read_response copies the
    // bytes after the 100's head to the front of the buffer, then read_head starts again at
    // `filled = 0`, discarding them: the engine then waits for a response that already came.
    let server = RawServer::start(|stream, _, _| {
        send(stream, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        true
    });
    let plan = custom_plan(
        &server.base_url(),
        r#", "request_timeout_ms": 1000"#,
        &get_step("/", Some(10.0)),
        &closed(1, 1.0),
        2.0,
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 1);
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
}

#[test]
fn a_100_continue_sent_apart_from_the_response_is_skipped() {
    // The same exchange with the two heads in separate writes (and a pause) works today.
    let server = RawServer::start(|stream, _, _| {
        send(stream, b"HTTP/1.1 100 Continue\r\n\r\n");
        std::thread::sleep(Duration::from_millis(30));
        send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        true
    });
    let plan = custom_plan(&server.base_url(), "", &get_step("/", Some(10.0)), &closed(1, 1.0), 2.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 5, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
}

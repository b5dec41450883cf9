//! Hostile targets: small raw TCP servers written here that refuse, reset, dribble, lie, stall
//! or flood. Each outcome is counted under its own error kind, every run ends on time (its
//! stages, its grace period and a margin), and nothing the target sends makes a VU hold more
//! than the plan's bounds (`max_response_header_bytes`, `max_kept_body_bytes`; memory itself
//! is measured in `body_memory.rs`, a test binary of its own).

mod support;

use horde_engine::Snapshot;
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{
    assert_scenario_accounting, closed, closed_port, connections_opened, custom_plan, error_kinds, get_step,
    huge_body_server, run_timed, send, total_ok, total_requests, RawServer,
};

/// A run of `seconds` with a grace period of `grace_s` ends within this much more.
const ON_TIME_MARGIN: Duration = Duration::from_millis(1500);

fn assert_on_time(took: Duration, seconds: f64, grace_s: f64) {
    let limit = Duration::from_secs_f64(seconds + grace_s) + ON_TIME_MARGIN;
    assert!(took < limit, "the run took {took:?}, more than {limit:?}");
}

fn kinds(snapshots: &[Snapshot]) -> Vec<String> {
    error_kinds(snapshots).into_keys().collect()
}

fn backoffs(snapshots: &[Snapshot]) -> (u64, f64) {
    (snapshots.iter().map(|s| s.connect_backoffs).sum(), snapshots.iter().map(|s| s.connect_backoff_s).sum())
}

/// Hangs up with a TCP reset (SO_LINGER 0) instead of an orderly close.
#[allow(unsafe_code)]
fn reset_on_close(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: a valid socket descriptor, an option value of the size given.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// A step with a check that reads the whole body: it passes only if `text` is in what was kept.
fn checked_step(text: &str) -> String {
    format!(
        r#"[{{"name": "get", "method": "GET", "path": "/", "checks": [{{"type": "body_contains", "text": "{text}"}}]}}]"#
    )
}

#[test]
fn refused_connections_back_off_and_the_plan_can_turn_it_off() {
    let port = closed_port();
    let url = format!("http://127.0.0.1:{port}");
    let (seconds, vus) = (1.0, 2);
    let (backing_off, took) = run_timed(&custom_plan(&url, "", &get_step("/", None), &closed(vus, seconds), 0.5), 1);
    assert_scenario_accounting(&backing_off);
    assert_eq!(kinds(&backing_off), vec!["refused"]);
    assert_on_time(took, seconds, 0.5);
    let requests = total_requests(&backing_off);
    let (count, backoff_s) = backoffs(&backing_off);
    // 10, 20, 40 ... 640 ms: 7 pauses a VU fill the second.
    assert!((vus..=8 * vus).contains(&requests), "{requests} requests with backoff");
    assert!(count + vus >= requests && count <= requests, "{count} backoffs for {requests} refusals");
    assert!((0.5 * vus as f64..=1.2 * vus as f64).contains(&backoff_s), "{backoff_s} s spent backing off");
    let plan = custom_plan(&url, r#", "connect_backoff": false"#, &get_step("/", None), &closed(vus, seconds), 0.5);
    let (hammering, _) = run_timed(&plan, 1);
    assert_eq!(kinds(&hammering), vec!["refused"]);
    let without = total_requests(&hammering);
    eprintln!("refused port, {vus} VUs for {seconds} s: {requests} attempts with backoff ({count} pauses, {backoff_s:.2} s), {without} without");
    assert_eq!(backoffs(&hammering).0, 0);
    assert!(without > 50 * requests, "without backoff only {without} attempts against {requests} with it");
}

#[test]
fn a_reset_is_counted_as_reset_and_the_next_request_reconnects() {
    let server = RawServer::start(|stream, _, _| {
        send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npart of it");
        reset_on_close(stream);
        false
    });
    let (snapshots, took) =
        run_timed(&custom_plan(&server.base_url(), "", &get_step("/", Some(20.0)), &closed(2, 1.0), 0.5), 1);
    assert_scenario_accounting(&snapshots);
    assert_eq!(kinds(&snapshots), vec!["reset"]);
    assert!(total_requests(&snapshots) >= 10);
    assert_eq!(connections_opened(&snapshots), total_requests(&snapshots));
    assert_on_time(took, 1.0, 0.5);
}

#[test]
fn a_slowloris_head_times_out_at_the_request_timeout() {
    let server = RawServer::start(|stream, _, _| {
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".chunks(1) {
            send(stream, byte);
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    });
    let plan =
        custom_plan(&server.base_url(), r#", "request_timeout_ms": 300"#, &get_step("/", None), &closed(2, 1.0), 0.5);
    let (snapshots, took) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    assert_eq!(kinds(&snapshots), vec!["timeout"]);
    assert!(total_requests(&snapshots) >= 4, "{} requests", total_requests(&snapshots));
    assert_on_time(took, 1.0, 0.5);
}

#[test]
fn garbage_status_lines_and_bad_chunking_are_protocol_errors() {
    let server = RawServer::start(|stream, number, _| {
        if number % 2 == 0 {
            send(stream, b"HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nok");
        } else {
            send(stream, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n");
        }
        true
    });
    let (snapshots, took) =
        run_timed(&custom_plan(&server.base_url(), "", &get_step("/", Some(10.0)), &closed(2, 1.0), 0.5), 1);
    assert_scenario_accounting(&snapshots);
    assert_eq!(kinds(&snapshots), vec!["protocol"]);
    assert!(total_requests(&snapshots) >= 10);
    assert_on_time(took, 1.0, 0.5);
}

#[test]
fn a_short_body_is_a_reset() {
    let server = RawServer::start(|stream, _, _| {
        send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nten bytes!");
        false
    });
    let (snapshots, took) =
        run_timed(&custom_plan(&server.base_url(), "", &get_step("/", Some(10.0)), &closed(2, 1.0), 0.5), 1);
    assert_scenario_accounting(&snapshots);
    assert_eq!(kinds(&snapshots), vec!["reset"]);
    assert_on_time(took, 1.0, 0.5);
}

#[test]
fn a_target_that_never_answers_has_its_requests_cut_and_counted_at_the_end() {
    // Accepts, reads the request, says nothing: the 30 s request timeout outlives the run.
    let server = RawServer::start(|_, _, _| true);
    let vus = 3;
    let (snapshots, took) =
        run_timed(&custom_plan(&server.base_url(), "", &get_step("/", None), &closed(vus, 1.0), 0.5), 1);
    assert_scenario_accounting(&snapshots);
    assert_eq!(error_kinds(&snapshots).into_iter().collect::<Vec<_>>(), vec![("cut".to_owned(), vus)]);
    let last = snapshots.last().expect("a final snapshot");
    assert_eq!(last.requests(), vus, "the cut requests are in the final snapshot");
    assert_eq!(total_ok(&snapshots), 0);
    assert_on_time(took, 1.0, 0.5);
}

#[test]
fn a_tls_handshake_that_stalls_times_out_at_the_connect_timeout() {
    // A TCP server that reads the ClientHello and never answers it.
    let server = RawServer::start(|_, _, _| true);
    let url = server.base_url().replace("http://", "https://");
    let plan = custom_plan(&url, r#", "connect_timeout_ms": 300"#, &get_step("/", None), &closed(2, 1.0), 0.5);
    let (snapshots, took) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    assert_eq!(kinds(&snapshots), vec!["timeout"]);
    assert!(total_requests(&snapshots) >= 2);
    assert_eq!(connections_opened(&snapshots), 0);
    assert_on_time(took, 1.0, 0.5);
}

#[test]
fn http_1_0_and_interim_responses_are_read_as_the_answers_they_are() {
    let server = RawServer::start(|stream, number, _| {
        if number % 2 == 0 {
            // HTTP/1.0: no length, the body ends with the connection.
            send(stream, b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello from 1996");
            false
        } else {
            send(
                stream,
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n",
            );
            send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
            false
        }
    });
    let (snapshots, took) =
        run_timed(&custom_plan(&server.base_url(), "", &get_step("/", Some(10.0)), &closed(2, 1.0), 0.5), 1);
    assert_scenario_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 10);
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
    assert_eq!(connections_opened(&snapshots), requests, "neither answer keeps the connection");
    assert_on_time(took, 1.0, 0.5);
}

/// A response head with `count` headers, a cookie of `cookie_bytes`, then a 2-byte body.
fn many_headers(count: usize, cookie_bytes: usize) -> Vec<u8> {
    let mut head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n".to_vec();
    for index in 0..count {
        head.extend_from_slice(format!("X-Header-{index}: value number {index}\r\n").as_bytes());
    }
    head.extend_from_slice(format!("Set-Cookie: big={}; Path=/\r\n\r\nok", "c".repeat(cookie_bytes)).as_bytes());
    head
}

#[test]
fn hundreds_of_headers_and_a_large_cookie_are_accepted() {
    let response = many_headers(500, 8000);
    let cookies_seen = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&cookies_seen);
    let server = RawServer::start(move |stream, _, head| {
        if String::from_utf8_lossy(head).contains("Cookie: big=cccc") {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        send(stream, &response);
        true
    });
    let (snapshots, took) =
        run_timed(&custom_plan(&server.base_url(), "", &get_step("/", Some(10.0)), &closed(2, 1.0), 0.5), 1);
    assert_scenario_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 10);
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
    assert_eq!(connections_opened(&snapshots), 2, "a long head keeps the connection");
    // The cookie (the 501st header) went into the jar and came back on every later request.
    assert!(cookies_seen.load(Ordering::SeqCst) >= requests - 2);
    assert_on_time(took, 1.0, 0.5);
}

#[test]
fn a_head_past_the_bound_is_headers_too_large_and_the_bound_is_the_plans() {
    // About 300 KiB of headers: past the default 256 KiB.
    let response = Arc::new(many_headers(9000, 10));
    assert!(response.len() > 300_000);
    let served = Arc::clone(&response);
    let server = RawServer::start(move |stream, _, _| {
        send(stream, &served);
        true
    });
    let (refused, took) =
        run_timed(&custom_plan(&server.base_url(), "", &get_step("/", Some(20.0)), &closed(1, 1.0), 0.5), 1);
    assert_scenario_accounting(&refused);
    assert_eq!(kinds(&refused), vec!["headers_too_large"]);
    assert_on_time(took, 1.0, 0.5);
    let extra = r#", "max_response_header_bytes": 1048576"#;
    let (accepted, _) =
        run_timed(&custom_plan(&server.base_url(), extra, &get_step("/", Some(20.0)), &closed(1, 1.0), 0.5), 1);
    assert_eq!(total_ok(&accepted), total_requests(&accepted), "errors: {:?}", error_kinds(&accepted));
    assert!(total_requests(&accepted) >= 5);
}

#[test]
fn a_huge_body_is_read_and_counted_but_a_check_keeps_only_the_bound() {
    let size = 8 * 1024 * 1024;
    let server = huge_body_server(size);
    let url = server.base_url();
    // No check: read to its end, counted, nothing kept.
    let (plain, took) = run_timed(&custom_plan(&url, "", &get_step("/", None), &closed(2, 1.0), 0.5), 1);
    assert_scenario_accounting(&plain);
    let requests = total_requests(&plain);
    assert!(requests >= 2);
    assert_eq!(total_ok(&plain), requests, "errors: {:?}", error_kinds(&plain));
    assert!(support::bytes_received(&plain) >= requests * size as u64);
    assert_on_time(took, 1.0, 0.5);
    // A check on the body: past the default 1 MiB it is not judged, and says so.
    let (checked, _) = run_timed(&custom_plan(&url, "", &checked_step("THE-END"), &closed(2, 1.0), 0.5), 1);
    assert_scenario_accounting(&checked);
    assert_eq!(kinds(&checked), vec!["body_too_large"]);
    assert!(
        support::bytes_received(&checked) >= total_requests(&checked) * size as u64,
        "the whole body is still read"
    );
    // With a bound above the body the check reads it all, and passes.
    let extra = r#", "max_kept_body_bytes": 16777216"#;
    let (kept, _) = run_timed(&custom_plan(&url, extra, &checked_step("THE-END"), &closed(2, 1.0), 0.5), 1);
    assert!(total_requests(&kept) >= 2);
    assert_eq!(total_ok(&kept), total_requests(&kept), "errors: {:?}", error_kinds(&kept));
}

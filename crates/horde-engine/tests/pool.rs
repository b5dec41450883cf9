//! The pool (`target.connections: {pool: N}`): many VUs share N keep-alive connections per
//! generator. The servers count what they accepted, so "at most N connections" is read from
//! the other end of the wire, not from the engine; the known-answer test checks that the wait
//! for a connection is measured (pool of 1, a 20 ms service: 50 requests/s, each request
//! waiting for the VUs ahead of it).

mod support;

use horde_target::{TargetConfig, TargetHandle};
use serde_json::json;
use support::{
    assert_accounting, connections_opened, error_kinds, latency, plan_of, run_timed, send, total_ok, total_requests,
    RawServer,
};

/// A server that answers every request with a short 200 and keeps the connection.
fn ok_server() -> RawServer {
    RawServer::start(|stream, _, _| {
        send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        true
    })
}

fn get_plan(
    urls: &[String],
    connections: serde_json::Value,
    vus: u64,
    seconds: f64,
    think_ms: f64,
) -> horde_plan::Plan {
    plan_of(json!({
        "version": 1,
        "target": {"base_url": urls[0], "instances": urls[1..], "connections": connections, "request_timeout_ms": 10000},
        "graceful_stop_s": 5,
        "scenarios": [{
            "name": "s",
            "steps": [{"name": "get", "method": "GET", "path": "/", "think_time": {"type": "constant", "duration_ms": think_ms}}],
            "workload": {"type": "closed", "start_vus": vus, "stages": [{"duration_s": seconds, "vus": vus}]},
        }],
    }))
}

#[test]
fn two_thousand_vus_share_a_pool_of_twenty_connections() {
    let server = ok_server();
    // 2,000 VUs each sending a request a second: ~2,000 requests/s over 20 connections.
    let plan = get_plan(&[server.base_url()], json!({"pool": 20}), 2000, 2.0, 1000.0);
    let (snapshots, _) = run_timed(&plan, 2);
    assert_accounting(&snapshots);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    let requests = total_requests(&snapshots);
    assert!(requests >= 2000, "every VU sent at least once: {requests} requests");
    assert_eq!(total_ok(&snapshots), requests);
    assert!(server.connections() <= 20, "the server accepted {} connections", server.connections());
    assert_eq!(connections_opened(&snapshots), server.connections(), "the engine counts what the server accepted");
    assert_eq!(server.requests(), requests);
}

#[test]
fn per_vu_is_still_one_connection_per_vu() {
    let server = ok_server();
    let plan = get_plan(&[server.base_url()], json!("per_vu"), 30, 1.0, 50.0);
    let (snapshots, _) = run_timed(&plan, 2);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    assert!(total_requests(&snapshots) > 30 * 5);
    assert_eq!(server.connections(), 30);
}

#[test]
fn waiting_for_a_connection_counts_in_the_latency() {
    // One connection, 10 VUs without think time, a 20 ms service: the connection is busy all
    // the time, so 50 requests/s go through, and each request waits for the 9 VUs queued ahead
    // of it: 10 x 20 = 200 ms from the VU's send to its response.
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    let vus = 10;
    let plan = plan_of(json!({
        "version": 1,
        "target": {"base_url": target.base_url(), "connections": {"pool": 1}, "request_timeout_ms": 10000},
        "graceful_stop_s": 5,
        "scenarios": [{
            "name": "s",
            "steps": [{"name": "slow", "method": "GET", "path": "/delay/20"}],
            "workload": {"type": "closed", "start_vus": vus, "stages": [{"duration_s": 4.0, "vus": vus}]},
        }],
    }));
    // Two workers asked: a pool of one runs on one.
    let (snapshots, took) = run_timed(&plan, 2);
    assert_accounting(&snapshots);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    assert_eq!(connections_opened(&snapshots), 1);
    let requests = total_requests(&snapshots) as f64;
    // Requests finished within the 4 s of stages plus the drain (at most the queue, 200 ms).
    let rate = requests / 4.0;
    assert!((44.0..=52.0).contains(&rate), "{rate} requests/s in {took:?}, expected about 50");
    let histogram = latency(&snapshots, "slow");
    let median_ms = histogram.value_at_quantile(0.5) as f64 / 1000.0;
    assert!((185.0..=240.0).contains(&median_ms), "median {median_ms} ms, expected about 200");
    // Nobody overtakes: with a fair queue no request waits much longer than the round.
    let p99_ms = histogram.value_at_quantile(0.99) as f64 / 1000.0;
    assert!(p99_ms < 300.0, "p99 {p99_ms} ms: some VU waited more than its turn");
}

#[test]
fn an_open_model_borrows_from_the_pool_and_times_from_the_arrival() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    // 40 arrivals/s of a 20 ms request over 2 connections (room for 100/s): no queue to speak of.
    let plan = plan_of(json!({
        "version": 1,
        "target": {"base_url": target.base_url(), "connections": {"pool": 2}, "request_timeout_ms": 10000},
        "graceful_stop_s": 5,
        "scenarios": [{
            "name": "s",
            "steps": [{"name": "slow", "method": "GET", "path": "/delay/20"}],
            "workload": support::open_burst(40.0, 2.01, 50),
        }],
    }));
    let (snapshots, _) = run_timed(&plan, 2);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    assert_eq!(total_requests(&snapshots), support::burst_arrivals(40.0, 2.01));
    assert!(connections_opened(&snapshots) <= 2);
    let histogram = latency(&snapshots, "slow");
    assert!(histogram.min() >= 20_000, "no request beat the 20 ms service: {} us", histogram.min());
}

#[test]
fn a_pool_spreads_over_the_instances_and_keeps_each_vu_with_its_own() {
    let servers = [ok_server(), ok_server()];
    let urls: Vec<String> = servers.iter().map(RawServer::base_url).collect();
    let plan = get_plan(&urls, json!({"pool": 4}), 40, 1.5, 20.0);
    let (snapshots, _) = run_timed(&plan, 2);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    let accepted: u64 = servers.iter().map(RawServer::connections).sum();
    assert!(accepted <= 4 + 4, "{accepted} connections for a pool of 4");
    assert_eq!(connections_opened(&snapshots), accepted);
    // Even VU numbers talk to instance 0, odd ones to instance 1: the same share of requests.
    let (first, second) = (servers[0].requests() as f64, servers[1].requests() as f64);
    assert!(first > 100.0 && (first / second - 1.0).abs() < 0.2, "{first} and {second} requests");
}

#[test]
fn a_failed_connection_is_replaced() {
    // The server closes every other connection after answering: the pool drops the closed one
    // and the next VU opens a new one; nothing fails.
    let server = RawServer::start(|stream, number, _| {
        if number % 2 == 0 {
            send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
            false
        } else {
            send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            true
        }
    });
    let plan = get_plan(&[server.base_url()], json!({"pool": 3}), 30, 1.0, 20.0);
    let (snapshots, _) = run_timed(&plan, 1);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    let requests = total_requests(&snapshots);
    assert!(requests > 100, "{requests}");
    assert!(server.connections() > 3, "closed connections were replaced");
    assert_eq!(connections_opened(&snapshots), server.connections());
}

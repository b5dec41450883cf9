//! `target.source_addresses`: outgoing connections bind to the listed local addresses, one
//! per connection in turn, and an address that cannot be bound is a counted connect error.
//! Where connections came from is read by the server (the peer address of each accept).

mod support;

use serde_json::json;
use std::collections::BTreeMap;
use std::net::IpAddr;
use support::{connections_opened, error_kinds, plan_of, run_timed, send, total_ok, total_requests, RawServer};

fn ok_server() -> RawServer {
    RawServer::start(|stream, _, _| {
        send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        true
    })
}

fn plan(base_url: &str, sources: &[&str], connections: serde_json::Value, vus: u64) -> horde_plan::Plan {
    plan_of(json!({
        "version": 1,
        "target": {"base_url": base_url, "source_addresses": sources, "connections": connections,
                   "connect_timeout_ms": 2000, "request_timeout_ms": 5000},
        "graceful_stop_s": 2,
        "scenarios": [{
            "name": "s",
            "steps": [{"name": "get", "method": "GET", "path": "/", "think_time": {"type": "constant", "duration_ms": 50}}],
            "workload": {"type": "closed", "start_vus": vus, "stages": [{"duration_s": 1.0, "vus": vus}]},
        }],
    }))
}

fn connections_by_source(server: &RawServer) -> BTreeMap<IpAddr, usize> {
    let mut counts = BTreeMap::new();
    for peer in server.peers() {
        *counts.entry(peer.ip()).or_insert(0) += 1;
    }
    counts
}

#[test]
fn connections_come_from_the_listed_addresses_in_turn() {
    let server = ok_server();
    let sources = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
    let (snapshots, _) = run_timed(&plan(&server.base_url(), &sources, json!("per_vu"), 12), 2);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    assert_eq!(total_ok(&snapshots), total_requests(&snapshots));
    let expected: BTreeMap<IpAddr, usize> = sources.iter().map(|source| (source.parse().unwrap(), 4)).collect();
    assert_eq!(connections_by_source(&server), expected, "12 connections, 4 from each address");
}

#[test]
fn a_pool_binds_its_connections_too() {
    let server = ok_server();
    let sources = ["127.0.0.5", "127.0.0.6"];
    let (snapshots, _) = run_timed(&plan(&server.base_url(), &sources, json!({"pool": 4}), 40), 2);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    let by_source = connections_by_source(&server);
    assert_eq!(by_source.keys().map(ToString::to_string).collect::<Vec<_>>(), sources);
    assert_eq!(by_source.values().sum::<usize>() as u64, connections_opened(&snapshots));
}

#[test]
fn an_address_that_cannot_be_bound_is_a_counted_connect_error() {
    let server = ok_server();
    // 192.0.2.1 (TEST-NET-1) is on no interface here: binding to it fails before any packet.
    let (snapshots, _) = run_timed(&plan(&server.base_url(), &["127.0.0.2", "192.0.2.1"], json!("per_vu"), 4), 1);
    let kinds = error_kinds(&snapshots);
    assert!(kinds.get("connect").is_some_and(|count| *count > 0), "{kinds:?}");
    assert_eq!(kinds.len(), 1, "{kinds:?}");
    assert!(total_ok(&snapshots) > 0, "the connections from 127.0.0.2 still work");
    assert!(server.peers().iter().all(|peer| peer.ip().to_string() == "127.0.0.2"));
}

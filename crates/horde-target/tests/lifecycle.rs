//! Starting and stopping: binding before `start` returns, actionable bind errors, and a stop
//! that never hangs.

mod common;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{start_default, Client};
use horde_target::{TargetConfig, TargetError, TargetHandle};

#[test]
fn port_is_known_and_connectable_when_start_returns() {
    let target = start_default();
    assert_ne!(target.port(), 0);
    assert_eq!(target.local_addr().port(), target.port());
    assert!(target.local_addr().ip().is_loopback());
    assert_eq!(target.base_url(), format!("http://127.0.0.1:{}", target.port()));
    assert_eq!(Client::connect(target.local_addr()).get("/").status, 200);
}

#[test]
fn second_target_on_the_same_port_names_the_address() {
    let first = start_default();
    let port = first.port();
    let error = TargetHandle::start(TargetConfig { port, ..TargetConfig::default() }).expect_err("the port is taken");
    assert!(matches!(error, TargetError::Bind { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(message.contains("address in use"), "{message}");
    // The first target is unharmed.
    assert_eq!(Client::connect(first.local_addr()).get("/").status, 200);
}

#[test]
fn unresolvable_host_is_a_bind_error() {
    let error =
        TargetHandle::start(TargetConfig { host: "no-such-host.invalid".to_string(), ..TargetConfig::default() })
            .expect_err("cannot resolve");
    assert!(error.to_string().contains("no-such-host.invalid"), "{error}");
}

#[test]
fn zero_threads_is_refused() {
    let error =
        TargetHandle::start(TargetConfig { threads: 0, ..TargetConfig::default() }).expect_err("invalid threads");
    assert!(matches!(error, TargetError::InvalidConfig(_)), "{error:?}");
}

#[test]
fn several_threads_serve() {
    let target = TargetHandle::start(TargetConfig { threads: 2, ..TargetConfig::default() }).expect("target starts");
    assert_eq!(Client::connect(target.local_addr()).get("/").status, 200);
}

#[test]
fn stop_returns_quickly_with_an_idle_keep_alive_connection_open() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    assert_eq!(client.get("/").status, 200);
    let started = Instant::now();
    target.stop();
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(2), "stop took {elapsed:?}");
    assert!(client.is_closed_within(Duration::from_secs(2)), "idle connection left open");
}

#[test]
fn stop_is_bounded_with_a_request_in_flight() {
    let target = start_default();
    let address = target.local_addr();
    let in_flight = std::thread::spawn(move || {
        let mut client = Client::connect(address);
        client.request("GET", "/delay/60000", b"").is_err()
    });
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    target.stop();
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(2) + Duration::from_millis(200), "stop took {elapsed:?}");
    assert!(in_flight.join().expect("client thread"), "the cut request cannot have succeeded");
}

#[test]
fn stop_closes_the_listener_and_frees_the_port() {
    let target = start_default();
    let address = target.local_addr();
    target.stop();
    assert!(TcpStream::connect_timeout(&address, Duration::from_secs(1)).is_err());
    let again = TargetHandle::start(TargetConfig { port: address.port(), ..TargetConfig::default() })
        .expect("the port is free again");
    assert_eq!(again.port(), address.port());
}

#[test]
fn drop_stops_the_target() {
    let address = {
        let target = start_default();
        target.local_addr()
    };
    assert!(TcpStream::connect_timeout(&address, Duration::from_secs(1)).is_err());
}

#[test]
fn starts_and_stops_from_inside_an_async_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    runtime.block_on(async {
        let target = start_default();
        let address = target.local_addr();
        let status =
            tokio::task::spawn_blocking(move || Client::connect(address).get("/").status).await.expect("client task");
        assert_eq!(status, 200);
        // Failing to start must not drop a runtime inside this one either.
        let port = target.port();
        assert!(TargetHandle::start(TargetConfig { port, ..TargetConfig::default() }).is_err());
        target.stop();
    });
}

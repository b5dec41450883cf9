//! Known answers: a target with a known service time and capacity gives known figures.

mod support;

use horde_target::{Capacity, ServiceTimes, TargetConfig, TargetHandle};
use support::{latency, one_step_plan, run_to_end, total_requests};

fn target(capacity: Option<Capacity>) -> TargetHandle {
    TargetHandle::start(TargetConfig { capacity, ..TargetConfig::default() }).expect("target starts")
}

#[test]
fn delay_20ms_has_a_median_of_20_to_22ms() {
    let target = target(None);
    let plan = one_step_plan(
        &target.base_url(),
        "/delay/20",
        r#"{"type": "closed", "start_vus": 5, "stages": [{"duration_s": 3, "vus": 5}]}"#,
    );
    let snapshots = run_to_end(&plan, 1);
    let histogram = latency(&snapshots, "get");
    let median_ms = histogram.value_at_quantile(0.5) as f64 / 1000.0;
    assert!(histogram.len() > 300, "only {} requests", histogram.len());
    assert!((20.0..=22.0).contains(&median_ms), "median {median_ms} ms");
    assert_eq!(support::errors_of_kind(&snapshots, "timeout"), 0);
}

#[test]
fn closed_throughput_matches_the_capacity_model() {
    // 10 workers x 20 ms of service: at most 500 requests/s, reached with 25 VUs and no think time.
    let target = target(Some(Capacity { workers: 10, service_ms: 20.0, service_times: ServiceTimes::Fixed }));
    let plan = one_step_plan(
        &target.base_url(),
        "/",
        r#"{"type": "closed", "start_vus": 25, "stages": [{"duration_s": 4, "vus": 25}]}"#,
    );
    let snapshots = run_to_end(&plan, 2);
    // Seconds 2..=4: past the first second's connection set-up, before the drain.
    let steady: Vec<_> = snapshots.iter().filter(|s| (2..=4).contains(&s.second) && !s.is_final).collect();
    assert!(steady.len() >= 2, "{} steady seconds", steady.len());
    let requests: u64 = steady.iter().map(|s| s.requests()).sum();
    let seconds: f64 = steady.iter().map(|s| s.interval_s).sum();
    let throughput = requests as f64 / seconds;
    assert!((throughput - 500.0).abs() <= 25.0, "throughput {throughput:.1}/s, expected 500 ± 5 %");
}

#[test]
fn open_model_holds_its_rate() {
    let target = target(None);
    let plan = one_step_plan(
        &target.base_url(),
        "/",
        r#"{"type": "open", "start_rate_per_s": 250, "stages": [{"duration_s": 4, "rate_per_s": 250}], "max_vus": 50}"#,
    );
    let snapshots = run_to_end(&plan, 2);
    let dropped: u64 = snapshots.iter().map(|s| s.dropped_arrivals).sum();
    assert_eq!(dropped, 0);
    // Every arrival of the stages happened: 250/s for 4 s.
    assert_eq!(total_requests(&snapshots), 1000);
    for snapshot in snapshots.iter().filter(|s| (2..=3).contains(&s.second)) {
        let rate = snapshot.requests() as f64 / snapshot.interval_s;
        assert!((rate - 250.0).abs() <= 5.0, "second {}: {rate:.1}/s, expected 250 ± 2 %", snapshot.second);
        assert_eq!(snapshot.target_rate_per_s, Some(250.0));
    }
}

#[test]
fn open_model_counts_drops_when_max_vus_is_too_small() {
    let target = target(None);
    // 5 VUs at 200 ms per iteration serve 25 arrivals/s; 100/s are asked.
    let plan = one_step_plan(
        &target.base_url(),
        "/delay/200",
        r#"{"type": "open", "start_rate_per_s": 100, "stages": [{"duration_s": 3, "rate_per_s": 100}], "max_vus": 5}"#,
    );
    let snapshots = run_to_end(&plan, 1);
    let dropped: u64 = snapshots.iter().map(|s| s.dropped_arrivals).sum();
    let served = total_requests(&snapshots);
    assert_eq!(served + dropped, 300, "every arrival is either served or counted as dropped");
    assert!((60..=90).contains(&served), "served {served}, expected about 75");
    assert!(snapshots.iter().all(|s| s.active_vus <= 5));
}

#[test]
fn a_stall_shows_in_open_model_latency() {
    let target = target(None);
    let address = target.local_addr();
    let plan = one_step_plan(
        &target.base_url(),
        "/",
        r#"{"type": "open", "start_rate_per_s": 100, "stages": [{"duration_s": 4, "rate_per_s": 100}], "max_vus": 300}"#,
    );
    let stall = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        support_stall(address, 1000);
    });
    let snapshots = run_to_end(&plan, 1);
    stall.join().unwrap();
    let histogram = latency(&snapshots, "get");
    let p99_ms = histogram.value_at_quantile(0.99) as f64 / 1000.0;
    let p50_ms = histogram.value_at_quantile(0.5) as f64 / 1000.0;
    // A quarter of the arrivals fell in the stall and waited up to a second for it to end.
    assert!(p99_ms >= 900.0, "p99 {p99_ms} ms does not show the 1 s stall");
    assert!(p50_ms < 100.0, "p50 {p50_ms} ms");
    assert_eq!(total_requests(&snapshots), 400);
}

fn support_stall(address: std::net::SocketAddr, milliseconds: u64) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(stream, "GET /stall/{milliseconds} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    assert!(response.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&response));
}

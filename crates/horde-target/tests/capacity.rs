//! The capacity model is a known-answer device: `W` workers of `S` ms serve at most
//! `W * 1000 / S` requests per second, exactly enough to check a generator's throughput.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{closed_loop, median, Client};
use horde_target::{Capacity, ServiceTimes, TargetConfig, TargetHandle};

const MS: Duration = Duration::from_millis(1);

fn start(workers: usize, service_ms: f64) -> TargetHandle {
    TargetHandle::start(TargetConfig {
        capacity: Some(Capacity { workers, service_ms, service_times: ServiceTimes::Fixed }),
        ..TargetConfig::default()
    })
    .expect("target starts")
}

#[test]
fn saturated_throughput_is_workers_per_service_time() {
    // 4 workers of 20 ms: 200 requests/s, whatever the number of clients beyond 4.
    let target = start(4, 20.0);
    let completions = closed_loop(&[target.local_addr()], 12, 2000 * MS);
    // Skip the first half second: connections and threads are still starting.
    let window = (500 * MS, 2000 * MS);
    let in_window = completions.iter().filter(|at| **at >= window.0 && **at <= window.1).count();
    let throughput = in_window as f64 / (window.1 - window.0).as_secs_f64();
    let error = (throughput - 200.0).abs() / 200.0;
    assert!(error <= 0.05, "measured {throughput:.1} requests/s, expected 200 within 5%");
}

#[test]
fn below_capacity_each_request_takes_the_service_time() {
    let target = start(4, 20.0);
    let address = target.local_addr();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            thread::spawn(move || {
                let mut client = Client::connect(address);
                client.get("/");
                (0..25).map(|_| client.timed_get("/").1).collect::<Vec<_>>()
            })
        })
        .collect();
    let durations: Vec<Duration> =
        threads.into_iter().flat_map(|thread| thread.join().expect("client thread")).collect();
    let median = median(durations);
    assert!(median >= 19 * MS && median <= 25 * MS, "median {median:?}, expected about 20 ms");
}

#[test]
fn delay_is_served_inside_the_worker_slot() {
    // One worker of 20 ms: a /delay/30 holds it for 50 ms, so a request queued behind it
    // finishes about 70 ms after both were sent.
    let target = start(1, 20.0);
    let address = target.local_addr();
    let mut first = Client::connect(address);
    let mut second = Client::connect(address);
    first.get("/");
    second.get("/");
    thread::sleep(50 * MS);
    let started = Instant::now();
    let delayed = thread::spawn(move || first.timed_get("/delay/30").1);
    thread::sleep(5 * MS);
    let (_, queued) = second.timed_get("/");
    let delayed = delayed.join().expect("client thread");
    assert!(delayed >= 50 * MS && delayed < 150 * MS, "delayed request took {delayed:?}");
    let total = started.elapsed();
    assert!(total >= 70 * MS, "the queued request finished after {total:?}");
    assert!(queued >= 60 * MS, "the queued request took {queued:?}");
}

#[test]
fn invalid_capacity_is_refused_with_a_message() {
    for capacity in [
        Capacity { workers: 0, service_ms: 10.0, service_times: ServiceTimes::Fixed },
        Capacity { workers: 1, service_ms: 0.0, service_times: ServiceTimes::Fixed },
        Capacity { workers: 1, service_ms: f64::NAN, service_times: ServiceTimes::Fixed },
    ] {
        let error = TargetHandle::start(TargetConfig { capacity: Some(capacity), ..TargetConfig::default() })
            .expect_err("invalid capacity");
        assert!(error.to_string().contains("capacity."), "{error}");
    }
}

//! Known answer of the shared resource: two targets of one process, each saturated by a closed
//! load, serve what the Universal Scalability Law with the implied σ and κ says.

mod common;

use std::time::Duration;

use common::closed_loop;
use horde_target::{Capacity, ServiceTimes, SharedCosts, TargetConfig, TargetHandle};

#[test]
fn two_saturated_instances_serve_the_law() {
    // W = 2, S = 9 ms, s = 1 ms, c = 1 ms: λ = 2 / 10 ms = 200/s, σ = 0.1, κ = 0.1, so two
    // instances serve 2·200 / (1 + 0.1 + 0.2) = 307.7 requests/s (each slot 9 + 2·(1 + 1) ms).
    let targets: Vec<TargetHandle> = (0..2)
        .map(|_| {
            TargetHandle::start(TargetConfig {
                capacity: Some(Capacity { workers: 2, service_ms: 9.0, service_times: ServiceTimes::Fixed }),
                shared: Some(SharedCosts { serial_ms: 1.0, crosstalk_ms: 1.0 }),
                ..TargetConfig::default()
            })
            .expect("target starts")
        })
        .collect();
    let duration = Duration::from_millis(2000);
    let window = (Duration::from_millis(500), duration);
    // Four clients per instance: more requests in flight than workers, always.
    let addresses: Vec<_> = targets.iter().map(TargetHandle::local_addr).collect();
    let completions = closed_loop(&addresses, 8, duration);
    let in_window = completions.iter().filter(|at| **at >= window.0 && **at <= window.1).count();
    let throughput = in_window as f64 / (window.1 - window.0).as_secs_f64();
    let expected = 2.0 * 200.0 / (1.0 + 0.1 + 0.1 * 2.0);
    assert!((throughput - expected).abs() / expected <= 0.05, "measured {throughput:.1}/s, expected {expected:.1}");
}

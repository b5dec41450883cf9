//! Re-pacing a running run: each scenario's VUs go at their own new pace (pacing and think
//! times divided by the factor) from their next pause on, the VU count unchanged, and bad
//! factors are refused.

mod support;

use horde_engine::{EngineOptions, Next, RunControl, Snapshot};
use horde_target::{TargetConfig, TargetHandle};
use serde_json::json;
use std::time::{Duration, Instant};
use support::{closed_value, plan_of};

const VUS: u64 = 4;

/// Scenario 0 starts an iteration every 200 ms (pacing); scenario 1 thinks 100 ms after each
/// request: about 20 and 40 requests a second at the plan's pace.
fn two_paces(base_url: &str, seconds: f64) -> horde_plan::Plan {
    let get = json!({"name": "get", "method": "GET", "path": "/"});
    let think = json!({"type": "think", "think_time": {"type": "constant", "duration_ms": 100}});
    let workload = closed_value(VUS, seconds);
    plan_of(json!({
        "version": 1,
        "target": {"base_url": base_url, "request_timeout_ms": 5000},
        "graceful_stop_s": 2,
        "scenarios": [
            {"name": "paced", "pacing_s": 0.2, "steps": [get], "workload": workload},
            {"name": "thinking", "steps": [get, think], "workload": workload},
        ],
    }))
}

/// Runs `plan`, calling `at_second(second, control)` after each snapshot, until the end.
fn run_with(plan: &horde_plan::Plan, mut at_second: impl FnMut(u64, &RunControl)) -> Vec<Snapshot> {
    let mut run = horde_engine::start(plan, EngineOptions::with_workers(2)).expect("run starts");
    let control = run.control();
    let deadline = Instant::now() + run.planned_duration() + Duration::from_secs(15);
    let mut snapshots = Vec::new();
    while Instant::now() < deadline && !run.is_finished() {
        if let Next::Snapshot(snapshot) = run.next_snapshot(Duration::from_millis(200)) {
            at_second(snapshot.second, &control);
            snapshots.push(*snapshot);
        }
    }
    assert!(run.is_finished(), "the run did not end in time");
    snapshots
}

/// Requests a second of one scenario, on average over `seconds`.
fn rate(snapshots: &[Snapshot], scenario: &str, seconds: &[u64]) -> f64 {
    let requests: u64 = snapshots
        .iter()
        .filter(|snapshot| seconds.contains(&snapshot.second))
        .flat_map(|snapshot| snapshot.steps.iter())
        .filter(|entry| entry.scenario == scenario)
        .map(|entry| entry.requests)
        .sum();
    requests as f64 / seconds.len() as f64
}

#[test]
fn each_scenario_goes_at_its_new_pace_with_the_same_vus() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    let plan = two_paces(&target.base_url(), 6.0);
    let snapshots = run_with(&plan, |second, control| {
        if second == 2 {
            control.repace(0, 2.0).expect("in range");
            control.repace(1, 0.5).expect("in range");
        }
    });
    // Seconds 1-2 at the plan's pace; second 3 still holds the pauses filed before the change.
    let paced = rate(&snapshots, "paced", &[1, 2]);
    let thinking = rate(&snapshots, "thinking", &[1, 2]);
    assert!((17.0..=23.0).contains(&paced), "paced at {paced}/s, 20 planned");
    assert!((32.0..=42.0).contains(&thinking), "thinking at {thinking}/s, about 40 planned");
    let paced_ratio = rate(&snapshots, "paced", &[4, 5]) / paced;
    let thinking_ratio = rate(&snapshots, "thinking", &[4, 5]) / thinking;
    assert!((1.7..=2.3).contains(&paced_ratio), "twice the pace: {paced_ratio:.2}x the rate");
    assert!((0.4..=0.6).contains(&thinking_ratio), "half the pace: {thinking_ratio:.2}x the rate");
    for snapshot in snapshots.iter().filter(|snapshot| !snapshot.is_final) {
        assert_eq!(snapshot.active_vus, 2 * VUS, "second {}", snapshot.second);
    }
}

#[test]
fn bad_factors_and_unknown_scenarios_are_refused() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    let plan = two_paces(&target.base_url(), 1.0);
    let run = horde_engine::start(&plan, EngineOptions::with_workers(1)).expect("run starts");
    let control = run.control();
    for bad in [0.0, -1.0, 1000.5, 0.0009, f64::NAN, f64::INFINITY] {
        let error = control.repace(0, bad).expect_err("refused").to_string();
        assert!(error.starts_with("a pace factor must be between 0.001 and 1000"), "{error}");
    }
    let error = control.repace(2, 2.0).expect_err("refused").to_string();
    assert_eq!(error, "the plan has no scenario number 2");
    control.repace(1, horde_engine::MAX_PACE_FACTOR).expect("the bound itself is accepted");
    control.repace(1, horde_engine::MIN_PACE_FACTOR).expect("the bound itself is accepted");
    control.stop();
}

//! What the engine's integration tests share: running a plan to its end and reading the result.
#![allow(dead_code)]

use hdrhistogram::Histogram;
use horde_engine::{EngineOptions, Next, RunHandle, Snapshot};
use horde_metrics::merge_encoded;
use std::time::{Duration, Instant};

/// A one-scenario plan with one GET step.
pub fn one_step_plan(base_url: &str, path: &str, workload: &str) -> horde_plan::Plan {
    let json = format!(
        r#"{{"version": 1, "target": {{"base_url": "{base_url}", "request_timeout_ms": 5000}},
            "graceful_stop_s": 2,
            "scenarios": [{{"name": "s", "steps": [{{"name": "get", "method": "GET", "path": "{path}"}}],
                            "workload": {workload}}}]}}"#
    );
    horde_plan::decode(&json).expect("test plan decodes")
}

/// Takes every snapshot of a run until its final one; bounded so a hung engine fails the test.
pub fn collect(run: &mut RunHandle, limit: Duration) -> Vec<Snapshot> {
    let deadline = Instant::now() + limit;
    let mut snapshots = Vec::new();
    while Instant::now() < deadline {
        match run.next_snapshot(Duration::from_millis(200)) {
            Next::Snapshot(snapshot) => snapshots.push(*snapshot),
            Next::Pending => {}
            Next::Finished => return snapshots,
        }
        if run.is_finished() {
            return snapshots;
        }
    }
    panic!("the run did not finish within {limit:?}");
}

pub fn run_to_end(plan: &horde_plan::Plan, workers: usize) -> Vec<Snapshot> {
    let mut run = horde_engine::start(plan, EngineOptions { workers }).expect("run starts");
    let limit = run.planned_duration() + Duration::from_secs(15);
    collect(&mut run, limit)
}

/// The exact merge of one step's latency over the given snapshots.
pub fn latency(snapshots: &[Snapshot], step: &str) -> Histogram<u64> {
    let parts: Vec<&[u8]> = snapshots
        .iter()
        .flat_map(|snapshot| snapshot.steps.iter())
        .filter(|entry| entry.step == step)
        .map(|entry| entry.histogram.as_slice())
        .collect();
    merge_encoded(parts).expect("histograms decode")
}

pub fn total_requests(snapshots: &[Snapshot]) -> u64 {
    snapshots.iter().map(Snapshot::requests).sum()
}

pub fn errors_of_kind(snapshots: &[Snapshot], kind: &str) -> u64 {
    snapshots
        .iter()
        .flat_map(|snapshot| snapshot.steps.iter())
        .flat_map(|entry| entry.errors.iter())
        .filter(|(label, _)| label == kind)
        .map(|(_, count)| count)
        .sum()
}

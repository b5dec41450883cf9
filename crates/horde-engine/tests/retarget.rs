//! Re-targeting a running run: the level moves from the next instant on, the past is kept, an
//! open pacer sleeping towards a far arrival wakes for the new rate, and a rate of zero can be
//! brought back; Poisson arrivals keep the asked rate.

mod support;

use horde_engine::{EngineOptions, Next, Snapshot};
use horde_target::{TargetConfig, TargetHandle};
use std::time::{Duration, Instant};
use support::{one_step_plan, open, run_to_end};

fn target() -> TargetHandle {
    TargetHandle::start(TargetConfig::default()).expect("target starts")
}

/// Runs `plan`, calling `at_second(second, control)` after each snapshot, until the end.
fn run_with(
    plan: &horde_plan::Plan,
    workers: usize,
    mut at_second: impl FnMut(u64, &horde_engine::RunControl),
) -> Vec<Snapshot> {
    let mut run = horde_engine::start(plan, EngineOptions::with_workers(workers)).expect("run starts");
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

fn requests_in(snapshots: &[Snapshot], second: u64) -> u64 {
    snapshots.iter().find(|s| s.second == second).map(Snapshot::requests).expect("that second was reported")
}

#[test]
fn an_open_rate_moves_up_and_down_and_comes_back_from_zero() {
    let target = target();
    let plan = one_step_plan(&target.base_url(), "/", &open(100.0, 8.0, 50));
    let snapshots = run_with(&plan, 2, |second, control| {
        let level = match second {
            2 => Some(300.0),
            4 => Some(0.0),
            6 => Some(50.0),
            _ => None,
        };
        if let Some(level) = level {
            control.retarget(0, level, Duration::ZERO).expect("in range");
        }
    });
    assert_eq!((requests_in(&snapshots, 1), requests_in(&snapshots, 2)), (100, 100));
    // Each move lands a few milliseconds into the next second (the snapshot is read first).
    for (second, expected) in [(4, 300u64), (6, 0), (8, 50)] {
        let got = requests_in(&snapshots, second);
        assert!(got.abs_diff(expected) <= expected / 50 + 2, "second {second}: {got} requests, {expected} asked");
    }
    let asked: Vec<Option<f64>> = [4, 6, 8].iter().map(|&s| snapshots[s - 1].target_rate_per_s).collect();
    assert_eq!(asked, vec![Some(300.0), Some(0.0), Some(50.0)]);
}

#[test]
fn a_closed_level_ramps_to_its_new_count() {
    let target = target();
    let plan = one_step_plan(&target.base_url(), "/delay/10", &support::closed(2, 6.0));
    let snapshots = run_with(&plan, 2, |second, control| {
        if second == 1 {
            control.retarget(0, 10.0, Duration::from_secs(2)).expect("in range");
        }
    });
    let asked: Vec<u64> = snapshots.iter().filter(|s| !s.is_final).map(|s| s.target_vus).collect();
    assert_eq!(asked[0], 2);
    assert!(asked[1] > 2 && asked[1] < 10, "half way up the ramp: {asked:?}");
    assert_eq!(&asked[3..], &[10, 10, 10], "{asked:?}");
    assert_eq!(snapshots[4].active_vus, 10);
}

#[test]
fn out_of_range_levels_are_refused() {
    let target = target();
    let plan = one_step_plan(&target.base_url(), "/", &open(10.0, 1.0, 5));
    let mut run = horde_engine::start(&plan, EngineOptions::with_workers(1)).expect("run starts");
    let control = run.control();
    assert!(control.retarget(1, 5.0, Duration::ZERO).is_err(), "no scenario 1");
    assert!(control.retarget(0, -1.0, Duration::ZERO).is_err());
    assert!(control.retarget(0, f64::NAN, Duration::ZERO).is_err());
    assert!(control.retarget(0, 1e12, Duration::ZERO).is_err());
    control.stop();
    support::collect(&mut run, Duration::from_secs(10));
}

#[test]
fn poisson_arrivals_keep_the_rate_with_exponential_gaps() {
    let target = target();
    let workload = r#"{"type": "open", "start_rate_per_s": 400, "stages": [{"duration_s": 5, "rate_per_s": 400}], "max_vus": 100, "arrivals": "poisson"}"#;
    let plan = one_step_plan(&target.base_url(), "/", workload);
    let snapshots = run_to_end(&plan, 2);
    let total: u64 = snapshots.iter().map(Snapshot::requests).sum();
    // 2,000 expected; a Poisson count has a standard deviation of sqrt(2000) ≈ 45.
    assert!(total.abs_diff(2000) < 200, "{total} arrivals for 2,000 asked");
    // Unlike evenly spaced arrivals (exactly 400 a second), the seconds vary.
    let per_second: Vec<u64> = snapshots.iter().filter(|s| !s.is_final).map(Snapshot::requests).collect();
    assert!(per_second.iter().any(|&n| n != 400), "{per_second:?}");
}

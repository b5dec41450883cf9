//! Work split over several worker threads stays exact: the open model's arrivals add up to the
//! plan's count whatever the worker count, merged snapshots equal the sum of their parts, and
//! a closed model's VUs are all alive.

mod support;

use horde_engine::Snapshot;
use horde_target::{TargetConfig, TargetHandle};
use support::{
    assert_accounting, closed, custom_plan, engine_panics, error_kinds, get_step, latency, open, run_to_end, total_ok,
    total_requests,
};

fn target() -> TargetHandle {
    TargetHandle::start(TargetConfig { threads: 2, ..TargetConfig::default() }).expect("target starts")
}

/// Per snapshot and overall: the merged counters are the sums over steps, the histograms hold
/// one sample per request, and iterations match (each iteration runs every step once).
fn assert_sums(snapshots: &[Snapshot], steps_per_iteration: u64) {
    assert_accounting(snapshots);
    for snapshot in snapshots {
        let by_steps: u64 = snapshot.steps.iter().map(|step| step.requests).sum();
        assert_eq!(snapshot.requests(), by_steps);
        let ok_by_steps: u64 = snapshot.steps.iter().map(|step| step.ok).sum();
        assert_eq!(snapshot.ok(), ok_by_steps);
    }
    let iterations: u64 = snapshots.iter().map(|s| s.iterations).sum();
    assert_eq!(iterations * steps_per_iteration, total_requests(snapshots), "iterations x steps = requests");
}

fn open_run(workers: usize) -> Vec<Snapshot> {
    let target = target();
    let plan = custom_plan(&target.base_url(), "", &get_step("/", None), &open(200.0, 3.0, 50), 2.0);
    run_to_end(&plan, workers)
}

#[test]
fn open_model_gives_exactly_its_arrivals_on_one_worker() {
    let panics = engine_panics();
    let snapshots = open_run(1);
    assert_sums(&snapshots, 1);
    let dropped: u64 = snapshots.iter().map(|s| s.dropped_arrivals).sum();
    assert_eq!(dropped, 0);
    assert_eq!(total_requests(&snapshots), 600, "200/s for 3 s");
    assert_eq!(total_ok(&snapshots), 600, "errors: {:?}", error_kinds(&snapshots));
    assert_eq!(latency(&snapshots, "get").len(), 600);
    assert_eq!(engine_panics(), panics);
}

#[test]
fn open_model_gives_exactly_its_arrivals_on_two_workers() {
    let panics = engine_panics();
    let snapshots = open_run(2);
    assert_sums(&snapshots, 1);
    let dropped: u64 = snapshots.iter().map(|s| s.dropped_arrivals).sum();
    assert_eq!(dropped, 0);
    assert_eq!(total_requests(&snapshots), 600, "200/s for 3 s");
    assert_eq!(total_ok(&snapshots), 600, "errors: {:?}", error_kinds(&snapshots));
    assert_eq!(latency(&snapshots, "get").len(), 600);
    // Whole seconds hold about a whole second's arrivals (loosely: a busy machine moves a few
    // completions across a boundary).
    for snapshot in snapshots.iter().filter(|s| !s.is_final && (2..=3).contains(&s.second)) {
        let requests = snapshot.requests();
        assert!((170..=230).contains(&requests), "second {}: {requests} requests", snapshot.second);
    }
    assert_eq!(engine_panics(), panics);
}

#[test]
fn open_model_with_three_workers_and_two_steps_sums_exactly() {
    let target = target();
    let steps =
        r#"[{"name": "a", "method": "GET", "path": "/"}, {"name": "b", "method": "GET", "path": "/status/404"}]"#;
    let plan = custom_plan(&target.base_url(), "", steps, &open(100.0, 2.0, 50), 2.0);
    let snapshots = run_to_end(&plan, 3);
    assert_sums(&snapshots, 2);
    let step_total = |name: &str| -> u64 {
        snapshots.iter().flat_map(|s| s.steps.iter()).filter(|step| step.step == name).map(|step| step.requests).sum()
    };
    assert_eq!(step_total("a"), 200);
    assert_eq!(step_total("b"), 200);
    assert_eq!(total_ok(&snapshots), 200);
    assert_eq!(support::errors_of_kind(&snapshots, "status_404"), 200);
    assert_eq!(latency(&snapshots, "a").len() + latency(&snapshots, "b").len(), 400);
}

#[test]
fn closed_vus_are_all_alive_across_three_workers() {
    let target = target();
    let plan = custom_plan(&target.base_url(), "", &get_step("/delay/20", None), &closed(7, 3.0), 2.0);
    let snapshots = run_to_end(&plan, 3);
    assert_sums(&snapshots, 1);
    let steady: Vec<&Snapshot> = snapshots.iter().filter(|s| !s.is_final && (1..=2).contains(&s.second)).collect();
    assert_eq!(steady.len(), 2, "seconds 1 and 2 are whole intervals");
    for snapshot in steady {
        assert_eq!(snapshot.active_vus, 7, "second {}", snapshot.second);
        assert_eq!(snapshot.target_vus, 7, "second {}", snapshot.second);
        assert!(snapshot.busy_vus <= 7);
    }
    assert_eq!(snapshots.iter().map(|s| s.connections_opened).sum::<u64>(), 7, "one connection per VU");
    assert_eq!(total_ok(&snapshots), total_requests(&snapshots));
    // 7 VUs x ~20 ms: about 350/s for 3 s; a loose floor that survives a busy machine.
    assert!(total_requests(&snapshots) >= 300, "only {} requests", total_requests(&snapshots));
}

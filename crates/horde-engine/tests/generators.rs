//! One plan run by several generators (`EngineOptions::generator`), here several engines in one
//! test process: their shares add up to the plan exactly, at every instant of a ramp and in
//! total; VU numbers never repeat across generators; they start at the agreed instant; and a
//! re-target sent to each moves the total.

mod support;

use horde_engine::{EngineOptions, GeneratorShare, RunHandle, Snapshot};
use horde_target::{TargetConfig, TargetHandle};
use serde_json::json;
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::{
    closed, collect, custom_plan, get_step, open, plan_of, total_ok, total_requests, RecordingServer, Reply,
};

fn target() -> TargetHandle {
    TargetHandle::start(TargetConfig { threads: 2, ..TargetConfig::default() }).expect("target starts")
}

/// Starts one generator of `plan` per entry of `workers` (its worker count), their slots laid
/// end to end, at one instant 300 ms ahead.
fn start_generators(plan: &horde_plan::Plan, workers: &[usize]) -> (Vec<RunHandle>, SystemTime) {
    let at = SystemTime::now() + Duration::from_millis(300);
    let slots = workers.iter().sum();
    let mut first_slot = 0;
    let runs = workers
        .iter()
        .map(|&workers| {
            let generator = Some(GeneratorShare { first_slot, slots });
            first_slot += workers;
            horde_engine::start(
                plan,
                EngineOptions { workers, generator, start_at: Some(at), ..EngineOptions::default() },
            )
            .expect("generator starts")
        })
        .collect();
    (runs, at)
}

fn collect_all(runs: &mut [RunHandle]) -> Vec<Vec<Snapshot>> {
    runs.iter_mut()
        .map(|run| {
            let limit = run.planned_duration() + Duration::from_secs(15);
            collect(run, limit)
        })
        .collect()
}

#[test]
fn open_model_arrivals_add_up_over_generators() {
    let target = target();
    // 211/s for 3 s: 633 arrivals, dealt over 3 generators x 2 workers = 6 slots.
    let plan = custom_plan(&target.base_url(), "", &get_step("/", None), &open(211.0, 3.0, 60), 2.0);
    let (mut runs, _) = start_generators(&plan, &[2, 2, 2]);
    let parts = collect_all(&mut runs);
    let per_generator: Vec<u64> = parts.iter().map(|snapshots| total_requests(snapshots)).collect();
    let total: u64 = per_generator.iter().sum();
    let alone = {
        let mut run = horde_engine::start(&plan, EngineOptions::with_workers(2)).expect("run starts");
        let limit = run.planned_duration() + Duration::from_secs(15);
        total_requests(&collect(&mut run, limit))
    };
    assert_eq!(total, alone, "three generators send what one sends alone: {per_generator:?}");
    for requests in &per_generator {
        assert!(requests.abs_diff(total / 3) <= 2, "an even split: {per_generator:?}");
    }
    let ok: u64 = parts.iter().map(|snapshots| total_ok(snapshots)).sum();
    assert_eq!(ok, total);
}

#[test]
fn closed_model_levels_add_up_at_every_instant_of_a_ramp() {
    let target = target();
    // 0 -> 23 VUs over 2 s, then 23 held: the generators' live VUs add up to what one would hold.
    let workload =
        r#"{"type": "closed", "start_vus": 0, "stages": [{"duration_s": 2, "vus": 23}, {"duration_s": 2, "vus": 23}]}"#;
    let plan = custom_plan(&target.base_url(), "", &get_step("/delay/5", None), workload, 2.0);
    let (mut runs, _) = start_generators(&plan, &[2, 2, 2]);
    let parts = collect_all(&mut runs);
    let seconds = parts.iter().map(Vec::len).min().unwrap();
    for second in 0..seconds {
        let snapshots: Vec<&Snapshot> = parts.iter().map(|snapshots| &snapshots[second]).collect();
        if snapshots.iter().any(|snapshot| snapshot.is_final || snapshot.second >= 4) {
            continue; // the stages end at 4 s: VUs are leaving
        }
        let asked = snapshots[0].target_vus;
        assert!(
            snapshots.iter().all(|snapshot| snapshot.target_vus == asked),
            "each generator reports the plan's level"
        );
        let held: u64 = snapshots.iter().map(|snapshot| snapshot.active_vus).sum();
        // The ramp moves every 20 ms tick; the sum lags the asked level by at most one tick's step.
        assert!(held.abs_diff(asked) <= 1, "second {}: {held} VUs alive for {asked} asked", second + 1);
    }
    let last: u64 = parts.iter().map(|snapshots| snapshots[2].active_vus).sum();
    assert_eq!(last, 23, "the hold: 23 VUs over three generators");
}

#[test]
fn vu_numbers_never_repeat_across_generators() {
    // Each VU sends its number once per iteration; the server collects the numbers it saw.
    let server = RecordingServer::start(|_| Reply::ok("ok"));
    let plan = plan_of(json!({
        "version": 1,
        "target": {"base_url": server.base_url(), "request_timeout_ms": 5000},
        "graceful_stop_s": 2,
        "scenarios": [{"name": "s", "workload": serde_json::from_str::<serde_json::Value>(&closed(10, 1.0)).unwrap(),
                       "steps": [{"name": "get", "method": "GET", "path": "/vu/{{ vu }}",
                                  "think_time": {"type": "constant", "duration_ms": 50}}]}],
    }));
    let (mut runs, _) = start_generators(&plan, &[1, 1, 1]);
    collect_all(&mut runs);
    let numbers: BTreeSet<String> = server.requests().iter().map(|request| request.path.clone()).collect();
    let expected: BTreeSet<String> = (0..10).map(|vu| format!("/vu/{vu}")).collect();
    assert_eq!(numbers, expected, "10 VUs numbered 0..9 over three generators, none twice");
}

#[test]
fn generators_start_at_the_agreed_instant() {
    let target = target();
    let plan = custom_plan(&target.base_url(), "", &get_step("/", None), &closed(2, 1.0), 1.0);
    let (mut runs, at) = start_generators(&plan, &[1, 1]);
    let parts = collect_all(&mut runs);
    let agreed = at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    for snapshots in &parts {
        let first = &snapshots[0];
        let start = first.timestamp - first.elapsed_s;
        assert!((start - agreed).abs() < 0.005, "time zero {start} is the agreed {agreed}");
    }
}

#[test]
fn shares_follow_the_workers() {
    let target = target();
    // 240/s for 3 s over a 1-worker and a 3-worker generator: a quarter and three quarters.
    let plan = custom_plan(&target.base_url(), "", &get_step("/", None), &open(240.0, 3.0, 60), 2.0);
    let (mut runs, _) = start_generators(&plan, &[1, 3]);
    let parts = collect_all(&mut runs);
    let (small, large) = (total_requests(&parts[0]), total_requests(&parts[1]));
    assert!(small.abs_diff((small + large) / 4) <= 1, "1 slot of 4 carries a quarter: {small} and {large}");
}

#[test]
fn slots_that_do_not_fit_are_refused() {
    let target = target();
    let plan = custom_plan(&target.base_url(), "", &get_step("/", None), &closed(1, 1.0), 1.0);
    let options =
        EngineOptions { generator: Some(GeneratorShare { first_slot: 2, slots: 3 }), ..EngineOptions::with_workers(2) };
    let error = horde_engine::start(&plan, options).err().expect("refused");
    assert!(error.to_string().contains("do not fit in the run's 3 slots"), "{error}");
}

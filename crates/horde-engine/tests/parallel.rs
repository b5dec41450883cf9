//! `parallel` groups with known answers against the built-in target: four requests to a 200 ms
//! delay take about one delay, not four, over h2c on the VU's one connection and over HTTP/1.1
//! on as many connections as `target.parallel_connections` allows; extractions apply in step
//! order once the group ends; recorded exchanges and the open model.
//!
//! The group's time is bounded loosely (a shared, loaded machine): under twice one delay at the
//! median and under the sum of the delays at worst, where sending in turn would take the sum.

mod support;

use horde_engine::{EngineOptions, Snapshot};
use horde_target::{TargetConfig, TargetHandle};
use serde_json::json;
use std::time::Duration;
use support::{
    assert_scenario_accounting, burst_arrivals, closed_value, collect, connections_opened, entries, error_kinds,
    latency, open_burst, plan_of, step_kind, step_ok, step_requests,
};

const DELAY_MS: u64 = 200;
const REQUESTS: usize = 4;

/// A plan whose iteration is one parallel group `page` of `REQUESTS` requests to the delay
/// endpoint, `r0`.. `r3`.
fn page_plan(base_url: &str, target_extra: serde_json::Value, workload: serde_json::Value) -> horde_plan::Plan {
    let requests: Vec<_> = (0..REQUESTS)
        .map(|index| json!({"name": format!("r{index}"), "method": "GET", "path": format!("/delay/{DELAY_MS}"), "checks": [{"type": "status", "in": [200]}]}))
        .collect();
    let mut target = json!({"base_url": base_url, "request_timeout_ms": 5000});
    target.as_object_mut().unwrap().extend(target_extra.as_object().unwrap().clone());
    plan_of(json!({
        "version": 1,
        "target": target,
        "graceful_stop_s": 3,
        "scenarios": [{"name": "s", "steps": [{"type": "parallel", "name": "page", "steps": requests}], "workload": workload}],
    }))
}

fn run(plan: &horde_plan::Plan, options: EngineOptions) -> Vec<Snapshot> {
    let mut run = horde_engine::start(plan, options).expect("run starts");
    let limit = run.planned_duration() + Duration::from_secs(20);
    collect(&mut run, limit)
}

/// Every request of the page answered, each under its own name, and the group's passes timed.
fn assert_page_answered(snapshots: &[Snapshot]) -> u64 {
    assert!(error_kinds(snapshots).is_empty(), "{:?}", error_kinds(snapshots));
    assert_eq!(step_kind(snapshots, "page"), "group");
    let passes = step_ok(snapshots, "page");
    assert!(passes >= 2, "{passes} passes");
    for index in 0..REQUESTS {
        let name = format!("r{index}");
        assert_eq!(step_ok(snapshots, &name), passes, "{name}");
        let min_ms = latency(snapshots, &name).min() / 1000;
        assert!(min_ms >= DELAY_MS, "{name}: {min_ms} ms, under the delay");
    }
    passes
}

/// The group's passes, in ms: (median, max).
fn page_ms(snapshots: &[Snapshot]) -> (u64, u64) {
    let histogram = latency(snapshots, "page");
    (histogram.value_at_quantile(0.5) / 1000, histogram.max() / 1000)
}

#[test]
fn over_h2c_the_requests_are_streams_of_the_vus_one_connection() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    let plan = page_plan(&target.base_url(), json!({"http_version": "2"}), closed_value(1, 1.5));
    let snapshots = run(&plan, EngineOptions::with_workers(1));
    assert_scenario_accounting(&snapshots);
    let passes = assert_page_answered(&snapshots);
    assert_eq!(connections_opened(&snapshots), 1, "one connection carried every stream");
    let over_h2: u64 = (0..REQUESTS)
        .flat_map(|index| entries(&snapshots, &format!("r{index}")).map(|entry| entry.http2).collect::<Vec<_>>())
        .sum();
    assert_eq!(over_h2, passes * REQUESTS as u64);
    let (median, max) = page_ms(&snapshots);
    assert!(median < 2 * DELAY_MS && max < REQUESTS as u64 * DELAY_MS, "page: median {median} ms, max {max} ms");
}

#[test]
fn over_http1_the_requests_go_out_on_several_connections_of_the_vu() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    let plan = page_plan(&target.base_url(), json!({}), closed_value(1, 1.5));
    let snapshots = run(&plan, EngineOptions::with_workers(1));
    assert_scenario_accounting(&snapshots);
    assert_page_answered(&snapshots);
    // Its own and three more (of the six allowed), kept alive from one pass to the next.
    assert_eq!(connections_opened(&snapshots), REQUESTS as u64);
    let (median, max) = page_ms(&snapshots);
    assert!(median < 2 * DELAY_MS && max < REQUESTS as u64 * DELAY_MS, "page: median {median} ms, max {max} ms");
}

#[test]
fn over_http1_requests_past_parallel_connections_wait_for_a_free_one() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    let plan = page_plan(&target.base_url(), json!({"parallel_connections": 2}), closed_value(1, 1.5));
    let snapshots = run(&plan, EngineOptions::with_workers(1));
    assert_page_answered(&snapshots);
    assert_eq!(connections_opened(&snapshots), 2);
    // Two at a time: a pass takes two delays at least.
    let page = latency(&snapshots, "page");
    assert!(page.min() / 1000 >= 2 * DELAY_MS, "page: {} ms", page.min() / 1000);
}

#[test]
fn extractions_apply_when_the_group_ends_the_later_step_winning() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    let plan = plan_of(json!({
        "version": 1,
        "target": {"base_url": target.base_url(), "http_version": "2"},
        "scenarios": [{"name": "s", "setup": [{"name": "first", "method": "GET", "path": "/status/204",
                                                "extract": [{"var": "code", "from": "status"}]}],
            "steps": [
                {"type": "parallel", "name": "both", "steps": [
                    // Both read `code` as it was before the group (204, from the setup).
                    {"name": "a", "method": "GET", "path": "/status/201",
                     "extract": [{"var": "code", "from": "status"}], "checks": [{"type": "status", "in": [201]}]},
                    {"name": "b", "method": "GET", "path": "/status/{{ code }}",
                     "extract": [{"var": "code", "from": "status"}], "checks": [{"type": "status", "in": [204]}]},
                ]},
                // After the group: b's status, the later step's, whatever answered first.
                {"name": "after", "method": "GET", "path": "/status/{{ code }}", "checks": [{"type": "status", "in": [204]}]},
            ],
            "workload": closed_value(1, 0.5)}],
    }));
    let snapshots = run(&plan, EngineOptions { record_exchanges: 3, ..EngineOptions::with_workers(1) });
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    let recorded: Vec<_> = snapshots.iter().flat_map(|snapshot| snapshot.exchanges.clone()).collect();
    let of = |step: &str| recorded.iter().filter(|exchange| exchange.step == step).cloned().collect::<Vec<_>>();
    // b asked for the setup's 204 (not a's 201, which a extracts in the same group), and
    // `after` for b's 204: b's extraction applied after a's.
    assert_eq!(of("a").len(), 3, "each request of the group is recorded");
    for exchange in of("b").iter().chain(&of("after")) {
        assert!(exchange.request.starts_with("GET /status/204 "), "{}: {:?}", exchange.step, exchange.request);
    }
    assert_eq!(of("a")[0].vars, vec![("code".to_owned(), Some("201".to_owned()))]);
    assert_eq!(of("b")[0].vars, vec![("code".to_owned(), Some("204".to_owned()))]);
    assert!(step_requests(&snapshots, "both") >= 3);
}

#[test]
fn in_the_open_model_an_iteration_ends_when_its_group_ends() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    let plan = page_plan(&target.base_url(), json!({"http_version": "2"}), open_burst(4.0, 1.1, 20));
    let snapshots = run(&plan, EngineOptions::with_workers(1));
    assert_scenario_accounting(&snapshots);
    let arrivals = burst_arrivals(4.0, 1.1);
    assert_eq!(step_ok(&snapshots, "page"), arrivals);
    for index in 0..REQUESTS {
        assert_eq!(step_ok(&snapshots, &format!("r{index}")), arrivals);
    }
    // Each request is timed from its arrival's intended start, and from its send too.
    assert!(entries(&snapshots, "r0").any(|entry| !entry.from_send_histogram.is_empty()));
}

#[test]
fn with_a_pool_each_request_takes_a_pool_connection_or_a_stream_of_one() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    // HTTP/2, a pool of one: the four requests are streams of its one connection.
    let plan =
        page_plan(&target.base_url(), json!({"http_version": "2", "connections": {"pool": 1}}), closed_value(1, 1.5));
    let snapshots = run(&plan, EngineOptions::with_workers(1));
    assert_page_answered(&snapshots);
    assert_eq!(connections_opened(&snapshots), 1);
    let (median, max) = page_ms(&snapshots);
    assert!(median < 2 * DELAY_MS && max < REQUESTS as u64 * DELAY_MS, "page: median {median} ms, max {max} ms");
    // HTTP/1.1, a pool of two: two requests at a time, each on a connection borrowed from it.
    let plan = page_plan(&target.base_url(), json!({"connections": {"pool": 2}}), closed_value(1, 1.5));
    let snapshots = run(&plan, EngineOptions::with_workers(1));
    assert_page_answered(&snapshots);
    assert_eq!(connections_opened(&snapshots), 2);
    assert!(latency(&snapshots, "page").min() / 1000 >= 2 * DELAY_MS);
}

#[test]
fn a_request_whose_template_fails_is_counted_and_the_others_go_out() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    let plan = plan_of(json!({
        "version": 1,
        "target": {"base_url": target.base_url()},
        "scenarios": [{"name": "s",
            "steps": [
                {"type": "parallel", "name": "both", "steps": [
                    {"name": "fine", "method": "GET", "path": "/delay/20"},
                    // `later` is set after the group: unset at the first pass.
                    {"name": "unset", "method": "GET", "path": "/{{ later }}"},
                ]},
                {"name": "set", "method": "GET", "path": "/", "extract": [{"var": "later", "from": "status", "default": 1}]},
                {"type": "end_iteration"},
            ],
            "workload": closed_value(1, 0.3)}],
    }));
    let snapshots = run(&plan, EngineOptions { single_iteration: true, ..EngineOptions::with_workers(1) });
    assert_eq!(step_ok(&snapshots, "fine"), 1);
    assert_eq!(support::step_errors(&snapshots, "unset", "template_failed"), 1);
    // The group's pass failed with one of its requests.
    assert_eq!(support::step_errors(&snapshots, "both", "step_failed"), 1);
}

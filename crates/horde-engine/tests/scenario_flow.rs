//! Control flow of the scenario language: weighted choices, loops (count, while, for_each),
//! conditions, end_iteration, groups, think steps, pacing, setup and teardown, and the first
//! slice's fast path left as it was.
//!
//! Most runs use an open burst (every arrival well before the stages end), so no iteration is
//! cut by the stop and the counts are exact.

mod support;

use horde_target::{TargetConfig, TargetHandle};
use serde_json::json;
use support::{
    assert_accounting, assert_scenario_accounting, burst_arrivals, bytes_sent, closed_value, error_kinds,
    errors_of_kind, iterations, latency, open_burst, run_timed, scenario_plan, step_kind, step_ok, step_requests,
    RecordingServer, Reply,
};

fn target() -> TargetHandle {
    TargetHandle::start(TargetConfig::default()).expect("target starts")
}

fn get(name: &str, path: &str) -> serde_json::Value {
    json!({"name": name, "method": "GET", "path": path})
}

fn think(ms: f64) -> serde_json::Value {
    json!({"type": "think", "think_time": {"type": "constant", "duration_ms": ms}})
}

#[test]
fn choice_branches_follow_their_weights() {
    let target = target();
    let (rate, seconds) = (1000.0, 2.05);
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "steps": [{"type": "choice", "branches": [
                {"weight": 80, "steps": [get("heavy", "/?branch=heavy")]},
                {"weight": 20, "steps": [get("light", "/?branch=light")]},
            ]}],
            "workload": open_burst(rate, seconds, 100),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let dropped: u64 = snapshots.iter().map(|s| s.dropped_arrivals).sum();
    let (heavy, light) = (step_requests(&snapshots, "heavy"), step_requests(&snapshots, "light"));
    // One branch per pass, never both, never none.
    assert_eq!(heavy + light + dropped, burst_arrivals(rate, seconds));
    assert!(heavy + light >= 1800, "only {} passes", heavy + light);
    let share = heavy as f64 / (heavy + light) as f64;
    assert!((share - 0.8).abs() <= 0.04, "heavy share {share:.3} ({heavy} vs {light})");
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
}

#[test]
fn count_and_while_loops_run_their_passes() {
    let target = target();
    let (rate, seconds) = (10.0, 1.55);
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "steps": [
                {"type": "loop", "count": 3, "steps": [get("counted", "/?loop=count")]},
                {"type": "loop", "while": "iteration < 0", "steps": [get("never", "/?loop=never")]},
                {"type": "loop", "while": "true", "max_iterations": 4, "steps": [get("capped", "/?loop=capped")]},
                {"type": "loop", "count": 2, "steps": [
                    {"type": "loop", "count": 2, "steps": [get("nested", "/?loop=nested")]},
                ]},
                get("after", "/?after"),
            ],
            "workload": open_burst(rate, seconds, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let passes = burst_arrivals(rate, seconds);
    assert_eq!(step_requests(&snapshots, "after"), passes);
    assert_eq!(iterations(&snapshots), passes);
    assert_eq!(step_requests(&snapshots, "counted"), 3 * passes);
    assert_eq!(step_requests(&snapshots, "never"), 0);
    assert_eq!(
        step_requests(&snapshots, "capped"),
        4 * passes,
        "max_iterations bounds a loop whose condition always holds"
    );
    assert_eq!(step_requests(&snapshots, "nested"), 4 * passes);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
}

/// A tiny counter service: `/start` answers `{"n": 0, "items": [...]}`, `/next/N` answers
/// `{"n": N + 1}`, `/item/X` answers `ok`.
fn counter_server() -> RecordingServer {
    RecordingServer::start(|request| {
        if request.path == "/start" {
            Reply::json(200, json!({"n": 0, "items": [{"code": "a"}, {"code": "b"}, {"code": "c"}]}))
        } else if let Some(n) = request.path.strip_prefix("/next/") {
            let n: i64 = n.parse().unwrap_or(-100);
            Reply::json(200, json!({"n": n + 1}))
        } else {
            Reply::ok("ok")
        }
    })
}

#[test]
fn while_loops_on_an_extracted_counter_and_for_each_over_an_extracted_list() {
    let server = counter_server();
    let (rate, seconds) = (10.0, 1.55);
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "steps": [
                {"name": "start", "method": "GET", "path": "/start", "extract": [
                    {"var": "n", "from": "json", "expression": "$.n"},
                    {"var": "codes", "from": "json", "expression": "$.items[*].code", "pick": "all"},
                ]},
                {"type": "loop", "while": "n < 5", "steps": [
                    {"name": "next", "method": "GET", "path": "/next/{{ n }}",
                     "extract": [{"var": "n", "from": "json", "expression": "$.n"}]},
                ]},
                {"type": "loop", "for_each": "codes", "as": "code", "steps": [
                    {"name": "item", "method": "GET", "path": "/item/{{ code }}?n={{ n }}"},
                ]},
                {"type": "loop", "for_each": "codes", "as": "first_codes", "max_iterations": 2, "steps": [
                    {"name": "first_items", "method": "GET", "path": "/first/{{ first_codes }}"},
                ]},
            ],
            "workload": open_burst(rate, seconds, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    let passes = burst_arrivals(rate, seconds) as usize;
    assert_eq!(server.count_path("/start"), passes);
    // n goes 0 -> 5 in five passes, each templated with the value the previous one extracted.
    assert_eq!(step_requests(&snapshots, "next") as usize, 5 * passes);
    for n in 0..5 {
        assert_eq!(server.count_path(&format!("/next/{n}")), passes, "/next/{n}");
    }
    // One request per item, in order, with the loop variable in the path.
    assert_eq!(step_requests(&snapshots, "item") as usize, 3 * passes);
    for code in ["a", "b", "c"] {
        assert_eq!(server.count_path(&format!("/item/{code}?n=5")), passes, "/item/{code}");
    }
    let order: Vec<String> = server.with_prefix("/item/").iter().take(3).map(|request| request.path.clone()).collect();
    assert_eq!(order, ["/item/a?n=5", "/item/b?n=5", "/item/c?n=5"]);
    // max_iterations also bounds for_each.
    assert_eq!(server.count_path("/first/a"), passes);
    assert_eq!(server.count_path("/first/b"), passes);
    assert_eq!(server.count_path("/first/c"), 0);
}

#[test]
fn if_and_else_branches_follow_the_condition() {
    let target = target();
    let (rate, seconds) = (10.0, 1.55);
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "steps": [
                {"name": "probe", "method": "GET", "path": "/status/202",
                 "extract": [{"var": "code", "from": "status"}]},
                {"type": "if", "condition": "code == 202", "then": [get("then_taken", "/?then")],
                 "else": [get("else_not_taken", "/?else")]},
                {"type": "if", "condition": "code == 500 or vu < 0", "then": [get("then_not_taken", "/?then2")],
                 "else": [get("else_taken", "/?else2")]},
                // A condition on a variable nothing set does not hold.
                {"type": "if", "condition": "never_set", "then": [get("unset_then", "/?unset")],
                 "else": [get("unset_else", "/?unset_else")]},
                {"type": "if", "condition": "false", "then": [
                    {"name": "setter", "method": "GET", "path": "/", "extract": [{"var": "never_set", "from": "status"}]},
                ]},
            ],
            "workload": open_burst(rate, seconds, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let passes = burst_arrivals(rate, seconds);
    assert_eq!(step_requests(&snapshots, "probe"), passes);
    assert_eq!(step_requests(&snapshots, "then_taken"), passes);
    assert_eq!(step_requests(&snapshots, "else_not_taken"), 0);
    assert_eq!(step_requests(&snapshots, "then_not_taken"), 0);
    assert_eq!(step_requests(&snapshots, "else_taken"), passes);
    assert_eq!(step_requests(&snapshots, "unset_then"), 0);
    assert_eq!(step_requests(&snapshots, "unset_else"), passes);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
}

/// A condition that is a variable alone is judged by its value's truth, as the template's
/// `if` judges it (the engine reads the variable without rendering): a non-empty list and a
/// number other than 0 hold; an empty list, 0 and an empty string do not.
#[test]
fn a_variable_alone_holds_as_its_value_is_true() {
    let target = target();
    let (rate, seconds) = (10.0, 1.55);
    let branch = |variable: &str| {
        json!({"type": "if", "condition": format!(" {variable} "), "then": [get(&format!("{variable}_then"), &format!("/?{variable}"))],
               "else": [get(&format!("{variable}_else"), &format!("/?{variable}_else"))]})
    };
    let default = |variable: &str, value: serde_json::Value| json!({"var": variable, "from": "json", "expression": "$.nothing", "default": value});
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "steps": [
                {"name": "probe", "method": "GET", "path": "/status/202",
                 "extract": [{"var": "code", "from": "status"}, default("listed", json!([0])), default("empty", json!([])),
                             default("zero", json!(0)), default("blank", json!(""))]},
                branch("code"), branch("listed"), branch("empty"), branch("zero"), branch("blank"),
            ],
            "workload": open_burst(rate, seconds, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let passes = burst_arrivals(rate, seconds);
    for (variable, holds) in [("code", true), ("listed", true), ("empty", false), ("zero", false), ("blank", false)] {
        let (then, otherwise) = if holds { (passes, 0) } else { (0, passes) };
        assert_eq!(step_requests(&snapshots, &format!("{variable}_then")), then, "{variable}");
        assert_eq!(step_requests(&snapshots, &format!("{variable}_else")), otherwise, "{variable}");
    }
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
}

#[test]
fn the_iteration_counter_alternates_per_vu() {
    let target = target();
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "steps": [
                {"type": "if", "condition": "iteration % 2 == 0", "then": [get("even", "/?even")],
                 "else": [get("odd", "/?odd")]},
                think(10.0),
            ],
            "workload": closed_value(1, 1.0),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let (even, odd) = (step_requests(&snapshots, "even"), step_requests(&snapshots, "odd"));
    assert!(odd >= 10, "{even} even, {odd} odd iterations");
    // Iterations 0, 1, 2...: even first, so even == odd or odd + 1.
    assert!(even == odd || even == odd + 1, "{even} even, {odd} odd iterations");
}

#[test]
fn end_iteration_skips_the_rest_of_the_iteration() {
    let target = target();
    let (rate, seconds) = (10.0, 1.55);
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "steps": [
                get("first", "/?first"),
                {"type": "loop", "count": 3, "steps": [
                    get("in_loop", "/?loop"),
                    {"type": "if", "condition": "vu >= 0", "then": [{"type": "end_iteration"}]},
                    get("after_end_in_loop", "/?never1"),
                ]},
                get("after_loop", "/?never2"),
            ],
            "workload": open_burst(rate, seconds, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let passes = burst_arrivals(rate, seconds);
    assert_eq!(step_requests(&snapshots, "first"), passes);
    // end_iteration ends the whole iteration, not only the loop around it.
    assert_eq!(step_requests(&snapshots, "in_loop"), passes);
    assert_eq!(step_requests(&snapshots, "after_end_in_loop"), 0);
    assert_eq!(step_requests(&snapshots, "after_loop"), 0);
    assert_eq!(iterations(&snapshots), passes, "an ended iteration still counts as an iteration");
}

#[test]
fn end_iteration_on_alternate_iterations() {
    let target = target();
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "steps": [
                get("first", "/?first"),
                {"type": "if", "condition": "iteration % 2 == 1", "then": [{"type": "end_iteration"}]},
                get("second", "/?second"),
                think(10.0),
            ],
            "workload": closed_value(1, 1.0),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let (first, second) = (step_requests(&snapshots, "first"), step_requests(&snapshots, "second"));
    assert!(second >= 10, "{first} first, {second} second");
    // Odd iterations end after `first`: it runs about twice as often as `second`.
    assert!((2 * second).abs_diff(first) <= 2, "{first} first, {second} second");
}

#[test]
fn a_group_times_its_steps_and_think_times() {
    let target = target();
    let (rate, seconds) = (10.0, 1.55);
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "steps": [
                {"type": "group", "name": "visit", "steps": [
                    get("page", "/delay/10"),
                    think(40.0),
                    {"type": "group", "name": "inner", "steps": [get("asset", "/delay/5")]},
                ]},
            ],
            "workload": open_burst(rate, seconds, 8),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let passes = burst_arrivals(rate, seconds);
    assert_eq!(step_requests(&snapshots, "visit"), passes);
    assert_eq!(step_requests(&snapshots, "inner"), passes);
    assert_eq!(step_kind(&snapshots, "visit"), "group");
    assert_eq!(step_kind(&snapshots, "inner"), "group");
    assert_eq!(step_kind(&snapshots, "page"), "request");
    assert_eq!(step_ok(&snapshots, "visit"), passes);
    // A group's pass lasts at least its requests' delays plus its think time.
    let visit = latency(&snapshots, "visit");
    assert!(visit.min() >= 54_000, "shortest pass {} us", visit.min());
    let inner = latency(&snapshots, "inner");
    assert!(inner.min() >= 5_000 && inner.max() < visit.min(), "inner {}..{} us", inner.min(), inner.max());
    // A group moves no bytes of its own.
    let group_bytes: u64 = support::entries(&snapshots, "visit").map(|e| e.bytes_sent + e.bytes_received).sum();
    assert_eq!(group_bytes, 0);
}

#[test]
fn pacing_starts_an_iteration_every_pacing_s() {
    let target = target();
    const VUS: u64 = 3;
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "pacing_s": 0.5,
            "steps": [get("fast", "/")],
            "workload": closed_value(VUS, 2.5),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    // Iterations start at 0, 0.5, 1.0, 1.5 and 2.0 s: 5 per VU.
    let done = iterations(&snapshots);
    assert!((VUS * 3..=VUS * 7).contains(&done), "{done} iterations, expected about {}", VUS * 5);
    assert_eq!(step_requests(&snapshots, "fast"), done);
}

#[test]
fn pacing_does_not_wait_after_an_iteration_longer_than_the_pacing() {
    let target = target();
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "pacing_s": 0.1,
            "steps": [get("slow", "/delay/300")],
            "workload": closed_value(1, 2.0),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    // 300 ms iterations back to back: about 7 in 2 s (not 2 s / (0.3 + 0.1) = 5).
    let done = step_requests(&snapshots, "slow");
    assert!((6..=8).contains(&done), "{done} iterations");
}

#[test]
fn setup_runs_once_and_teardown_once_per_vu() {
    let target = target();
    const VUS: u64 = 3;
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "setup": [get("hello", "/?setup")],
            "steps": [get("work", "/?work"), think(20.0)],
            "teardown": [get("bye", "/?teardown"), get("bye_again", "/delay/50")],
            // 3 VUs, down to 1 after a second (2 stop early and tear down then), held to the end.
            "workload": {"type": "closed", "start_vus": VUS, "stages": [
                {"duration_s": 1.0, "vus": VUS}, {"duration_s": 0.2, "vus": 1}, {"duration_s": 1.0, "vus": 1}]},
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    assert_eq!(step_requests(&snapshots, "hello"), VUS);
    assert_eq!(step_requests(&snapshots, "bye"), VUS, "teardown once per VU, early leavers and the last one");
    assert_eq!(step_ok(&snapshots, "bye_again"), VUS, "teardown is not cut by the stop");
    assert!(step_requests(&snapshots, "work") > 3 * VUS);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    // Two VUs tore down at the ramp-down, about a second before the end of the stages.
    let early: u64 = snapshots
        .iter()
        .filter(|s| s.second <= 2)
        .flat_map(|s| s.steps.iter())
        .filter(|e| e.step == "bye")
        .map(|e| e.requests)
        .sum();
    assert!(early >= 2, "only {early} teardowns before the end");
}

#[test]
fn open_model_vus_set_up_once_and_tear_down_at_the_end() {
    let target = target();
    let (rate, seconds) = (10.0, 1.55);
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "setup": [get("hello", "/?setup")],
            "steps": [get("work", "/?work")],
            "teardown": [get("bye", "/?teardown")],
            "workload": open_burst(rate, seconds, 1),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let dropped: u64 = snapshots.iter().map(|s| s.dropped_arrivals).sum();
    assert_eq!(step_requests(&snapshots, "work") + dropped, burst_arrivals(rate, seconds));
    // One VU at most: one setup, one teardown.
    assert_eq!(step_requests(&snapshots, "hello"), 1);
    assert_eq!(step_requests(&snapshots, "bye"), 1);
}

#[test]
fn no_teardown_for_vus_cut_by_the_grace_period() {
    let target = target();
    let mut plan = scenario_plan(
        &target.base_url(),
        json!({
            "setup": [get("hello", "/?setup")],
            // Still in flight when the stages end at 1 s, and past the 0.5 s grace period.
            "steps": [get("slow", "/delay/3000")],
            "teardown": [get("bye", "/?teardown")],
            "workload": closed_value(2, 1.0),
        }),
    );
    plan.graceful_stop_s = 0.5;
    let (snapshots, took) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    assert_eq!(step_requests(&snapshots, "hello"), 2);
    assert_eq!(step_requests(&snapshots, "slow"), 2, "each VU's request in flight is counted once, as cut");
    assert_eq!(support::step_errors(&snapshots, "slow", "cut"), 2);
    assert_eq!(step_requests(&snapshots, "bye"), 0, "a VU cut by the grace period does not tear down");
    assert!(took < std::time::Duration::from_millis(2900), "the run waited for the cut iterations: {took:?}");
}

#[test]
fn plain_plans_keep_the_fast_path_and_its_accounting() {
    let target = target();
    let plain = scenario_plan(
        &target.base_url(),
        json!({"steps": [get("get", "/?v=0")], "workload": open_burst(50.0, 1.55, 4)}),
    );
    let (snapshots, _) = run_timed(&plain, 1);
    // The first slice's accounting: no new error kind, one kind "request".
    assert_accounting(&snapshots);
    let passes = burst_arrivals(50.0, 1.55);
    assert_eq!(step_ok(&snapshots, "get"), passes);
    assert_eq!(errors_of_kind(&snapshots, "template_failed"), 0);
    assert_eq!(step_kind(&snapshots, "get"), "request");
    // The same request rendered from a template is byte for byte the same request.
    let templated = scenario_plan(
        &target.base_url(),
        json!({"steps": [get("get", "/?v={{ 0 }}")], "workload": open_burst(50.0, 1.55, 4)}),
    );
    let (rendered, _) = run_timed(&templated, 1);
    assert_accounting(&rendered);
    assert_eq!(step_ok(&rendered, "get"), passes);
    assert_eq!(bytes_sent(&rendered), bytes_sent(&snapshots));
    assert_eq!(bytes_sent(&snapshots) % passes, 0);
}

#[test]
fn an_iteration_whose_requests_all_fail_their_templates_does_not_hang_the_run() {
    let target = target();
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "steps": [
                {"type": "if", "condition": "false", "then": [
                    {"name": "login", "method": "GET", "path": "/", "extract": [{"var": "token", "from": "status"}]},
                ]},
                {"name": "use", "method": "GET", "path": "/?t={{ token }}",
                 "think_time": {"type": "constant", "duration_ms": 50}},
            ],
            "workload": closed_value(1, 1.0),
        }),
    );
    // A hang shows as a panic from `collect` (the run does not finish in time).
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let failed = errors_of_kind(&snapshots, "template_failed");
    // The think time still paces the VU: about 20 failures, not millions.
    assert!((5..=40).contains(&failed), "{failed} template failures");
}

#[test]
fn an_iteration_that_sends_nothing_does_not_hang_the_run() {
    let target = target();
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "steps": [{"type": "if", "condition": "iteration < 0", "then": [get("never", "/")]}],
            "workload": closed_value(1, 1.0),
        }),
    );
    let (snapshots, took) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    assert_eq!(step_requests(&snapshots, "never"), 0);
    assert!(took < std::time::Duration::from_secs(5), "took {took:?}");
}

#[test]
fn a_group_pass_that_sent_nothing_is_not_recorded() {
    let target = target();
    const VUS: u64 = 2;
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            // The stop at 1 s finds each VU in the slow request (0.9 to 1.2 s); the group's only
            // request is then skipped by the stop.
            "steps": [get("slow", "/delay/300"), {"type": "group", "name": "g", "steps": [get("inner", "/?inner")]}],
            "workload": closed_value(VUS, 1.0),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let (passes, inner) = (step_requests(&snapshots, "g"), step_requests(&snapshots, "inner"));
    assert!(inner >= 2 * VUS, "{inner} inner requests");
    assert_eq!(passes, inner, "every recorded pass of the group sent its request");
}

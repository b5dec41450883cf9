//! Data in the scenario language: checks, extractors, templates (paths, headers, bodies, JSON
//! bodies with typed values, parameters, functions), template failures, and feeders.
//!
//! The target is a [`RecordingServer`]: it records whole requests, so a test can say what was
//! really sent, and that a request whose template failed was not sent at all.

mod support;

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use support::{
    assert_scenario_accounting, burst_arrivals, closed_value, error_kinds, open_burst, plan_of, run_timed,
    scenario_plan, step_error_kinds, step_errors, step_ok, step_requests, Recorded, RecordingServer, Reply, TempFile,
};

const RATE: f64 = 10.0;
const SECONDS: f64 = 1.55;

/// `/page`: text with two ids and an `X-Token` header; `/doc`: JSON; `/status/N`: that status;
/// anything else: `ok`.
fn data_server() -> RecordingServer {
    RecordingServer::start(|request| {
        let path = request.path.as_str();
        if path == "/page" {
            Reply::ok("<p>id=1234; id=5678</p>").header("X-Token", "tok-42")
        } else if path == "/doc" {
            Reply::json(200, json!({"name": "horde", "n": 3, "list": [1, 2], "flag": true}))
        } else if let Some(code) = path.strip_prefix("/status/") {
            Reply::new(code.parse().unwrap_or(500), "status")
        } else {
            Reply::ok("ok")
        }
    })
}

fn get(name: &str, path: &str) -> Value {
    json!({"name": name, "method": "GET", "path": path})
}

fn checked(name: &str, path: &str, checks: Value) -> Value {
    json!({"name": name, "method": "GET", "path": path, "checks": checks})
}

#[test]
fn checks_pass_or_count_check_failed() {
    let server = data_server();
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "steps": [
                checked("contains_fail", "/page", json!([{"type": "body_contains", "text": "nope"}])),
                checked("matches_fail", "/page", json!([{"type": "body_matches", "pattern": "^\\d+$"}])),
                checked("text_ok", "/page", json!([
                    {"type": "body_contains", "text": "id=1234"},
                    {"type": "body_matches", "pattern": "id=\\d{4};"}])),
                checked("json_equals_fail", "/doc", json!([{"type": "json", "expression": "$.name", "equals": "other"}])),
                checked("json_ok", "/doc", json!([
                    {"type": "json", "expression": "$.name", "equals": "horde"},
                    {"type": "json", "expression": "$.n", "equals": 3},
                    {"type": "json", "expression": "$.flag", "equals": true},
                    {"type": "json", "expression": "$.list[1]"}])),
                checked("json_missing", "/doc", json!([{"type": "json", "expression": "$.missing"}])),
                checked("json_not_json", "/page", json!([{"type": "json", "expression": "$.x"}])),
                checked("one_of_two_fails", "/doc", json!([
                    {"type": "json", "expression": "$.n", "equals": 3},
                    {"type": "body_contains", "text": "absent"}])),
                checked("status_in_404", "/status/404", json!([{"type": "status", "in": [404]}])),
                get("status_404_plain", "/status/404"),
                checked("status_check_fail", "/status/200", json!([{"type": "status", "in": [201, 204]}])),
                checked("status_check_on_503", "/status/503", json!([{"type": "status", "in": [200]}])),
                checked("other_check_on_500", "/status/500", json!([{"type": "body_contains", "text": "status"}])),
            ],
            "workload": open_burst(RATE, SECONDS, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let passes = burst_arrivals(RATE, SECONDS);
    let only = |step: &str, kind: &str| {
        let kinds = step_error_kinds(&snapshots, step);
        assert_eq!(step_requests(&snapshots, step), passes, "{step}");
        if kind == "ok" {
            assert_eq!(step_ok(&snapshots, step), passes, "{step}: {kinds:?}");
        } else {
            assert_eq!(kinds, BTreeMap::from([(kind.to_owned(), passes)]), "{step}");
        }
    };
    for step in
        ["contains_fail", "matches_fail", "json_equals_fail", "json_missing", "json_not_json", "one_of_two_fails"]
    {
        only(step, "check_failed");
    }
    only("text_ok", "ok");
    only("json_ok", "ok");
    // A status check decides which statuses are fine...
    only("status_in_404", "ok");
    only("status_check_fail", "check_failed");
    only("status_check_on_503", "check_failed");
    // ...without one, >= 400 is an error as before, whatever the other checks say.
    only("status_404_plain", "status_404");
    only("other_check_on_500", "status_500");
}

#[test]
fn on_check_failure_end_iteration_stops_the_iteration() {
    let server = data_server();
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "steps": [
                // continue (the default): the iteration goes on.
                checked("soft_gate", "/page", json!([{"type": "body_contains", "text": "nope"}])),
                get("after_soft", "/after/soft"),
                // A passing check does not end anything.
                {"name": "passing_gate", "method": "GET", "path": "/page", "on_check_failure": "end_iteration",
                 "checks": [{"type": "body_contains", "text": "id="}]},
                get("after_passing", "/after/passing"),
                {"name": "gate", "method": "GET", "path": "/page", "on_check_failure": "end_iteration",
                 "checks": [{"type": "body_contains", "text": "nope"}]},
                get("after_gate", "/after/gate"),
            ],
            "workload": open_burst(RATE, SECONDS, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let passes = burst_arrivals(RATE, SECONDS);
    assert_eq!(step_errors(&snapshots, "soft_gate", "check_failed"), passes);
    assert_eq!(step_ok(&snapshots, "after_soft"), passes);
    assert_eq!(step_ok(&snapshots, "passing_gate"), passes);
    assert_eq!(step_ok(&snapshots, "after_passing"), passes);
    assert_eq!(step_errors(&snapshots, "gate", "check_failed"), passes);
    assert_eq!(step_requests(&snapshots, "after_gate"), 0);
    assert_eq!(server.count_prefix("/after/gate"), 0);
}

#[test]
fn extractors_set_variables_that_later_templates_use() {
    let server = data_server();
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "steps": [
                {"name": "page", "method": "GET", "path": "/page", "extract": [
                    {"var": "rid", "from": "regex", "expression": "id=(\\d+)"},
                    {"var": "rall", "from": "regex", "expression": "id=(\\d+)", "pick": "all"},
                    {"var": "whole", "from": "regex", "expression": "id=\\d+"},
                    {"var": "htok", "from": "header", "expression": "x-token"},
                    {"var": "st", "from": "status"},
                    {"var": "dflt", "from": "json", "expression": "$.x", "default": "fallback"},
                    {"var": "nomatch", "from": "regex", "expression": "nomatch(\\d+)", "default": 0},
                ]},
                get("use", "/use/{{ rid }}/{{ whole }}/{{ htok }}/{{ st }}/{{ dflt }}/{{ nomatch }}/{{ rall | join(',') }}"),
                {"name": "doc", "method": "GET", "path": "/doc", "extract": [
                    {"var": "dname", "from": "json", "expression": "$.name"},
                    {"var": "dlist", "from": "json", "expression": "$.list[*]", "pick": "all"},
                    {"var": "dpick", "from": "json", "expression": "$.list[*]", "pick": "random"},
                ]},
                get("use_doc", "/doc/{{ dname }}/{{ dlist | sum }}/{{ dpick in dlist }}"),
            ],
            "workload": open_burst(RATE, SECONDS, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    let passes = burst_arrivals(RATE, SECONDS) as usize;
    let uses: BTreeSet<String> = server.with_prefix("/use/").into_iter().map(|request| request.path).collect();
    assert_eq!(uses, BTreeSet::from(["/use/1234/id=1234/tok-42/200/fallback/0/1234,5678".to_owned()]));
    assert_eq!(server.count_prefix("/use/"), passes);
    assert_eq!(server.count_path("/doc/horde/3/True"), passes);
}

#[test]
fn a_failed_extraction_counts_and_a_template_using_it_is_not_sent() {
    let server = data_server();
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "steps": [
                {"name": "missing", "method": "GET", "path": "/doc", "extract": [
                    {"var": "gone", "from": "json", "expression": "$.nothing"},
                    {"var": "kept", "from": "json", "expression": "$.name"},
                    {"var": "no_header", "from": "header", "expression": "X-Absent"},
                ]},
                get("after_missing", "/gone/{{ gone }}"),
                {"name": "json_after_missing", "method": "POST", "path": "/post", "json": {"v": "x-{{ no_header }}"}},
                {"name": "header_after_missing", "method": "GET", "path": "/hdr", "headers": {"X-V": "{{ gone }}"}},
                get("still_set", "/kept/{{ kept }}"),
            ],
            "workload": open_burst(RATE, SECONDS, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let passes = burst_arrivals(RATE, SECONDS);
    assert_eq!(step_error_kinds(&snapshots, "missing"), BTreeMap::from([("extract_failed".to_owned(), passes)]));
    for step in ["after_missing", "json_after_missing", "header_after_missing"] {
        assert_eq!(
            step_error_kinds(&snapshots, step),
            BTreeMap::from([("template_failed".to_owned(), passes)]),
            "{step}"
        );
    }
    // Not sent: the target saw none of them.
    assert_eq!(server.count_prefix("/gone"), 0);
    assert_eq!(server.count_prefix("/post"), 0);
    assert_eq!(server.count_prefix("/hdr"), 0);
    // The other extractor of the failing step still set its variable.
    assert_eq!(step_ok(&snapshots, "still_set"), passes);
    assert_eq!(server.count_path("/kept/horde") as u64, passes);
    // An unsent request moves no bytes.
    let unsent: u64 = support::entries(&snapshots, "after_missing").map(|e| e.bytes_sent + e.bytes_received).sum();
    assert_eq!(unsent, 0);
}

#[test]
fn a_json_body_using_an_unset_variable_is_not_sent() {
    let server = data_server();
    let rows = TempFile::with_contents("json-rows", "csv", "login\nu0\n");
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "feeders": [feeder("rows", &rows, "csv", "circular")],
            "steps": [
                {"name": "missing", "method": "GET", "path": "/doc", "extract": [
                    {"var": "token", "from": "json", "expression": "$.nothing"}]},
                {"name": "unset_variable", "method": "POST", "path": "/post/unset", "json": {"token": "{{ token }}"}},
                {"name": "missing_field", "method": "POST", "path": "/post/field", "json": {"password": "{{ rows.password }}"}},
            ],
            "workload": open_burst(RATE, SECONDS, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let passes = burst_arrivals(RATE, SECONDS);
    let sent: Vec<String> =
        server.with_prefix("/post").iter().map(|r| format!("{} {}", r.path, r.body_text())).collect();
    assert!(sent.is_empty(), "sent anyway: {:?}", &sent[..sent.len().min(2)]);
    assert_eq!(step_errors(&snapshots, "unset_variable", "template_failed"), passes);
    assert_eq!(step_errors(&snapshots, "missing_field", "template_failed"), passes);
}

fn body_json(request: &Recorded) -> Value {
    serde_json::from_slice(&request.body).unwrap_or_else(|error| panic!("{} is not JSON: {error}", request.body_text()))
}

#[test]
fn templates_render_into_paths_headers_and_bodies_with_json_types_kept() {
    let server = data_server();
    let plan = plan_of(json!({
        "version": 1,
        "parameters": {"ratio": 0.5, "label": "horde"},
        "target": {"base_url": server.base_url(), "headers": {"X-Over": "target", "X-Target": "t"}},
        "graceful_stop_s": 2,
        "scenarios": [{
            "name": "s",
            "headers": {"X-Over": "scenario", "X-Scenario": "{{ params.label }}"},
            "steps": [
                {"name": "typed", "method": "POST", "path": "/typed", "json": {
                    "n": "{{ vu }}", "s": "id-{{ vu }}", "list": ["{{ vu }}", "x", 7],
                    "nested": {"b": "{{ vu >= 0 }}", "f": "{{ params.ratio }}", "obj": "{{ {'k': 1} }}"},
                    "fixed": {"k": [1, 2]}, "null": null}},
                {"name": "fixed_json", "method": "PUT", "path": "/fixed", "json": {"a": 1}},
                {"name": "text", "method": "POST", "path": "/text", "body": "label={{ params.label }}&vu={{ vu }}"},
                {"name": "headers", "method": "GET", "path": "/hdr",
                 "headers": {"X-Vu": "vu-{{ vu }}", "X-Over": "step"}},
                {"name": "functions", "method": "GET",
                 "path": "/fn/{{ random_int(5, 5) }}/{{ uuid() }}/{{ now_ms() > 0 }}/{{ random_choice(['only']) }}",
                 "think_time": {"type": "constant", "duration_ms": 10}},
            ],
            "workload": closed_value(2, 0.5),
        }],
    }));
    let (snapshots, _) = run_timed(&plan, 2);
    assert_scenario_accounting(&snapshots);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));

    let typed = server.with_prefix("/typed");
    assert!(!typed.is_empty());
    let mut vus = BTreeSet::new();
    for request in &typed {
        assert_eq!(request.header("Content-Type"), Some("application/json"));
        let body = body_json(request);
        let vu = body["n"].as_u64().unwrap_or_else(|| panic!("n is not a number: {body}"));
        vus.insert(vu);
        assert_eq!(body["s"], json!(format!("id-{vu}")), "{body}");
        assert_eq!(body["list"], json!([vu, "x", 7]), "{body}");
        assert_eq!(body["nested"], json!({"b": true, "f": 0.5, "obj": {"k": 1}}), "{body}");
        assert_eq!(body["fixed"], json!({"k": [1, 2]}));
        assert_eq!(body["null"], Value::Null);
    }
    assert_eq!(vus, BTreeSet::from([0, 1]), "two VUs, numbered 0 and 1 across both workers");

    let fixed = server.with_prefix("/fixed");
    assert!(fixed.iter().all(|r| r.method == "PUT" && body_json(r) == json!({"a": 1})));
    assert!(fixed.iter().all(|r| r.header("Content-Type") == Some("application/json")));

    for request in server.with_prefix("/text") {
        let text = request.body_text();
        assert!(text == "label=horde&vu=0" || text == "label=horde&vu=1", "{text}");
        assert_ne!(request.header("Content-Type"), Some("application/json"));
    }

    let headers = server.with_prefix("/hdr");
    assert!(!headers.is_empty());
    for request in &headers {
        assert_eq!(request.header("X-Over"), Some("step"), "the step's header wins");
        assert_eq!(request.header("X-Scenario"), Some("horde"));
        assert_eq!(request.header("X-Target"), Some("t"));
        assert!(matches!(request.header("X-Vu"), Some("vu-0" | "vu-1")), "{:?}", request.header("X-Vu"));
        let overs = request.headers.iter().filter(|(name, _)| name.eq_ignore_ascii_case("X-Over")).count();
        assert_eq!(overs, 1, "one X-Over header, not one per level");
    }

    let functions = server.with_prefix("/fn/");
    assert!(!functions.is_empty());
    let mut uuids = BTreeSet::new();
    for request in &functions {
        let parts: Vec<&str> = request.path.split('/').collect();
        assert_eq!(parts.len(), 6, "{}", request.path);
        assert_eq!((parts[2], parts[4], parts[5]), ("5", "True", "only"), "{}", request.path);
        let uuid = parts[3];
        assert_eq!(uuid.len(), 36, "{uuid}");
        assert_eq!(uuid.as_bytes()[14], b'4', "version 4: {uuid}");
        uuids.insert(uuid.to_owned());
    }
    assert_eq!(uuids.len(), functions.len(), "a fresh uuid per request");
}

// ----- feeders -----

fn feeder(name: &str, file: &TempFile, format: &str, mode: &str) -> Value {
    json!({"name": name, "path": file.path(), "format": format, "mode": mode})
}

#[test]
fn a_unique_feeder_gives_each_vu_its_own_row_for_life() {
    let server = data_server();
    let users = TempFile::with_contents("users", "csv", "login,password\nu0,pw0\nu1,pw1\nu2,pw2\nu3,pw3\n");
    const VUS: usize = 3;
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "feeders": [feeder("users", &users, "csv", "unique")],
            "setup": [{"name": "register", "method": "POST", "path": "/register",
                       "json": {"login": "{{ users.login }}", "password": "{{ users.password }}"}}],
            "steps": [{"name": "play", "method": "GET", "path": "/u/{{ users.login }}",
                       "think_time": {"type": "constant", "duration_ms": 20}}],
            "workload": closed_value(VUS as u64, 1.0),
        }),
    );
    // Two workers: rows are handed out by VU number across workers.
    let (snapshots, _) = run_timed(&plan, 2);
    assert_scenario_accounting(&snapshots);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    let registered = server.with_prefix("/register");
    assert_eq!(registered.len(), VUS);
    let mut logins = BTreeSet::new();
    for request in &registered {
        let body = body_json(request);
        let login = body["login"].as_str().expect("login is a string").to_owned();
        assert_eq!(body["password"], json!(login.replace('u', "pw")), "the fields come from one row: {body}");
        logins.insert(login);
    }
    assert_eq!(logins.len(), VUS, "distinct logins: {logins:?}");
    // Each VU plays with the row it registered with, every iteration.
    let played: BTreeSet<String> =
        server.with_prefix("/u/").iter().map(|request| request.path.trim_start_matches("/u/").to_owned()).collect();
    assert_eq!(played, logins);
    assert!(server.count_prefix("/u/") >= 3 * VUS);
}

#[test]
fn a_circular_feeder_cycles_through_its_rows() {
    let server = data_server();
    let rows = TempFile::with_contents("rows", "csv", "id,label\na,first\nb,second\nc,third\n");
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "feeders": [feeder("rows", &rows, "csv", "circular")],
            "steps": [
                get("row", "/c/{{ rows.id }}/{{ rows.label }}"),
                // A field the rows do not have: the template fails, nothing is sent.
                get("no_field", "/x/{{ rows.nope }}"),
            ],
            "workload": open_burst(RATE, SECONDS, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let passes = burst_arrivals(RATE, SECONDS) as usize;
    assert_eq!(passes, 16);
    // Each iteration takes the next row: a, b, c, a, b, c...
    let seen: Vec<String> = server.with_prefix("/c/").into_iter().map(|request| request.path).collect();
    assert_eq!(seen.len(), passes);
    let expected: Vec<String> =
        (0..passes).map(|i| ["/c/a/first", "/c/b/second", "/c/c/third"][i % 3].to_owned()).collect();
    assert_eq!(seen, expected);
    assert_eq!(step_errors(&snapshots, "no_field", "template_failed"), passes as u64);
    assert_eq!(server.count_prefix("/x/"), 0);
}

#[test]
fn random_and_jsonl_feeders() {
    let server = data_server();
    let csv = TempFile::with_contents("random", "csv", "id\na\nb\nc\n");
    // Blank lines are skipped; values keep their JSON types.
    let jsonl = TempFile::with_contents(
        "lines",
        "jsonl",
        "{\"id\": 7, \"name\": \"x\"}\n\n{\"id\": 8, \"name\": \"y\", \"tags\": [1]}\n",
    );
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "feeders": [feeder("picks", &csv, "csv", "random"), feeder("lines", &jsonl, "jsonl", "circular")],
            "steps": [
                get("random_row", "/r/{{ picks.id }}"),
                {"name": "line", "method": "POST", "path": "/line", "json": {"id": "{{ lines.id }}", "name": "{{ lines.name }}"}},
            ],
            "workload": open_burst(RATE, SECONDS, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    assert!(error_kinds(&snapshots).is_empty(), "{:?}", error_kinds(&snapshots));
    let passes = burst_arrivals(RATE, SECONDS) as usize;
    let randoms = server.with_prefix("/r/");
    assert_eq!(randoms.len(), passes);
    assert!(randoms.iter().all(|r| ["/r/a", "/r/b", "/r/c"].contains(&r.path.as_str())), "{randoms:?}");
    let lines: Vec<Value> = server.with_prefix("/line").iter().map(body_json).collect();
    assert_eq!(lines.len(), passes);
    for (index, body) in lines.iter().enumerate() {
        let expected = if index % 2 == 0 { json!({"id": 7, "name": "x"}) } else { json!({"id": 8, "name": "y"}) };
        assert_eq!(body, &expected, "line {index}");
    }
}

#[test]
fn a_unique_feeder_with_fewer_rows_than_vus_is_refused_at_start() {
    let users = TempFile::with_contents("few", "csv", "login\nu0\nu1\n");
    for workload in [closed_value(5, 1.0), open_burst(RATE, SECONDS, 5)] {
        let plan = scenario_plan(
            "http://127.0.0.1:9",
            json!({
                "feeders": [feeder("users", &users, "csv", "unique")],
                "steps": [get("play", "/u/{{ users.login }}")],
                "workload": workload,
            }),
        );
        match horde_engine::start(&plan, horde_engine::EngineOptions::with_workers(1)) {
            Ok(_) => panic!("a plan with 5 VUs and 2 unique rows started"),
            Err(error) => {
                let message = error.to_string();
                assert!(message.contains("users"), "{message}");
                assert!(message.contains("2 rows") && message.contains("5 VUs"), "{message}");
            }
        }
    }
}

#[test]
fn a_feeder_that_cannot_be_read_is_refused_at_start() {
    let missing = support::temp_file("missing", "csv");
    let empty = TempFile::with_contents("empty", "csv", "login\n");
    let broken = TempFile::with_contents("broken", "jsonl", "{\"id\": 1}\n{not json\n");
    for (path, why) in
        [(missing.to_str().unwrap().to_owned(), "missing"), (empty.path(), "no rows"), (broken.path(), "line 2")]
    {
        let plan = scenario_plan(
            "http://127.0.0.1:9",
            json!({
                "feeders": [{"name": "data", "path": path, "format": if why == "line 2" { "jsonl" } else { "csv" }, "mode": "circular"}],
                "steps": [get("play", "/u/{{ data.login }}")],
                "workload": closed_value(1, 1.0),
            }),
        );
        match horde_engine::start(&plan, horde_engine::EngineOptions::with_workers(1)) {
            Ok(_) => panic!("a plan with a {why} feeder started"),
            Err(error) => {
                let message = error.to_string();
                assert!(message.contains("'data'"), "{why}: {message}");
                if why != "missing" {
                    assert!(message.contains(why), "{why}: {message}");
                }
            }
        }
    }
}

#[test]
fn a_json_check_compares_numbers_by_value() {
    let server = RecordingServer::start(|_| Reply::json(200, json!({"int": 3, "float": 2.5, "whole_float": 10.0})));
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "steps": [
                checked("int_as_float", "/", json!([{"type": "json", "expression": "$.int", "equals": 3.0}])),
                checked("float_as_int", "/", json!([{"type": "json", "expression": "$.whole_float", "equals": 10}])),
                checked("float", "/", json!([{"type": "json", "expression": "$.float", "equals": 2.5}])),
            ],
            "workload": open_burst(RATE, SECONDS, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let passes = burst_arrivals(RATE, SECONDS);
    assert_eq!(step_ok(&snapshots, "float"), passes);
    assert_eq!(step_ok(&snapshots, "int_as_float"), passes, "{:?}", step_error_kinds(&snapshots, "int_as_float"));
    assert_eq!(step_ok(&snapshots, "float_as_int"), passes, "{:?}", step_error_kinds(&snapshots, "float_as_int"));
}

#[test]
fn a_feeder_secret_the_target_echoes_is_redacted_from_a_failed_checks_detail() {
    // The target answers with what it was sent; the check fails, and its detail quotes the body.
    let server = RecordingServer::start(|request| Reply::ok(format!("welcome {}", request.body_text())));
    let rows = TempFile::with_contents("secret-rows", "csv", "login,password\nu0,hunter2-s3cret\n");
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "feeders": [feeder("rows", &rows, "csv", "circular")],
            "steps": [{"name": "login", "method": "POST", "path": "/login",
                       "body": "user={{ rows.login }}&password={{ rows.password }}",
                       "checks": [{"type": "body_contains", "text": "absent"}]}],
            "workload": open_burst(RATE, SECONDS, 4),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert!(server.with_prefix("/login").iter().all(|request| request.body_text().contains("hunter2-s3cret")));
    let details: Vec<&String> = support::entries(&snapshots, "login")
        .flat_map(|entry| entry.error_details.iter().map(|(_, words, _)| words))
        .collect();
    assert!(!details.is_empty());
    for words in details {
        assert!(words.contains("body does not contain") && words.contains("user=u0&password="), "{words}");
        assert!(!words.contains("hunter2-s3cret"), "{words}");
    }
}

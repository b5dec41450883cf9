//! Several instances of one target (`target.instances`): VU n talks to instance n mod k only,
//! over its own connection, with that instance's `Host` header; the closed and the open model
//! spread the same way; and the plan check refuses instances that are not the same target.
//!
//! What each instance received is read from the instances themselves, not from the engine: the
//! built-in target's game numbers players 1, 2, 3... per target, so registering one more player
//! after the run tells how many registrations that target served, and logging in as a VU's
//! player tells which target that VU registered at.

mod support;

use horde_engine::Snapshot;
use horde_target::{TargetConfig, TargetHandle};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::{
    assert_scenario_accounting, error_kinds, iterations, plan_of, run_timed, step_ok, step_requests, RecordingServer,
    Reply,
};

fn targets(count: usize) -> Vec<TargetHandle> {
    (0..count).map(|_| TargetHandle::start(TargetConfig::default()).expect("target starts")).collect()
}

/// A plan whose target is `urls[0]` with the rest as its instances.
fn plan_over(urls: &[String], scenario: serde_json::Value) -> horde_plan::Plan {
    plan_of(json!({
        "version": 1,
        "target": {"base_url": urls[0], "instances": urls[1..], "request_timeout_ms": 5000},
        "graceful_stop_s": 5,
        "scenarios": [scenario],
    }))
}

fn urls_of(targets: &[TargetHandle]) -> Vec<String> {
    targets.iter().map(TargetHandle::base_url).collect()
}

/// Each VU registers its own player and logs in once (the session cookie then goes with every
/// request it makes); each iteration reads the city (only the target that issued the session
/// accepts it) and registers one more player.
fn game_scenario(workload: serde_json::Value) -> serde_json::Value {
    let account = json!({"login": "vu{{ vu }}", "password": "pw"});
    json!({
        "name": "players",
        "setup": [
            {"name": "register", "method": "POST", "path": "/game/register", "json": account, "checks": [{"type": "status", "in": [201]}]},
            {"name": "login", "method": "POST", "path": "/game/login", "json": account, "checks": [{"type": "status", "in": [200]}]},
        ],
        "steps": [
            {"name": "city", "method": "GET", "path": "/game/city", "checks": [{"type": "status", "in": [200]}]},
            {"name": "again", "method": "POST", "path": "/game/register",
             "json": {"login": "vu{{ vu }}-{{ iteration }}", "password": "pw"},
             "checks": [{"type": "status", "in": [201]}],
             "think_time": {"type": "constant", "duration_ms": 5}},
        ],
        "workload": workload,
    })
}

/// One request straight to a target, apart from the engine: (status, JSON body).
fn ask(target: &TargetHandle, method: &str, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let mut stream = TcpStream::connect(target.local_addr()).expect("connect to the target");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("read timeout");
    let body = body.to_string();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        target.local_addr(),
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read the whole response");
    let text = String::from_utf8(response).expect("a UTF-8 response");
    let status = text.split(' ').nth(1).and_then(|code| code.parse().ok()).expect("a status line");
    let (_, body) = text.split_once("\r\n\r\n").expect("a response head");
    (status, serde_json::from_str(body).unwrap_or(serde_json::Value::Null))
}

/// How many players the target has registered so far (one more is registered to find out).
fn registrations(target: &TargetHandle) -> u64 {
    let (status, body) = ask(target, "POST", "/game/register", &json!({"login": "probe", "password": "x"}));
    assert_eq!(status, 201, "{body}");
    body["player_id"].as_u64().expect("a player id") - 1
}

/// Whether VU `vu` registered its player at this target.
fn has_player_of(target: &TargetHandle, vu: u64) -> bool {
    let (status, body) = ask(target, "POST", "/game/login", &json!({"login": format!("vu{vu}"), "password": "pw"}));
    assert!(status == 200 || status == 401, "login answered {status}: {body}");
    status == 200
}

/// Every VU of the run (numbered 0 to `vus` - 1) registered at instance (its number mod the
/// instance count) and nowhere else.
fn assert_each_vu_at_its_instance(targets: &[TargetHandle], vus: u64) {
    for vu in 0..vus {
        let at: Vec<usize> = (0..targets.len()).filter(|&index| has_player_of(&targets[index], vu)).collect();
        assert_eq!(at, vec![vu as usize % targets.len()], "VU {vu} registered at instances {at:?}");
    }
}

/// Every VU of the run registered at exactly one instance (the open model binds a VU to the
/// instance of the arrival it was created for, whatever its number).
fn assert_each_vu_at_one_instance(targets: &[TargetHandle], vus: u64) {
    for vu in 0..vus {
        let at: Vec<usize> = (0..targets.len()).filter(|&index| has_player_of(&targets[index], vu)).collect();
        assert_eq!(at.len(), 1, "VU {vu} registered at instances {at:?}");
    }
}

fn assert_no_errors(snapshots: &[Snapshot]) {
    assert!(error_kinds(snapshots).is_empty(), "{:?}", error_kinds(snapshots));
}

#[test]
fn a_closed_run_spreads_its_vus_evenly_over_three_instances() {
    let targets = targets(3);
    let vus = 6;
    let workload = json!({"type": "closed", "start_vus": vus, "stages": [{"duration_s": 1.5, "vus": vus}]});
    let plan = plan_over(&urls_of(&targets), game_scenario(workload));
    let (snapshots, _) = run_timed(&plan, 2);
    assert_scenario_accounting(&snapshots);
    // The session cookie of one instance is refused by the others: no error means every VU's
    // requests all went to the instance that logged it in.
    assert_no_errors(&snapshots);
    assert_eq!(step_ok(&snapshots, "register"), vus);
    assert_eq!(step_ok(&snapshots, "login"), vus);
    assert_each_vu_at_its_instance(&targets, vus);

    let served: Vec<u64> = targets.iter().map(registrations).collect();
    let again = step_ok(&snapshots, "again");
    assert!(again >= 60, "only {again} registrations in the loop");
    // The run's totals are exactly what the instances served between them.
    assert_eq!(served.iter().sum::<u64>(), vus + again, "served {served:?}");
    // Two VUs per instance, same think time, identical instances: a third each.
    for (index, count) in served.iter().enumerate() {
        let share = (*count - vus / 3) as f64 / again as f64;
        assert!((share - 1.0 / 3.0).abs() < 0.08, "instance {index} served {share:.3} of the loop ({served:?})");
    }
}

#[test]
fn an_open_run_spreads_its_vus_the_same_way() {
    let targets = targets(3);
    let max_vus = 6;
    // Arrivals every 25 ms, each iteration at least 200 ms: more than 6 would be busy at once,
    // so all 6 VUs are created and kept busy (the arrivals that find none free are dropped).
    let workload = json!({"type": "open", "start_rate_per_s": 40, "max_vus": max_vus, "stages": [
        {"duration_s": 1.5, "rate_per_s": 40}, {"duration_s": 0.001, "rate_per_s": 0}, {"duration_s": 1.0, "rate_per_s": 0},
    ]});
    let mut scenario = game_scenario(workload);
    scenario["steps"]
        .as_array_mut()
        .expect("steps")
        .push(json!({"name": "slow", "method": "GET", "path": "/delay/200"}));
    let plan = plan_over(&urls_of(&targets), scenario);
    let (snapshots, _) = run_timed(&plan, 2);
    assert_scenario_accounting(&snapshots);
    assert_no_errors(&snapshots);
    assert!(snapshots.iter().map(|s| s.dropped_arrivals).sum::<u64>() > 0, "the VUs were never all busy");
    assert_eq!(step_ok(&snapshots, "register"), max_vus);
    assert_each_vu_at_one_instance(&targets, max_vus);

    let served: Vec<u64> = targets.iter().map(registrations).collect();
    let again = step_ok(&snapshots, "again");
    assert_eq!(again, iterations(&snapshots));
    assert_eq!(served.iter().sum::<u64>(), max_vus + again, "served {served:?}");
    for (index, count) in served.iter().enumerate() {
        assert!(*count > max_vus / 3, "instance {index} got no arrival ({served:?})");
    }
}

#[test]
fn an_open_run_at_low_concurrency_still_spreads_its_arrivals() {
    // 60 arrivals/s of a few milliseconds each: one or two VUs could carry them all, and a free
    // VU would take every arrival; arrivals are dealt to instances instead.
    let targets = targets(3);
    let workload = json!({"type": "open", "start_rate_per_s": 60, "max_vus": 30, "stages": [{"duration_s": 2.0, "rate_per_s": 60}]});
    let plan = plan_over(&urls_of(&targets), game_scenario(workload));
    let (snapshots, _) = run_timed(&plan, 2);
    assert_no_errors(&snapshots);
    let registered = step_ok(&snapshots, "register");
    let served: Vec<u64> = targets.iter().map(registrations).collect();
    let again = step_ok(&snapshots, "again");
    assert_eq!(again, 120, "2 s at 60/s");
    assert_eq!(served.iter().sum::<u64>(), registered + again, "served {served:?}");
    for (index, count) in served.iter().enumerate() {
        let share = *count as f64 / (registered + again) as f64;
        assert!((share - 1.0 / 3.0).abs() < 0.05, "instance {index} served {share:.3} ({served:?})");
    }
}

#[test]
fn each_instance_gets_its_own_host_header_on_fixed_and_templated_requests() {
    let servers: Vec<RecordingServer> = (0..3).map(|_| RecordingServer::start(|_| Reply::ok("ok"))).collect();
    let urls: Vec<String> = servers.iter().map(RecordingServer::base_url).collect();
    let vus = 6;
    let scenario = json!({
        "name": "s",
        "steps": [
            // Nothing templated: sent from the bytes encoded once per instance.
            {"name": "fixed", "method": "GET", "path": "/fixed"},
            {"name": "templated", "method": "GET", "path": "/vu/{{ vu }}",
             "think_time": {"type": "constant", "duration_ms": 5}},
        ],
        "workload": {"type": "closed", "start_vus": vus, "stages": [{"duration_s": 1.0, "vus": vus}]},
    });
    let (snapshots, _) = run_timed(&plan_over(&urls, scenario), 2);
    assert_scenario_accounting(&snapshots);
    assert_no_errors(&snapshots);
    let mut received = 0;
    for (index, server) in servers.iter().enumerate() {
        let host = server.base_url().trim_start_matches("http://").to_owned();
        let requests = server.requests();
        assert!(server.count_path("/fixed") > 0, "instance {index} got no fixed request");
        for request in &requests {
            assert_eq!(request.header("host"), Some(host.as_str()), "instance {index}: {request:?}");
            if let Some(vu) = request.path.strip_prefix("/vu/") {
                let vu: usize = vu.parse().expect("a VU number");
                assert_eq!(vu % 3, index, "VU {vu} reached instance {index}");
            }
        }
        received += requests.len() as u64;
    }
    assert_eq!(received, step_requests(&snapshots, "fixed") + step_requests(&snapshots, "templated"));
}

#[test]
fn one_instance_is_the_plan_as_before() {
    let targets = targets(1);
    let plan = plan_over(
        &urls_of(&targets),
        game_scenario(json!({"type": "closed", "start_vus": 2, "stages": [{"duration_s": 0.5, "vus": 2}]})),
    );
    assert!(plan.target.instances.is_empty());
    let (snapshots, _) = run_timed(&plan, 1);
    assert_no_errors(&snapshots);
    assert_eq!(registrations(&targets[0]), 2 + step_ok(&snapshots, "again"));
}

fn problems_with_instances(base_url: &str, instances: serde_json::Value) -> Vec<(String, String)> {
    let plan = horde_plan::decode(
        &json!({
            "version": 1,
            "target": {"base_url": base_url, "instances": instances},
            "scenarios": [{"name": "s", "steps": [{"name": "get", "method": "GET", "path": "/"}],
                           "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]}}],
        })
        .to_string(),
    )
    .expect("the plan decodes");
    let problems: Vec<(String, String)> =
        plan.validate().into_iter().map(|problem| (problem.path, problem.message)).collect();
    // The engine refuses to start what the check refuses.
    if !problems.is_empty() {
        assert!(matches!(
            horde_engine::start(&plan, Default::default()),
            Err(horde_engine::EngineError::InvalidPlan(_))
        ));
    }
    problems
}

#[test]
fn instances_must_be_the_same_target_each_once() {
    assert_eq!(
        problems_with_instances("http://a:8080/api/", json!(["http://b:8080/api", "http://C:8081/api/"])),
        vec![]
    );
    let problems = problems_with_instances(
        "http://a:8080/api",
        json!([
            "https://b:8080/api", // scheme
            "http://c:8080/v2",   // prefix
            "http://d:8080",      // no prefix
            "http://A:8080/api/", // base_url again (host case, trailing slash)
            "http://e/api",       // fine
            "http://e:80/api",    // instances[4] again (default port)
            "ftp://f/api",        // not http(s)
            "http://u:p@g/api",   // credentials
            "http://:8080/api",   // no host
            "http://h:0/api",     // port 0
            "http://h:99999/api", // bad port
        ]),
    );
    let expected = [
        ("target.instances[0]", "'https://b:8080/api' uses https:// but base_url uses http://"),
        ("target.instances[1]", "'http://c:8080/v2' has path prefix '/v2' but base_url has '/api'"),
        ("target.instances[2]", "'http://d:8080' has path prefix none but base_url has '/api'"),
        ("target.instances[3]", "'http://A:8080/api/' is the same instance as base_url"),
        ("target.instances[5]", "'http://e:80/api' is the same instance as instances[4]"),
        ("target.instances[6]", "'ftp://f/api' uses scheme 'ftp'; only http and https are supported"),
        ("target.instances[7]", "an instance must not carry credentials (user:password@)"),
        ("target.instances[8]", "'http://:8080/api' has no host"),
        ("target.instances[9]", "'http://h:0/api' has port 0"),
        ("target.instances[10]", "'http://h:99999/api' is not a valid URL (bad port)"),
    ];
    let expected: Vec<(String, String)> =
        expected.iter().map(|(path, message)| (path.to_string(), message.to_string())).collect();
    assert_eq!(problems, expected);
}

#[test]
fn a_bad_base_url_still_lets_each_instance_be_checked() {
    let problems = problems_with_instances("ftp://a", json!(["http://b", "http://b:80", "http://"]));
    let paths: Vec<&str> = problems.iter().map(|(path, _)| path.as_str()).collect();
    assert_eq!(paths, vec!["target.base_url", "target.instances[1]", "target.instances[2]"], "{problems:?}");
}

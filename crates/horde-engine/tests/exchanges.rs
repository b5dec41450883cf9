//! Exchange recording (`--debug N`, `horde try`): off, nothing is recorded; on, the first N
//! exchanges of each step come in full with their credentials redacted; a single iteration
//! runs setup, steps and teardown once and ends the run.

mod support;

use horde_engine::{EngineOptions, Exchange, Snapshot};
use horde_target::{TargetConfig, TargetHandle};
use serde_json::json;
use std::time::{Duration, Instant};
use support::{closed_value, collect, scenario_plan};

const SECRET: &str = "tok-s3cr3t-7781";

fn plan(base_url: &str, workload: serde_json::Value) -> horde_plan::Plan {
    scenario_plan(
        base_url,
        json!({
            "headers": {"Authorization": format!("Bearer {SECRET}")},
            "setup": [{"name": "hello", "method": "GET", "path": "/",
                       "extract": [{"var": "greeting", "from": "regex", "expression": "(o.)"}]}],
            "steps": [
                {"name": "root", "method": "GET", "path": "/?access_token=abcdef&page=2",
                 "checks": [{"type": "status", "in": [200]}]},
                {"name": "teapot", "method": "POST", "path": "/status/418", "body": "hi {{ greeting }}",
                 "checks": [{"type": "status", "in": [200]}]},
            ],
            "teardown": [{"name": "bye", "method": "GET", "path": "/"}],
            "workload": workload,
        }),
    )
}

fn run(plan: &horde_plan::Plan, options: EngineOptions) -> Vec<Snapshot> {
    let mut run = horde_engine::start(plan, options).expect("run starts");
    let limit = run.planned_duration() + Duration::from_secs(20);
    collect(&mut run, limit)
}

fn exchanges(snapshots: &[Snapshot]) -> Vec<Exchange> {
    snapshots.iter().flat_map(|snapshot| snapshot.exchanges.clone()).collect()
}

#[test]
fn recording_off_records_nothing() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    let snapshots = run(&plan(&target.base_url(), closed_value(2, 0.5)), EngineOptions::with_workers(1));
    assert!(snapshots.iter().map(Snapshot::requests).sum::<u64>() > 10);
    assert!(exchanges(&snapshots).is_empty());
}

#[test]
fn the_first_n_exchanges_of_each_step_are_recorded_redacted() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    let options = EngineOptions { record_exchanges: 2, ..EngineOptions::with_workers(2) };
    let snapshots = run(&plan(&target.base_url(), closed_value(3, 0.5)), options);
    let recorded = exchanges(&snapshots);
    for step in ["hello", "root", "teapot", "bye"] {
        assert_eq!(recorded.iter().filter(|exchange| exchange.step == step).count(), 2, "{step}: {recorded:#?}");
    }
    let everything = format!("{recorded:?}");
    assert!(!everything.contains(SECRET) && !everything.contains("abcdef"), "{everything}");
    let root = recorded.iter().find(|exchange| exchange.step == "root").unwrap();
    assert!(root.request.starts_with("GET /?access_token=<redacted>&page=2 HTTP/1.1"), "{}", root.request);
    assert!(root.request.contains("Authorization: <redacted>"), "{}", root.request);
    assert!(root.response.starts_with("HTTP/1.1 200"), "{}", root.response);
    assert_eq!((root.status, root.outcome.as_str(), root.phase), (Some(200), "ok", "steps"));
    assert_eq!(root.checks, vec![("status in [200]".to_owned(), true, None)]);
    let teapot = recorded.iter().find(|exchange| exchange.step == "teapot").unwrap();
    assert_eq!((teapot.status, teapot.outcome.as_str()), (Some(418), "check_failed"));
    assert_eq!(teapot.request_body, "hi ok");
    assert!(teapot.checks[0].2.as_deref().unwrap().contains("418"), "{:?}", teapot.checks);
    let hello = recorded.iter().find(|exchange| exchange.step == "hello").unwrap();
    assert_eq!((hello.phase, hello.vars.clone()), ("setup", vec![("greeting".to_owned(), Some("ok".to_owned()))]));
    assert_eq!(recorded.iter().find(|exchange| exchange.step == "bye").unwrap().phase, "teardown");
}

#[test]
fn a_single_iteration_runs_setup_steps_and_teardown_once_then_stops() {
    let target = TargetHandle::start(TargetConfig::default()).expect("target starts");
    let options = EngineOptions { record_exchanges: 10, single_iteration: true, ..EngineOptions::with_workers(1) };
    let began = Instant::now();
    let snapshots = run(&plan(&target.base_url(), closed_value(1, 30.0)), options);
    assert!(began.elapsed() < Duration::from_secs(10), "took {:?}", began.elapsed());
    let steps: Vec<(String, &str)> =
        exchanges(&snapshots).iter().map(|exchange| (exchange.step.clone(), exchange.phase)).collect();
    let expected = [("hello", "setup"), ("root", "steps"), ("teapot", "steps"), ("bye", "teardown")];
    assert_eq!(steps, expected.map(|(step, phase)| (step.to_owned(), phase)));
    assert_eq!(snapshots.iter().map(|snapshot| snapshot.iterations).sum::<u64>(), 1);
}

#[test]
fn a_message_steps_exchange_holds_its_connection_its_messages_checks_and_variables() {
    use horde_target::{GatewayConfig, GatewayHandle};
    let gateway = GatewayHandle::start(GatewayConfig::default()).expect("gateway starts");
    let url = format!("tcp://{}", gateway.tcp_addr.unwrap());
    let plan = scenario_plan(
        &url,
        json!({
            "steps": [
                {"type": "send", "name": "hello", "text": "hello {{ vu }}-{{ seq }} token=" },
                {"type": "receive", "name": "echo", "match": "^hello", "timeout_ms": 2000,
                 "extract": [{"var": "echoed", "from": "regex", "expression": "hello (\\d+)-"}],
                 "checks": [{"type": "body_contains", "text": "hello"}, {"type": "body_contains", "text": "absent"}]},
                {"type": "ping", "name": "rtt", "reply_seq": "pong (\\d+)"},
                {"type": "stream", "name": "moves", "text": "move {{ seq }}", "per_second": 100, "duration_ms": 300},
            ],
            "workload": closed_value(1, 5.0),
        }),
    );
    let options = EngineOptions { record_exchanges: 1, single_iteration: true, ..EngineOptions::with_workers(1) };
    let recorded = exchanges(&run(&plan, options));
    let step = |name: &str| {
        recorded
            .iter()
            .find(|exchange| exchange.step == name)
            .unwrap_or_else(|| panic!("{name}: {recorded:#?}"))
            .clone()
    };
    let address = gateway.tcp_addr.unwrap().to_string();
    let hello = step("hello");
    assert_eq!(hello.transport, "message");
    // The connection the first step opened, then its message (seq 1).
    assert_eq!(hello.request, format!("(connect to {address})\nhello 0-1 token="));
    assert_eq!((hello.response.as_str(), hello.outcome.as_str()), ("", "ok"));
    let echo = step("echo");
    assert_eq!((echo.request.as_str(), echo.response.as_str()), ("", "hello 0-1 token="));
    // The second check fails: the step's outcome says so, and the record judges each.
    assert_eq!(echo.outcome, "check_failed");
    assert_eq!(echo.checks.iter().map(|(_, passed, _)| *passed).collect::<Vec<_>>(), vec![true, false]);
    assert!(echo.checks[1].2.as_deref().is_some_and(|why| why.contains("absent")), "{:?}", echo.checks);
    assert_eq!(echo.vars, vec![("echoed".to_owned(), Some("0".to_owned()))]);
    let rtt = step("rtt");
    assert_eq!((rtt.request.as_str(), rtt.response.as_str(), rtt.outcome.as_str()), ("ping 2", "pong 2", "ok"));
    assert!(rtt.latency_us > 0);
    // About 30 moves in 300 ms: the first 8 kept each way, the rest counted.
    let moves = step("moves");
    let sent: Vec<&str> = moves.request.lines().collect();
    assert_eq!(sent.len(), 9, "{sent:?}");
    assert_eq!(&sent[..2], ["move 3", "move 4"]);
    assert!(sent[8].starts_with("… and ") && sent[8].ends_with(" more"), "{sent:?}");
    assert!(moves.response.lines().next().is_some_and(|line| line == "move 3"), "{:?}", moves.response);
}

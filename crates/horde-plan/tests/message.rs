//! Message plans (`tcp://`, `udp://`, `kcp://`, `ws://`, `wss://`): what decodes, and every
//! problem located.

use horde_plan::{decode, decode_and_validate, Framing, Step};
use serde_json::{json, Value};

fn plan(base_url: &str, target_extra: Value, steps: Value, network: Value) -> String {
    let mut target = json!({"base_url": base_url});
    target.as_object_mut().unwrap().extend(target_extra.as_object().cloned().unwrap_or_default());
    let mut scenario = json!({"name": "robots", "steps": steps, "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]}});
    if !network.is_null() {
        scenario["network"] = network;
    }
    json!({"version": 1, "target": target, "scenarios": [scenario]}).to_string()
}

fn problems(text: &str) -> Vec<String> {
    match decode_and_validate(text) {
        Ok(_) => Vec::new(),
        Err(problems) => problems.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn a_whole_message_scenario_decodes_and_validates() {
    let text = plan(
        "tcp://127.0.0.1:7000",
        json!({"framing": {"type": "length", "bytes": 2, "endian": "little", "adjust": 2}}),
        json!([
            {"type": "connect", "name": "connect"},
            {"type": "send", "name": "join", "text": "join room-{{ vu % 4 }}", "hex": null, "base64": null, "json": null, "think_time": null},
            {"type": "receive", "name": "joined", "match": "^joined", "extract": [{"var": "members", "from": "regex", "expression": "(\\d+)$"}]},
            {"type": "ping", "name": "rtt"},
            {"type": "stream", "name": "move", "json": {"x": "{{ seq }}", "t": "{{ now_ms() }}"}, "per_second": 20, "duration_ms": 1000},
            {"type": "close"}
        ]),
        Value::Null,
    );
    let plan = decode_and_validate(&text).expect("valid");
    assert_eq!(plan.target.framing, Some(Framing::Length { bytes: 2, endian: horde_plan::Endian::Little, adjust: 2 }));
    assert!(
        matches!(plan.scenarios[0].steps[3], Step::Ping(ref ping) if ping.text == "ping {{ seq }}" && ping.timeout_ms == 1000.0)
    );
    assert!(matches!(plan.scenarios[0].steps[5], Step::Close(_)));
}

#[test]
fn bad_message_plans_are_located() {
    let text = plan(
        "udp://127.0.0.1:0",
        json!({"framing": {"type": "newline"}}),
        json!([
            {"type": "send", "name": "nothing"},
            {"type": "send", "name": "odd", "hex": "abc"},
            {"type": "ping", "name": "rtt", "text": "ping", "reply_seq": "\\d+"},
            {"type": "stream", "name": "move", "text": "m", "duration_ms": 1000},
            {"type": "receive", "name": "r", "checks": [{"type": "status", "in": [200]}], "extract": [{"var": "seq", "from": "header", "expression": "x"}]},
            {"name": "home", "method": "GET", "path": "/"}
        ]),
        json!({"loss_percent": 120, "delay_ms": -1}),
    );
    let found = problems(&text);
    for expected in [
        "target.base_url: 'udp://127.0.0.1:0' has a bad port '0'",
        "target.framing: a udp:// or kcp:// target's datagram is a message",
        "scenarios[0].network.delay_ms: must be 0 or more",
        "scenarios[0].network.loss_percent: must be at most 100",
        "scenarios[0].steps[0]: needs exactly one of 'text', 'hex', 'base64' or 'json'",
        "scenarios[0].steps[1].hex: 'abc' is not hex",
        "scenarios[0].steps[2].text: the ping must carry its number",
        "scenarios[0].steps[2].reply_seq: reply_seq needs a capture group",
        "scenarios[0].steps[3]: a stream needs exactly one of 'every_ms' or 'per_second'",
        "scenarios[0].steps[4].checks[0].type: a message has no status",
        "scenarios[0].steps[4].extract[0].from: a message has no status or headers",
        "scenarios[0].steps[4].extract[0].var: 'seq' is the message number",
        "scenarios[0].steps[5].type: an http step against a message target",
    ] {
        assert!(found.iter().any(|problem| problem.starts_with(expected)), "missing '{expected}' in {found:#?}");
    }
    // Each message step's mistake says what to write instead (the words pydantic gave).
    let hints: Vec<(String, Option<String>)> =
        decode_and_validate(&text).unwrap_err().into_iter().map(|problem| (problem.path, problem.hint)).collect();
    for (path, hint) in [
        ("scenarios[0].steps[0]", "e.g. text: 'move {{ seq }}'"),
        ("scenarios[0].steps[1].hex", "e.g. hex: '0a0b'"),
        ("scenarios[0].steps[2].text", "e.g. text: 'ping {{ seq }}'"),
        ("scenarios[0].steps[2].reply_seq", r"e.g. reply_seq: 'pong (\d+)'"),
        ("scenarios[0].steps[3]", "e.g. per_second: 10"),
        ("scenarios[0].steps[4].checks[0].type", "check with json, body_contains or body_matches"),
        ("scenarios[0].steps[4].extract[0].var", "choose another variable name"),
    ] {
        assert!(hints.contains(&(path.to_owned(), Some(hint.to_owned()))), "no hint '{hint}' at {path} in {hints:#?}");
    }
}

#[test]
fn message_steps_need_a_message_target_and_network_needs_udp() {
    let text = plan(
        "http://127.0.0.1:8080",
        json!({"framing": {"type": "raw"}}),
        json!([{"type": "ping", "name": "rtt"}]),
        json!({"delay_ms": 20}),
    );
    let found = problems(&text);
    assert!(
        found.iter().any(|problem| problem
            .starts_with("scenarios[0].steps[0].type: a message step needs a tcp://, udp://, kcp://, ws:// or wss://")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|problem| problem.starts_with("scenarios[0].network: the engine impairs its own UDP datagrams only")),
        "{found:#?}"
    );
    assert!(
        found.iter().any(|problem| problem.starts_with("target.framing: framing is for a tcp:// target")),
        "{found:#?}"
    );
    let bytes =
        plan("tcp://h:1", json!({"framing": {"type": "length", "bytes": 3}}), json!([{"type": "close"}]), Value::Null);
    assert!(problems(&bytes).iter().any(|problem| problem.starts_with("target.framing.bytes: must be 1, 2 or 4")));
    assert!(decode(&plan(
        "tcp://h:1",
        json!({}),
        json!([{"type": "send", "name": "s", "text": "x", "extra": 1}]),
        Value::Null
    ))
    .is_err());
}

#[test]
fn kcp_targets_take_ikcp_knobs_with_its_defaults() {
    let text =
        plan("kcp://127.0.0.1:7000", json!({}), json!([{"type": "ping", "name": "rtt"}]), json!({"loss_percent": 10}));
    let decoded = decode_and_validate(&text).expect("valid");
    assert_eq!(decoded.target.kcp, None);
    assert_eq!(horde_plan::KcpOptions::default().interval_ms, 100);
    let bad = plan_with_kcp(json!({"interval_ms": 5, "mtu": 20, "send_window": 0, "resend": 1000}));
    let found = problems(&bad);
    for expected in ["target.kcp.interval_ms", "target.kcp.mtu", "target.kcp.send_window", "target.kcp.resend"] {
        assert!(found.iter().any(|problem| problem.starts_with(expected)), "missing {expected} in {found:#?}");
    }
    let on_udp =
        plan("udp://127.0.0.1:7000", json!({"kcp": {"nodelay": true}}), json!([{"type": "close"}]), Value::Null);
    assert!(problems(&on_udp)
        .iter()
        .any(|problem| problem.starts_with("target.kcp: KCP's knobs are for a kcp:// target")));
}

fn plan_with_kcp(kcp: Value) -> String {
    plan("kcp://127.0.0.1:7000", json!({"kcp": kcp}), json!([{"type": "close"}]), Value::Null)
}

#[test]
fn websocket_plans_take_http_steps_and_an_upgrade_and_refuse_framing() {
    let steps = json!([
        {"type": "http", "name": "login", "method": "POST", "path": "/game/login", "json": {"login": "u{{ vu }}"}},
        {"type": "connect", "name": "upgrade", "path": "/ws/rooms/r{{ vu % 4 }}", "headers": {"Authorization": "Bearer {{ vu }}"}},
        {"type": "send", "name": "move", "base64": "bW92ZQ=="},
        {"type": "ping", "name": "rtt"},
        {"type": "close"}
    ]);
    for url in ["ws://127.0.0.1:8080", "wss://game.example/ws", "ws://[::1]:9000/a/b"] {
        let decoded = decode_and_validate(&plan(url, json!({}), steps.clone(), Value::Null))
            .unwrap_or_else(|problems| panic!("{url}: {problems:?}"));
        assert!(matches!(&decoded.scenarios[0].steps[1], Step::Connect(connect) if connect.headers.len() == 1));
    }
    let found = problems(&plan(
        "ws://h:0/x?q=1",
        json!({"framing": {"type": "raw"}, "kcp": {}}),
        json!([{"type": "connect", "name": "c", "path": "ws"}]),
        json!({"delay_ms": 5}),
    ));
    for expected in [
        "target.base_url: 'ws://h:0/x?q=1' has a query or fragment",
        "target.framing: a WebSocket's frames are its messages",
        "target.kcp: KCP's knobs are for a kcp:// target",
        "scenarios[0].network: the engine impairs its own UDP datagrams only",
        "scenarios[0].steps[0].path: 'ws' must start with '/'",
    ] {
        assert!(found.iter().any(|problem| problem.starts_with(expected)), "missing '{expected}' in {found:#?}");
    }
    assert!(problems(&plan("wss://:443", json!({}), json!([{"type": "close"}]), Value::Null))
        .iter()
        .any(|problem| problem.contains("names no host")));
    let tcp = problems(&plan(
        "tcp://h:1",
        json!({}),
        json!([{"type": "connect", "name": "c", "path": "/x", "headers": {"A": "b"}}]),
        Value::Null,
    ));
    assert!(
        tcp.iter().any(|problem| problem.starts_with("scenarios[0].steps[0].path: an upgrade path is for a ws://")),
        "{tcp:#?}"
    );
    assert!(
        tcp.iter().any(|problem| problem.starts_with("scenarios[0].steps[0].headers: upgrade headers are for a ws://")),
        "{tcp:#?}"
    );
    let frame = problems(&plan(
        "udp://h:1",
        json!({}),
        json!([{"type": "ping", "name": "p", "control_frame": true}]),
        Value::Null,
    ));
    assert!(
        frame
            .iter()
            .any(|problem| problem
                .starts_with("scenarios[0].steps[0].control_frame: a ping control frame is for a ws://")),
        "{frame:#?}"
    );
    let long = "x".repeat(130) + "{{ seq }}";
    let too_long = problems(&plan(
        "ws://h",
        json!({}),
        json!([{"type": "ping", "name": "p", "text": long, "control_frame": true}]),
        Value::Null,
    ));
    assert!(
        too_long
            .iter()
            .any(|problem| problem.starts_with("scenarios[0].steps[0].text: a ping control frame carries at most 125")),
        "{too_long:#?}"
    );
    let http = problems(&plan(
        "tcp://h:1",
        json!({}),
        json!([{"type": "http", "name": "h", "method": "GET", "path": "/"}]),
        Value::Null,
    ));
    assert!(http.iter().any(|problem| problem.contains("an http step against a message target")), "{http:#?}");
}

#[test]
fn a_rate_limit_is_bytes_a_second_written_as_a_number_or_with_a_unit() {
    let rate = |value: Value| {
        let text = plan(
            "udp://127.0.0.1:7000",
            json!({}),
            json!([{"type": "ping", "name": "rtt"}]),
            json!({"rate_limit": value}),
        );
        decode_and_validate(&text)
            .map(|plan| plan.scenarios[0].network.and_then(|network| network.rate_limit).map(|rate| rate.bytes_per_s))
    };
    for (written, bytes_per_s) in [
        (json!(125000), 125_000.0),
        (json!(2500.5), 2500.5),
        (json!("1mbit"), 125_000.0),
        (json!("1Mbit/s"), 125_000.0),
        (json!("500kbit"), 62_500.0),
        (json!("8bit"), 1.0),
        (json!("1gbit"), 125_000_000.0),
        (json!("125kB/s"), 125_000.0),
        (json!("2MB"), 2_000_000.0),
        (json!("1.5 kB/s"), 1500.0),
        (json!("100B/s"), 100.0),
    ] {
        assert_eq!(rate(written.clone()).expect("valid"), Some(bytes_per_s), "{written}");
    }
    for wrong in [
        json!("1mb"),
        json!("fast"),
        json!("kB"),
        json!("10 kbps"),
        json!(0),
        json!(-5),
        json!("0.5B/s"),
        json!(true),
        json!(2e12),
    ] {
        let problems = rate(wrong.clone()).expect_err(&format!("{wrong} refused"));
        assert!(problems[0].to_string().starts_with("scenarios[0].network.rate_limit"), "{wrong}: {problems:?}");
    }
    let network: horde_plan::Network = serde_json::from_value(json!({"rate_limit": "1mbit"})).unwrap();
    assert_eq!(serde_json::to_value(network).unwrap()["rate_limit"], json!(125000.0), "written back in bytes a second");
}

//! Property tests of the plan decoder: whatever JSON arrives (arbitrary documents, a valid plan
//! with any one value replaced or any key added, arbitrary text), `decode` and `validate` return
//! a plan or located problems and never panic; a plan they accept round-trips and its
//! arithmetic (duration, peak VUs) is finite. Reproducers of issue 16 are kept as cases.

use horde_plan::{decode, decode_and_validate, Plan};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn valid_plan() -> Value {
    json!({
        "version": 1,
        "name": "fuzz",
        "parameters": {"vus": 2},
        "target": {
            "base_url": "http://127.0.0.1:8080/api",
            "headers": {"accept": "application/json"},
            "connect_timeout_ms": 500,
            "request_timeout_ms": 1000,
            "instances": ["http://127.0.0.1:8081/api"],
            "connections": {"pool": 4},
            "max_response_header_bytes": 65536,
            "max_kept_body_bytes": 4096,
            "connect_backoff": false
        },
        "scenarios": [
            {
                "name": "browse",
                "setup": [{"name": "login", "method": "POST", "path": "/login", "json": {"user": "u{{ vu }}"},
                           "extract": [{"var": "token", "from": "json", "expression": "$.token"}]}],
                "steps": [
                    {"name": "home", "method": "GET", "path": "/", "headers": {"authorization": "Bearer {{ token }}"},
                     "checks": [{"type": "status", "in": [200]}, {"type": "body_contains", "text": "ok"}],
                     "think_time": {"type": "uniform", "min_ms": 1, "max_ms": 2}},
                    {"type": "group", "name": "g", "steps": [{"name": "item", "method": "GET", "path": "/items/{{ iteration }}"}]},
                    {"type": "loop", "count": 2, "steps": [{"type": "think", "think_time": {"type": "constant", "duration_ms": 1}}]}
                ],
                "pacing_s": 0.5,
                "workload": {"type": "closed", "start_vus": 1, "stages": [{"duration_s": 2, "vus": 3}]}
            },
            {
                "name": "api",
                "steps": [{"name": "get", "method": "GET", "path": "/status/200"}],
                "workload": {"type": "open", "start_rate_per_s": 1, "stages": [{"duration_s": 1.5, "rate_per_s": 10}],
                             "max_vus": 5, "arrivals": "poisson"}
            }
        ],
        "graceful_stop_s": 1
    })
}

/// Decodes and validates; checks what holds for any plan accepted.
fn exercise(text: &str) {
    let Ok(plan) = decode(text) else { return };
    let problems = plan.validate();
    for problem in &problems {
        assert!(!problem.message.is_empty(), "a problem without a message at {}", problem.path);
    }
    let _ = plan.duration_s();
    if problems.is_empty() {
        assert!(plan.duration_s().is_finite(), "an accepted plan lasts {} s", plan.duration_s());
        let again = serde_json::to_string(&plan).expect("an accepted plan serialises");
        let decoded: Plan = decode(&again).expect("an accepted plan decodes again");
        // Equal but for the last bit of a float: serde_json (without its float_roundtrip
        // feature) may read a float written in full back one unit in the last place off.
        let (before, after) =
            (serde_json::to_value(&plan).expect("serialises"), serde_json::to_value(&decoded).expect("serialises"));
        assert!(same(&before, &after), "the plan changed over a round trip:\n{before}\n{after}");
        assert!(decoded.validate().is_empty(), "an accepted plan is refused once written out and read back");
        for scenario in &plan.scenarios {
            let _ = scenario.workload.peak_vus();
        }
    }
}

/// Whether two JSON documents are the same, floats within a few units in the last place.
fn same(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Number(a), Value::Number(b)) if a.is_f64() || b.is_f64() => {
            let (a, b) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
            a == b || (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs())
        }
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(key, a)| b.get(key).is_some_and(|b| same(a, b)))
        }
        _ => left == right,
    }
}

/// Arbitrary JSON: numbers at the edges, odd strings, nested arrays and objects.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|number| serde_json::Number::from_f64(number).map_or(Value::Null, Value::Number)),
        prop_oneof![Just(0.0), Just(-1.0), Just(1e308), Just(5e-324), Just(0.5), Just(3601.0), Just(1e7 + 1.0)]
            .prop_map(|number| json!(number)),
        "\\PC{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("http://127.0.0.1:"),
            Just("HTTP://127.0.0.1:80"),
            Just("http://h.:1"),
            Just("http://a b"),
            Just("{{ nope }}"),
            Just("{% for %}"),
            Just("$..["),
            Just("(("),
            Just("GET"),
            Just("closed"),
            Just("open"),
            Just("per_vu"),
            Just("poisson"),
            Just("/"),
            Just("")
        ]
        .prop_map(|text| Value::String(text.to_owned())),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Every place in a JSON document, as the list of keys and indices leading to it.
fn places(value: &Value, prefix: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(prefix.clone());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                prefix.push(Value::String(key.clone()));
                places(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                prefix.push(Value::from(index));
                places(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(value: &'a mut Value, place: &[Value]) -> &'a mut Value {
    place.iter().fold(value, |node, key| match key {
        Value::String(name) => &mut node[name.as_str()],
        Value::Number(index) => &mut node[index.as_u64().expect("an index") as usize],
        _ => unreachable!("places are keys and indices"),
    })
}

fn all_places() -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    places(&valid_plan(), &mut Vec::new(), &mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_one_value_of_a_valid_plan_replaced(choice in any::<prop::sample::Index>(), value in any_json()) {
        let places = all_places();
        let mut plan = valid_plan();
        *at(&mut plan, &places[choice.index(places.len())]) = value;
        exercise(&plan.to_string());
    }

    #[test]
    fn any_key_added_to_any_object_of_a_valid_plan(choice in any::<prop::sample::Index>(), key in "[a-z_]{1,24}", value in any_json()) {
        let objects: Vec<Vec<Value>> = all_places().into_iter().filter(|place| at(&mut valid_plan(), place).is_object()).collect();
        let mut plan = valid_plan();
        if let Value::Object(map) = at(&mut plan, &objects[choice.index(objects.len())]) {
            map.insert(key, value);
        }
        exercise(&plan.to_string());
    }

    #[test]
    fn any_document(value in any_json()) {
        exercise(&value.to_string());
    }

    #[test]
    fn any_text(text in "\\PC{0,200}") {
        exercise(&text);
    }

    #[test]
    fn any_bytes_of_the_valid_plan_cut_or_changed(cut in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let text = valid_plan().to_string();
        let mut bytes = text.into_bytes();
        let at = cut.index(bytes.len());
        bytes[at] = byte;
        exercise(&String::from_utf8_lossy(&bytes));
        exercise(&String::from_utf8_lossy(&bytes[..at]));
    }
}

#[test]
fn the_valid_plan_is_valid() {
    let plan = decode_and_validate(&valid_plan().to_string()).expect("the fuzzers' starting plan is valid");
    assert!(!plan.target.connect_backoff);
}

#[test]
fn reproducers_of_issue_16_are_refused_without_a_panic() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_object = format!("{}1{}", r#"{"a":"#.repeat(5_000), "}".repeat(5_000));
    let huge_integer = format!(r#"{{"version": {}}}"#, "9".repeat(5_000));
    let mut plan = valid_plan();
    plan["target"]["base_url"] = json!("http://127.0.0.1:");
    let empty_port = plan.to_string();
    let mut keys = Map::new();
    for index in 0..20_000 {
        keys.insert(format!("unknown_{index}"), Value::Null);
    }
    let many_keys = Value::Object(keys).to_string();
    let inputs = [
        deep,
        deep_object,
        huge_integer,
        r#"{"version": 1, "name": "\ud800"}"#.to_owned(),
        r#"{"version": 1e999}"#.to_owned(),
        empty_port,
        many_keys,
        String::new(),
        "\u{feff}{}".to_owned(),
    ];
    for input in &inputs {
        let started = std::time::Instant::now();
        assert!(decode_and_validate(input).is_err(), "accepted: {:.80}", input);
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?} for {:.80}", started.elapsed(), input);
    }
}

#[test]
fn target_urls_with_an_empty_port_an_upper_case_scheme_or_a_bad_host_are_refused_at_base_url() {
    for url in [
        "http://127.0.0.1:",
        "HTTP://127.0.0.1:8080",
        "Https://localhost",
        "http://example.com.:80",
        "http://exa mple.com",
        "http://localhost :80",
        "http://a..b",
        "http://[zz]:80",
        "http://bücher.de",
        "http://-bad-.com/",
        "http://bad-.com:80",
        "http://a.-b:80",
    ] {
        let mut plan = valid_plan();
        plan["target"]["base_url"] = json!(url);
        plan["target"]["instances"] = json!([]);
        plan["target"]["connections"] = json!("per_vu");
        let problems = decode_and_validate(&plan.to_string()).expect_err(url);
        assert_eq!(problems.len(), 1, "{url}: {problems:?}");
        assert_eq!(problems[0].path, "target.base_url", "{url}: {problems:?}");
    }
}

//! Seeded pseudo-random fuzzing (no extra crates): mutated plans never panic the decoder or the
//! engine's plan arithmetic; mutated responses never panic the engine, and every request is
//! still counted under a documented kind. Also valid plans with extreme numbers.

mod support;

use horde_engine::http::{encode_request, Endpoint, RequestParts};
use horde_engine::workload::Profile;
use horde_engine::{EngineOptions, Next};
use horde_plan::{Plan, Workload};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use support::{
    assert_accounting, closed, closed_port, collect, custom_plan, engine_panics, error_kinds, get_step, open,
    run_timed, send, total_ok, total_requests, RawServer, XorShift,
};

/// Tests that run the engine take turns, so that a panic counted by `engine_panics()` belongs
/// to the test that looks at the count.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

const VALID_PLAN: &str = r#"{
  "version": 1,
  "name": "fuzz",
  "target": {
    "base_url": "http://127.0.0.1:8080/api",
    "headers": {"accept": "application/json", "x-run": "1"},
    "connect_timeout_ms": 5000,
    "request_timeout_ms": 30000,
    "insecure": false
  },
  "scenarios": [
    {
      "name": "browse",
      "steps": [
        {"name": "home", "method": "GET", "path": "/", "headers": {}, "body": null,
         "think_time": {"type": "constant", "duration_ms": 100}},
        {"name": "item", "method": "POST", "path": "/items/1", "headers": {"content-type": "text/plain"},
         "body": "hello", "think_time": {"type": "uniform", "min_ms": 10, "max_ms": 30}},
        {"name": "other", "method": "HEAD", "path": "/x",
         "think_time": {"type": "exponential", "mean_ms": 50}}
      ],
      "workload": {"type": "closed", "start_vus": 0,
                   "stages": [{"duration_s": 5, "vus": 50}, {"duration_s": 15, "vus": 50}]}
    },
    {
      "name": "api",
      "steps": [{"name": "get", "method": "GET", "path": "/status/200"}],
      "workload": {"type": "open", "start_rate_per_s": 10,
                   "stages": [{"duration_s": 2.5, "rate_per_s": 100}, {"duration_s": 3, "rate_per_s": 0}],
                   "max_vus": 20}
    }
  ],
  "graceful_stop_s": 5
}"#;

/// Bytes that make interesting JSON mutations more likely than uniform noise would.
const INTERESTING: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"-",
    b"0",
    b"1e308",
    b"-1",
    b"1e-320",
    b"null",
    b"true",
    b"\\u0000",
    b"18446744073709551615",
    b"99999999999999999999",
    b"NaN",
    b"\xff",
    b"\xc3\xa9",
    b" ",
    b"\n",
    b"1.5",
    b"0.0",
];

fn mutate(rng: &mut XorShift, input: &[u8]) -> Vec<u8> {
    let mut bytes = input.to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let at = rng.below(bytes.len() as u64 + 1) as usize;
        match rng.below(7) {
            0 if at < bytes.len() => bytes[at] ^= 1 << rng.below(8),
            1 if at < bytes.len() => bytes[at] = rng.byte(),
            2 => bytes.insert(at, rng.byte()),
            3 if at < bytes.len() => {
                let end = (at + 1 + rng.below(8) as usize).min(bytes.len());
                bytes.drain(at..end);
            }
            4 => {
                let token = INTERESTING[rng.below(INTERESTING.len() as u64) as usize];
                bytes.splice(at..at, token.iter().copied());
            }
            5 => {
                // Replace a run of digits (a number) by an interesting value.
                let start = bytes[at.min(bytes.len())..].iter().position(u8::is_ascii_digit).map(|offset| at + offset);
                if let Some(start) = start {
                    let end = bytes[start..]
                        .iter()
                        .position(|b| !b.is_ascii_digit() && *b != b'.')
                        .map_or(bytes.len(), |o| start + o);
                    let token = INTERESTING[rng.below(INTERESTING.len() as u64) as usize];
                    bytes.splice(start..end, token.iter().copied());
                }
            }
            _ if !bytes.is_empty() => {
                // Duplicate a span (repeated keys, nested structure).
                let start = rng.below(bytes.len() as u64) as usize;
                let end = (start + 1 + rng.below(40) as usize).min(bytes.len());
                let span: Vec<u8> = bytes[start..end].to_vec();
                bytes.splice(at..at, span);
            }
            _ => {}
        }
    }
    bytes
}

/// What the engine does with a valid plan before any IO: none of it may panic.
fn exercise_valid_plan(plan: &Plan) {
    let endpoint = Endpoint::parse(&plan.target.base_url);
    for scenario in &plan.scenarios {
        if let Ok(endpoint) = &endpoint {
            for step in &scenario.steps {
                let horde_plan::Step::Http(step) = step else { continue };
                let headers: Vec<(&str, &str)> = plan
                    .target
                    .headers
                    .iter()
                    .chain(step.headers.iter())
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect();
                let body = step.body.as_deref().unwrap_or("").as_bytes();
                let parts = RequestParts {
                    method: &step.method,
                    path: &step.path,
                    headers: &headers,
                    cookie: None,
                    body,
                    json: false,
                };
                let mut bytes = Vec::new();
                encode_request(&mut bytes, endpoint, &parts);
                assert!(bytes.ends_with(body));
            }
        }
        let profile = match &scenario.workload {
            Workload::Closed { start_vus, stages } => Profile::closed(*start_vus, stages),
            Workload::Open { start_rate_per_s, stages, .. } => Profile::open(*start_rate_per_s, stages),
        };
        let duration = profile.duration_s();
        for fraction in [0.0, 0.25, 0.5, 0.999, 1.0, 2.0] {
            let _ = profile.level_at(duration * fraction);
            let _ = profile.vus_at(duration * fraction);
        }
        for count in [0.0, 1.0, 10.0, 1e6] {
            if let Some(at) = profile.time_of_arrival(count) {
                assert!(
                    at.is_finite() && at >= 0.0 && at <= duration * (1.0 + 1e-9),
                    "arrival {count} at {at} of {duration}"
                );
            }
        }
    }
    // Decoding what we encode gives the same plan back.
    let json = serde_json::to_string(plan).expect("a valid plan serialises");
    let again = horde_plan::decode_and_validate(&json).expect("a serialised valid plan is valid");
    assert_eq!(&again, plan, "round trip of {json}");
}

#[test]
fn mutated_plans_never_panic_the_decoder() {
    assert!(horde_plan::decode_and_validate(VALID_PLAN).is_ok(), "the seed plan is valid");
    let mut rng = XorShift::new(0x5eed_0001);
    let mut valid = 0;
    let mut invalid = 0;
    let began = Instant::now();
    for case in 0..5_000 {
        let bytes = mutate(&mut rng, VALID_PLAN.as_bytes());
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let outcome = catch_unwind(AssertUnwindSafe(|| match horde_plan::decode_and_validate(&text) {
            Ok(plan) => {
                exercise_valid_plan(&plan);
                true
            }
            Err(problems) => {
                assert!(!problems.is_empty(), "an invalid plan with no problem listed");
                false
            }
        }));
        match outcome {
            Ok(true) => valid += 1,
            Ok(false) => invalid += 1,
            Err(_) => panic!("case {case} panicked on input:\n{text}"),
        }
        assert!(began.elapsed() < Duration::from_secs(120), "fuzzing is too slow");
    }
    eprintln!("mutated plans: {valid} valid, {invalid} invalid");
    assert!(invalid > 1000, "the mutations hardly ever broke the plan ({invalid} invalid)");
    assert!(valid > 50, "the mutations hardly ever kept the plan valid ({valid} valid)");
}

/// A response the server might send, then mangled: varying framing, lengths, chunk sizes,
/// header garbage, flipped or inserted bytes, truncation; delivered in random pieces.
fn fuzzed_response(rng: &mut XorShift) -> (Vec<u8>, bool) {
    let statuses: [&[u8]; 9] = [
        b"200 OK",
        b"204 No Content",
        b"301 Moved",
        b"404 Not Found",
        b"500 Oops",
        b"503 Busy",
        b"200",
        b"999 What",
        b"1 Short",
    ];
    let status = statuses[rng.below(statuses.len() as u64) as usize];
    let version: &[u8] = if rng.chance(1, 8) { b"HTTP/1.0 " } else { b"HTTP/1.1 " };
    let body_len = rng.below(300) as usize;
    let body: Vec<u8> = (0..body_len).map(|i| b'a' + (i % 26) as u8).collect();
    let mut response = Vec::new();
    if rng.chance(1, 10) {
        response.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    response.extend_from_slice(version);
    response.extend_from_slice(status);
    response.extend_from_slice(b"\r\nServer: fuzz\r\n");
    if rng.chance(1, 6) {
        // Header garbage: no colon, odd bytes, a very long value.
        let garbage: Vec<u8> = (0..rng.below(60)).map(|_| rng.byte()).collect();
        response.extend_from_slice(&garbage);
        response.extend_from_slice(b"\r\n");
    }
    if rng.chance(1, 20) {
        response.extend_from_slice(b"X-Long: ");
        response.extend_from_slice(&vec![b'x'; rng.below(100_000) as usize]);
        response.extend_from_slice(b"\r\n");
    }
    let mut keep = !rng.chance(1, 4);
    if !keep && rng.chance(1, 2) {
        response.extend_from_slice(b"Connection: close\r\n");
    }
    match rng.below(4) {
        0 | 1 => {
            // Content-Length, sometimes wrong (too short leaves bytes behind, too long stalls).
            let declared = match rng.below(6) {
                0 => body_len + rng.below(50) as usize,
                1 => body_len.saturating_sub(rng.below(50) as usize),
                _ => body_len,
            };
            response.extend_from_slice(format!("Content-Length: {declared}\r\n\r\n").as_bytes());
            response.extend_from_slice(&body);
        }
        2 => {
            response.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            let mut rest: &[u8] = &body;
            while !rest.is_empty() {
                let size = (1 + rng.below(100) as usize).min(rest.len());
                let declared = if rng.chance(1, 15) { size + rng.below(5) as usize } else { size };
                let line = if rng.chance(1, 30) { "zz".to_string() } else { format!("{declared:x}") };
                response.extend_from_slice(format!("{line}\r\n").as_bytes());
                response.extend_from_slice(&rest[..size]);
                response.extend_from_slice(b"\r\n");
                rest = &rest[size..];
            }
            response.extend_from_slice(b"0\r\n");
            if rng.chance(1, 5) {
                response.extend_from_slice(b"X-Trailer: t\r\n");
            }
            response.extend_from_slice(b"\r\n");
        }
        _ => {
            // Delimited by close.
            response.extend_from_slice(b"\r\n");
            response.extend_from_slice(&body);
            keep = false;
        }
    }
    let flips = if rng.chance(1, 3) { 1 + rng.below(3) } else { 0 };
    for _ in 0..flips {
        if response.is_empty() {
            break;
        }
        let at = rng.below(response.len() as u64) as usize;
        match rng.below(3) {
            0 => response[at] ^= 1 << rng.below(8),
            1 => response.insert(at, rng.byte()),
            _ => {
                response.remove(at);
            }
        }
    }
    if rng.chance(1, 10) {
        let cut = rng.below(response.len() as u64 + 1) as usize;
        response.truncate(cut);
    }
    (response, keep)
}

#[test]
fn mutated_responses_never_panic_the_engine_and_are_all_counted() {
    let _serial = serial();
    let panics_before = engine_panics();
    let server = RawServer::start(|stream, number, _| {
        let mut rng = XorShift::new(0xF0_2200 + number);
        if rng.chance(1, 50) {
            return true; // no answer at all: the engine's request timeout ends it
        }
        let (response, keep) = fuzzed_response(&mut rng);
        let mut rest: &[u8] = &response;
        while !rest.is_empty() {
            let piece = (1 + rng.below(rest.len() as u64)) as usize;
            send(stream, &rest[..piece]);
            rest = &rest[piece..];
            if rng.chance(1, 4) {
                std::thread::sleep(Duration::from_millis(rng.below(15)));
            }
        }
        keep
    });
    let plan = custom_plan(
        &server.base_url(),
        r#", "request_timeout_ms": 500, "connect_timeout_ms": 1000"#,
        &get_step("/", Some(10.0)),
        &closed(5, 3.0),
        1.0,
    );
    let (snapshots, took) = run_timed(&plan, 2);
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    let kinds = error_kinds(&snapshots);
    eprintln!(
        "{requests} requests, {} ok, errors {kinds:?}; server saw {} requests",
        total_ok(&snapshots),
        server.requests()
    );
    assert!(requests >= 100, "only {requests} requests");
    assert!(total_ok(&snapshots) > 0, "no valid response was recognised");
    assert!(kinds.len() >= 3, "little variety in the outcomes: {kinds:?}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert_eq!(engine_panics(), panics_before, "an engine thread panicked");
}

/// Starts `plan` (stopping it at once if it starts) and reports a panic of `start` or of the
/// engine's threads.
fn start_and_stop(plan: &Plan) -> Result<(), String> {
    let panics_before = engine_panics();
    let started = catch_unwind(AssertUnwindSafe(|| horde_engine::start(plan, EngineOptions::with_workers(1))));
    match started {
        Err(_) => return Err("start() panicked".into()),
        Ok(Err(_)) => return Ok(()), // refusing the plan is fine
        Ok(Ok(mut run)) => {
            std::thread::sleep(Duration::from_millis(300));
            run.stop();
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline && !matches!(run.next_snapshot(Duration::from_millis(200)), Next::Finished)
            {
            }
            if !run.is_finished() {
                return Err("the run did not end within 20 s of its stop".into());
            }
        }
    }
    if engine_panics() != panics_before {
        return Err("an engine thread panicked".into());
    }
    Ok(())
}

#[test]
fn plans_with_extreme_numbers_are_refused_before_anything_starts() {
    // Beyond the plan's upper bounds, numbers would overflow a Duration or an allocation; the
    // plan check refuses them, each at its own path, and start() refuses them too.
    let base_url = format!("http://127.0.0.1:{}", closed_port());
    let raw = |target_extra: &str, steps: &str, workload: &str, graceful_stop_s: f64| {
        format!(
            r#"{{"version": 1, "target": {{"base_url": "{base_url}"{target_extra}}}, "graceful_stop_s": {graceful_stop_s},
                "scenarios": [{{"name": "s", "steps": {steps}, "workload": {workload}}}]}}"#
        )
    };
    let step = get_step("/", Some(50.0));
    let cases = [
        ("scenarios[0].workload.stages[0].duration_s", raw("", &step, &closed(1, 1e300), 1.0)),
        ("graceful_stop_s", raw("", &step, &closed(1, 30.0), 1e300)),
        ("target.request_timeout_ms", raw(r#", "request_timeout_ms": 1e300"#, &step, &closed(1, 30.0), 1.0)),
        ("target.connect_timeout_ms", raw(r#", "connect_timeout_ms": 1e300"#, &step, &closed(1, 30.0), 1.0)),
        ("scenarios[0].steps[0].think_time.duration_ms", raw("", &get_step("/", Some(1e300)), &closed(1, 30.0), 1.0)),
        (
            "scenarios[0].steps[0].think_time.mean_ms",
            raw(
                "",
                r#"[{"name": "get", "method": "GET", "path": "/", "think_time": {"type": "exponential", "mean_ms": 1e308}}]"#,
                &closed(1, 30.0),
                1.0,
            ),
        ),
        ("scenarios[0].workload.stages[0].vus", raw("", &step, &closed(1_000_000_000_000, 30.0), 1.0)),
        ("scenarios[0].workload.stages[0].rate_per_s", raw("", &step, &open(1e10, 1.0, 2), 1.0)),
    ];
    for (path, json) in cases {
        let problems = horde_plan::decode_and_validate(&json).expect_err(path);
        assert!(problems.iter().any(|problem| problem.path == path), "{path}: {problems:?}");
        let plan = horde_plan::decode(&json).expect("decodes");
        assert!(horde_engine::start(&plan, EngineOptions::with_workers(1)).is_err(), "{path}: start() refuses it");
    }
}

#[test]
fn valid_plans_at_the_upper_bounds_run() {
    let _serial = serial();
    let base_url = format!("http://127.0.0.1:{}", closed_port());
    let step = get_step("/", Some(50.0));
    let cases = [
        (
            "stage duration_s 30 days",
            custom_plan(&base_url, "", &step, &closed(1, horde_plan::MAX_STAGE_DURATION_S), 1.0),
        ),
        ("graceful_stop_s 1 h", custom_plan(&base_url, "", &step, &closed(1, 30.0), horde_plan::MAX_GRACEFUL_STOP_S)),
        (
            "request_timeout_ms 1 h",
            custom_plan(&base_url, r#", "request_timeout_ms": 3600000"#, &step, &closed(1, 30.0), 1.0),
        ),
        (
            "think time 1 day",
            custom_plan(&base_url, "", &get_step("/", Some(horde_plan::MAX_THINK_TIME_MS)), &closed(1, 30.0), 1.0),
        ),
        (
            "exponential think time, mean 1 day",
            custom_plan(
                &base_url,
                "",
                r#"[{"name": "get", "method": "GET", "path": "/", "think_time": {"type": "exponential", "mean_ms": 86400000}}]"#,
                &closed(1, 30.0),
                1.0,
            ),
        ),
        ("tiny think time", custom_plan(&base_url, "", &get_step("/", Some(1e-300)), &closed(1, 30.0), 1.0)),
        ("open, tiny rate", custom_plan(&base_url, "", &step, &open(1e-9, 30.0, 1), 1.0)),
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(name, plan)| start_and_stop(plan).err().map(|why| format!("{name}: {why}")))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn an_extreme_arrival_rate_does_not_hang_the_run() {
    // The highest rate a plan may ask (1e7/s) on one worker: arrivals are always overdue, and
    // the open-model driver must still let the worker's other tasks (interval reports, the
    // stop at the end of the stages) run.
    let _serial = serial();
    let base_url = format!("http://127.0.0.1:{}", closed_port());
    let plan = custom_plan(&base_url, "", &get_step("/", None), &open(1e7, 1.0, 2), 1.0);
    let mut run = horde_engine::start(&plan, EngineOptions::with_workers(1)).expect("run starts");
    let snapshots = collect(&mut run, Duration::from_secs(15));
    assert_accounting(&snapshots);
    let dropped: u64 = snapshots.iter().map(|s| s.dropped_arrivals).sum();
    assert!(dropped > 0);
}

//! What the engine's integration tests share: running a plan to its end and reading the result.
#![allow(dead_code)]

use hdrhistogram::Histogram;
use horde_engine::{EngineOptions, Next, RunHandle, Snapshot};
use horde_metrics::merge_encoded;
use std::time::{Duration, Instant};

/// A one-scenario plan with one GET step.
pub fn one_step_plan(base_url: &str, path: &str, workload: &str) -> horde_plan::Plan {
    let json = format!(
        r#"{{"version": 1, "target": {{"base_url": "{base_url}", "request_timeout_ms": 5000}},
            "graceful_stop_s": 2,
            "scenarios": [{{"name": "s", "steps": [{{"name": "get", "method": "GET", "path": "{path}"}}],
                            "workload": {workload}}}]}}"#
    );
    horde_plan::decode(&json).expect("test plan decodes")
}

/// Takes every snapshot of a run until its final one; bounded so a hung engine fails the test.
pub fn collect(run: &mut RunHandle, limit: Duration) -> Vec<Snapshot> {
    let deadline = Instant::now() + limit;
    let mut snapshots = Vec::new();
    while Instant::now() < deadline {
        match run.next_snapshot(Duration::from_millis(200)) {
            Next::Snapshot(snapshot) => snapshots.push(*snapshot),
            Next::Pending => {}
            Next::Finished => return snapshots,
        }
        if run.is_finished() {
            return snapshots;
        }
    }
    panic!("the run did not finish within {limit:?}");
}

pub fn run_to_end(plan: &horde_plan::Plan, workers: usize) -> Vec<Snapshot> {
    let mut run = horde_engine::start(plan, EngineOptions::with_workers(workers)).expect("run starts");
    let limit = run.planned_duration() + Duration::from_secs(15);
    collect(&mut run, limit)
}

/// The exact merge of one step's latency over the given snapshots.
pub fn latency(snapshots: &[Snapshot], step: &str) -> Histogram<u64> {
    let parts: Vec<&[u8]> = snapshots
        .iter()
        .flat_map(|snapshot| snapshot.steps.iter())
        .filter(|entry| entry.step == step)
        .map(|entry| entry.histogram.as_slice())
        .collect();
    merge_encoded(parts).expect("histograms decode")
}

pub fn total_requests(snapshots: &[Snapshot]) -> u64 {
    snapshots.iter().map(Snapshot::requests).sum()
}

pub fn errors_of_kind(snapshots: &[Snapshot], kind: &str) -> u64 {
    snapshots
        .iter()
        .flat_map(|snapshot| snapshot.steps.iter())
        .flat_map(|entry| entry.errors.iter())
        .filter(|(label, _)| label == kind)
        .map(|(_, count)| count)
        .sum()
}

// ---------------------------------------------------------------------------------------------
// Helpers added for the feature tests (tls, error kinds, graceful stop, robustness, workers).
// ---------------------------------------------------------------------------------------------

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Decodes a test plan written in full, and checks that it is valid.
pub fn plan_from_json(json: &str) -> horde_plan::Plan {
    match horde_plan::decode_and_validate(json) {
        Ok(plan) => plan,
        Err(problems) => panic!("test plan is invalid: {problems:?}\n{json}"),
    }
}

/// A one-scenario plan. `target_extra` is spliced into the target object after `base_url`
/// (for example `, "request_timeout_ms": 200, "insecure": true`); `steps` is a JSON array.
pub fn custom_plan(
    base_url: &str,
    target_extra: &str,
    steps: &str,
    workload: &str,
    graceful_stop_s: f64,
) -> horde_plan::Plan {
    plan_from_json(&format!(
        r#"{{"version": 1, "target": {{"base_url": "{base_url}"{target_extra}}},
            "graceful_stop_s": {graceful_stop_s},
            "scenarios": [{{"name": "s", "steps": {steps}, "workload": {workload}}}]}}"#
    ))
}

/// One GET step named `get`, with an optional constant think time (which also bounds how fast
/// a VU can loop against a target that fails at once).
pub fn get_step(path: &str, think_ms: Option<f64>) -> String {
    match think_ms {
        Some(ms) => format!(
            r#"[{{"name": "get", "method": "GET", "path": "{path}", "think_time": {{"type": "constant", "duration_ms": {ms}}}}}]"#
        ),
        None => format!(r#"[{{"name": "get", "method": "GET", "path": "{path}"}}]"#),
    }
}

/// A closed workload holding `vus` VUs for `seconds` (from the first instant: `start_vus`).
pub fn closed(vus: u64, seconds: f64) -> String {
    format!(r#"{{"type": "closed", "start_vus": {vus}, "stages": [{{"duration_s": {seconds}, "vus": {vus}}}]}}"#)
}

/// An open workload at a constant `rate` for `seconds`.
pub fn open(rate: f64, seconds: f64, max_vus: u64) -> String {
    format!(
        r#"{{"type": "open", "start_rate_per_s": {rate}, "stages": [{{"duration_s": {seconds}, "rate_per_s": {rate}}}], "max_vus": {max_vus}}}"#
    )
}

pub fn total_ok(snapshots: &[Snapshot]) -> u64 {
    snapshots.iter().map(Snapshot::ok).sum()
}

pub fn bytes_received(snapshots: &[Snapshot]) -> u64 {
    snapshots.iter().flat_map(|s| s.steps.iter()).map(|step| step.bytes_received).sum()
}

pub fn bytes_sent(snapshots: &[Snapshot]) -> u64 {
    snapshots.iter().flat_map(|s| s.steps.iter()).map(|step| step.bytes_sent).sum()
}

pub fn connections_opened(snapshots: &[Snapshot]) -> u64 {
    snapshots.iter().map(|s| s.connections_opened).sum()
}

/// Every error kind seen in the run, with its count.
pub fn error_kinds(snapshots: &[Snapshot]) -> BTreeMap<String, u64> {
    let mut kinds = BTreeMap::new();
    for (label, count) in snapshots.iter().flat_map(|s| s.steps.iter()).flat_map(|step| step.errors.iter()) {
        *kinds.entry(label.clone()).or_insert(0) += count;
    }
    kinds
}

/// The kinds of a request that got no response: counted, never timed.
pub fn is_without_response(label: &str) -> bool {
    matches!(
        label,
        "refused"
            | "reset"
            | "timeout"
            | "tls"
            | "dns"
            | "connect"
            | "protocol"
            | "headers_too_large"
            | "io"
            | "cut"
            | "template_failed"
            | "feeder_exhausted"
            | "h2_goaway"
            | "h2_refused"
            | "ws_closed"
    ) || label.starts_with("h2_reset_")
}

/// The error kinds ARCHITECTURE.md documents: `status_<code>` (code >= 400) and the fixed ones.
pub fn is_documented_kind(label: &str) -> bool {
    if let Some(code) = label.strip_prefix("status_") {
        return code.parse::<u16>().is_ok_and(|code| code >= 400);
    }
    matches!(
        label,
        "refused"
            | "reset"
            | "timeout"
            | "tls"
            | "dns"
            | "connect"
            | "protocol"
            | "headers_too_large"
            | "io"
            | "cut"
            | "h2_goaway"
            | "h2_refused"
            | "ws_closed"
    ) || label.starts_with("h2_reset_")
}

/// The accounting every snapshot must satisfy: per step, `requests = ok + sum(errors)`, one
/// latency sample per request that got a response (none for one that got none: refused,
/// reset, timeout, cut...), and only documented error kinds.
pub fn assert_accounting(snapshots: &[Snapshot]) {
    assert!(!snapshots.is_empty(), "no snapshot at all");
    assert!(snapshots.last().is_some_and(|s| s.is_final), "the last snapshot is not final");
    assert_eq!(snapshots.iter().filter(|s| s.is_final).count(), 1, "exactly one final snapshot");
    for (position, snapshot) in snapshots.iter().enumerate() {
        assert_eq!(snapshot.second, position as u64 + 1, "snapshots are numbered 1, 2, 3...");
        for step in &snapshot.steps {
            let errors: u64 = step.errors.iter().map(|(_, count)| count).sum();
            assert_eq!(step.requests, step.ok + errors, "second {}: {step:?}", snapshot.second);
            for (label, count) in &step.errors {
                assert!(is_documented_kind(label), "undocumented error kind {label:?}");
                assert!(*count > 0, "a zero count is listed for {label}");
            }
            let histogram = horde_metrics::decode_histogram(&step.histogram).expect("histogram decodes");
            let untimed: u64 =
                step.errors.iter().filter(|(label, _)| is_without_response(label)).map(|(_, count)| count).sum();
            assert_eq!(histogram.len(), step.requests - untimed, "one latency sample per request that got a response");
        }
    }
}

/// A port on 127.0.0.1 where nothing listens (bound, noted, released).
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    let port = listener.local_addr().expect("local address").port();
    drop(listener);
    port
}

/// Names of this process's threads that belong to a run (worker and aggregator threads).
/// Linux truncates thread names to 15 bytes: `horde-worker-0`, `horde-aggregat`.
pub fn run_threads() -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| name.starts_with("horde-worker") || name.starts_with("horde-aggregat"))
        .collect()
}

/// What a [`RawServer`] handler gets for each request: the connection, the request's number in
/// the whole server (0-based), and the request head as read.
pub type RawHandler = dyn Fn(&mut TcpStream, u64, &[u8]) -> bool + Send + Sync;

/// A hand-rolled HTTP/1.1 server on 127.0.0.1 (std::net, a thread per connection) that lets a
/// test answer each request with exactly the bytes it wants. It reads each request head (up to
/// the blank line; the engine's test requests have no body) and calls the handler, which writes
/// whatever it likes and returns whether to keep reading from the connection (false closes it).
pub struct RawServer {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
    /// The address each accepted connection came from, in order.
    peers: Arc<Mutex<Vec<SocketAddr>>>,
    thread: Option<JoinHandle<()>>,
}

/// How long a connection may stay idle before the server gives up on it (bounds every thread).
const RAW_IDLE_LIMIT: Duration = Duration::from_secs(20);

impl RawServer {
    pub fn start(handler: impl Fn(&mut TcpStream, u64, &[u8]) -> bool + Send + Sync + 'static) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("non-blocking listener");
        let address = listener.local_addr().expect("local address");
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let peers = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<RawHandler> = Arc::new(handler);
        let thread = {
            let (stop, requests, connections) = (Arc::clone(&stop), Arc::clone(&requests), Arc::clone(&connections));
            let peers = Arc::clone(&peers);
            std::thread::Builder::new()
                .name("raw-server".into())
                .spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        match listener.accept() {
                            Ok((stream, peer)) => {
                                connections.fetch_add(1, Ordering::SeqCst);
                                peers.lock().expect("peers lock").push(peer);
                                let (stop, requests, handler) =
                                    (Arc::clone(&stop), Arc::clone(&requests), Arc::clone(&handler));
                                let _ = std::thread::Builder::new()
                                    .name("raw-connection".into())
                                    .spawn(move || serve_raw(stream, &stop, &requests, &*handler));
                            }
                            Err(_) => std::thread::sleep(Duration::from_millis(2)),
                        }
                    }
                })
                .expect("spawn the raw server")
        };
        RawServer { address, stop, requests, connections, peers, thread: Some(thread) }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Requests whose head the server read completely.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// Where each connection came from (source address and port), in the order accepted.
    pub fn peers(&self) -> Vec<SocketAddr> {
        self.peers.lock().expect("peers lock").clone()
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve_raw(mut stream: TcpStream, stop: &AtomicBool, requests: &AtomicU64, handler: &RawHandler) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(250)));
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut idle_since = Instant::now();
    loop {
        if let Some(end) = pending.windows(4).position(|window| window == b"\r\n\r\n") {
            let head: Vec<u8> = pending.drain(..end + 4).collect();
            let number = requests.fetch_add(1, Ordering::SeqCst);
            if !handler(&mut stream, number, &head) {
                return; // dropping the stream closes it
            }
            idle_since = Instant::now();
            continue;
        }
        if pending.len() > 64 * 1024 {
            return;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(read) => {
                pending.extend_from_slice(&chunk[..read]);
                idle_since = Instant::now();
            }
            Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if stop.load(Ordering::SeqCst) || idle_since.elapsed() > RAW_IDLE_LIMIT {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

/// A server whose every answer is a body of `size` bytes ending in "THE-END", written from a
/// small buffer (the server holds no body in memory, so only the engine's memory grows).
pub fn huge_body_server(size: usize) -> RawServer {
    RawServer::start(move |stream, _, _| {
        let chunk = [b'x'; 64 * 1024];
        send(stream, format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n").as_bytes());
        let mut left = size - b"THE-END".len();
        while left > 0 {
            let take = left.min(chunk.len());
            if stream.write_all(&chunk[..take]).is_err() {
                return false;
            }
            left -= take;
        }
        send(stream, b"THE-END");
        true
    })
}

/// Writes all of `bytes`, ignoring failures (the engine may have hung up: that is its right).
pub fn send(stream: &mut TcpStream, bytes: &[u8]) {
    let _ = stream.write_all(bytes);
    let _ = stream.flush();
}

/// A tiny seeded generator (xorshift64*) for reproducible fuzzing without extra crates.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        // Never zero: xorshift stays at zero forever.
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..bound` (bound > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound.max(1)
    }

    pub fn chance(&mut self, numerator: u64, denominator: u64) -> bool {
        self.below(denominator) < numerator
    }

    pub fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }
}

/// Runs a plan to its end; also returns how long that took from `start`. Fails if an engine
/// thread panicked meanwhile (in a test binary whose tests run in parallel, any test's).
pub fn run_timed(plan: &horde_plan::Plan, workers: usize) -> (Vec<Snapshot>, Duration) {
    let panics = engine_panics();
    let began = Instant::now();
    let mut run = horde_engine::start(plan, EngineOptions::with_workers(workers)).expect("run starts");
    let limit = run.planned_duration() + Duration::from_secs(20);
    let snapshots = collect(&mut run, limit);
    let took = began.elapsed();
    assert_eq!(engine_panics(), panics, "an engine thread panicked during the run");
    (snapshots, took)
}

static ENGINE_PANICS: AtomicU64 = AtomicU64::new(0);
static PANIC_HOOK: std::sync::Once = std::sync::Once::new();

/// How many panics engine threads (`horde-*`) have had in this test process so far. The first
/// call installs a panic hook that counts them: a panic inside a VU task is caught by tokio and
/// would otherwise only show as missing counts.
pub fn engine_panics() -> u64 {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name().is_some_and(|name| name.starts_with("horde-")) {
                ENGINE_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
    ENGINE_PANICS.load(Ordering::SeqCst)
}

// ---------------------------------------------------------------------------------------------
// Helpers added for the scenario-language tests (scenarios.rs, scenario_flow.rs,
// scenario_data.rs): plans written as JSON values, per-step figures, the accounting with the
// scenario error kinds, and a server that records whole requests (bodies included).
// ---------------------------------------------------------------------------------------------

use std::sync::Mutex;

/// Decodes and validates a plan given as a JSON value (`serde_json::json!`).
pub fn plan_of(value: serde_json::Value) -> horde_plan::Plan {
    plan_from_json(&value.to_string())
}

/// A one-scenario plan; `scenario` holds the scenario's fields except `name` (set to `s` unless
/// given) and must include `steps` and `workload`.
pub fn scenario_plan(base_url: &str, scenario: serde_json::Value) -> horde_plan::Plan {
    let mut scenario = scenario;
    let fields = scenario.as_object_mut().expect("a scenario is a JSON object");
    fields.entry("name").or_insert_with(|| serde_json::Value::String("s".into()));
    plan_of(serde_json::json!({
        "version": 1,
        "target": {"base_url": base_url, "request_timeout_ms": 5000},
        "graceful_stop_s": 2,
        "scenarios": [scenario],
    }))
}

/// A closed workload as a JSON value: `vus` VUs from the first instant for `seconds`.
pub fn closed_value(vus: u64, seconds: f64) -> serde_json::Value {
    serde_json::json!({"type": "closed", "start_vus": vus, "stages": [{"duration_s": seconds, "vus": vus}]})
}

/// An open workload whose arrivals all fall well before the stages end: `rate` per second for
/// `seconds`, then a second of nothing, so every iteration completes (none is cut by the end of
/// the stages) and the number of iterations is exact: [`burst_arrivals`]. Choose `rate *
/// seconds` not a whole number, so no arrival sits exactly on the edge.
pub fn open_burst(rate: f64, seconds: f64, max_vus: u64) -> serde_json::Value {
    serde_json::json!({"type": "open", "start_rate_per_s": rate, "max_vus": max_vus, "stages": [
        {"duration_s": seconds, "rate_per_s": rate},
        {"duration_s": 0.001, "rate_per_s": 0},
        {"duration_s": 1.0, "rate_per_s": 0},
    ]})
}

/// How many arrivals [`open_burst`] makes: arrivals 0, 1, ... up to `rate * seconds`.
pub fn burst_arrivals(rate: f64, seconds: f64) -> u64 {
    (rate * seconds).floor() as u64 + 1
}

/// Every entry of one step (or group) over the run.
pub fn entries<'a>(
    snapshots: &'a [Snapshot],
    step: &'a str,
) -> impl Iterator<Item = &'a horde_engine::StepSnapshot> + 'a {
    snapshots.iter().flat_map(|snapshot| snapshot.steps.iter()).filter(move |entry| entry.step == step)
}

/// Requests (passes, for a group) of one step over the run.
pub fn step_requests(snapshots: &[Snapshot], step: &str) -> u64 {
    entries(snapshots, step).map(|entry| entry.requests).sum()
}

pub fn step_ok(snapshots: &[Snapshot], step: &str) -> u64 {
    entries(snapshots, step).map(|entry| entry.ok).sum()
}

/// Errors of one kind of one step over the run.
pub fn step_errors(snapshots: &[Snapshot], step: &str, kind: &str) -> u64 {
    entries(snapshots, step)
        .flat_map(|entry| entry.errors.iter())
        .filter(|(label, _)| label == kind)
        .map(|(_, count)| count)
        .sum()
}

/// The error kinds of one step over the run, with their counts.
pub fn step_error_kinds(snapshots: &[Snapshot], step: &str) -> BTreeMap<String, u64> {
    let mut kinds = BTreeMap::new();
    for (label, count) in entries(snapshots, step).flat_map(|entry| entry.errors.iter()) {
        *kinds.entry(label.clone()).or_insert(0) += count;
    }
    kinds
}

/// The `kind` of a step's entries ("request" or "group"); panics if it has none or they differ.
pub fn step_kind(snapshots: &[Snapshot], step: &str) -> String {
    let kinds: std::collections::BTreeSet<String> =
        entries(snapshots, step).map(|entry| entry.kind.to_string()).collect();
    assert_eq!(kinds.len(), 1, "step {step:?} has kinds {kinds:?}");
    kinds.into_iter().next().expect("one kind")
}

/// Iterations completed over the run.
pub fn iterations(snapshots: &[Snapshot]) -> u64 {
    snapshots.iter().map(|snapshot| snapshot.iterations).sum()
}

/// The error kinds ARCHITECTURE.md documents, those of the scenario language included.
pub fn is_documented_scenario_kind(label: &str) -> bool {
    is_documented_kind(label)
        || matches!(
            label,
            "check_failed"
                | "extract_failed"
                | "body_too_large"
                | "feeder_exhausted"
                | "template_failed"
                | "step_failed"
        )
}

/// [`assert_accounting`] for runs of the scenario language: the same invariants, the new error
/// kinds allowed, and every entry's `kind` either "request" or "group" (only groups may count
/// `step_failed`).
pub fn assert_scenario_accounting(snapshots: &[Snapshot]) {
    assert!(!snapshots.is_empty(), "no snapshot at all");
    assert!(snapshots.last().is_some_and(|s| s.is_final), "the last snapshot is not final");
    assert_eq!(snapshots.iter().filter(|s| s.is_final).count(), 1, "exactly one final snapshot");
    for (position, snapshot) in snapshots.iter().enumerate() {
        assert_eq!(snapshot.second, position as u64 + 1, "snapshots are numbered 1, 2, 3...");
        for step in &snapshot.steps {
            assert!(matches!(step.kind.as_ref(), "request" | "group"), "kind {:?} of {}", step.kind, step.step);
            let errors: u64 = step.errors.iter().map(|(_, count)| count).sum();
            assert_eq!(step.requests, step.ok + errors, "second {}: {step:?}", snapshot.second);
            for (label, count) in &step.errors {
                assert!(is_documented_scenario_kind(label), "undocumented error kind {label:?}");
                assert!(*count > 0, "a zero count is listed for {label}");
                if label == "step_failed" {
                    assert_eq!(step.kind, "group", "step_failed on a request step {}", step.step);
                }
            }
            let histogram = horde_metrics::decode_histogram(&step.histogram).expect("histogram decodes");
            let untimed: u64 =
                step.errors.iter().filter(|(label, _)| is_without_response(label)).map(|(_, count)| count).sum();
            assert_eq!(histogram.len(), step.requests - untimed, "one latency sample per request that got a response");
        }
    }
}

/// A unique scratch file path under the system's temporary directory.
pub fn temp_file(stem: &str, extension: &str) -> std::path::PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let unique = format!(
        "horde-test-{stem}-{}-{}-{}.{extension}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    );
    std::env::temp_dir().join(unique)
}

/// A file that is removed when dropped (a feeder's data).
pub struct TempFile(pub std::path::PathBuf);

impl TempFile {
    pub fn with_contents(stem: &str, extension: &str, contents: &str) -> TempFile {
        let path = temp_file(stem, extension);
        std::fs::write(&path, contents).expect("write a temporary file");
        TempFile(path)
    }

    pub fn path(&self) -> String {
        self.0.to_str().expect("a UTF-8 temporary path").to_owned()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// One request as a [`RecordingServer`] received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The request target as sent (path and query).
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(header, _)| header.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// What a [`RecordingServer`] handler answers.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Reply {
        Reply { status, headers: Vec::new(), body: body.into() }
    }

    pub fn ok(body: impl Into<Vec<u8>>) -> Reply {
        Reply::new(200, body)
    }

    pub fn json(status: u16, value: serde_json::Value) -> Reply {
        Reply::new(status, value.to_string()).header("Content-Type", "application/json")
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// An HTTP/1.1 server on 127.0.0.1 (std::net, a thread per connection, keep-alive) that reads
/// whole requests, bodies included (`Content-Length` framing, what the engine sends), records
/// each one, and answers what the handler says. The log is what the target really saw: a
/// request the engine did not send is not in it.
pub struct RecordingServer {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Recorded>>>,
    thread: Option<JoinHandle<()>>,
}

type RecordingHandler = dyn Fn(&Recorded) -> Reply + Send + Sync;

impl RecordingServer {
    pub fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> RecordingServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("non-blocking listener");
        let address = listener.local_addr().expect("local address");
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<RecordingHandler> = Arc::new(handler);
        let thread = {
            let (stop, log) = (Arc::clone(&stop), Arc::clone(&log));
            std::thread::Builder::new()
                .name("recording-server".into())
                .spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        match listener.accept() {
                            Ok((stream, _)) => {
                                let (stop, log, handler) = (Arc::clone(&stop), Arc::clone(&log), Arc::clone(&handler));
                                let _ = std::thread::Builder::new()
                                    .name("recording-connection".into())
                                    .spawn(move || serve_recorded(stream, &stop, &log, &*handler));
                            }
                            Err(_) => std::thread::sleep(Duration::from_millis(2)),
                        }
                    }
                })
                .expect("spawn the recording server")
        };
        RecordingServer { address, stop, log, thread: Some(thread) }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.log.lock().expect("log lock").clone()
    }

    /// Requests whose path starts with `prefix`.
    pub fn count_prefix(&self, prefix: &str) -> usize {
        self.log.lock().expect("log lock").iter().filter(|request| request.path.starts_with(prefix)).count()
    }

    /// Requests whose path is exactly `path`.
    pub fn count_path(&self, path: &str) -> usize {
        self.log.lock().expect("log lock").iter().filter(|request| request.path == path).count()
    }

    /// Received requests with a path starting with `prefix`.
    pub fn with_prefix(&self, prefix: &str) -> Vec<Recorded> {
        self.log.lock().expect("log lock").iter().filter(|request| request.path.starts_with(prefix)).cloned().collect()
    }
}

impl Drop for RecordingServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A request head: method, target, headers.
type Head = (String, String, Vec<(String, String)>);

/// Splits a request head into (method, target, headers).
fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers = lines
        .filter(|line| !line.is_empty())
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    Some((method, path, headers))
}

fn serve_recorded(mut stream: TcpStream, stop: &AtomicBool, log: &Mutex<Vec<Recorded>>, handler: &RecordingHandler) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(250)));
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut idle_since = Instant::now();
    loop {
        if let Some(end) = pending.windows(4).position(|window| window == b"\r\n\r\n") {
            let Some((method, path, headers)) = parse_head(&pending[..end]) else { return };
            let length = headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, value)| value.parse::<usize>().ok())
                .unwrap_or(0);
            if pending.len() >= end + 4 + length {
                let body = pending[end + 4..end + 4 + length].to_vec();
                pending.drain(..end + 4 + length);
                let request = Recorded { method, path, headers, body };
                log.lock().expect("log lock").push(request.clone());
                let reply = handler(&request);
                let mut out =
                    format!("HTTP/1.1 {} X\r\nContent-Length: {}\r\n", reply.status, reply.body.len()).into_bytes();
                for (name, value) in &reply.headers {
                    out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
                }
                out.extend_from_slice(b"\r\n");
                if request.method != "HEAD" {
                    out.extend_from_slice(&reply.body);
                }
                send(&mut stream, &out);
                idle_since = Instant::now();
                continue;
            }
        }
        if pending.len() > 1024 * 1024 {
            return;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(read) => {
                pending.extend_from_slice(&chunk[..read]);
                idle_since = Instant::now();
            }
            Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if stop.load(Ordering::SeqCst) || idle_since.elapsed() > RAW_IDLE_LIMIT {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

//! The plan: what a run does, as the engine reads it.
//!
//! The plan is Horde's contract between the Python control plane and the Rust engine. Its types
//! and defaults are written in `python/horde/plan` (pydantic: the JSON Schema and the builder);
//! this crate decodes the same JSON with serde (`deny_unknown_fields` everywhere, so a key the
//! engine does not know is an error, never silently ignored) and owns its bounds ([`bounds`],
//! which the control plane reads through the binding instead of copying them).
//!
//! Two entry points:
//! - [`decode`] turns JSON into a [`Plan`], or one [`PlanError`] located at the JSON path where
//!   decoding stopped (serde cannot go on after a type error);
//! - [`Plan::validate`] returns *every* semantic problem at once, each with its path, written
//!   like pydantic's (`scenarios[0].steps[1].path`) so both sides name places the same way.
//!
//! This crate has no IO and no async runtime: it is a leaf the engine and the bindings build on.

mod message;
pub mod secrets;
mod sql;
mod steps;
pub mod templates;
mod validate;

use serde::{Deserialize, Serialize};

pub use message::{
    CloseStep, ConnectStep, Endian, Framing, KcpOptions, MessageTransport, Network, Payload, PingStep, RateLimit,
    ReceiveStep, SendStep, StreamStep, MAX_CONTROL_FRAME_BYTES, MAX_MESSAGE_BYTES, MAX_STREAM_MESSAGES, SEQ_VARIABLE,
};
pub use sql::{is_postgres_url, SqlCheck, SqlExtractFrom, SqlExtractor, SqlMode, SqlStatement, SqlStep};
pub use steps::{
    Branch, Check, ChoiceStep, EndIterationStep, ExtractFrom, Extractor, Feeder, FeederFormat, FeederMode, GroupStep,
    IfStep, LoopStep, OnCheckFailure, ParallelStep, Pick, Step, ThinkStep,
};
pub use validate::{scenario_structure_problems, target_problems, workload_problems, PlanError};

/// The only plan version this engine reads.
pub const PLAN_VERSION: u32 = 1;

// Upper bounds: far beyond any real test, low enough that no valid plan can overflow a
// duration, an allocation or a counter. The control plane reads them from [`bounds`].
/// A stage lasts at most 30 days.
pub const MAX_STAGE_DURATION_S: f64 = 30.0 * 24.0 * 3600.0;
/// Connect and request timeouts, and the grace period, are at most an hour.
pub const MAX_TIMEOUT_MS: f64 = 3_600_000.0;
pub const MAX_GRACEFUL_STOP_S: f64 = 3600.0;
/// A think time is at most a day.
pub const MAX_THINK_TIME_MS: f64 = 86_400_000.0;
/// VU counts and arrival rates are at most ten million (per plan, before any scale-out).
pub const MAX_VUS: u64 = 10_000_000;
pub const MAX_RATE_PER_S: f64 = 10_000_000.0;
/// A pool holds at most a million connections (far beyond any one process's open-file limit).
pub const MAX_POOL_CONNECTIONS: u64 = 1_000_000;
/// `target.max_response_header_bytes`: 256 KiB by default (Chrome's limit on a response's
/// headers; servers send a few KiB), 1 KiB to 64 MiB.
pub const DEFAULT_MAX_RESPONSE_HEADER_BYTES: u64 = 256 * 1024;
pub const MIN_RESPONSE_HEADER_BYTES: u64 = 1024;
pub const MAX_RESPONSE_HEADER_BYTES: u64 = 64 * 1024 * 1024;
/// `target.max_kept_body_bytes`: 1 MiB by default, 1 byte to 1 GiB, per VU.
pub const DEFAULT_MAX_KEPT_BODY_BYTES: u64 = 1024 * 1024;
pub const MAX_KEPT_BODY_BYTES: u64 = 1024 * 1024 * 1024;
/// `target.parallel_connections`: the connections a VU uses at once for a `parallel` group over
/// HTTP/1.1, its own among them: 6 by default, as browsers open per host; 1 to 256.
pub const DEFAULT_PARALLEL_CONNECTIONS: u64 = 6;
pub const MAX_PARALLEL_CONNECTIONS: u64 = 256;
/// A scenario's or a branch's weight.
pub const MAX_WEIGHT: f64 = 1_000_000.0;
/// Steps inside steps: a top-level step is at depth 1.
pub const MAX_STEP_DEPTH: usize = 16;

/// A bound the engine checks a plan's value against: a count (written as an integer) or an
/// amount (a number that may have a fraction).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    Count(u64),
    Amount(f64),
}

/// The HTTP methods an http step sends, upper case: the one list (the plan's Python types and
/// the converters read it through `horde._engine.http_methods`).
pub const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Why an http step cannot send `method`: the problem and its hint, or None.
pub fn method_problem(method: &str) -> Option<(String, String)> {
    if METHODS.contains(&method) {
        return None;
    }
    let upper = method.to_ascii_uppercase();
    Some(if METHODS.contains(&upper.as_str()) {
        (format!("method '{method}' must be upper case"), format!("write '{upper}'"))
    } else {
        (format!("'{method}' is not a method Horde sends"), format!("use one of: {}", METHODS.join(", ")))
    })
}

/// Every bound and default size the engine checks a plan against, by its name: the one list the
/// control plane (its JSON Schema, its messages, `horde.plan`) reads through `horde._engine`.
pub fn bounds() -> Vec<(&'static str, Bound)> {
    use Bound::{Amount, Count};
    vec![
        ("MAX_STAGE_DURATION_S", Amount(MAX_STAGE_DURATION_S)),
        ("MAX_TIMEOUT_MS", Amount(MAX_TIMEOUT_MS)),
        ("MAX_GRACEFUL_STOP_S", Amount(MAX_GRACEFUL_STOP_S)),
        ("MAX_THINK_TIME_MS", Amount(MAX_THINK_TIME_MS)),
        ("MAX_VUS", Count(MAX_VUS)),
        ("MAX_RATE_PER_S", Amount(MAX_RATE_PER_S)),
        ("MAX_WEIGHT", Amount(MAX_WEIGHT)),
        ("MAX_LOOP_COUNT", Count(validate::MAX_LOOP_COUNT)),
        ("MAX_STEP_DEPTH", Count(MAX_STEP_DEPTH as u64)),
        ("MAX_POOL_CONNECTIONS", Count(MAX_POOL_CONNECTIONS)),
        ("DEFAULT_MAX_RESPONSE_HEADER_BYTES", Count(DEFAULT_MAX_RESPONSE_HEADER_BYTES)),
        ("MIN_RESPONSE_HEADER_BYTES", Count(MIN_RESPONSE_HEADER_BYTES)),
        ("MAX_RESPONSE_HEADER_BYTES", Count(MAX_RESPONSE_HEADER_BYTES)),
        ("DEFAULT_MAX_KEPT_BODY_BYTES", Count(DEFAULT_MAX_KEPT_BODY_BYTES)),
        ("MAX_KEPT_BODY_BYTES", Count(MAX_KEPT_BODY_BYTES)),
        ("DEFAULT_PARALLEL_CONNECTIONS", Count(DEFAULT_PARALLEL_CONNECTIONS)),
        ("MAX_PARALLEL_CONNECTIONS", Count(MAX_PARALLEL_CONNECTIONS)),
        ("MAX_H2_WINDOW_BYTES", Count(MAX_H2_WINDOW_BYTES)),
        ("MIN_H2_CONNECTION_WINDOW_BYTES", Count(MIN_H2_CONNECTION_WINDOW_BYTES)),
        ("MAX_H2_CONCURRENT_STREAMS", Count(MAX_H2_CONCURRENT_STREAMS)),
        ("DEFAULT_H2_STREAM_WINDOW_BYTES", Count(DEFAULT_H2_STREAM_WINDOW_BYTES)),
        ("DEFAULT_H2_CONNECTION_WINDOW_BYTES", Count(DEFAULT_H2_CONNECTION_WINDOW_BYTES)),
        ("MAX_CONTROL_FRAME_BYTES", Count(MAX_CONTROL_FRAME_BYTES as u64)),
        // A count the engine compares as a float (duration over interval).
        ("MAX_STREAM_MESSAGES", Count(MAX_STREAM_MESSAGES as u64)),
        ("MAX_MESSAGE_BYTES", Count(MAX_MESSAGE_BYTES as u64)),
    ]
}

/// A whole plan: where the target is, and the scenarios to run against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub version: u32,
    #[serde(default = "default_plan_name")]
    pub name: String,
    /// The values of the plan's parameters, already substituted by the plan loader; kept so the
    /// stored plan says what ran.
    #[serde(default)]
    pub parameters: serde_json::Map<String, serde_json::Value>,
    pub target: Target,
    pub scenarios: Vec<Scenario>,
    /// How long in-flight iterations may run on after the stages end or a stop is asked.
    #[serde(default = "default_graceful_stop_s")]
    pub graceful_stop_s: f64,
    /// The control plane's part of the plan: judged, watched and steered in Python from the
    /// snapshots, never read by the engine; kept (as JSON) so that a decoded plan round-trips.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub autostop: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steer: Option<serde_json::Value>,
    /// How a run over several generators is sized (read by the control plane that starts them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generators: Option<serde_json::Value>,
    /// What the control plane watches on the target's side (hosts, exporters, databases) while
    /// the run goes; sampled in Python, never read by the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitors: Option<serde_json::Value>,
}

fn default_plan_name() -> String {
    "plan".to_owned()
}

fn default_graceful_stop_s() -> f64 {
    5.0
}

/// The system under test and how to reach it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub base_url: String,
    #[serde(default, with = "header_map")]
    pub headers: Vec<(String, String)>,
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: f64,
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: f64,
    /// Turns TLS certificate verification off (self-signed test servers).
    #[serde(default)]
    pub insecure: bool,
    /// A PEM file of CA certificates trusted besides the usual roots (a private CA), read when
    /// the run starts.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// Further base URLs of the same target, its other instances (`base_url` is instance 0):
    /// the VU numbered n sends all its requests to instance n mod (1 + `instances.len()`), as a
    /// client-side balancer would. Only host and port may differ from `base_url`.
    #[serde(default)]
    pub instances: Vec<String>,
    /// How VUs reach the target: each over its own connection, or through a pool shared by
    /// the VUs of a generator.
    #[serde(default)]
    pub connections: Connections,
    /// Which HTTP the VUs speak: `"1.1"` (the default), `"2"` (h2c with prior knowledge for
    /// `http://`, and over TLS a server that does not choose h2 in ALPN fails as `h2_refused`) or
    /// `"auto"` (ALPN over TLS offers h2 and http/1.1, the server chooses; `http://` stays 1.1).
    #[serde(default)]
    pub http_version: HttpVersion,
    /// HTTP/2's knobs (`http_version` "2" or "auto"): the receive windows the client advertises
    /// and a cap on its concurrent streams per connection; the engine's defaults when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<Http2Settings>,
    /// Local addresses (IP literals) outgoing connections bind to before connecting, taken in
    /// turn, one per connection: each source address has its own range of ephemeral ports,
    /// so several of them hold more connections to one target than one address can. Empty:
    /// the system chooses.
    #[serde(default)]
    pub source_addresses: Vec<String>,
    /// The largest response head (status line and headers) read: a larger one fails as
    /// `headers_too_large`. Any number of headers fits within it.
    #[serde(default = "default_max_response_header_bytes")]
    pub max_response_header_bytes: u64,
    /// The most of a response body a VU keeps for its step's checks and extractors (a body is
    /// always read to its end and counted; it is kept only when a check or extractor reads
    /// it). A longer body fails such a step as `body_too_large`.
    #[serde(default = "default_max_kept_body_bytes")]
    pub max_kept_body_bytes: u64,
    /// A closed-model VU whose connect failed pauses before its next request: 10 ms, doubling
    /// with each failure in a row up to 1 s, back to none after a connect succeeds. `false`:
    /// it tries again at once.
    #[serde(default = "default_connect_backoff")]
    pub connect_backoff: bool,
    /// Over HTTP/1.1, the most connections a VU uses at once to send a `parallel` group's
    /// requests (its own connection among them; the others it keeps alive for its next group);
    /// requests past them wait for one to be free. Over HTTP/2 a group's requests are streams
    /// of the VU's connection (or the pool's) and this does not apply.
    #[serde(default = "default_parallel_connections")]
    pub parallel_connections: u64,
    /// A `postgresql://` target's password: the name of the environment variable holding it,
    /// or a file whose first line is it (read by the engine when it connects; never in the plan).
    #[serde(default)]
    pub password_env: Option<String>,
    #[serde(default)]
    pub password_file: Option<String>,
    /// A `tcp://` target: how its byte stream is cut into messages (newline-delimited when
    /// left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framing: Option<Framing>,
    /// A `kcp://` target's KCP knobs (`ikcp.c`'s defaults when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kcp: Option<KcpOptions>,
}

fn default_max_response_header_bytes() -> u64 {
    DEFAULT_MAX_RESPONSE_HEADER_BYTES
}

fn default_max_kept_body_bytes() -> u64 {
    DEFAULT_MAX_KEPT_BODY_BYTES
}

fn default_connect_backoff() -> bool {
    true
}

fn default_parallel_connections() -> u64 {
    DEFAULT_PARALLEL_CONNECTIONS
}

/// The largest flow-control window HTTP/2 allows (RFC 9113 6.9.1: 2^31-1 octets).
pub const MAX_H2_WINDOW_BYTES: u64 = (1 << 31) - 1;
/// The connection's window never starts below the RFC's initial 65,535 octets: WINDOW_UPDATE
/// only widens it.
pub const MIN_H2_CONNECTION_WINDOW_BYTES: u64 = 65_535;
/// `target.http2.max_concurrent_streams`' largest value (SETTINGS values are 31-bit in practice).
pub const MAX_H2_CONCURRENT_STREAMS: u64 = (1 << 31) - 1;

/// `target.http2`: what the HTTP/2 client advertises and keeps to, per connection.
/// python/horde/plan/target.py (`Http2Settings`) has the same fields, defaults and bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Http2Settings {
    /// Each stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE), 1 to 2^31-1 bytes.
    #[serde(default = "default_h2_stream_window_bytes")]
    pub stream_window_bytes: u64,
    /// The connection's receive window (raised from 65,535 by a WINDOW_UPDATE), 65,535 to
    /// 2^31-1 bytes.
    #[serde(default = "default_h2_connection_window_bytes")]
    pub connection_window_bytes: u64,
    /// The most streams the client opens at once on one connection (below the server's own
    /// SETTINGS_MAX_CONCURRENT_STREAMS); `None`: the server's limit only.
    #[serde(default)]
    pub max_concurrent_streams: Option<u64>,
}

/// 1 MiB per stream: a response of a few MiB is not held back by WINDOW_UPDATE round trips
/// (the RFC's 64 KiB default would be).
pub const DEFAULT_H2_STREAM_WINDOW_BYTES: u64 = 1 << 20;
/// 16 MiB per connection: enough for many streams at once, bounded per connection.
pub const DEFAULT_H2_CONNECTION_WINDOW_BYTES: u64 = 16 << 20;

fn default_h2_stream_window_bytes() -> u64 {
    DEFAULT_H2_STREAM_WINDOW_BYTES
}

fn default_h2_connection_window_bytes() -> u64 {
    DEFAULT_H2_CONNECTION_WINDOW_BYTES
}

impl Default for Http2Settings {
    fn default() -> Self {
        Self {
            stream_window_bytes: DEFAULT_H2_STREAM_WINDOW_BYTES,
            connection_window_bytes: DEFAULT_H2_CONNECTION_WINDOW_BYTES,
            max_concurrent_streams: None,
        }
    }
}

/// `target.http_version`. On the wire: `"1.1"`, `"2"` or `"auto"`; the numbers `1.1` and `2`
/// are read too, as YAML writes them unquoted (python/horde/plan/target.py reads them alike).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum HttpVersion {
    #[default]
    #[serde(rename = "1.1")]
    Http1,
    #[serde(rename = "2")]
    Http2,
    #[serde(rename = "auto")]
    Auto,
}

impl<'de> Deserialize<'de> for HttpVersion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = HttpVersion;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("'1.1', '2' or 'auto'")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<HttpVersion, E> {
                match text {
                    "1.1" => Ok(HttpVersion::Http1),
                    "2" => Ok(HttpVersion::Http2),
                    "auto" => Ok(HttpVersion::Auto),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(text), &self)),
                }
            }
            fn visit_u64<E: serde::de::Error>(self, number: u64) -> Result<HttpVersion, E> {
                match number {
                    2 => Ok(HttpVersion::Http2),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Unsigned(number), &self)),
                }
            }
            fn visit_i64<E: serde::de::Error>(self, number: i64) -> Result<HttpVersion, E> {
                match number {
                    2 => Ok(HttpVersion::Http2),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Signed(number), &self)),
                }
            }
            fn visit_f64<E: serde::de::Error>(self, number: f64) -> Result<HttpVersion, E> {
                if number == 1.1 {
                    Ok(HttpVersion::Http1)
                } else if number == 2.0 {
                    Ok(HttpVersion::Http2)
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Float(number), &self))
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// How VUs reach the target (`target.connections`).
///
/// On the wire: `"per_vu"` or `{"pool": N}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Connections {
    /// Each VU owns one keep-alive connection for its life, as real clients do.
    #[default]
    PerVu,
    /// N keep-alive connections per generator, split over its workers: a VU borrows an idle
    /// connection to its instance for one exchange and gives it back; when none is idle and
    /// the pool is full it waits its turn (first come, first served), and the wait counts in
    /// the request's latency.
    Pool(u64),
}

impl Connections {
    /// The pool's size, when the VUs share one.
    pub fn pool_size(&self) -> Option<u64> {
        match self {
            Connections::PerVu => None,
            Connections::Pool(size) => Some(*size),
        }
    }
}

fn default_connect_timeout_ms() -> f64 {
    5000.0
}

fn default_request_timeout_ms() -> f64 {
    30000.0
}

/// One behaviour, run by its own VUs under its own workload model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// This scenario's share when one load level is spread over several scenarios.
    #[serde(default = "default_weight")]
    pub weight: f64,
    /// Default headers of this scenario's requests (over the target's, under the step's).
    #[serde(default, with = "header_map")]
    pub headers: Vec<(String, String)>,
    /// Run once per VU, before its first iteration.
    #[serde(default)]
    pub setup: Vec<Step>,
    /// The behaviour: one pass is one iteration.
    pub steps: Vec<Step>,
    /// Run once per VU when it stops (not when cut by the grace period).
    #[serde(default)]
    pub teardown: Vec<Step>,
    /// Start an iteration every `pacing_s` seconds, whatever the responses took.
    #[serde(default)]
    pub pacing_s: Option<f64>,
    #[serde(default)]
    pub feeders: Vec<Feeder>,
    pub workload: Workload,
    /// A `udp://` target: the impaired network the engine puts its datagrams through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
}

fn default_weight() -> f64 {
    1.0
}

/// One HTTP request of a scenario. `path`, header values and `body` are templates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpStep {
    pub name: String,
    pub method: String,
    pub path: String,
    #[serde(default, with = "header_map")]
    pub headers: Vec<(String, String)>,
    #[serde(default)]
    pub body: Option<String>,
    /// A JSON body whose strings are templates; sent with `Content-Type: application/json`.
    #[serde(default)]
    pub json: Option<serde_json::Value>,
    /// The pause after this step, before the next one.
    #[serde(default)]
    pub think_time: Option<ThinkTime>,
    #[serde(default)]
    pub extract: Vec<Extractor>,
    #[serde(default)]
    pub checks: Vec<Check>,
    #[serde(default)]
    pub on_check_failure: OnCheckFailure,
}

/// A pause a VU takes, drawn afresh each time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ThinkTime {
    Constant {
        duration_ms: f64,
    },
    Uniform {
        min_ms: f64,
        max_ms: f64,
    },
    /// Cut at 0.
    Normal {
        mean_ms: f64,
        stddev_ms: f64,
    },
    Exponential {
        mean_ms: f64,
    },
}

/// How load is applied: a number of looping VUs (closed) or a rate of arrivals (open).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Workload {
    Closed {
        #[serde(default)]
        start_vus: u64,
        stages: Vec<ClosedStage>,
    },
    Open {
        #[serde(default)]
        start_rate_per_s: f64,
        stages: Vec<OpenStage>,
        max_vus: u64,
        /// How arrivals are spaced: evenly (`uniform`) or as a Poisson process (`poisson`).
        #[serde(default)]
        arrivals: Arrivals,
    },
}

/// The spacing of an open model's arrivals at a given rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Evenly spaced: arrival k at the instant the rate's integral reaches k.
    #[default]
    Uniform,
    /// A Poisson process of that rate: independent, exponentially distributed gaps, as many
    /// independent clients produce.
    Poisson,
}

/// Move the VU count linearly to `vus` over `duration_s`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClosedStage {
    pub duration_s: f64,
    pub vus: u64,
}

/// Move the arrival rate linearly to `rate_per_s` over `duration_s`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenStage {
    pub duration_s: f64,
    pub rate_per_s: f64,
}

impl Workload {
    /// Total length of the stages, in seconds.
    pub fn duration_s(&self) -> f64 {
        match self {
            Workload::Closed { stages, .. } => stages.iter().map(|s| s.duration_s).sum(),
            Workload::Open { stages, .. } => stages.iter().map(|s| s.duration_s).sum(),
        }
    }

    /// The most VUs this workload can have alive at once.
    pub fn peak_vus(&self) -> u64 {
        match self {
            Workload::Closed { start_vus, stages } => stages.iter().map(|s| s.vus).fold(*start_vus, u64::max),
            Workload::Open { max_vus, .. } => *max_vus,
        }
    }
}

impl Plan {
    /// The longest scenario's stages: when a run without a stop ends (before the grace period).
    pub fn duration_s(&self) -> f64 {
        self.scenarios.iter().map(|s| s.workload.duration_s()).fold(0.0, f64::max)
    }
}

/// Decodes a plan from JSON; the error names the JSON path where decoding failed.
///
/// Headers arrive as JSON objects (`{"accept": "text/plain"}`) and keep their order.
pub fn decode(json: &str) -> Result<Plan, PlanError> {
    let deserializer = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let mut path = validate::pydantic_path(&error.path().to_string());
        let message = error.into_inner().to_string();
        // Inside a tagged enum (a workload, a think time) serde buffers the content and the
        // path stops at the enum; the message still names the unknown key, so complete the path.
        if let Some(key) = unknown_field(&message) {
            if !path.ends_with(key) {
                path = if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") };
            }
        }
        let hint = validate::reference_hint(&path);
        PlanError::new(path, message).with_hint(hint)
    })
}

/// The key named by serde's "unknown field `key`, expected ..." message.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

/// Decodes and validates: the plan, or every problem found.
pub fn decode_and_validate(json: &str) -> Result<Plan, Vec<PlanError>> {
    let plan = decode(json).map_err(|error| vec![error])?;
    let problems = plan.validate();
    if problems.is_empty() {
        Ok(plan)
    } else {
        Err(problems)
    }
}

pub(crate) mod header_map {
    //! Headers are a JSON object on the wire but an ordered list of pairs here: the order is kept
    //! as written (some servers care) and duplicate-free by construction of a JSON object.

    use serde::de::{MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserializer, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(pairs: &[(String, String)], serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(pairs.len()))?;
        for (name, value) in pairs {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<(String, String)>, D::Error> {
        struct PairsVisitor;
        impl<'de> Visitor<'de> for PairsVisitor {
            type Value = Vec<(String, String)>;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("an object of header names to string values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut pairs = Vec::new();
                while let Some((name, value)) = access.next_entry::<String, String>()? {
                    pairs.push((name, value));
                }
                Ok(pairs)
            }
        }
        deserializer.deserialize_map(PairsVisitor)
    }
}

#[cfg(test)]
mod bounds_tests {
    use super::{bounds, Bound};

    #[test]
    fn each_bound_is_named_once_and_is_the_engine_s_own_number() {
        let all = bounds();
        let mut names: Vec<_> = all.iter().map(|(name, _)| *name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        let find = |wanted: &str| all.iter().find(|(name, _)| *name == wanted).map(|(_, bound)| *bound);
        // Known answers, written from the reference docs' numbers, not from the table.
        assert_eq!(find("MAX_VUS"), Some(Bound::Count(10_000_000)));
        assert_eq!(find("MAX_STAGE_DURATION_S"), Some(Bound::Amount(2_592_000.0)));
        assert_eq!(find("MAX_H2_WINDOW_BYTES"), Some(Bound::Count(2_147_483_647)));
        assert_eq!(find("MAX_LOOP_COUNT"), Some(Bound::Count(1_000_000)));
    }
}

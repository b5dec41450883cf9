//! One interval of a run's metrics, as the engine hands it to its caller.
//!
//! Its serialized form (serde) is the snapshot Python reads: the binding converts it as it is,
//! so a field added here reaches Python with no other Rust to write. Keys sent only when they
//! hold something are marked `skip_serializing_if`; `tests/test_snapshot_contract.py` reads
//! those marks and the fields, and compares them with `horde.engine.snapshot`'s TypedDicts.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// What one step did during one interval, merged across workers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSnapshot {
    pub scenario: String,
    pub step: String,
    /// `"request"` or `"group"` (a group's latency is the time of one pass through it).
    pub kind: &'static str,
    pub requests: u64,
    pub ok: u64,
    /// Error kind label (`status_503`, `timeout`...) and count, only kinds that occurred.
    #[serde(serialize_with = "counts_by_kind")]
    pub errors: Vec<(String, u64)>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Rows returned or changed by an `sql` step's statements; 0 for HTTP.
    #[serde(skip_serializing_if = "is_zero")]
    pub rows: u64,
    /// Requests sent over HTTP/1.1 and HTTP/2 (`http_version` "2" or "auto" only; 0 otherwise).
    #[serde(skip_serializing_if = "is_zero")]
    pub http1: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub http2: u64,
    /// Requests over HTTP/2 whose body waited over 100 ms for the server's flow-control window.
    #[serde(skip_serializing_if = "is_zero")]
    pub h2_stalls: u64,
    /// Latency in microseconds, HDR V2 encoded, as users felt it (open-model requests timed
    /// from their intended instant).
    #[serde(serialize_with = "bytes")]
    pub histogram: Vec<u8>,
    /// Latency from each request's actual send (what the target took), HDR V2 encoded; empty
    /// when it equals `histogram` (no request of the interval was timed from an intended instant).
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "bytes")]
    pub from_send_histogram: Vec<u8>,
    /// The first distinct messages of each error kind: (kind label, message, count); bounded
    /// (`horde_metrics::MAX_DETAILS_PER_KIND` per kind), empty while nothing failed.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "error_details")]
    pub error_details: Vec<(String, String, u64)>,
    /// Each check of the step in words, with its passes and failures; empty without checks.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "checks")]
    pub checks: Vec<(String, u64, u64)>,
    /// A message step's messages and datagrams (`tcp://`, `udp://`); all zero for other steps.
    #[serde(skip_serializing_if = "horde_metrics::MessageCounts::is_empty")]
    pub messages: horde_metrics::MessageCounts,
}

/// One interval (normally one second) of the whole run. Field meanings are documented with
/// the snapshot format in ARCHITECTURE.md.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    pub second: u64,
    pub elapsed_s: f64,
    pub interval_s: f64,
    pub timestamp: f64,
    #[serde(rename = "final")]
    pub is_final: bool,
    pub steps: Vec<StepSnapshot>,
    pub active_vus: u64,
    /// The most VUs alive at once during the interval.
    pub peak_vus: u64,
    pub busy_vus: u64,
    pub iterations: u64,
    pub dropped_arrivals: u64,
    pub connections_opened: u64,
    /// Pauses VUs took after a failed connect (`target.connect_backoff`), and their time
    /// summed over VUs, in seconds.
    pub connect_backoffs: u64,
    pub connect_backoff_s: f64,
    /// VUs whose setup failed in the interval (each VU counted once in the run).
    pub setup_failures: u64,
    pub target_vus: u64,
    pub target_rate_per_s: Option<f64>,
    pub cpu_percent: f64,
    pub timer_lateness_p99_ms: f64,
    /// The worst timer lateness of the interval, in ms.
    pub timer_lateness_max_ms: f64,
    /// How long this process's threads waited for a CPU (runnable, not running) during the
    /// interval, summed over threads, in ms: a generator that was not scheduled (a busy or
    /// overcommitted machine) shows here, one that was busy itself shows in `cpu_percent`.
    pub run_delay_ms: f64,
    /// The machine's CPU time taken by its hypervisor during the interval (steal), in percent of
    /// all CPUs; 0 where the system does not report it.
    pub steal_percent: f64,
    /// Exchanges recorded in full during the interval (`EngineOptions::record_exchanges`), in
    /// the order they started; empty when recording is off.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exchanges: Vec<crate::exchange::Exchange>,
}

impl Snapshot {
    pub fn requests(&self) -> u64 {
        self.steps.iter().map(|step| step.requests).sum()
    }

    pub fn ok(&self) -> u64 {
        self.steps.iter().map(|step| step.ok).sum()
    }
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// A histogram's encoding as bytes (Python `bytes`), not as a list of numbers.
fn bytes<S: Serializer>(encoded: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bytes(encoded)
}

/// Error kinds as a mapping, kind to count, in the order they occurred.
fn counts_by_kind<S: Serializer>(counts: &[(String, u64)], serializer: S) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(Some(counts.len()))?;
    for (kind, count) in counts {
        map.serialize_entry(kind, count)?;
    }
    map.end()
}

/// Each error detail as a record: `{kind, message, count}`.
fn error_details<S: Serializer>(details: &[(String, String, u64)], serializer: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Detail<'a> {
        kind: &'a str,
        message: &'a str,
        count: u64,
    }
    serializer.collect_seq(details.iter().map(|(kind, message, count)| Detail { kind, message, count: *count }))
}

/// Each check as a record: `{check, passes, failures}`.
fn checks<S: Serializer>(checks: &[(String, u64, u64)], serializer: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Counted<'a> {
        check: &'a str,
        passes: u64,
        failures: u64,
    }
    serializer.collect_seq(checks.iter().map(|(check, passes, failures)| Counted { check, passes: *passes, failures: *failures }))
}

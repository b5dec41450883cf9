//! One interval of a run's metrics, as the engine hands it to its caller.

/// What one step did during one interval, merged across workers.
#[derive(Debug, Clone, PartialEq)]
pub struct StepSnapshot {
    pub scenario: String,
    pub step: String,
    /// `"request"` or `"group"` (a group's latency is the time of one pass through it).
    pub kind: &'static str,
    pub requests: u64,
    pub ok: u64,
    /// Error kind label (`status_503`, `timeout`...) and count, only kinds that occurred.
    pub errors: Vec<(String, u64)>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Rows returned or changed by an `sql` step's statements; 0 for HTTP.
    pub rows: u64,
    /// Requests sent over HTTP/1.1 and HTTP/2 (`http_version` "2" or "auto" only; 0 otherwise).
    pub http1: u64,
    pub http2: u64,
    /// Requests over HTTP/2 whose body waited over 100 ms for the server's flow-control window.
    pub h2_stalls: u64,
    /// Latency in microseconds, HDR V2 encoded, as users felt it (open-model requests timed
    /// from their intended instant).
    pub histogram: Vec<u8>,
    /// Latency from each request's actual send (what the target took), HDR V2 encoded; empty
    /// when it equals `histogram` (no request of the interval was timed from an intended instant).
    pub from_send_histogram: Vec<u8>,
    /// The first distinct messages of each error kind: (kind label, message, count); bounded
    /// (`horde_metrics::MAX_DETAILS_PER_KIND` per kind), empty while nothing failed.
    pub error_details: Vec<(String, String, u64)>,
    /// Each check of the step in words, with its passes and failures; empty without checks.
    pub checks: Vec<(String, u64, u64)>,
    /// A message step's messages and datagrams (`tcp://`, `udp://`); all zero for other steps.
    pub messages: horde_metrics::MessageCounts,
}

/// One interval (normally one second) of the whole run. Field meanings are documented with
/// the snapshot format in ARCHITECTURE.md.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub second: u64,
    pub elapsed_s: f64,
    pub interval_s: f64,
    pub timestamp: f64,
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

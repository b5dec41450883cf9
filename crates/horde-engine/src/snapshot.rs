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
    /// Latency in microseconds, HDR V2 encoded.
    pub histogram: Vec<u8>,
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
    pub target_vus: u64,
    pub target_rate_per_s: Option<f64>,
    pub cpu_percent: f64,
    pub timer_lateness_p99_ms: f64,
}

impl Snapshot {
    pub fn requests(&self) -> u64 {
        self.steps.iter().map(|step| step.requests).sum()
    }

    pub fn ok(&self) -> u64 {
        self.steps.iter().map(|step| step.ok).sum()
    }
}

//! [`WorkerPart`]: the message a worker thread sends the aggregator thread once an interval.
//!
//! Its own module because both ends use it: `worker.rs` builds parts, `aggregator.rs` merges
//! them, and `run.rs` opens the channel between them. Neither end depends on the other.

use horde_metrics::WorkerRecorder;
use std::time::Duration;

/// One worker's measurements for interval `index` (1-based: the interval ending at `index` s).
pub(crate) struct WorkerPart {
    pub worker: usize,
    pub index: u64,
    pub recorder: WorkerRecorder,
    /// Exchanges the worker recorded during the interval (`crate::exchange`); empty when off.
    pub exchanges: Vec<crate::exchange::Exchange>,
    pub active_vus: u64,
    /// The most VUs the worker had alive at once during the interval.
    pub peak_vus: u64,
    pub busy_vus: u64,
    /// The worker's last part: it sends nothing after this.
    pub is_final: bool,
    /// When the part was taken, since time zero.
    pub elapsed: Duration,
}

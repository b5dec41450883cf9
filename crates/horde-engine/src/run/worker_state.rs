//! [`WorkerState`]: one worker's state, shared by the tasks on its thread (the scenario drivers,
//! the interval reports, and every VU).
//!
//! Its own module because `worker.rs` builds it and drives the VUs, while `vu.rs` reads and
//! records into it: with the state here, the worker depends on the VUs and both depend on
//! this, instead of the two depending on each other.

use crate::run::shared::Shared;
use crate::time::deadline::Deadlines;
use crate::time::pause::Pauses;
use crate::transport::pool::Pool;
use horde_metrics::WorkerRecorder;
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A worker's state, shared by its tasks (all on one thread: `Rc`, `Cell`, no locks).
pub(crate) struct WorkerState {
    pub index: usize,
    /// This worker's place among all workers of all generators, and how many there are
    /// (`GeneratorShare::slot`): VUs and arrivals are dealt by slot.
    pub slot: u64,
    pub slots: u64,
    pub shared: Arc<Shared>,
    pub recorder: RefCell<WorkerRecorder>,
    pub active_vus: Cell<u64>,
    /// The most VUs alive at once since the last interval report.
    pub peak_vus: Cell<u64>,
    pub busy_vus: Cell<u64>,
    /// Set once: no new iterations from now on.
    pub stopping: Cell<bool>,
    /// Wakes VUs out of think times when stopping begins.
    pub stop_notify: Notify,
    /// Wakes the drain when the last VU leaves.
    pub idle_notify: Notify,
    /// This worker's share of the generator's pool; `None` when each VU owns its connection.
    pub pool: Option<Pool>,
    /// The same share over HTTP/2 (`http_version` "2"): connections multiplexed by the VUs;
    /// `pool` is then `None`.
    pub h2_pool: Option<crate::transport::h2_pool::H2Pool>,
    /// This worker's share of a `postgresql://` target's pool (`crate::transport::sql::SqlPool`).
    pub sql_pool: Option<crate::transport::sql::SqlPool>,
    /// Its VUs' think times and pacing waits (`pause.rs`: one tokio timer for all of them).
    pub pauses: Pauses,
    /// Its exchanges' request timeouts (`deadline.rs`: one tokio timer for all of them).
    pub deadlines: Deadlines,
    /// Exchanges recorded since the last part (`crate::exchange`); always empty in a run that
    /// records none.
    pub exchanges: RefCell<Vec<crate::exchange::Exchange>>,
}

impl WorkerState {
    pub fn vu_started(&self) {
        self.active_vus.set(self.active_vus.get() + 1);
        self.peak_vus.set(self.peak_vus.get().max(self.active_vus.get()));
    }

    /// The interval's peak, and a new interval that starts at the current count.
    pub fn take_peak(&self) -> u64 {
        self.peak_vus.replace(self.active_vus.get())
    }

    pub fn vu_ended(&self) {
        self.active_vus.set(self.active_vus.get() - 1);
        if self.active_vus.get() == 0 {
            self.idle_notify.notify_waiters();
        }
    }

    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(self.shared.start)
    }
}

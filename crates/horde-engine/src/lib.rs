//! The engine: drives virtual users against a target and measures what happens.
//!
//! ```text
//!   horde-plan ──┐
//! horde-metrics ─┼──▶ horde-engine ──▶ horde-py (pyo3: the only crate that knows Python)
//!   horde-link ──┘          ▲          (horde-link: the impaired network's draws, and the link)
//!                horde-target (built-in target; a dev-dependency here, for known-answer tests)
//! ```
//!
//! A run ([`start`]) spawns one OS thread per worker, each with its own single-threaded tokio
//! runtime. VUs are dealt round-robin to workers and never move, so each worker records into
//! its own [`horde_metrics::WorkerRecorder`] without locks or atomics on the request path. The
//! open model's arrivals are dealt the same way (arrival k goes to worker k mod N), which keeps
//! the total rate exact. Once a second every worker swaps its recorder out and sends it to the
//! aggregator thread, which merges the parts exactly into one [`Snapshot`] and queues it for the
//! caller ([`RunHandle::next_snapshot`]). The queue is unbounded, so a slow consumer never
//! stalls the engine.
//!
//! Connections: each VU owns a keep-alive connection (`target.connections: per_vu`), or the
//! VUs of a worker share that worker's part of the generator's pool (`{pool: N}`, `pool.rs`):
//! a VU borrows a connection for one exchange, waiting its turn when all are lent. The pool
//! is per worker for the same reason as the recorders: no lock on the request path.
//!
//! Time: a closed VU's request is timed from just before it is sent; an open-model iteration's
//! first request is timed from the arrival's *intended* instant, so a stalled target or a late
//! generator shows in the latency instead of hiding in fewer samples (coordinated omission).
//! A worker's VUs pause (think times, pacing) on one heap under a single tokio timer
//! (`time/pause.rs`), not on a tokio timer each: with 150,000 VUs tokio's wheel stalled the worker for
//! milliseconds every 4.1 s moving tens of thousands of timers at once.
//!
//! Re-targeting: [`RunControl::retarget`] moves a scenario's level (VUs or rate) while the run
//! goes; workers pick the new profile up on their next tick or arrival, and an open-model pacer
//! asleep towards an arrival the new rate has moved is woken (`run/levels.rs`).
//!
//! Re-pacing: [`RunControl::repace`] sets a scenario's pace factor while the run goes; the same
//! VUs go faster or slower, each pause they start from then on (think times, pacing) divided by
//! it (`time/pace_factors.rs`: one atomic load per pause, the plan's pauses untouched at 1.0).
//!
//! Stopping: when the stages end or [`RunHandle::stop`] is called, no new iteration starts, VUs
//! cut their think time, finish the request in flight, and stop; whatever has not finished
//! after the plan's `graceful_stop_s` is dropped unrecorded. The last snapshot is marked final.
//!
//! Layout: modules depend only downward, never in a circle (`tests/test_layout.py` checks it on
//! the source), in four folders and a few files below them. `run` starts the threads: `worker`
//! drives its VUs (`vu`) on a `worker_state`; `aggregator` merges what workers send it
//! (`worker_part`) into snapshots; they share `shared` and the live `levels`. `scenario` holds
//! what a VU does: `interpreter` compiles the step tree into nodes, of which the `sql` and
//! `message` steps are defined by their transports, and `compiled` is the plan prepared once.
//! `transport` is how requests reach the target (`http`, `pool`, `h2_pool`, `sql`, `message`);
//! `time` is when things happen (`workload`, `arrival_timer`, `pause`, `deadline`, `think`,
//! `pace_factors`). Steps hold their templated text in `template` and their extractors and checks
//! in `response_rules`; at the bottom are `snapshot`, `exchange`, `system` and `error`
//! ([`EngineError`], which the crate root re-exports).

mod error;
mod exchange;
mod response_rules;
mod run;
mod scenario;
mod snapshot;
mod system;
mod template;
mod time;
mod transport;

pub use time::workload;
pub use transport::http;

pub use error::EngineError;
pub use exchange::Exchange;
pub use run::shared::GeneratorShare;
pub use run::{start, EngineOptions, Next, RunControl, RunHandle};
pub use snapshot::{MergeError, Snapshot, StepSnapshot};
pub use time::pace_factors::{MAX_PACE_FACTOR, MIN_PACE_FACTOR};

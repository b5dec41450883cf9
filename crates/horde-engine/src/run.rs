//! Starting a run and the handle its caller holds, and the threads of a run below it.
//!
//! The entry point below the crate root: it builds what every thread shares (`shared`), starts
//! the worker threads (`worker`, each driving its VUs, `vu`, on a `worker_state`) and the
//! aggregator thread (`aggregator`), and joins them with a channel of `WorkerPart`s
//! (`worker_part`). The load level each scenario runs at lives in `levels`. Nothing below
//! imports this file's items.

pub(crate) mod aggregator;
pub(crate) mod levels;
pub(crate) mod shared;
pub(crate) mod vu;
pub(crate) mod worker;
pub(crate) mod worker_part;
pub(crate) mod worker_state;

use crate::error::EngineError;
use crate::run::levels::Levels;
use crate::run::shared::{GeneratorShare, Shared};
use crate::run::worker_part::WorkerPart;
use crate::scenario::compiled::CompiledPlan;
use crate::snapshot::Snapshot;
use crate::system;
use crate::time::pace_factors::PaceFactors;
use horde_plan::Plan;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;

/// How the engine runs a plan (not part of the plan: the same plan runs anywhere).
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Worker threads; default: the machine's available parallelism. A plan with a pool of N
    /// connections runs on at most N workers.
    pub workers: usize,
    /// This process's part of a run spread over several generators (scale-out); `None`: the
    /// whole run.
    pub generator: Option<GeneratorShare>,
    /// When time zero falls, on this machine's wall clock: several generators start together at
    /// an instant agreed beforehand. `None`: now (plus the workers' start-up lead).
    pub start_at: Option<SystemTime>,
    /// Record the first N exchanges of each step in full (`Snapshot::exchanges`); 0: none, at no
    /// cost (see `exchange.rs`).
    pub record_exchanges: u32,
    /// Each VU runs one iteration (setup, steps, teardown), after which the run stops: `horde try`
    /// (a plan of one VU).
    pub single_iteration: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            workers: std::thread::available_parallelism().map(usize::from).unwrap_or(1),
            generator: None,
            start_at: None,
            record_exchanges: 0,
            single_iteration: false,
        }
    }
}

impl EngineOptions {
    /// A whole run (one generator, starting now) on `workers` threads.
    pub fn with_workers(workers: usize) -> Self {
        Self { workers, ..Self::default() }
    }
}

/// The result of asking for the next snapshot.
#[derive(Debug)]
pub enum Next {
    Snapshot(Box<Snapshot>),
    /// Nothing arrived within the timeout; the run goes on.
    Pending,
    /// The final snapshot has already been handed out.
    Finished,
}

/// A running plan: take its snapshots as they come, stop it when you like.
pub struct RunHandle {
    shared: Arc<Shared>,
    snapshots: mpsc::Receiver<Snapshot>,
    threads: Vec<JoinHandle<()>>,
    finished: bool,
}

/// Validates the plan, then starts its workers; returns at once.
pub fn start(plan: &Plan, options: EngineOptions) -> Result<RunHandle, EngineError> {
    let problems = plan.validate();
    if !problems.is_empty() {
        return Err(EngineError::InvalidPlan(problems));
    }
    let compiled = CompiledPlan::compile(plan)?;
    system::raise_open_file_limit();
    // A worker without a connection of the pool could never send: a pool smaller than the
    // worker count runs on as many workers as it has connections.
    let workers = match compiled.pool_size {
        Some(size) => options.workers.clamp(1, usize::try_from(size).unwrap_or(usize::MAX).max(1)),
        None => options.workers.max(1),
    };
    let generator = options.generator;
    if let Some(share) = generator {
        // A generator's slots are fixed by the coordinator: each of its workers must run, or
        // the VUs and arrivals of a missing slot would never be sent.
        if workers < options.workers.max(1) {
            return Err(EngineError::Setup(format!(
                "a pool of {workers} connections cannot feed this generator's {} workers; give it at most {workers}",
                options.workers
            )));
        }
        if share.first_slot + workers > share.slots {
            return Err(EngineError::Setup(format!(
                "slots {}..{} (one per worker) do not fit in the run's {} slots",
                share.first_slot,
                share.first_slot + workers,
                share.slots
            )));
        }
    }
    let (stop, _) = watch::channel(false);
    // Time zero is set a little ahead so that every worker is up before the first arrival.
    let lead = Duration::from_millis(20);
    let (now, now_wall) = (Instant::now(), SystemTime::now());
    let (start, start_wall) = match options.start_at {
        // An agreed instant: the same wall-clock time on every generator. One already past (a
        // slow start) starts now; the skew is visible in the snapshots' timestamps.
        Some(at) => match at.duration_since(now_wall) {
            Ok(ahead) => (now + ahead, at),
            Err(_) => (now, now_wall),
        },
        None => (now + lead, now_wall + lead),
    };
    let levels = Levels::new(&compiled);
    let pace_factors = PaceFactors::new(compiled.scenarios.len());
    let recording = crate::exchange::Recording::new(options.record_exchanges, compiled.step_names.len());
    let single_iteration = options.single_iteration;
    let shared = Arc::new(Shared {
        levels,
        pace_factors,
        plan: compiled,
        workers,
        generator,
        start,
        start_wall,
        stop,
        recording,
        single_iteration,
    });
    let (parts_sender, parts) = mpsc::channel::<WorkerPart>();
    let (snapshot_sender, snapshots) = mpsc::channel::<Snapshot>();
    let mut threads = Vec::with_capacity(workers + 1);
    for index in 0..workers {
        let shared = Arc::clone(&shared);
        let parts_sender = parts_sender.clone();
        let thread = std::thread::Builder::new()
            .name(format!("horde-worker-{index}"))
            .spawn(move || worker::run_worker(index, shared, parts_sender))
            .map_err(|error| EngineError::Setup(format!("cannot start worker thread: {error}")))?;
        threads.push(thread);
    }
    drop(parts_sender);
    let aggregator_shared = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name("horde-aggregator".into())
        .spawn(move || aggregator::run_aggregator(aggregator_shared, parts, snapshot_sender))
        .map_err(|error| EngineError::Setup(format!("cannot start aggregator thread: {error}")))?;
    threads.push(thread);
    Ok(RunHandle { shared, snapshots, threads, finished: false })
}

impl RunHandle {
    /// Waits up to `timeout` for the next snapshot.
    pub fn next_snapshot(&mut self, timeout: Duration) -> Next {
        if self.finished {
            return Next::Finished;
        }
        match self.snapshots.recv_timeout(timeout) {
            Ok(snapshot) => {
                if snapshot.is_final {
                    self.finished = true;
                    self.join();
                }
                Next::Snapshot(Box::new(snapshot))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Next::Pending,
            // The aggregator always sends a final snapshot before it ends; if it is gone without
            // one, a thread died: end the run rather than wait forever.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.finished = true;
                Next::Finished
            }
        }
    }

    /// Asks the run to stop: no new iterations; in-flight requests get the grace period.
    pub fn stop(&self) {
        self.shared.stop.send_replace(true);
    }

    /// A handle that stops, re-targets or re-paces this run from any thread, without waiting
    /// for a caller blocked in [`RunHandle::next_snapshot`].
    pub fn control(&self) -> RunControl {
        RunControl { shared: Arc::clone(&self.shared) }
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Seconds from time zero until the stages end (before any grace period).
    pub fn planned_duration(&self) -> Duration {
        self.shared.plan.duration
    }

    fn join(&mut self) {
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Stops, re-targets or re-paces a run; cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct RunControl {
    shared: Arc<Shared>,
}

impl RunControl {
    /// Moves scenario `scenario` (its index in the plan) to `level` from now on: a VU count for
    /// a closed model, arrivals per second for an open one; linearly over `ramp` (at once when
    /// zero), then held until the run's stages end. The past is kept: arrivals already due
    /// keep their instants, and a ramp starts from the level reached now.
    pub fn retarget(&self, scenario: usize, level: f64, ramp: Duration) -> Result<(), EngineError> {
        let at_s = Instant::now().saturating_duration_since(self.shared.start).as_secs_f64();
        self.shared.levels.retarget(scenario, at_s, level, ramp.as_secs_f64())
    }

    /// Sets scenario `scenario`'s pace factor: from now on each pause one of its VUs starts
    /// (think times, the pacing between iteration starts) is the plan's divided by `factor`,
    /// so 2.0 runs twice as fast and 0.5 half as fast, with the same VUs. Pauses already
    /// waiting keep their end (`pace_factors.rs`). Refused unless `factor` is finite and within
    /// [`MIN_PACE_FACTOR`](crate::MIN_PACE_FACTOR)..=[`MAX_PACE_FACTOR`](crate::MAX_PACE_FACTOR).
    pub fn repace(&self, scenario: usize, factor: f64) -> Result<(), EngineError> {
        self.shared.pace_factors.set(scenario, factor)
    }

    /// As [`RunHandle::stop`].
    pub fn stop(&self) {
        self.shared.stop.send_replace(true);
    }
}

impl Drop for RunHandle {
    fn drop(&mut self) {
        if !self.finished {
            self.stop();
        }
    }
}

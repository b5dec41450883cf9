//! What every thread of a run shares ([`Shared`]), and this generator's place in a run spread
//! over several generators ([`GeneratorShare`]).
//!
//! Kept apart from `run.rs`, which builds it, so that the worker and aggregator threads that
//! read it depend on this module rather than on the run's entry point. The crate root
//! re-exports [`GeneratorShare`], which callers set in `EngineOptions`.

use crate::run::levels::Levels;
use crate::scenario::compiled::CompiledPlan;
use crate::time::pace_factors::PaceFactors;
use std::time::{Instant, SystemTime};
use tokio::sync::watch;

/// This generator's place in a run spread over several generators (scale-out). The plan's VUs
/// and arrivals are dealt over the workers of all generators as if they were the workers of one
/// process: there are `slots` slots in all, this generator's workers hold slots `first_slot`,
/// `first_slot + 1`, ..., and VU `i` and arrival `i` belong to slot `i mod slots`. So the
/// generators' shares add up to the plan's level at every instant of a ramp, a generator with
/// more workers carries a proportionally larger share, VU numbers (and with them unique feeder
/// rows) never repeat across generators, and a re-target sent to all of them moves the total
/// exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneratorShare {
    pub first_slot: usize,
    pub slots: usize,
}

impl GeneratorShare {
    /// The slot of worker `worker`, and how many slots there are; alone, the workers are the
    /// slots.
    pub(crate) fn slot(share: Option<GeneratorShare>, worker: usize, workers: usize) -> (usize, usize) {
        match share {
            Some(share) => (share.first_slot + worker, share.slots),
            None => (worker, workers),
        }
    }
}

/// What every thread of a run shares.
pub(crate) struct Shared {
    pub plan: CompiledPlan,
    pub workers: usize,
    pub generator: Option<GeneratorShare>,
    /// The run's time zero; arrivals, stages and intervals are all measured from it.
    pub start: Instant,
    pub start_wall: SystemTime,
    /// Turns true once, when a stop is asked.
    pub stop: watch::Sender<bool>,
    /// Each scenario's live profile (the plan's until re-targeted).
    pub levels: Levels,
    /// Each scenario's pace factor (1.0 until re-paced): its VUs' pauses are divided by it.
    pub pace_factors: PaceFactors,
    /// Exchange recording (`--debug N`, `horde try`); `None`: off, and free.
    pub recording: Option<crate::exchange::Recording>,
    /// `horde try`: each VU runs one iteration (setup, steps, teardown), then the run stops.
    pub single_iteration: bool,
}

//! The load level each scenario runs at: the plan's profile until a caller re-targets it while
//! the run goes (a new VU count or arrival rate, at once or over a ramp).
//!
//! Workers read the live profiles lock-free on their hot paths: each keeps its own `Arc` of a
//! scenario's profile and takes a fresh one only when the change counter moves (a `watch`
//! channel, which also wakes an open-model pacer sleeping towards an arrival the new rate has
//! moved).

use crate::error::EngineError;
use crate::scenario::compiled::{CompiledPlan, CompiledWorkload};
use crate::time::workload::Profile;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

pub(crate) struct Levels {
    profiles: Mutex<Vec<Arc<Profile>>>,
    /// Counts re-targets; workers watch it.
    changed: watch::Sender<u64>,
    /// Which scenarios are open (a rate) rather than closed (a VU count).
    open: Vec<bool>,
    /// When the run's stages end: a re-target holds its level until then.
    until_s: f64,
}

impl Levels {
    pub fn new(plan: &CompiledPlan) -> Self {
        let (profiles, open) = plan
            .scenarios
            .iter()
            .map(|scenario| match &scenario.workload {
                CompiledWorkload::Closed(profile) => (Arc::new(profile.clone()), false),
                CompiledWorkload::Open { profile, .. } => (Arc::new(profile.clone()), true),
            })
            .unzip();
        Self {
            profiles: Mutex::new(profiles),
            changed: watch::channel(0).0,
            open,
            until_s: plan.duration.as_secs_f64(),
        }
    }

    /// The scenario's profile as it is now.
    pub fn profile(&self, scenario: usize) -> Arc<Profile> {
        Arc::clone(&self.profiles.lock().unwrap_or_else(|poisoned| poisoned.into_inner())[scenario])
    }

    pub fn watch(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// From `at_s` on, scenario `scenario` moves to `level` (VUs or arrivals/s) over `ramp_s`.
    pub fn retarget(&self, scenario: usize, at_s: f64, level: f64, ramp_s: f64) -> Result<(), EngineError> {
        let Some(&open) = self.open.get(scenario) else {
            return Err(EngineError::Setup(format!("the plan has no scenario number {scenario}")));
        };
        let limit = if open { horde_plan::MAX_RATE_PER_S } else { horde_plan::MAX_VUS as f64 };
        if !level.is_finite() || level < 0.0 || level > limit {
            let what = if open { "an arrival rate" } else { "a VU count" };
            return Err(EngineError::Setup(format!("{what} must be between 0 and {limit} (got {level})")));
        }
        if !ramp_s.is_finite() || !(0.0..=horde_plan::MAX_STAGE_DURATION_S).contains(&ramp_s) {
            return Err(EngineError::Setup(format!(
                "a ramp must last between 0 and {} s (got {ramp_s})",
                horde_plan::MAX_STAGE_DURATION_S
            )));
        }
        let level = if open { level } else { level.floor() };
        {
            let mut profiles = self.profiles.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let next = profiles[scenario].retargeted(at_s, level, ramp_s, self.until_s);
            profiles[scenario] = Arc::new(next);
        }
        self.changed.send_modify(|count| *count += 1);
        Ok(())
    }

    /// What the workload models ask for at `elapsed_s`: (VUs of closed scenarios, rate of open ones).
    pub fn asked_at(&self, elapsed_s: f64) -> (u64, Option<f64>) {
        let profiles = self.profiles.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut vus = 0;
        let mut rate = None;
        for (profile, &open) in profiles.iter().zip(&self.open) {
            if open {
                *rate.get_or_insert(0.0) += profile.level_at(elapsed_s);
            } else {
                vus += profile.vus_at(elapsed_s);
            }
        }
        (vus, rate)
    }
}

//! How fast each scenario's VUs go: a pace factor per scenario, 1.0 (the plan's pace) until a
//! caller changes it while the run goes ([`crate::RunControl::repace`]). Every pause a VU starts
//! from then on (think times of every kind, the pacing between iteration starts) lasts the
//! plan's pause divided by the factor: 2.0 goes twice as fast, 0.5 half as fast. The VU count
//! stays as it is, and with it the VUs' connections and logins: only how fast each one goes
//! moves, as a game's players sped up by a timer.
//!
//! Why an atomic per scenario rather than a watch channel as `levels.rs` has: a level change
//! must wake the drivers asleep towards it, but a pace change wakes nobody (a pause already
//! waiting keeps its deadline, see [`PaceFactors::scaled`]), so all a VU needs is the factor when
//! it starts a pause. A relaxed load of the f64's bits is a plain load, and the factors' cache
//! line stays shared by the workers until a change writes it, so a run never re-paced pays one
//! load and one comparison per pause, and its pauses are exactly the plan's.

use crate::error::EngineError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The slowest pace a run may be set to: pauses a thousand times the plan's.
pub const MIN_PACE_FACTOR: f64 = 0.001;
/// The fastest pace: pauses a thousandth of the plan's (a 7.5-s pacing becomes 7.5 ms).
pub const MAX_PACE_FACTOR: f64 = 1000.0;

/// Each scenario's pace factor, shared by every thread of a run (`Shared::pace_factors`).
pub(crate) struct PaceFactors {
    /// The factors' f64 bits, by scenario index.
    factors: Vec<AtomicU64>,
}

impl PaceFactors {
    /// Every scenario at the plan's pace (1.0).
    pub fn new(scenarios: usize) -> Self {
        Self { factors: (0..scenarios).map(|_| AtomicU64::new(1.0f64.to_bits())).collect() }
    }

    /// Sets scenario `scenario`'s factor; refuses one that is not finite or lies outside
    /// [`MIN_PACE_FACTOR`]..=[`MAX_PACE_FACTOR`].
    pub fn set(&self, scenario: usize, factor: f64) -> Result<(), EngineError> {
        let Some(slot) = self.factors.get(scenario) else {
            return Err(EngineError::Setup(format!("the plan has no scenario number {scenario}")));
        };
        // NaN fails the range test too: no comparison with it holds.
        if !(MIN_PACE_FACTOR..=MAX_PACE_FACTOR).contains(&factor) {
            return Err(EngineError::Setup(format!(
                "a pace factor must be between {MIN_PACE_FACTOR} and {MAX_PACE_FACTOR} \
                 (2 halves every pause, 0.5 doubles it; got {factor})"
            )));
        }
        slot.store(factor.to_bits(), Ordering::Relaxed);
        Ok(())
    }

    /// Scenario `scenario`'s factor now.
    pub fn factor(&self, scenario: usize) -> f64 {
        f64::from_bits(self.factors[scenario].load(Ordering::Relaxed))
    }

    /// The pause a VU of scenario `scenario` takes for the plan's `pause`, at the pace of now.
    /// Called when the pause starts, and only then: a pause already waiting keeps its deadline
    /// when the factor changes (the worker's pause heap would otherwise have to find and re-file
    /// every one of them), so a change is felt by each VU from its next pause on.
    #[inline]
    pub fn scaled(&self, scenario: usize, pause: Duration) -> Duration {
        let factor = self.factor(scenario);
        // The plan's pace: the pause untouched, not rounded through a division by 1.
        if factor == 1.0 {
            pause
        } else {
            // In range (`set`), and the plan bounds every pause (a day of think time, 30 days
            // of pacing), so the quotient is finite: at most 82 years, well within a Duration
            // and an Instant.
            pause.div_f64(factor)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(milliseconds: u64) -> Duration {
        Duration::from_millis(milliseconds)
    }

    /// Equal to the microsecond: a division in f64 may miss the exact nanosecond.
    fn assert_close(found: Duration, expected: Duration) {
        assert!(gap(found, expected) < Duration::from_micros(1), "{found:?} is not {expected:?}");
    }

    fn gap(one: Duration, other: Duration) -> Duration {
        one.max(other) - one.min(other)
    }

    #[test]
    fn the_plan_pace_leaves_pauses_exact() {
        let factors = PaceFactors::new(2);
        let day = Duration::from_secs(86_400);
        for pause in [Duration::ZERO, Duration::from_nanos(1), ms(200), day] {
            assert_eq!(factors.scaled(0, pause), pause);
            assert_eq!(factors.scaled(1, pause), pause);
        }
        assert_eq!(factors.factor(1), 1.0);
    }

    #[test]
    fn a_factor_divides_the_pauses_of_its_scenario_only() {
        let factors = PaceFactors::new(2);
        factors.set(1, 2.0).unwrap();
        assert_close(factors.scaled(1, ms(200)), ms(100));
        assert_eq!(factors.scaled(0, ms(200)), ms(200));
        factors.set(1, 0.5).unwrap();
        assert_close(factors.scaled(1, ms(200)), ms(400));
        // The bounds themselves are accepted, and back to 1.0 is the plan's pace again.
        factors.set(1, MAX_PACE_FACTOR).unwrap();
        assert_close(factors.scaled(1, Duration::from_secs(7)), ms(7));
        factors.set(1, MIN_PACE_FACTOR).unwrap();
        assert_close(factors.scaled(1, ms(7)), Duration::from_secs(7));
        factors.set(1, 1.0).unwrap();
        assert_eq!(factors.scaled(1, ms(3)), ms(3));
    }

    #[test]
    fn a_factor_divides_a_drawn_think_time() {
        let factors = PaceFactors::new(1);
        let think_time = horde_plan::ThinkTime::Constant { duration_ms: 250.0 };
        let mut random = crate::time::think::VuRandom::new(1);
        let drawn = crate::time::think::draw(&think_time, &mut random);
        assert_eq!(factors.scaled(0, drawn), ms(250));
        factors.set(0, 4.0).unwrap();
        assert_close(factors.scaled(0, drawn), Duration::from_micros(62_500));
    }

    #[test]
    fn the_longest_pause_at_the_slowest_pace_is_a_duration() {
        let factors = PaceFactors::new(1);
        factors.set(0, MIN_PACE_FACTOR).unwrap();
        let longest = Duration::from_secs_f64(horde_plan::MAX_THINK_TIME_MS / 1000.0);
        let scaled = factors.scaled(0, longest);
        assert!(gap(scaled, longest * 1000) < ms(1), "{scaled:?}");
    }

    #[test]
    fn bad_factors_are_refused_and_leave_the_pace_as_it_was() {
        let factors = PaceFactors::new(1);
        factors.set(0, 3.0).unwrap();
        let tiny = MIN_PACE_FACTOR / 2.0;
        let huge = MAX_PACE_FACTOR * 1.001;
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, tiny, huge] {
            let error = factors.set(0, bad).unwrap_err().to_string();
            assert!(error.contains("a pace factor must be between 0.001 and 1000"), "{error}");
            assert_eq!(factors.factor(0), 3.0);
        }
        let error = factors.set(1, 2.0).unwrap_err().to_string();
        assert_eq!(error, "the plan has no scenario number 1");
    }
}

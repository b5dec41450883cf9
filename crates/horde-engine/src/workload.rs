//! Workload arithmetic: how many VUs or what arrival rate the plan asks for at any instant, when
//! the k-th arrival is due, and how work is split exactly between worker threads.
//!
//! Everything here is a pure function of the plan's stages and elapsed seconds, so the same
//! arithmetic serves the workers (which act on it) and the aggregator (which reports what was
//! asked), and is tested without a runtime.

use horde_plan::{ClosedStage, OpenStage};

/// A piecewise-linear profile: `start` at t = 0, then each stage moves linearly to its level.
#[derive(Debug, Clone)]
pub struct Profile {
    start: f64,
    /// (duration_s, level at the end of the stage)
    stages: Vec<(f64, f64)>,
}

impl Profile {
    pub fn closed(start_vus: u64, stages: &[ClosedStage]) -> Self {
        Self { start: start_vus as f64, stages: stages.iter().map(|s| (s.duration_s, s.vus as f64)).collect() }
    }

    pub fn open(start_rate_per_s: f64, stages: &[OpenStage]) -> Self {
        Self { start: start_rate_per_s, stages: stages.iter().map(|s| (s.duration_s, s.rate_per_s)).collect() }
    }

    pub fn duration_s(&self) -> f64 {
        self.stages.iter().map(|(duration, _)| duration).sum()
    }

    /// The level at `elapsed_s`; after the last stage, the last level.
    pub fn level_at(&self, elapsed_s: f64) -> f64 {
        let mut from = self.start;
        let mut stage_start = 0.0;
        for &(duration, to) in &self.stages {
            if elapsed_s < stage_start + duration {
                let progress = ((elapsed_s - stage_start) / duration).clamp(0.0, 1.0);
                return from + (to - from) * progress;
            }
            stage_start += duration;
            from = to;
        }
        from
    }

    /// The VU count at `elapsed_s`: a ramp adds a VU when the line crosses the next integer.
    pub fn vus_at(&self, elapsed_s: f64) -> u64 {
        // A small epsilon so that a hold at exactly N (a float computed as N - 1e-15) is N.
        (self.level_at(elapsed_s) + 1e-9).floor().max(0.0) as u64
    }

    /// The instant the cumulative number of arrivals reaches `count` (the rate profile's
    /// integral inverted), or `None` if it never does before the stages end.
    pub fn time_of_arrival(&self, count: f64) -> Option<f64> {
        let mut from = self.start;
        let mut stage_start = 0.0;
        let mut before = 0.0; // arrivals before this stage
        for &(duration, to) in &self.stages {
            let in_stage = (from + to) / 2.0 * duration;
            if count <= before + in_stage && in_stage > 0.0 {
                let needed = count - before;
                // needed = from*t + (to-from)/(2*duration) * t^2, solved for t in [0, duration].
                let slope = (to - from) / duration;
                let t = if slope.abs() < 1e-12 {
                    needed / from
                } else {
                    let discriminant = (from * from + 2.0 * slope * needed).max(0.0);
                    (discriminant.sqrt() - from) / slope
                };
                return Some(stage_start + t.clamp(0.0, duration));
            }
            before += in_stage;
            stage_start += duration;
            from = to;
        }
        None
    }
}

/// How many of the first `total` items (VUs, `max_vus` slots...) worker `worker` of `workers`
/// owns when items are dealt round-robin: the shares always add up to `total` exactly.
pub fn share(total: u64, worker: usize, workers: usize) -> u64 {
    let (worker, workers) = (worker as u64, workers as u64);
    if total > worker {
        (total - worker).div_ceil(workers)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp_then_hold() -> Profile {
        Profile::closed(0, &[ClosedStage { duration_s: 10.0, vus: 100 }, ClosedStage { duration_s: 5.0, vus: 100 }])
    }

    #[test]
    fn closed_levels() {
        let profile = ramp_then_hold();
        assert_eq!(profile.vus_at(0.0), 0);
        assert_eq!(profile.vus_at(5.0), 50);
        assert_eq!(profile.vus_at(9.999), 99);
        assert_eq!(profile.vus_at(10.0), 100);
        assert_eq!(profile.vus_at(14.0), 100);
        assert_eq!(profile.vus_at(100.0), 100);
        assert_eq!(profile.duration_s(), 15.0);
    }

    #[test]
    fn shares_add_up() {
        for workers in 1..7 {
            for total in 0..50 {
                let sum: u64 = (0..workers).map(|worker| share(total, worker, workers)).sum();
                assert_eq!(sum, total, "total {total} over {workers}");
            }
        }
        assert_eq!(share(5, 0, 2), 3);
        assert_eq!(share(5, 1, 2), 2);
    }

    #[test]
    fn constant_rate_arrivals() {
        let profile = Profile::open(100.0, &[OpenStage { duration_s: 2.0, rate_per_s: 100.0 }]);
        assert_eq!(profile.time_of_arrival(0.0), Some(0.0));
        assert!((profile.time_of_arrival(50.0).unwrap() - 0.5).abs() < 1e-9);
        assert!((profile.time_of_arrival(200.0).unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(profile.time_of_arrival(200.5), None);
    }

    #[test]
    fn ramped_rate_arrivals_follow_the_integral() {
        // 0 -> 100/s over 10 s: N(t) = 5 t^2, so N = 125 at t = 5.
        let profile = Profile::open(0.0, &[OpenStage { duration_s: 10.0, rate_per_s: 100.0 }]);
        assert!((profile.time_of_arrival(125.0).unwrap() - 5.0).abs() < 1e-9);
        assert!((profile.time_of_arrival(500.0).unwrap() - 10.0).abs() < 1e-9);
        // Down-ramps too: 100 -> 0 over 10 s; N(t) = 100 t - 5 t^2, N(5) = 375.
        let down = Profile::open(100.0, &[OpenStage { duration_s: 10.0, rate_per_s: 0.0 }]);
        assert!((down.time_of_arrival(375.0).unwrap() - 5.0).abs() < 1e-9);
    }

    #[test]
    fn zero_rate_stage_is_skipped() {
        let profile = Profile::open(
            0.0,
            &[OpenStage { duration_s: 3.0, rate_per_s: 0.0 }, OpenStage { duration_s: 1.0, rate_per_s: 0.0 }],
        );
        assert_eq!(profile.time_of_arrival(1.0), None);
        let pause_then_go = Profile::open(
            0.0,
            &[OpenStage { duration_s: 2.0, rate_per_s: 0.0 }, OpenStage { duration_s: 1.0, rate_per_s: 0.0 }],
        );
        assert_eq!(pause_then_go.time_of_arrival(0.5), None);
    }
}

//! Workload arithmetic: how many VUs or what arrival rate the plan asks for at any instant, when
//! the k-th arrival is due, and how work is split exactly between worker threads.
//!
//! Everything here is a pure function of the plan's stages and elapsed seconds, so the same
//! arithmetic serves the workers (which act on it) and the aggregator (which reports what was
//! asked), and is tested without a runtime.

use horde_plan::{ClosedStage, OpenStage};

/// A piecewise-linear profile: segments one after the other from t = 0, each moving linearly
/// from its own start level to its end level. The plan's stages are continuous (each starts where
/// the previous ended); a re-target may jump.
#[derive(Debug, Clone)]
pub struct Profile {
    /// (duration_s, level at the start, level at the end)
    segments: Vec<(f64, f64, f64)>,
}

impl Profile {
    pub fn closed(start_vus: u64, stages: &[ClosedStage]) -> Self {
        Self::continuous(start_vus as f64, stages.iter().map(|s| (s.duration_s, s.vus as f64)))
    }

    pub fn open(start_rate_per_s: f64, stages: &[OpenStage]) -> Self {
        Self::continuous(start_rate_per_s, stages.iter().map(|s| (s.duration_s, s.rate_per_s)))
    }

    fn continuous(start: f64, stages: impl Iterator<Item = (f64, f64)>) -> Self {
        let mut from = start;
        let segments = stages
            .map(|(duration, to)| {
                let segment = (duration, from, to);
                from = to;
                segment
            })
            .collect();
        Self { segments }
    }

    pub fn duration_s(&self) -> f64 {
        self.segments.iter().map(|(duration, _, _)| duration).sum()
    }

    /// The level at `elapsed_s`; after the last segment, its end level.
    pub fn level_at(&self, elapsed_s: f64) -> f64 {
        let mut segment_start = 0.0;
        for &(duration, from, to) in &self.segments {
            if elapsed_s < segment_start + duration {
                let progress = ((elapsed_s - segment_start) / duration).clamp(0.0, 1.0);
                return from + (to - from) * progress;
            }
            segment_start += duration;
        }
        self.segments.last().map_or(0.0, |&(_, _, to)| to)
    }

    /// The VU count at `elapsed_s`: a ramp adds a VU when the line crosses the next integer.
    pub fn vus_at(&self, elapsed_s: f64) -> u64 {
        // A small epsilon so that a hold at exactly N (a float computed as N - 1e-15) is N.
        (self.level_at(elapsed_s) + 1e-9).floor().max(0.0) as u64
    }

    /// The instant the cumulative number of arrivals reaches `count` (the rate profile's
    /// integral inverted), or `None` if it never does before the segments end.
    pub fn time_of_arrival(&self, count: f64) -> Option<f64> {
        let mut segment_start = 0.0;
        let mut before = 0.0; // arrivals before this segment
        for &(duration, from, to) in &self.segments {
            let in_segment = (from + to) / 2.0 * duration;
            if count <= before + in_segment && in_segment > 0.0 {
                let needed = count - before;
                // needed = from*t + (to-from)/(2*duration) * t^2, solved for t in [0, duration].
                let slope = (to - from) / duration;
                let t = if slope.abs() < 1e-12 {
                    needed / from
                } else {
                    let discriminant = (from * from + 2.0 * slope * needed).max(0.0);
                    (discriminant.sqrt() - from) / slope
                };
                return Some(segment_start + t.clamp(0.0, duration));
            }
            before += in_segment;
            segment_start += duration;
        }
        None
    }

    /// This profile until `at_s`, then a linear move to `level` over `ramp_s` (a jump when 0),
    /// held until `until_s` (the run's end). Everything before `at_s` is kept exactly, so the
    /// arrivals already due keep their numbers and the cumulative count stays continuous.
    pub fn retargeted(&self, at_s: f64, level: f64, ramp_s: f64, until_s: f64) -> Profile {
        let mut segments = Vec::with_capacity(self.segments.len() + 2);
        let mut segment_start = 0.0;
        for &(duration, from, to) in &self.segments {
            if at_s <= segment_start {
                break;
            }
            if at_s < segment_start + duration {
                segments.push((at_s - segment_start, from, self.level_at(at_s)));
            } else {
                segments.push((duration, from, to));
            }
            segment_start += duration;
        }
        let kept: f64 = segments.iter().map(|(duration, _, _)| duration).sum();
        let current = self.level_at(at_s);
        if at_s > kept {
            segments.push((at_s - kept, current, current));
        }
        if ramp_s > 0.0 {
            segments.push((ramp_s, current, level));
        }
        let hold = until_s - at_s - ramp_s.max(0.0);
        if hold > 0.0 {
            segments.push((hold, level, level));
        }
        Profile { segments }
    }
}

/// How many of the first `total` items (VUs, `max_vus` slots...) worker `worker` of `workers`
/// owns when items are dealt round-robin: the shares always add up to `total` exactly.
pub fn share(total: u64, worker: u64, workers: u64) -> u64 {
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
    fn retargeting_keeps_the_past_and_moves_the_future() {
        // 100/s for 10 s; at t = 4 jump to 300/s, held until 10.
        let profile = Profile::open(100.0, &[OpenStage { duration_s: 10.0, rate_per_s: 100.0 }]);
        let jumped = profile.retargeted(4.0, 300.0, 0.0, 10.0);
        assert!((jumped.time_of_arrival(400.0).unwrap() - 4.0).abs() < 1e-9);
        assert!((jumped.time_of_arrival(700.0).unwrap() - 5.0).abs() < 1e-9);
        assert_eq!(jumped.level_at(3.9), 100.0);
        assert_eq!(jumped.level_at(4.5), 300.0);
        assert!((jumped.duration_s() - 10.0).abs() < 1e-9);
        // A ramp: 100 -> 300 over 2 s from t = 4 (400 arrivals in the ramp), then 300/s.
        let ramped = profile.retargeted(4.0, 300.0, 2.0, 10.0);
        assert!((ramped.level_at(5.0) - 200.0).abs() < 1e-9);
        assert!((ramped.time_of_arrival(800.0).unwrap() - 6.0).abs() < 1e-9);
        // In the middle of a ramp, from the level reached; past the stages, from the last level.
        let ramp = Profile::closed(0, &[ClosedStage { duration_s: 10.0, vus: 100 }]);
        let held = ramp.retargeted(5.0, 20.0, 0.0, 10.0);
        assert_eq!((held.vus_at(4.99), held.vus_at(5.0), held.vus_at(9.0)), (49, 20, 20));
        let late = ramp.retargeted(12.0, 7.0, 0.0, 20.0);
        assert_eq!((late.vus_at(11.0), late.vus_at(13.0)), (100, 7));
        // Retargeted twice: the second keeps the first's past.
        let twice = jumped.retargeted(6.0, 50.0, 0.0, 10.0);
        assert_eq!((twice.level_at(5.0), twice.level_at(7.0)), (300.0, 50.0));
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

//! Think times: the pauses VUs take between steps, drawn from each VU's own random stream.

use horde_plan::ThinkTime;
use std::time::Duration;

/// A VU's random stream: SplitMix64, seeded from the VU number so that runs are reproducible and
/// VUs do not share state (no locking, no cross-thread traffic). The same generator as the
/// impaired network's draws (`horde_link::Random`), written once there.
pub use horde_link::Random as VuRandom;

/// Draws one pause from a think-time distribution.
pub fn draw(think_time: &ThinkTime, random: &mut VuRandom) -> Duration {
    let milliseconds = match *think_time {
        ThinkTime::Constant { duration_ms } => duration_ms,
        ThinkTime::Uniform { min_ms, max_ms } => min_ms + (max_ms - min_ms) * random.next_f64(),
        // Box-Muller; 1 - u is in (0, 1] so the logarithm is finite.
        ThinkTime::Normal { mean_ms, stddev_ms } => {
            let radius = (-2.0 * (1.0 - random.next_f64()).ln()).sqrt();
            mean_ms + stddev_ms * radius * (std::f64::consts::TAU * random.next_f64()).cos()
        }
        // Inverse transform; 1 - u is in (0, 1] so the logarithm is finite.
        ThinkTime::Exponential { mean_ms } => -mean_ms * (1.0 - random.next_f64()).ln(),
    };
    // The plan bounds every think time; the exponential tail is clamped to the same bound.
    Duration::from_secs_f64(milliseconds.clamp(0.0, horde_plan::MAX_THINK_TIME_MS) / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_ms(think_time: ThinkTime) -> f64 {
        let mut random = VuRandom::new(7);
        let total: f64 = (0..100_000).map(|_| draw(&think_time, &mut random).as_secs_f64() * 1000.0).sum();
        total / 100_000.0
    }

    #[test]
    fn distributions_have_their_means() {
        assert!((mean_ms(ThinkTime::Constant { duration_ms: 40.0 }) - 40.0).abs() < 1e-6);
        assert!((mean_ms(ThinkTime::Uniform { min_ms: 10.0, max_ms: 30.0 }) - 20.0).abs() < 0.2);
        assert!((mean_ms(ThinkTime::Exponential { mean_ms: 50.0 }) - 50.0).abs() < 1.0);
        assert!((mean_ms(ThinkTime::Normal { mean_ms: 100.0, stddev_ms: 10.0 }) - 100.0).abs() < 0.5);
    }

    #[test]
    fn normal_has_its_spread_and_is_cut_at_zero() {
        let mut random = VuRandom::new(3);
        let draws: Vec<f64> = (0..100_000)
            .map(|_| draw(&ThinkTime::Normal { mean_ms: 100.0, stddev_ms: 20.0 }, &mut random).as_secs_f64() * 1000.0)
            .collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let variance = draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / draws.len() as f64;
        assert!((variance.sqrt() - 20.0).abs() < 0.5, "stddev {}", variance.sqrt());
        let wide = draw(&ThinkTime::Normal { mean_ms: 0.0, stddev_ms: 1000.0 }, &mut random);
        assert!(wide.as_secs_f64() >= 0.0);
    }

    #[test]
    fn uniform_stays_in_range() {
        let mut random = VuRandom::new(1);
        for _ in 0..10_000 {
            let pause = draw(&ThinkTime::Uniform { min_ms: 5.0, max_ms: 6.0 }, &mut random).as_secs_f64() * 1000.0;
            assert!((5.0..6.0 + 1e-9).contains(&pause), "{pause}");
        }
    }
}

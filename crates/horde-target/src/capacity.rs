//! The capacity model: a virtual M/D/W queue, or M/M/W with exponential service times.
//!
//! A semaphore plus `sleep(service)` would lose throughput to timer granularity: tokio rounds
//! sleeps up to the next millisecond and wakes late under load, and each lost fraction of a
//! millisecond is lost for good, so a 20 ms service would measure closer to 21 ms. Instead each
//! worker is represented by the instant it becomes free, and a request's completion is computed
//! from that instant, not from when the previous request's timer actually fired. A late wake-up
//! then delays one response but never the worker's next start, so a saturated target completes
//! exactly `workers` requests every `service` on average.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::ServiceTimes;

/// `workers` virtual servers, each known only by the instant it is next free.
#[derive(Debug)]
pub(crate) struct CapacityQueue {
    state: Mutex<QueueState>,
    service: Duration,
    times: ServiceTimes,
}

#[derive(Debug)]
struct QueueState {
    free_at: BinaryHeap<Reverse<Instant>>,
    /// SplitMix64 state for exponential service times (reproducible: seeded by the worker count).
    random: u64,
}

impl CapacityQueue {
    /// Fixed service times (the tests' shorthand).
    #[cfg(test)]
    pub(crate) fn new(workers: usize, service: Duration, now: Instant) -> Self {
        Self::with_times(workers, service, ServiceTimes::Fixed, now)
    }

    /// `workers` must be at least 1 (checked by `TargetConfig::check`).
    pub(crate) fn with_times(workers: usize, service: Duration, times: ServiceTimes, now: Instant) -> Self {
        let free_at = (0..workers).map(|_| Reverse(now)).collect();
        CapacityQueue {
            state: Mutex::new(QueueState { free_at, random: 0x9E37_79B9_7F4A_7C15 ^ workers as u64 }),
            service,
            times,
        }
    }

    /// Books the earliest free worker for a request arriving at `arrival` that needs
    /// `service + extra`, and returns when its response is due. Arrivals are served in the order
    /// they call this, which is first come, first served up to lock acquisition.
    pub(crate) fn admit(&self, arrival: Instant, extra: Duration) -> Instant {
        // A poisoned lock only means another request panicked mid-update; the heap is still a
        // valid set of instants.
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let service = match self.times {
            ServiceTimes::Fixed => self.service,
            ServiceTimes::Exponential => self.service.mul_f64(exponential(&mut state.random)),
        };
        let Reverse(free) = state.free_at.pop().expect("capacity has at least one worker");
        let end = arrival.max(free) + service + extra;
        state.free_at.push(Reverse(end));
        end
    }
}

/// A draw from the exponential distribution of mean 1 (inversion of a uniform from SplitMix64).
fn exponential(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // 53 random bits, in (0, 1]: never 0, so the logarithm is finite.
    let uniform = ((z >> 11) + 1) as f64 / (1u64 << 53) as f64;
    -uniform.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn exponential_service_keeps_the_mean_and_the_capacity() {
        let base = Instant::now();
        let queue = CapacityQueue::with_times(4, 10 * MS, ServiceTimes::Exponential, base);
        // 40,000 requests all arriving at once: 4 workers at a mean of 10 ms finish them in
        // about 100 s; the mean service is 10 ms within 2 %, and services vary (M/M/4).
        let ends: Vec<Instant> = (0..40_000).map(|_| queue.admit(base, Duration::ZERO)).collect();
        let last = ends.iter().max().unwrap().duration_since(base).as_secs_f64();
        assert!((last - 100.0).abs() < 2.0, "{last}");
        let mut draws = 0x1234u64;
        let values: Vec<f64> = (0..100_000).map(|_| exponential(&mut draws)).collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let over_three = values.iter().filter(|value| **value > 3.0).count() as f64 / values.len() as f64;
        assert!((mean - 1.0).abs() < 0.01, "{mean}");
        // P(X > 3) = e^-3 ≈ 0.0498 for the exponential.
        assert!((over_three - 0.0498).abs() < 0.003, "{over_three}");
    }

    #[test]
    fn idle_workers_serve_at_arrival() {
        let base = Instant::now();
        let queue = CapacityQueue::new(2, 20 * MS, base);
        assert_eq!(queue.admit(base + 5 * MS, Duration::ZERO), base + 25 * MS);
        assert_eq!(queue.admit(base + 6 * MS, Duration::ZERO), base + 26 * MS);
    }

    #[test]
    fn saturated_queue_completes_workers_per_service_time() {
        let base = Instant::now();
        let queue = CapacityQueue::new(4, 20 * MS, base);
        // 100 requests all arriving at once: 4 finish every 20 ms.
        let ends: Vec<Instant> = (0..100).map(|_| queue.admit(base, Duration::ZERO)).collect();
        for (index, end) in ends.iter().enumerate() {
            let batch = index as u32 / 4 + 1;
            assert_eq!(*end, base + batch * 20 * MS);
        }
    }

    #[test]
    fn late_arrival_does_not_inherit_idle_time() {
        let base = Instant::now();
        let queue = CapacityQueue::new(1, 10 * MS, base);
        assert_eq!(queue.admit(base, Duration::ZERO), base + 10 * MS);
        // The worker idled from 10 ms to 50 ms; that time is not banked.
        assert_eq!(queue.admit(base + 50 * MS, Duration::ZERO), base + 60 * MS);
    }

    #[test]
    fn extra_time_is_served_inside_the_slot() {
        let base = Instant::now();
        let queue = CapacityQueue::new(1, 10 * MS, base);
        assert_eq!(queue.admit(base, 5 * MS), base + 15 * MS);
        assert_eq!(queue.admit(base, Duration::ZERO), base + 25 * MS);
    }
}

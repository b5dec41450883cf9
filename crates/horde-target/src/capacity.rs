//! The capacity model: a virtual M/D/W queue.
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

/// `workers` virtual servers, each known only by the instant it is next free.
#[derive(Debug)]
pub(crate) struct CapacityQueue {
    free_at: Mutex<BinaryHeap<Reverse<Instant>>>,
    service: Duration,
}

impl CapacityQueue {
    /// `workers` must be at least 1 (checked by `TargetConfig::check`).
    pub(crate) fn new(workers: usize, service: Duration, now: Instant) -> Self {
        let free_at = (0..workers).map(|_| Reverse(now)).collect();
        CapacityQueue {
            free_at: Mutex::new(free_at),
            service,
        }
    }

    /// Books the earliest free worker for a request arriving at `arrival` that needs
    /// `service + extra`, and returns when its response is due. Arrivals are served in the order
    /// they call this, which is first come, first served up to lock acquisition.
    pub(crate) fn admit(&self, arrival: Instant, extra: Duration) -> Instant {
        // A poisoned lock only means another request panicked mid-update; the heap is still a
        // valid set of instants.
        let mut free_at = self
            .free_at
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Reverse(free) = free_at.pop().expect("capacity has at least one worker");
        let end = arrival.max(free) + self.service + extra;
        free_at.push(Reverse(end));
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

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
        let ends: Vec<Instant> = (0..100)
            .map(|_| queue.admit(base, Duration::ZERO))
            .collect();
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

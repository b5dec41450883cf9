//! Stall control: freeze the target for a while, as a garbage-collection pause or a lock
//! convoy would.
//!
//! A stall is what coordinated-omission tests need: a closed-model generator stops sending while
//! the target is frozen and so under-reports the pause, whereas an open-model generator must
//! show it in its high percentiles. Only requests that *arrive* during a stall wait; requests
//! already in service finish on time, as they would on a real server whose new work is blocked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The instant the current stall ends, shared by all connections. Stored as nanoseconds since
/// `base` so that it fits an atomic; `0` means "never stalled".
#[derive(Debug)]
pub(crate) struct StallClock {
    base: Instant,
    until_nanos: AtomicU64,
}

impl StallClock {
    pub(crate) fn new(base: Instant) -> Self {
        StallClock { base, until_nanos: AtomicU64::new(0) }
    }

    /// Stalls the target until `now + duration`. A stall that ends later than the current one
    /// extends it; one that ends earlier changes nothing, so overlapping stalls never shorten
    /// each other.
    pub(crate) fn stall(&self, now: Instant, duration: Duration) {
        let until = self.nanos_since_base(now + duration);
        self.until_nanos.fetch_max(until, Ordering::AcqRel);
    }

    /// When the current (or last) stall ends, or `None` if there never was one.
    pub(crate) fn until(&self) -> Option<Instant> {
        match self.until_nanos.load(Ordering::Acquire) {
            0 => None,
            nanos => Some(self.base + Duration::from_nanos(nanos)),
        }
    }

    /// The instant at which a request arriving at `arrival` may start, given stalls known now.
    /// Sleep until it, then ask again: a stall that was extended meanwhile still holds the
    /// request, because the target stayed frozen the whole time.
    pub(crate) fn release_after(&self, arrival: Instant) -> Option<Instant> {
        self.until().filter(|until| *until > arrival)
    }

    fn nanos_since_base(&self, instant: Instant) -> u64 {
        // Saturate instead of wrapping: u64 nanoseconds cover 584 years of uptime.
        let nanos = instant.saturating_duration_since(self.base).as_nanos();
        u64::try_from(nanos).unwrap_or(u64::MAX).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn no_stall_releases_immediately() {
        let base = Instant::now();
        let clock = StallClock::new(base);
        assert_eq!(clock.release_after(base + MS), None);
    }

    #[test]
    fn arrivals_during_a_stall_wait_for_its_end() {
        let base = Instant::now();
        let clock = StallClock::new(base);
        clock.stall(base + 10 * MS, 300 * MS);
        assert_eq!(clock.release_after(base + 20 * MS), Some(base + 310 * MS));
        assert_eq!(clock.release_after(base + 310 * MS), None);
        assert_eq!(clock.release_after(base + 400 * MS), None);
    }

    #[test]
    fn later_stall_extends_and_shorter_one_does_not_shorten() {
        let base = Instant::now();
        let clock = StallClock::new(base);
        clock.stall(base, 100 * MS);
        clock.stall(base + 50 * MS, 200 * MS);
        assert_eq!(clock.until(), Some(base + 250 * MS));
        clock.stall(base + 60 * MS, 10 * MS);
        assert_eq!(clock.until(), Some(base + 250 * MS));
    }
}

//! A rate-limited link, one way: the bottleneck both of Horde's impaired networks use, the
//! engine's own datagrams (`scenario.network.rate_limit`) and the link's IP packets (`horde link
//! --rate-mbit`), so that the same rate means the same thing in both.
//!
//! It is a token bucket one Ethernet frame deep in front of a drop-tail queue: an idle link
//! passes a packet up to [`BURST_BYTES`] at once, a busier one paces every byte at the rate, and
//! a packet that would wait longer than the queue holds is dropped (tail drop). The state is when
//! the last packet let through leaves and the tokens left then, so nothing runs between packets.

use std::time::{Duration, Instant};

/// The bucket's depth: an Ethernet frame.
pub const BURST_BYTES: f64 = 1500.0;

/// One way of a rate-limited link.
#[derive(Debug, Clone)]
pub struct Bottleneck {
    bytes_per_s: f64,
    queue: Duration,
    free_at: Option<Instant>,
    tokens: f64,
}

impl Bottleneck {
    /// `queue`: the longest a packet may wait for the link before it is dropped.
    pub fn new(bytes_per_s: f64, queue: Duration) -> Self {
        Self { bytes_per_s, queue, free_at: None, tokens: BURST_BYTES }
    }

    /// How long a packet of `length` bytes offered at `now` waits before it leaves, or `None`
    /// when that wait would pass the queue's (dropped; the link is as before).
    pub fn admit(&mut self, now: Instant, length: usize) -> Option<Duration> {
        let free_at = self.free_at.unwrap_or(now);
        let start = free_at.max(now);
        let tokens = (self.tokens + (start - free_at).as_secs_f64() * self.bytes_per_s).min(BURST_BYTES);
        let length = length as f64;
        let (leaves, left) = if tokens >= length {
            (start, tokens - length)
        } else {
            (start + Duration::from_secs_f64((length - tokens) / self.bytes_per_s), 0.0)
        };
        let wait = leaves - now;
        if wait > self.queue {
            return None;
        }
        self.free_at = Some(leaves);
        self.tokens = left;
        Some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUEUE: Duration = Duration::from_millis(100);

    #[test]
    fn a_rate_limited_link_carries_its_rate_and_drops_past_its_queue() {
        // 100 kB/s offered 500-byte packets at 500 kB/s (one a millisecond) for 10 s.
        let mut link = Bottleneck::new(100_000.0, QUEUE);
        let start = Instant::now();
        let (mut passed, mut last_leaves, mut longest) = (0u64, Duration::ZERO, Duration::ZERO);
        for millisecond in 0..10_000u64 {
            let now = start + Duration::from_millis(millisecond);
            if let Some(wait) = link.admit(now, 500) {
                passed += 500;
                longest = longest.max(wait);
                last_leaves = Duration::from_millis(millisecond) + wait;
            }
        }
        // The bucket's first 1,500 bytes at once, then exactly the rate until the last leaves.
        let expected = BURST_BYTES + 100_000.0 * last_leaves.as_secs_f64();
        assert!((passed as f64 - expected).abs() <= 500.0, "{passed} bytes passed, expected {expected}");
        assert!(
            (10.0..10.1).contains(&last_leaves.as_secs_f64()),
            "the queue drains its 100 ms after the offer ends: {last_leaves:?}"
        );
        assert!(
            longest <= QUEUE && longest >= QUEUE - Duration::from_millis(5),
            "a full queue waits 100 ms: {longest:?}"
        );
    }

    #[test]
    fn an_idle_rate_limited_link_passes_a_packet_at_once_and_paces_a_burst() {
        let mut link = Bottleneck::new(10_000.0, QUEUE);
        let now = Instant::now();
        assert_eq!(link.admit(now, 1000), Some(Duration::ZERO));
        // 500 tokens left: the next 1,000 bytes wait for 500 more, 50 ms at 10 kB/s.
        assert_eq!(link.admit(now, 1000), Some(Duration::from_millis(50)));
        // Queued behind it: 100 ms more, past the queue's wait: dropped, and the link unchanged.
        assert_eq!(link.admit(now, 1000), None);
        assert_eq!(link.admit(now, 400), Some(Duration::from_millis(90)));
        // A second later the bucket is full again.
        assert_eq!(link.admit(now + Duration::from_secs(1), 1500), Some(Duration::ZERO));
    }

    #[test]
    fn a_longer_queue_holds_more_before_it_drops() {
        let (mut short, mut long) =
            (Bottleneck::new(10_000.0, QUEUE), Bottleneck::new(10_000.0, Duration::from_millis(500)));
        let now = Instant::now();
        let passed = |link: &mut Bottleneck| (0..20).filter(|_| link.admit(now, 1000).is_some()).count();
        // A packet at once, the next 50 ms later (the bucket's 500 bytes left), then one each
        // 100 ms: a 100 ms queue holds none of those, a 500 ms one four.
        assert_eq!(passed(&mut short), 2);
        assert_eq!(passed(&mut long), 6);
    }
}

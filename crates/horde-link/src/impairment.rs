//! The impaired network's draws: what happens to each datagram or packet (lost, delayed,
//! duplicated, held back past later ones), from a random stream seeded by `network.seed` and a
//! number of the caller's (the engine: the VU; the link: the way). Pure: no clock, no IO. The
//! engine's UDP and KCP sockets and the link's relay hold what comes out on their own heaps.

use horde_plan::Network;
use std::time::Duration;

/// A small seeded random stream (splitmix64), as the engine's VUs draw theirs.
#[derive(Debug, Clone)]
pub struct Random(u64);

impl Random {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    pub fn next_u64(&mut self) -> u64 {
        horde_plan::templates::splitmix64(&mut self.0)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The draws of one stream: the same network, seed and stream number give the same impairment.
#[derive(Debug, Clone)]
pub struct Impairment {
    network: Network,
    random: Random,
}

impl Impairment {
    pub fn new(network: Network, stream: u64) -> Self {
        Self { network, random: Random::new(network.seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F)) }
    }

    pub fn network(&self) -> &Network {
        &self.network
    }

    /// Nothing to draw: every datagram goes through at once.
    pub fn is_transparent(&self) -> bool {
        let Network { delay_ms, jitter_ms, loss_percent, duplicate_percent, reorder_percent, .. } = self.network;
        [delay_ms, jitter_ms, loss_percent, duplicate_percent, reorder_percent].iter().all(|value| *value <= 0.0)
    }

    fn happens(&mut self, percent: f64) -> bool {
        percent > 0.0 && self.random.next_f64() * 100.0 < percent
    }

    /// The delays after which copies of one datagram arrive: none (lost), one, or two
    /// (duplicated), each drawn on its own.
    pub fn delays(&mut self) -> Vec<Duration> {
        if self.happens(self.network.loss_percent) {
            return Vec::new();
        }
        let copies = if self.happens(self.network.duplicate_percent) { 2 } else { 1 };
        (0..copies)
            .map(|_| {
                let Network { delay_ms, jitter_ms, reorder_percent, .. } = self.network;
                let jitter = if jitter_ms > 0.0 { jitter_ms * (2.0 * self.random.next_f64() - 1.0) } else { 0.0 };
                let mut milliseconds = (delay_ms + jitter).max(0.0);
                if self.happens(reorder_percent) {
                    milliseconds += (delay_ms + jitter_ms).max(1.0);
                }
                Duration::from_secs_f64(milliseconds / 1000.0)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network(loss_percent: f64, duplicate_percent: f64) -> Network {
        Network {
            delay_ms: 20.0,
            jitter_ms: 5.0,
            loss_percent,
            duplicate_percent,
            reorder_percent: 0.0,
            rate_limit: None,
            seed: 7,
        }
    }

    #[test]
    fn draws_are_repeatable_and_near_their_shares() {
        let draws = |stream| {
            let mut impairment = Impairment::new(network(10.0, 5.0), stream);
            (0..20_000).map(|_| impairment.delays()).collect::<Vec<_>>()
        };
        let first = draws(3);
        assert_eq!(first, draws(3), "same seed, same impairment");
        assert_ne!(first, draws(4), "each stream its own draws");
        let lost = first.iter().filter(|copies| copies.is_empty()).count();
        let duplicated = first.iter().filter(|copies| copies.len() == 2).count();
        // 10 % of 20,000: sd = sqrt(20000 * 0.1 * 0.9) ≈ 42; 5 sd either way.
        assert!((2000 - 212..=2000 + 212).contains(&lost), "lost {lost}");
        // 5 % of the 90 % kept ≈ 900, sd ≈ 30.
        assert!((900 - 150..=900 + 150).contains(&duplicated), "duplicated {duplicated}");
        for delay in first.iter().flatten() {
            assert!((Duration::from_millis(15)..=Duration::from_millis(25)).contains(delay), "{delay:?}");
        }
    }

    #[test]
    fn reordered_datagrams_are_held_one_more_delay() {
        let mut impairment = Impairment::new(Network { reorder_percent: 100.0, ..network(0.0, 0.0) }, 1);
        for delay in impairment.delays() {
            assert!(delay >= Duration::from_millis(15 + 25), "{delay:?}");
        }
    }

    #[test]
    fn no_impairment_is_transparent() {
        let none = Network {
            delay_ms: 0.0,
            jitter_ms: 0.0,
            loss_percent: 0.0,
            duplicate_percent: 0.0,
            reorder_percent: 0.0,
            rate_limit: None,
            seed: 1,
        };
        let mut impairment = Impairment::new(none, 0);
        assert!(impairment.is_transparent());
        assert_eq!(impairment.delays(), vec![Duration::ZERO]);
        assert!(!Impairment::new(network(1.0, 0.0), 0).is_transparent());
    }
}

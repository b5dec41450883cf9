//! A resource that every target of one process shares, with a known cost: the device that lets
//! a scalability study over built-in instances have a known answer.
//!
//! Each instance configured with [`SharedCosts`] `{ serial_ms: s, crosstalk_ms: c }` joins one
//! process-wide resource. An instance is *active* while it has a request in service; `n` is the
//! number of active instances (its own included) when a request is admitted. The request then
//! holds the resource for `s + c·(n−1)` ms: a serial section of `s`, during which it exchanges
//! `c` ms of work with each other active instance (keeping their copies coherent). And it queues
//! for the resource behind one hold of each other active instance: the convoy a lock forms when
//! every instance's requests reach it together, the synchronous queueing that the Universal
//! Scalability Law is derived from. So the request is charged
//!
//! ```text
//! charge(n) = n · (s + c·(n−1))      ms, served inside its worker's slot
//! ```
//!
//! The charge is computed rather than waited for at a real mutex: a real lock, reached at
//! staggered instants by a closed load with fixed service times, settles into a schedule with no
//! convoy at all up to the lock's own limit (`1000 / s` req/s) and then a cliff, a knee that no
//! smooth model fits. Computing the convoy's wait keeps the cost exact, whatever the timer.
//!
//! # What a saturating closed load measures
//!
//! With the capacity model (`W` workers of `S` ms) and every instance saturated (more requests
//! in flight than workers), each worker of each of the `n` instances completes one request per
//! `S + charge(n)` ms. Since `n·s = s + s·(n−1)` and `n·c·(n−1) = c·n(n−1)`:
//!
//! ```text
//! X(n) = n·W / (S + s + s·(n−1) + c·n(n−1))
//!      = λ·n / (1 + σ·(n−1) + κ·n(n−1)),   λ = W / (S + s),  σ = s / (S + s),  κ = c / (S + s)
//! ```
//!
//! the Universal Scalability Law, with the throughput peaking at `n* = sqrt((1 − σ) / κ)`.
//! For example `W = 4, S = 9.5, s = 0.5, c = 0.05` (ms) gives λ = 400 req/s per instance,
//! σ = 0.05 and κ = 0.005: 2,210 req/s at 12 instances, a peak near 14.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The costs of the resource the targets of one process share (see the `shared` module's
/// derivation of the σ and κ they imply).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SharedCosts {
    /// How long each request holds the shared resource alone, ms; finite, at least 0.
    pub serial_ms: f64,
    /// The extra hold per other active instance, ms; finite, at least 0.
    pub crosstalk_ms: f64,
}

/// The process-wide count of active instances.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    active: AtomicUsize,
}

/// The one resource every target of this process with [`SharedCosts`] shares.
pub(crate) static PROCESS: Registry = Registry { active: AtomicUsize::new(0) };

/// One instance's membership of a [`Registry`].
#[derive(Debug)]
pub(crate) struct Member {
    registry: &'static Registry,
    costs: SharedCosts,
    in_flight: AtomicUsize,
}

/// A request in service at a member; the member stays active until its last one is dropped.
#[derive(Debug)]
pub(crate) struct InService<'a> {
    member: &'a Member,
    /// What the request is charged for the resource.
    pub(crate) charge: Duration,
}

impl Member {
    pub(crate) fn new(registry: &'static Registry, costs: SharedCosts) -> Self {
        Member { registry, costs, in_flight: AtomicUsize::new(0) }
    }

    /// Admits one request: the member becomes active if it was not, and the request is charged
    /// `n·(s + c·(n−1))` for the `n` instances active now.
    pub(crate) fn enter(&self) -> InService<'_> {
        if self.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            self.registry.active.fetch_add(1, Ordering::AcqRel);
        }
        let active = self.registry.active.load(Ordering::Acquire).max(1);
        InService { member: self, charge: Duration::from_secs_f64(charge_ms(self.costs, active) / 1000.0) }
    }
}

impl Drop for InService<'_> {
    fn drop(&mut self) {
        if self.member.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.member.registry.active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// `n · (s + c·(n−1))` ms: the request's own hold and one hold of each other active instance.
pub(crate) fn charge_ms(costs: SharedCosts, active: usize) -> f64 {
    let others = active.saturating_sub(1) as f64;
    active as f64 * (costs.serial_ms + costs.crosstalk_ms * others)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COSTS: SharedCosts = SharedCosts { serial_ms: 0.5, crosstalk_ms: 0.05 };

    fn registry() -> &'static Registry {
        // Each test its own resource: the process's one is shared by concurrent tests.
        Box::leak(Box::default())
    }

    #[test]
    fn the_charge_makes_the_universal_scalability_law() {
        // W = 4, S = 9.5 ms: λ = 4 / 10 ms = 400/s, σ = 0.05, κ = 0.005 (the module's example).
        for n in 1..=16usize {
            let slot_ms = 9.5 + charge_ms(COSTS, n);
            let measured = n as f64 * 4.0 * 1000.0 / slot_ms;
            let k = n as f64;
            let law = 400.0 * k / (1.0 + 0.05 * (k - 1.0) + 0.005 * k * (k - 1.0));
            assert!((measured - law).abs() < 1e-9 * law, "{n}: {measured} {law}");
        }
        assert!((400.0_f64 * 12.0 / (1.0 + 0.55 + 0.66) - 2171.9).abs() < 0.1);
    }

    #[test]
    fn active_counts_instances_with_a_request_in_service() {
        let registry = registry();
        let (one, two) = (Member::new(registry, COSTS), Member::new(registry, COSTS));
        let first = one.enter();
        assert_eq!(first.charge, Duration::from_secs_f64(0.0005));
        // A second request at the same instance leaves it one active instance.
        let again = one.enter();
        assert_eq!(again.charge, Duration::from_secs_f64(0.0005));
        // Another instance's: two active, each holding 0.55 ms, twice.
        let other = two.enter();
        assert_eq!(other.charge, Duration::from_secs_f64(0.0011));
        drop((first, again));
        assert_eq!(registry.active.load(Ordering::Acquire), 1);
        assert_eq!(two.enter().charge, Duration::from_secs_f64(0.0005));
        drop(other);
        assert_eq!(registry.active.load(Ordering::Acquire), 0);
    }
}

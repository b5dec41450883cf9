//! The open model's pacer waits for each arrival on one of two timers that leapfrog a
//! millisecond apart, so that the timer of its next wait is registered before the current one
//! fires.
//!
//! Why: tokio's timer wheel counts in whole milliseconds and keeps, from its last turn, the tick
//! it will next wake at. A timer registered for an earlier tick than that wakes the driver (an
//! eventfd write, then an `epoll_wait` that returns at once) even from the driver's own thread.
//! With one timer, that happened at every tick the pacer waited on: its timer fired, the wheel's
//! next tick became some later timer's (the lateness probe's, a request's deadline), and the
//! pacer's next wait was earlier. At 5,000 arrivals/s perf counted 0.18 eventfd writes per
//! request on the worker, one per millisecond, each followed by a wasted `epoll_wait`.
//!
//! Here the spare timer always sits one millisecond after the wait being armed. When the wait
//! fires, the wheel's next tick is the spare's, and the next wait is either on that same tick
//! (the spare becomes the wait: nothing is registered) or later (registering it wakes nothing).

use std::pin::Pin;
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// The wheel's resolution: a deadline fires at the first whole millisecond at or after it.
const TICK: Duration = Duration::from_millis(1);

pub(crate) struct ArrivalTimer {
    /// The wait armed last: the one to await.
    waiting: Pin<Box<Sleep>>,
    /// One tick after `waiting`'s deadline: the next wait when its arrival falls on that tick.
    spare: Pin<Box<Sleep>>,
}

impl ArrivalTimer {
    /// Two timers, armed for `first` and one tick after it (`first` is the first arrival's
    /// instant, or any instant near the run's start).
    pub fn new(first: Instant) -> Self {
        Self {
            waiting: Box::pin(tokio::time::sleep_until(first)),
            spare: Box::pin(tokio::time::sleep_until(first + TICK)),
        }
    }

    /// Arms the wait for an arrival due at `due` (later than now); await `wait()` for it.
    ///
    /// The spare takes the wait when the last wait has fired (so now is at or past its tick)
    /// and `due` is no later than the spare's deadline: `due` then falls on the spare's tick,
    /// the one right after the last wait's, and the spare fires exactly when a timer of its own
    /// would.
    pub fn arm(&mut self, due: Instant) {
        if self.waiting.is_elapsed() && due <= self.spare.deadline() {
            std::mem::swap(&mut self.waiting, &mut self.spare);
        } else if self.waiting.deadline() != due {
            self.waiting.as_mut().reset(due);
        }
        let after = self.waiting.deadline() + TICK;
        if self.spare.deadline() != after {
            self.spare.as_mut().reset(after);
        }
    }

    /// The armed wait.
    pub fn wait(&mut self) -> Pin<&mut Sleep> {
        self.waiting.as_mut()
    }

    #[cfg(test)]
    fn deadlines(&self) -> (Instant, Instant) {
        (self.waiting.deadline(), self.spare.deadline())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap()
    }

    #[test]
    fn an_arrival_on_the_spares_tick_waits_on_the_spare() {
        runtime().block_on(async {
            let start = Instant::now();
            let at = |us: u64| start + Duration::from_micros(us);
            let mut timer = ArrivalTimer::new(at(1_000));
            timer.arm(at(1_000));
            assert_eq!(timer.deadlines(), (at(1_000), at(2_000)));
            timer.wait().await;
            // Fired: the next arrival is within the spare's millisecond, so the spare (already
            // registered) is the wait, and the other timer goes one tick after it.
            timer.arm(at(1_700));
            assert_eq!(timer.deadlines(), (at(2_000), at(3_000)));
            timer.wait().await;
            assert!(Instant::now() >= at(1_700));
            // An arrival further off than the spare: the wait is set to it.
            timer.arm(at(7_300));
            assert_eq!(timer.deadlines(), (at(7_300), at(8_300)));
            timer.wait().await;
            assert!(Instant::now() >= at(7_300));
        });
    }

    #[test]
    fn a_wait_that_has_not_fired_is_moved_not_swapped() {
        runtime().block_on(async {
            let start = Instant::now();
            let at = |us: u64| start + Duration::from_micros(us);
            let mut timer = ArrivalTimer::new(at(5_000));
            timer.arm(at(5_000));
            // Re-armed before it fired (a re-target moved the arrival): an arrival before the
            // spare's deadline must not take the spare, which fires a tick later than it should.
            timer.arm(at(5_500));
            assert_eq!(timer.deadlines(), (at(5_500), at(6_500)));
            timer.arm(at(800));
            assert_eq!(timer.deadlines(), (at(800), at(1_800)));
            timer.wait().await;
            assert!(Instant::now() >= at(800) && Instant::now() < at(5_000));
        });
    }

    #[test]
    fn waits_end_no_earlier_than_their_arrivals_and_within_a_tick_of_them() {
        runtime().block_on(async {
            let start = Instant::now();
            let mut timer = ArrivalTimer::new(start);
            // 5,000 arrivals/s for 40 ms, waiting only for those still ahead (as the pacer does).
            for k in 1..200u64 {
                let due = start + Duration::from_micros(200 * k);
                if due <= Instant::now() {
                    continue;
                }
                timer.arm(due);
                timer.wait().await;
                let now = Instant::now();
                assert!(
                    now >= due && now < due + TICK + Duration::from_micros(1),
                    "arrival {k}: woke {:?} after it",
                    now - due
                );
            }
        });
    }
}

//! A worker's pauses: its VUs' think times and pacing waits. A pause waits in one binary heap
//! under a single tokio timer (the earliest deadline) until [`HANDOVER`] before its end, and
//! only then takes a tokio timer of its own for the last stretch.
//!
//! Why: tokio's timer wheel files a timer by how far its deadline lies from now, in levels of
//! 64 slots (1 ms, 64 ms, 4.096 s, ...). A timer due after the next 4.096-s boundary goes in
//! the third level, and when one of that level's slots comes due the wheel moves every timer in
//! it down a level in one go. 150,000 players pacing 7.5 s put ~82,000 timers in such a slot,
//! and their worker stalled 7 to 15 ms every 4.1 s doing it (the timer-lateness spikes in
//! `bench/NOTES.md`, "Pauses"). In the heap each pause costs O(log n) when filed and when due,
//! spread evenly over time, and nothing is moved in bulk; the wheel only ever holds the last
//! [`HANDOVER`] of each pause (about 1,000 timers at 20,000 pauses a second).
//!
//! Why the last stretch on tokio's timer: the VU is then woken by tokio's time driver, in the
//! same queue and order as the responses its worker is waiting for. Woken by the heap's driver
//! (a task inside the worker's `LocalSet`), it would go to the `LocalSet`'s own queue, which is
//! served before the driver's, and every batch of VUs starting an iteration would delay the
//! responses already in (by about 0.25 ms at the median, measured).
//!
//! One worker, one thread: `RefCell`, no locks. A pause dropped before it is due (a stop cut
//! it) leaves its heap entry behind; the entry names its slot's generation, so it is skipped
//! when it comes up, and the slot is reused at once.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// How long before its end a pause leaves the heap for a tokio timer.
const HANDOVER: Duration = Duration::from_millis(50);

/// The pending pauses of one worker, and the wake-up of the one task that drives them
/// ([`Pauses::drive`]).
#[derive(Default)]
pub(crate) struct Pauses {
    inner: RefCell<Inner>,
}

#[derive(Default)]
struct Inner {
    /// (deadline, slot, the slot's generation when filed), the earliest on top.
    due: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    /// One per pause alive; a slot is reused once its pause has ended or been dropped.
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// The driving task's waker, and the deadline its timer is set to.
    driver: Option<Waker>,
    armed: Option<Instant>,
    /// The wakers of one batch of due pauses, woken once the heap is no longer borrowed (kept to
    /// reuse its allocation).
    batch: Vec<Waker>,
}

#[derive(Default)]
struct Slot {
    generation: u32,
    waker: Option<Waker>,
    fired: bool,
}

impl Inner {
    fn file(&mut self, deadline: Instant, waker: &Waker) -> u32 {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        };
        let entry = &mut self.slots[slot as usize];
        entry.waker = Some(waker.clone());
        entry.fired = false;
        self.due.push(Reverse((deadline, slot, entry.generation)));
        slot
    }

    fn release(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        // Whatever heap entry still names this slot is from an older pause from now on.
        entry.generation = entry.generation.wrapping_add(1);
        entry.waker = None;
        entry.fired = false;
        self.free.push(slot);
    }

    /// Marks every pause due by `now` as fired and moves its waker to `batch`.
    fn fire_due(&mut self, now: Instant) {
        while let Some(&Reverse((deadline, slot, generation))) = self.due.peek() {
            if deadline > now {
                break;
            }
            self.due.pop();
            let entry = &mut self.slots[slot as usize];
            if entry.generation == generation && !entry.fired {
                entry.fired = true;
                if let Some(waker) = entry.waker.take() {
                    self.batch.push(waker);
                }
            }
        }
    }
}

impl Pauses {
    /// Pauses until `deadline` (at once if it has passed). A long pause only ends while
    /// [`Pauses::drive`] runs on the same thread.
    pub async fn until(&self, deadline: Instant) {
        if let Some(handover) = deadline.checked_sub(HANDOVER) {
            if handover > Instant::now() {
                self.heap_until(handover).await;
            }
        }
        tokio::time::sleep_until(deadline).await;
    }

    /// Waits in the heap until `deadline`.
    fn heap_until(&self, deadline: Instant) -> Pause<'_> {
        Pause { pauses: self, deadline, slot: None }
    }

    /// Pauses filed and not yet ended or dropped.
    #[cfg(test)]
    fn pending(&self) -> usize {
        let inner = self.inner.borrow();
        inner.slots.len() - inner.free.len()
    }

    /// Wakes each pause when it is due, for ever: a worker spawns this once, beside its VUs.
    pub async fn drive(&self) {
        let timer = tokio::time::sleep_until(Instant::now());
        tokio::pin!(timer);
        std::future::poll_fn(|cx| self.poll_drive(cx, timer.as_mut())).await
    }

    fn poll_drive(&self, cx: &mut Context<'_>, mut timer: Pin<&mut Sleep>) -> Poll<()> {
        loop {
            let mut inner = self.inner.borrow_mut();
            if !inner.driver.as_ref().is_some_and(|driver| driver.will_wake(cx.waker())) {
                inner.driver = Some(cx.waker().clone());
            }
            inner.fire_due(Instant::now());
            let next = inner.due.peek().map(|Reverse((deadline, _, _))| *deadline);
            inner.armed = next;
            let mut batch = std::mem::take(&mut inner.batch);
            drop(inner);
            // Woken with the heap free: a waker may run code that files a pause.
            for waker in batch.drain(..) {
                waker.wake();
            }
            self.inner.borrow_mut().batch = batch;
            let Some(deadline) = next else { return Poll::Pending };
            if timer.deadline() != deadline {
                timer.as_mut().reset(deadline);
            }
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // The timer is already due: fire again.
        }
    }
}

/// One VU's wait in the heap, from [`Pauses::heap_until`].
struct Pause<'a> {
    pauses: &'a Pauses,
    deadline: Instant,
    slot: Option<u32>,
}

impl Future for Pause<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let mut inner = this.pauses.inner.borrow_mut();
        match this.slot {
            Some(slot) => {
                let entry = &mut inner.slots[slot as usize];
                if entry.fired {
                    inner.release(slot);
                    this.slot = None;
                    return Poll::Ready(());
                }
                if !entry.waker.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
                    entry.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            None => {
                if this.deadline <= Instant::now() {
                    return Poll::Ready(());
                }
                this.slot = Some(inner.file(this.deadline, cx.waker()));
                let sooner = match inner.armed {
                    Some(armed) => this.deadline < armed,
                    None => true,
                };
                if sooner {
                    // The driver's timer is set later than this pause (or not at all).
                    let driver = inner.driver.clone();
                    drop(inner);
                    if let Some(driver) = driver {
                        driver.wake();
                    }
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Pause<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.pauses.inner.borrow_mut().release(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;
    use std::time::Duration;

    fn on_local<F: Future<Output = ()>>(test: impl FnOnce(Rc<Pauses>) -> F) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async move {
            let pauses = Rc::new(Pauses::default());
            let driver = Rc::clone(&pauses);
            tokio::task::spawn_local(async move { driver.drive().await });
            test(pauses).await;
        });
    }

    #[test]
    fn pauses_end_in_deadline_order_and_not_before() {
        on_local(|pauses| async move {
            let start = Instant::now();
            let ended = Rc::new(RefCell::new(Vec::new()));
            let mut tasks = Vec::new();
            // Filed out of order, one filed after the driver's timer is set to a later one; the
            // longer ones wait in the heap first, the shortest only on tokio's timer.
            for ms in [300u64, 100, 200, 20, 5_000, 200] {
                let (pauses, ended) = (Rc::clone(&pauses), Rc::clone(&ended));
                tasks.push(tokio::task::spawn_local(async move {
                    pauses.until(start + Duration::from_millis(ms)).await;
                    ended.borrow_mut().push((ms, start.elapsed()));
                }));
                tokio::task::yield_now().await;
            }
            for task in tasks {
                task.await.unwrap();
            }
            let ended = ended.borrow();
            assert_eq!(ended.iter().map(|(ms, _)| *ms).collect::<Vec<_>>(), vec![20, 100, 200, 200, 300, 5_000]);
            for (ms, elapsed) in ended.iter() {
                assert!(*elapsed >= Duration::from_millis(*ms), "{ms} ms pause ended after {elapsed:?}");
                assert!(*elapsed <= Duration::from_millis(ms + 2), "{ms} ms pause ended late, after {elapsed:?}");
            }
            assert_eq!(pauses.pending(), 0);
        });
    }

    #[test]
    fn a_sooner_pause_wakes_the_driver_asleep_towards_a_later_one() {
        on_local(|pauses| async move {
            let start = Instant::now();
            let long = {
                let pauses = Rc::clone(&pauses);
                tokio::task::spawn_local(async move { pauses.heap_until(start + Duration::from_secs(60)).await })
            };
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
            pauses.heap_until(Instant::now() + Duration::from_millis(5)).await;
            let elapsed = start.elapsed();
            assert!(elapsed >= Duration::from_millis(15) && elapsed <= Duration::from_millis(17), "{elapsed:?}");
            assert!(!long.is_finished());
            long.abort();
        });
    }

    #[test]
    fn a_dropped_pause_frees_its_slot_and_wakes_nobody() {
        on_local(|pauses| async move {
            let start = Instant::now();
            let woken = Rc::new(Cell::new(false));
            {
                let woken = Rc::clone(&woken);
                let cut = tokio::select! {
                    _ = pauses.heap_until(start + Duration::from_millis(100)) => { woken.set(true); false }
                    _ = tokio::time::sleep(Duration::from_millis(20)) => true,
                };
                assert!(cut);
            }
            assert_eq!(pauses.pending(), 0);
            // The slot is reused at once; the old entry (due at 100 ms) must not end the new pause.
            let reused = pauses.heap_until(start + Duration::from_millis(150));
            reused.await;
            assert!(start.elapsed() >= Duration::from_millis(150));
            assert!(!woken.get());
            assert_eq!(pauses.pending(), 0);
        });
    }

    #[test]
    fn a_pause_already_due_ends_at_once_without_a_slot() {
        on_local(|pauses| async move {
            pauses.until(Instant::now()).await;
            assert_eq!(pauses.pending(), 0);
        });
    }

    #[test]
    fn many_pauses_due_together_all_end() {
        on_local(|pauses| async move {
            let start = Instant::now();
            let ended = Rc::new(Cell::new(0u32));
            let tasks: Vec<_> = (0..5_000u64)
                .map(|i| {
                    let (pauses, ended) = (Rc::clone(&pauses), Rc::clone(&ended));
                    tokio::task::spawn_local(async move {
                        pauses.heap_until(start + Duration::from_millis(1 + i % 7)).await;
                        ended.set(ended.get() + 1);
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            assert_eq!(ended.get(), 5_000);
            assert!(start.elapsed() <= Duration::from_millis(9), "{:?}", start.elapsed());
            assert_eq!(pauses.pending(), 0);
        });
    }
}

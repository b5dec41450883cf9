//! A worker's request deadlines (`target.request_timeout_ms`): every exchange in flight is filed
//! in one list ordered by deadline, under a single tokio timer set to the earliest, instead of
//! taking a tokio timer entry of its own.
//!
//! Why: `tokio::time::timeout` registers a timer entry in tokio's wheel for every request and
//! clears it when the response comes (`Timeout::poll`, `clear_entry` in the profiles of
//! `bench/NOTES.md`, issue 22), a cost paid for every request although almost none times out.
//! wrk sweeps its connections for timeouts instead. Here filing an exchange is a link at the end
//! of a list and its answer an unlink, both O(1) with no allocation once the list's slots exist:
//! a worker's requests share one timeout, so a new deadline is never earlier than the last one
//! filed and goes at the tail (a shorter one would walk back from it to its place). The list's
//! one timer is set to the head's deadline; when it fires the heads that are due are woken, and
//! the timer is set again to the new head. A head answered before its deadline is simply
//! unlinked: the timer, still set to its deadline, fires then, finds it gone and moves on to the
//! new head, so that steady traffic costs the timer one wake per timeout period, not a change
//! per request.
//!
//! Behaviour is tokio's `timeout`'s: the future is polled first and its output wins when it is
//! ready; after the deadline (to tokio's millisecond) it is dropped and the caller gets `None`.
//!
//! One worker, one thread: `RefCell`, no locks.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// No entry (the list's ends, an unlinked entry's neighbours).
const NIL: u32 = u32::MAX;

/// The exchanges in flight on one worker and their deadlines, and the wake-up of the one task
/// that drives them ([`Deadlines::drive`]).
#[derive(Default)]
pub(crate) struct Deadlines {
    inner: RefCell<Inner>,
}

struct Inner {
    entries: Vec<Entry>,
    free: Vec<u32>,
    /// The earliest deadline (`NIL`: none filed) and the latest.
    head: u32,
    tail: u32,
    /// The driving task's waker, and the deadline its timer is set to (`None`: no timer).
    driver: Option<Waker>,
    armed: Option<Instant>,
    /// The wakers of one batch of due exchanges, woken once the list is no longer borrowed (kept
    /// to reuse its allocation).
    batch: Vec<Waker>,
}

impl Default for Inner {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            driver: None,
            armed: None,
            batch: Vec::new(),
        }
    }
}

struct Entry {
    deadline: Instant,
    prev: u32,
    next: u32,
    waker: Option<Waker>,
    /// Its deadline passed: it is out of the list, and its exchange ends as a timeout.
    fired: bool,
}

impl Inner {
    /// Files a deadline in its place (at the tail, unless a later one was filed before it).
    fn file(&mut self, deadline: Instant, waker: &Waker) -> u32 {
        let mut prev = self.tail;
        while prev != NIL && self.entries[prev as usize].deadline > deadline {
            prev = self.entries[prev as usize].prev;
        }
        let next = if prev == NIL { self.head } else { self.entries[prev as usize].next };
        let entry = Entry { deadline, prev, next, waker: Some(waker.clone()), fired: false };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.entries[slot as usize] = entry;
                slot
            }
            None => {
                self.entries.push(entry);
                (self.entries.len() - 1) as u32
            }
        };
        match prev {
            NIL => self.head = slot,
            prev => self.entries[prev as usize].next = slot,
        }
        match next {
            NIL => self.tail = slot,
            next => self.entries[next as usize].prev = slot,
        }
        slot
    }

    fn unlink(&mut self, slot: u32) {
        let Entry { prev, next, .. } = self.entries[slot as usize];
        match prev {
            NIL => self.head = next,
            prev => self.entries[prev as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            next => self.entries[next as usize].prev = prev,
        }
    }

    /// The exchange ended (answered, timed out or dropped): its slot is free again.
    fn release(&mut self, slot: u32) {
        if !self.entries[slot as usize].fired {
            self.unlink(slot);
        }
        let entry = &mut self.entries[slot as usize];
        entry.waker = None;
        entry.fired = false;
        self.free.push(slot);
    }

    /// Takes every entry due by `now` off the head of the list, marked fired, its waker moved
    /// to `batch`.
    fn fire_due(&mut self, now: Instant) {
        while self.head != NIL && self.entries[self.head as usize].deadline <= now {
            let slot = self.head;
            self.unlink(slot);
            let entry = &mut self.entries[slot as usize];
            entry.fired = true;
            if let Some(waker) = entry.waker.take() {
                self.batch.push(waker);
            }
        }
    }
}

impl Deadlines {
    /// Runs `future` until `timeout` after `from`: its output, or `None` when the timeout passed
    /// first (the future is then dropped). The timeout only fires while [`Deadlines::drive`]
    /// runs on the same thread. `from` is an instant the caller has just read (an exchange's
    /// start or send): the clock is read once per exchange, not once more here.
    pub fn within<F: Future>(&self, from: Instant, timeout: Duration, future: F) -> Within<'_, F> {
        // As tokio's `timeout`: a timeout too long to be an instant never fires.
        let deadline = from.checked_add(timeout);
        Within { future, deadline, filed: Filed { deadlines: self, slot: None } }
    }

    /// Exchanges filed and not yet ended or dropped.
    #[cfg(test)]
    fn pending(&self) -> usize {
        let inner = self.inner.borrow();
        inner.entries.len() - inner.free.len()
    }

    /// Ends each exchange whose deadline passed, for ever: a worker spawns this once, beside its
    /// VUs.
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
            let next = (inner.head != NIL).then(|| inner.entries[inner.head as usize].deadline);
            inner.armed = next;
            let mut batch = std::mem::take(&mut inner.batch);
            drop(inner);
            // Woken with the list free: a waker may run code that files a deadline.
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

pin_project_lite::pin_project! {
    /// [`Deadlines::within`]'s future. A named future rather than an `async fn`: an `async fn`
    /// keeps its argument twice in its state (as given, and pinned in its body), and an HTTP
    /// exchange is kilobytes, copied into the VU's step futures at every request.
    pub(crate) struct Within<'d, F> {
        // Dropped before its filing is taken back, as the exchange ends before its deadline.
        #[pin]
        future: F,
        deadline: Option<Instant>,
        filed: Filed<'d>,
    }
}

impl<F: Future> Future for Within<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(output) = this.future.poll(cx) {
            return Poll::Ready(Some(output));
        }
        match *this.deadline {
            Some(deadline) if this.filed.expired(deadline, cx) => Poll::Ready(None),
            _ => Poll::Pending,
        }
    }
}

/// One exchange's place in the list: filed when it first waits, out of the list when it
/// ends or is dropped.
struct Filed<'a> {
    deadlines: &'a Deadlines,
    slot: Option<u32>,
}

impl Filed<'_> {
    /// Whether the deadline passed; files it (or keeps the waker to wake) otherwise.
    fn expired(&mut self, deadline: Instant, cx: &mut Context<'_>) -> bool {
        let mut inner = self.deadlines.inner.borrow_mut();
        match self.slot {
            Some(slot) => {
                let entry = &mut inner.entries[slot as usize];
                if entry.fired {
                    return true;
                }
                if !entry.waker.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
                    entry.waker = Some(cx.waker().clone());
                }
                false
            }
            None => {
                self.slot = Some(inner.file(deadline, cx.waker()));
                // The driver's timer is set no later than this deadline: it will come to it.
                if inner.armed.is_some_and(|armed| armed <= deadline) {
                    return false;
                }
                let driver = inner.driver.clone();
                drop(inner);
                if let Some(driver) = driver {
                    driver.wake();
                }
                false
            }
        }
    }
}

impl Drop for Filed<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.deadlines.inner.borrow_mut().release(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    fn on_local<F: Future<Output = ()>>(test: impl FnOnce(Rc<Deadlines>) -> F) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async move {
            let deadlines = Rc::new(Deadlines::default());
            let driver = Rc::clone(&deadlines);
            tokio::task::spawn_local(async move { driver.drive().await });
            test(deadlines).await;
        });
    }

    #[test]
    fn an_answer_before_the_deadline_wins_and_leaves_nothing_filed() {
        on_local(|deadlines| async move {
            let answered = deadlines
                .within(Instant::now(), Duration::from_millis(100), tokio::time::sleep(Duration::from_millis(99)))
                .await;
            assert_eq!(answered, Some(()));
            assert_eq!(deadlines.within(Instant::now(), Duration::from_millis(100), async { 7 }).await, Some(7));
            assert_eq!(deadlines.pending(), 0);
        });
    }

    #[test]
    fn a_late_answer_times_out_at_its_deadline() {
        on_local(|deadlines| async move {
            let start = Instant::now();
            let late = deadlines
                .within(start, Duration::from_millis(100), tokio::time::sleep(Duration::from_millis(500)))
                .await;
            assert_eq!(late, None);
            let elapsed = start.elapsed();
            assert!(elapsed >= Duration::from_millis(100) && elapsed <= Duration::from_millis(101), "{elapsed:?}");
            assert_eq!(deadlines.pending(), 0);
        });
    }

    #[test]
    fn the_timeout_runs_from_the_instant_given() {
        on_local(|deadlines| async move {
            // An exchange whose step started 40 ms before it was filed has 60 ms left of 100.
            let started = Instant::now();
            tokio::time::sleep(Duration::from_millis(40)).await;
            let filed = Instant::now();
            let late = deadlines
                .within(started, Duration::from_millis(100), tokio::time::sleep(Duration::from_millis(500)))
                .await;
            assert_eq!(late, None);
            let waited = filed.elapsed();
            assert!(waited >= Duration::from_millis(60) && waited <= Duration::from_millis(61), "{waited:?}");
            assert_eq!(deadlines.pending(), 0);
        });
    }

    #[test]
    fn many_exchanges_time_out_in_deadline_order_whatever_was_answered_between() {
        on_local(|deadlines| async move {
            let start = Instant::now();
            let ended = Rc::new(RefCell::new(Vec::new()));
            let mut tasks = Vec::new();
            // Filed 10 ms apart with a 100-ms timeout; the even ones are answered after 30 ms,
            // so the driver's timer keeps finding its head gone; a shorter timeout filed last
            // goes to its place ahead of the others.
            for (i, timeout_ms) in [100u64, 100, 100, 100, 100, 100, 25].into_iter().enumerate() {
                let (deadlines, ended) = (Rc::clone(&deadlines), Rc::clone(&ended));
                let answer_ms = if i % 2 == 0 && i < 6 { 30 } else { 1_000 };
                tasks.push(tokio::task::spawn_local(async move {
                    let filed = Instant::now();
                    let outcome = deadlines
                        .within(
                            filed,
                            Duration::from_millis(timeout_ms),
                            tokio::time::sleep(Duration::from_millis(answer_ms)),
                        )
                        .await;
                    ended.borrow_mut().push((i, outcome.is_some(), filed.duration_since(start), filed.elapsed()));
                }));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            for task in tasks {
                task.await.unwrap();
            }
            let ended = ended.borrow();
            let order: Vec<_> = ended.iter().map(|(i, answered, _, _)| (*i, *answered)).collect();
            assert_eq!(order, vec![(0, true), (2, true), (4, true), (6, false), (1, false), (3, false), (5, false)]);
            for (i, answered, _, waited) in ended.iter() {
                let expected = if *answered {
                    30
                } else if *i == 6 {
                    25
                } else {
                    100
                };
                assert!(
                    *waited >= Duration::from_millis(expected) && *waited <= Duration::from_millis(expected + 1),
                    "{i}: {waited:?}"
                );
            }
            assert_eq!(deadlines.pending(), 0);
        });
    }

    #[test]
    fn a_dropped_exchange_frees_its_slot_for_the_next() {
        on_local(|deadlines| async move {
            let cut = tokio::select! {
                _ = deadlines.within(Instant::now(), Duration::from_millis(50), std::future::pending::<()>()) => false,
                _ = tokio::time::sleep(Duration::from_millis(20)) => true,
            };
            assert!(cut);
            assert_eq!(deadlines.pending(), 0);
            // The slot is reused; the dropped exchange's deadline (at 50 ms) must not end this one.
            let start = Instant::now();
            let outcome = deadlines
                .within(start, Duration::from_millis(100), tokio::time::sleep(Duration::from_millis(60)))
                .await;
            assert_eq!(outcome, Some(()));
            assert!(start.elapsed() >= Duration::from_millis(60));
            assert_eq!(deadlines.pending(), 0);
        });
    }
}

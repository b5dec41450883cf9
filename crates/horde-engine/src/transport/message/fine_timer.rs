//! A worker thread's timer of sub-millisecond precision, for the datagrams the impaired network
//! holds (`impair.rs`, `kcp.rs`).
//!
//! tokio's timer counts whole milliseconds and rounds each deadline up to the next one, and its
//! driver sleeps in `epoll_wait`, whose timeout is whole milliseconds too: a datagram held for
//! 20 ms went out 21 to 22 ms later, and one held for no time at all waited for the next tick,
//! about a millisecond each way (issue 36: 20 ms each way read 41.9 to 42.3 ms of round trip,
//! `horde link`'s relay, which sleeps in `ppoll` to the nanosecond, 40.3). Here one `timerfd`
//! per worker thread, armed in nanoseconds at the soonest deadline of the thread's sleepers,
//! wakes the runtime through its IO driver, and the timer's task wakes the sleepers whose
//! deadline has come. A deadline already past is ready at once, with no timer at all.
//!
//! One worker, one thread: `RefCell` and `Cell`, no locks. The timer lives while some sleeper
//! or link holds it; the last one gone, its task ends and the descriptor is closed.
#![allow(unsafe_code)] // the timerfd's calls (libc's) and its registration, each with its SAFETY note.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

/// The thread's timer: the `timerfd` (its task waits on it), the sleepers by deadline, and the
/// deadline it is armed for.
pub(crate) struct FineTimer {
    /// Shared with the task that waits on it: open while either is alive, so that arming it
    /// never reaches a descriptor closed (or reused) under the timer.
    fd: Rc<AsyncFd<OwnedFd>>,
    sleepers: RefCell<BTreeMap<(Instant, u64), Waker>>,
    armed: Cell<Option<Instant>>,
    /// Tells apart sleepers of the same deadline.
    next_key: Cell<u64>,
}

thread_local! {
    static TIMER: RefCell<Weak<FineTimer>> = const { RefCell::new(Weak::new()) };
}

impl FineTimer {
    /// This worker thread's timer, its task started if it was not running (on the worker's
    /// `LocalSet`).
    pub fn shared() -> io::Result<Rc<FineTimer>> {
        TIMER.with(|timer| {
            if let Some(running) = timer.borrow().upgrade() {
                return Ok(running);
            }
            // SAFETY: timerfd_create takes no pointer; a descriptor it returns is ours to own.
            let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` was just opened and nothing else owns it.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: an `OwnedFd` keeps its one descriptor open until it is dropped with the
            // `AsyncFd`, and nothing else closes it.
            let readiness = Rc::new(unsafe { AsyncFd::register(owned) }.map_err(|error| error.into_parts().1)?);
            let running = Rc::new(FineTimer {
                fd: Rc::clone(&readiness),
                sleepers: RefCell::new(BTreeMap::new()),
                armed: Cell::new(None),
                next_key: Cell::new(0),
            });
            tokio::task::spawn_local(drive(readiness, Rc::downgrade(&running)));
            *timer.borrow_mut() = Rc::downgrade(&running);
            Ok(running)
        })
    }

    /// A future ready at `due` (at once when it has passed).
    pub fn sleep_until(self: &Rc<Self>, due: Instant) -> FineSleep {
        FineSleep { timer: Rc::clone(self), due, key: None }
    }

    /// Sets the timerfd to fire `due` from now (a deadline past or present: at once).
    fn arm(&self, due: Instant) {
        self.armed.set(Some(due));
        // A zero it_value would disarm the timer: one nanosecond fires it at once instead.
        let wait = due.saturating_duration_since(Instant::now()).max(Duration::from_nanos(1));
        let value = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: wait.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: `fd` is this timer's timerfd, open while the timer lives; the pointers are to
        // locals. It cannot fail for a valid descriptor and value.
        unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &value, std::ptr::null_mut()) };
    }

    /// The sleepers whose deadline has come are woken; the timer set for the next one.
    fn fire(&self) {
        self.armed.set(None);
        let now = Instant::now();
        let mut due = Vec::new();
        {
            let mut sleepers = self.sleepers.borrow_mut();
            while let Some(entry) = sleepers.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                due.push(entry.remove());
            }
        }
        if let Some(((next, _), _)) = self.sleepers.borrow().first_key_value() {
            self.arm(*next);
        }
        for waker in due {
            waker.wake();
        }
    }
}

impl Drop for FineTimer {
    fn drop(&mut self) {
        // The task waits on the descriptor: fired once more, it finds the timer gone and ends,
        // and the descriptor is closed with the last of the two.
        self.arm(Instant::now());
    }
}

/// The timer's task: each expiry read off the timerfd, then the due sleepers woken.
async fn drive(readiness: Rc<AsyncFd<OwnedFd>>, timer: Weak<FineTimer>) {
    loop {
        let Ok(mut ready) = readiness.readable().await else { return };
        let mut expirations = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a local buffer of 8 from the timerfd we own.
        let read = unsafe { libc::read(readiness.as_raw_fd(), expirations.as_mut_ptr().cast(), expirations.len()) };
        // Read or not (EAGAIN: a wake with no expiry), this readiness is spent; an expiry after
        // the read is a new one, which tokio keeps.
        ready.clear_ready();
        if read < 0 {
            continue;
        }
        let Some(timer) = timer.upgrade() else { return };
        timer.fire();
    }
}

/// Ready at its deadline, woken by the thread's [`FineTimer`].
pub(crate) struct FineSleep {
    timer: Rc<FineTimer>,
    due: Instant,
    /// Its place among the sleepers, once it waits there.
    key: Option<(Instant, u64)>,
}

impl Future for FineSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if Instant::now() >= this.due {
            if let Some(key) = this.key.take() {
                this.timer.sleepers.borrow_mut().remove(&key);
            }
            return Poll::Ready(());
        }
        let key = *this.key.get_or_insert_with(|| {
            let order = this.timer.next_key.get();
            this.timer.next_key.set(order + 1);
            (this.due, order)
        });
        // (Re)filed with the current waker: the timer's task may have taken it off the list
        // when it woke it.
        this.timer.sleepers.borrow_mut().insert(key, cx.waker().clone());
        if this.timer.armed.get().is_none_or(|armed| this.due < armed) {
            this.timer.arm(this.due);
        }
        Poll::Pending
    }
}

impl Drop for FineSleep {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.timer.sleepers.borrow_mut().remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleepers_wake_at_their_deadline_to_a_fraction_of_a_millisecond() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async {
            let timer = FineTimer::shared().unwrap();
            assert!(Rc::ptr_eq(&timer, &FineTimer::shared().unwrap()), "one timer per worker thread");
            let started = Instant::now();
            timer.sleep_until(started).await;
            assert!(started.elapsed() < Duration::from_micros(200), "a deadline already come is ready at once");
            let mut lateness = Vec::new();
            for wait_us in [300u64, 1_500, 5_250, 20_000, 700, 2_100] {
                let due = Instant::now() + Duration::from_micros(wait_us);
                // A later sleeper and an abandoned one beside it change nothing.
                let later = timer.sleep_until(due + Duration::from_millis(50));
                drop(timer.sleep_until(due - Duration::from_micros(100)));
                tokio::select! {
                    () = timer.sleep_until(due) => {}
                    () = later => unreachable!("the later sleeper woke first"),
                }
                lateness.push(Instant::now().saturating_duration_since(due));
            }
            lateness.sort();
            // tokio's own timer is a millisecond late on average; this one tens of microseconds
            // on an idle machine (the median leaves room for a busy one).
            assert!(lateness[lateness.len() / 2] < Duration::from_micros(300), "{lateness:?}");
            assert!(timer.sleepers.borrow().is_empty(), "no sleeper left behind");
        });
    }
}

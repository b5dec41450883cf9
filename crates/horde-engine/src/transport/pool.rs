//! The pool (`target.connections: {pool: N}`): keep-alive connections a worker's VUs share.
//!
//! Each worker owns its share of the generator's N connections ([`Pool::new`] with
//! `share(N, worker, workers)`), so the pool lives on one thread: `RefCell`, no lock, no atomic
//! on the request path. A VU borrows a connection to its own instance for one exchange
//! ([`Pool::acquire`]) and gives it back when the [`Lease`] drops. A lease holds a *place*: the
//! right to one open connection. When no connection to the VU's instance is idle, a free place
//! is taken and the VU connects; when none is free either, an idle connection to another
//! instance is closed and its place taken; otherwise the VU waits its turn in its instance's
//! queue (first come, first served). The wait is part of the exchange, so it counts in the
//! request's latency and its timeout, as with any real client's pool.
//!
//! A connection given back goes to the oldest waiter of its own instance. With several
//! instances the places follow the demand: a place moves to the waiters of another instance (the
//! connection is closed, the waiter opens a new one) when that instance holds no place at all,
//! or when it holds at least two fewer than the connection's instance. That keeps every
//! instance served without closing and reopening connections while the shares are even.
//! A connection that failed or was closed is dropped and its place handed on, empty.
//!
//! The read buffer travels with the place, not the VU: with thousands of VUs per connection,
//! a 4 KiB buffer per VU would be most of a VU's memory.

use crate::transport::http::Connection;
use std::cell::RefCell;
use std::collections::VecDeque;
use tokio::sync::oneshot;

/// What a place carries from one VU to the next.
struct Grant {
    /// `None`: the place is free and its new holder connects.
    connection: Option<Connection>,
    buffer: Vec<u8>,
}

struct Waiter {
    /// Arrival order across the worker's instances (for choosing between instances).
    ticket: u64,
    grant: oneshot::Sender<Grant>,
}

/// One instance's part of a worker's pool.
#[derive(Default)]
struct InstancePlaces {
    /// Places this instance holds: idle connections, connections lent, connections opening.
    held: usize,
    /// Connections waiting for a VU, with their buffers; the last given back is lent first
    /// (a hot connection rather than one the target may have closed while idle).
    idle: Vec<(Connection, Vec<u8>)>,
    waiters: VecDeque<Waiter>,
}

impl InstancePlaces {
    /// The oldest waiter still waiting (a waiter whose request timed out or was cut has gone).
    fn first_waiter(&mut self) -> Option<&Waiter> {
        while self.waiters.front().is_some_and(|waiter| waiter.grant.is_closed()) {
            self.waiters.pop_front();
        }
        self.waiters.front()
    }
}

struct Places {
    /// Places taken, all instances together; never more than the capacity.
    taken: usize,
    instances: Vec<InstancePlaces>,
    next_ticket: u64,
    /// Buffers of places that are free, kept for the next connection.
    spare_buffers: Vec<Vec<u8>>,
}

/// A worker's share of the generator's pool.
pub(crate) struct Pool {
    capacity: usize,
    places: RefCell<Places>,
}

/// A place held for one exchange. `connection` is the idle connection lent, or `None` when the
/// holder must connect; what `connection` holds when the lease drops is given back (leave it
/// `None` for a connection that failed or was closed).
pub(crate) struct Lease<'a> {
    pool: &'a Pool,
    instance: usize,
    pub connection: Option<Connection>,
    pub buffer: Vec<u8>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let grant = Grant { connection: self.connection.take(), buffer: std::mem::take(&mut self.buffer) };
        self.pool.give_back(self.instance, grant);
    }
}

/// A VU in its instance's queue. Should it stop waiting (its request timed out) just as a place
/// was sent to it, the place is handed on rather than lost.
struct Waiting<'a> {
    pool: &'a Pool,
    instance: usize,
    receiver: oneshot::Receiver<Grant>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.receiver.close();
        if let Ok(grant) = self.receiver.try_recv() {
            self.pool.give_back(self.instance, grant);
        }
    }
}

impl Pool {
    /// A pool of `capacity` connections (at least 1) to `instances` instances of the target.
    pub fn new(capacity: u64, instances: usize) -> Self {
        Self {
            capacity: usize::try_from(capacity).unwrap_or(usize::MAX).max(1),
            places: RefCell::new(Places {
                taken: 0,
                instances: (0..instances).map(|_| InstancePlaces::default()).collect(),
                next_ticket: 0,
                spare_buffers: Vec::new(),
            }),
        }
    }

    /// A place for one exchange with instance `instance`: at once when a connection is idle or a
    /// place is free, otherwise after the waiters that came first.
    pub async fn acquire(&self, instance: usize) -> Lease<'_> {
        let waiting = {
            let mut places = self.places.borrow_mut();
            let places = &mut *places;
            if let Some((connection, buffer)) = places.instances[instance].idle.pop() {
                return self.lease(instance, Grant { connection: Some(connection), buffer });
            }
            if places.taken < self.capacity {
                places.taken += 1;
                places.instances[instance].held += 1;
                let buffer = places.spare_buffers.pop().unwrap_or_default();
                return self.lease(instance, Grant { connection: None, buffer });
            }
            if let Some(other) = places.instances.iter().position(|other| !other.idle.is_empty()) {
                // Full, but another instance has a connection nobody waits for: close it and
                // take its place rather than wait for one of our own.
                let (closed, buffer) = places.instances[other].idle.pop().expect("not empty");
                drop(closed);
                places.instances[other].held -= 1;
                places.instances[instance].held += 1;
                return self.lease(instance, Grant { connection: None, buffer });
            }
            let (sender, receiver) = oneshot::channel();
            let ticket = places.next_ticket;
            places.next_ticket += 1;
            places.instances[instance].waiters.push_back(Waiter { ticket, grant: sender });
            Waiting { pool: self, instance, receiver }
        };
        let mut waiting = waiting;
        match (&mut waiting.receiver).await {
            Ok(grant) => self.lease(instance, grant),
            // The pool drops a waiter's sender only with the pool itself, which outlives every
            // VU of its worker.
            Err(_) => unreachable!("a worker's pool outlives its VUs"),
        }
    }

    fn lease(&self, instance: usize, grant: Grant) -> Lease<'_> {
        Lease { pool: self, instance, connection: grant.connection, buffer: grant.buffer }
    }

    /// A place of instance `instance` comes back, with its connection when it can be used again.
    fn give_back(&self, instance: usize, mut grant: Grant) {
        let mut places = self.places.borrow_mut();
        loop {
            let Some(to) = places.next_holder(instance, grant.connection.is_some()) else {
                match grant.connection {
                    Some(connection) => places.instances[instance].idle.push((connection, grant.buffer)),
                    None => {
                        places.taken -= 1;
                        places.instances[instance].held -= 1;
                        places.spare_buffers.push(grant.buffer);
                    }
                }
                return;
            };
            if to != instance {
                // The connection goes to the wrong instance for its new holder: closed here.
                grant.connection = None;
                places.instances[instance].held -= 1;
                places.instances[to].held += 1;
            }
            let waiter = places.instances[to].waiters.pop_front().expect("next_holder found a waiter");
            match waiter.grant.send(grant) {
                Ok(()) => return,
                Err(back) => {
                    // The waiter left between the check and the send: give the place to the next.
                    grant = back;
                    if to != instance {
                        places.instances[to].held -= 1;
                        places.instances[instance].held += 1;
                    }
                }
            }
        }
    }
}

impl Places {
    /// Which instance's oldest waiter gets a place of `instance` (with its connection when
    /// `connected` and the waiter is of the same instance); `None` when nobody waits.
    fn next_holder(&mut self, instance: usize, connected: bool) -> Option<usize> {
        let own_waits = self.instances[instance].first_waiter().is_some();
        if own_waits && self.instances.len() == 1 {
            return Some(instance);
        }
        // The instance with waiters that holds the fewest places; on a tie, the oldest waiter.
        let mut neediest: Option<(usize, usize, u64)> = None;
        for (index, places) in self.instances.iter_mut().enumerate() {
            let held = places.held;
            if let Some(waiter) = places.first_waiter() {
                let key = (held, waiter.ticket);
                if neediest.is_none_or(|(_, best_held, best_ticket)| key < (best_held, best_ticket)) {
                    neediest = Some((index, held, waiter.ticket));
                }
            }
        }
        let (other, other_held, _) = neediest?;
        if !own_waits || other == instance {
            return Some(other);
        }
        // Keep the connection with its instance unless the other one is starved or clearly
        // behind: moving a place costs a new connection.
        let held = self.instances[instance].held;
        let starved = other_held == 0;
        let behind = held > other_held + 1;
        if connected && !starved && !behind {
            Some(instance)
        } else {
            Some(other)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};

    type Acquiring<'a> = Pin<Box<dyn Future<Output = Lease<'a>> + 'a>>;

    fn acquire(pool: &Pool, instance: usize) -> Acquiring<'_> {
        Box::pin(pool.acquire(instance))
    }

    /// The lease, if the acquisition is done by now.
    fn poll<'a>(future: &mut Acquiring<'a>) -> Option<Lease<'a>> {
        let mut context = Context::from_waker(Waker::noop());
        match future.as_mut().poll(&mut context) {
            Poll::Ready(lease) => Some(lease),
            Poll::Pending => None,
        }
    }

    #[test]
    fn waiters_are_served_first_come_first_served() {
        let pool = Pool::new(1, 1);
        let first = poll(&mut acquire(&pool, 0)).expect("a free place is taken at once");
        let (mut second, mut third) = (acquire(&pool, 0), acquire(&pool, 0));
        assert!(poll(&mut second).is_none() && poll(&mut third).is_none());
        drop(first);
        assert!(poll(&mut third).is_none(), "the place goes to the older waiter");
        let second = poll(&mut second).expect("the older waiter has the place");
        assert_eq!(pool.places.borrow().taken, 1);
        drop(second);
        assert!(poll(&mut third).is_some());
    }

    #[test]
    fn a_place_left_by_a_waiter_that_gave_up_goes_to_the_next() {
        let pool = Pool::new(1, 1);
        let holder = poll(&mut acquire(&pool, 0)).expect("free place");
        let (mut gone, mut next) = (acquire(&pool, 0), acquire(&pool, 0));
        assert!(poll(&mut gone).is_none() && poll(&mut next).is_none());
        drop(gone);
        drop(holder);
        assert!(poll(&mut next).is_some());
    }

    #[test]
    fn a_place_sent_to_a_waiter_that_then_gives_up_is_not_lost() {
        let pool = Pool::new(1, 1);
        let holder = poll(&mut acquire(&pool, 0)).expect("free place");
        let (mut leaving, mut next) = (acquire(&pool, 0), acquire(&pool, 0));
        assert!(poll(&mut leaving).is_none() && poll(&mut next).is_none());
        drop(holder); // sent to `leaving`, which is dropped before it takes it
        drop(leaving);
        assert!(poll(&mut next).is_some());
    }

    #[test]
    fn an_instance_without_places_is_not_starved() {
        let pool = Pool::new(1, 2);
        let holder = poll(&mut acquire(&pool, 0)).expect("free place");
        let (mut same, mut other) = (acquire(&pool, 0), acquire(&pool, 1));
        assert!(poll(&mut same).is_none() && poll(&mut other).is_none());
        drop(holder);
        let other = poll(&mut other).expect("instance 1 holds no place: it gets this one");
        assert!(poll(&mut same).is_none());
        let places = pool.places.borrow();
        assert_eq!((places.taken, places.instances[0].held, places.instances[1].held), (1, 0, 1));
        drop(places);
        drop(other);
        assert!(poll(&mut same).is_some());
    }
}

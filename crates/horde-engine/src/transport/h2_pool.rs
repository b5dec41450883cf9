//! The pool over HTTP/2 (`target.connections: {pool: N}` with `http_version: "2"`): a worker's
//! share of the N connections, each *multiplexed* by many VUs at once rather than lent to one
//! at a time as the HTTP/1.1 pool (`crate::transport::pool`) does. A VU takes the next connection of its
//! instance in turn and opens a stream on it; the server's limit of concurrent streams is kept
//! by `h2` (a VU waits for a free stream, and the wait is part of its latency).
//!
//! A connection is opened by the first VU that finds its place empty, under the place's lock,
//! so the VUs that arrive meanwhile wait for that connection instead of opening more: a
//! worker never holds more connections than its share.

use crate::transport::http::H2Sender;
use std::cell::Cell;

/// One connection's place: empty until a VU connects, emptied when the connection is lost.
/// The number tells a connection from the one that replaced it, so that a VU whose stream
/// failed on an old connection does not drop the new one.
pub(crate) struct Place {
    pub connection: tokio::sync::Mutex<Option<(u64, H2Sender)>>,
}

pub(crate) struct H2Pool {
    /// Places by instance: the worker's share split over the target's instances, at least
    /// one each.
    instances: Vec<Vec<Place>>,
    next: Cell<usize>,
    opened: Cell<u64>,
}

impl H2Pool {
    /// A worker's `capacity` connections (at least 1) to `instances` instances of the target.
    pub fn new(capacity: u64, instances: usize) -> Self {
        let instances = (0..instances)
            .map(|instance| {
                let share = crate::time::workload::share(capacity, instance as u64, instances as u64).max(1);
                (0..share).map(|_| Place { connection: tokio::sync::Mutex::new(None) }).collect()
            })
            .collect();
        Self { instances, next: Cell::new(0), opened: Cell::new(0) }
    }

    /// The next place of `instance`, in turn: VUs spread evenly over the connections.
    pub fn place(&self, instance: usize) -> &Place {
        let places = &self.instances[instance];
        let turn = self.next.get();
        self.next.set(turn.wrapping_add(1));
        &places[turn % places.len()]
    }

    /// A number for a connection just opened.
    pub fn number(&self) -> u64 {
        let number = self.opened.get();
        self.opened.set(number + 1);
        number
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_is_split_over_instances_and_taken_in_turn() {
        let pool = H2Pool::new(5, 2);
        assert_eq!((pool.instances[0].len(), pool.instances[1].len()), (3, 2));
        let first: *const Place = pool.place(0);
        let second: *const Place = pool.place(0);
        assert_ne!(first, second);
        assert_eq!(H2Pool::new(1, 3).instances.iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 1, 1]);
    }
}

//! `target.connections: {pool: N}` for a `postgresql://` target.
//!
//! Each worker holds its share of the generator's N connections (as the HTTP pool does, so no
//! lock on the request path): at most that many are in use at once, lent to VUs in the order
//! they asked (tokio's semaphore is fair). Idle connections are kept per instance of the
//! target; a lease's connection goes back when the lease drops, unless it broke. A VU whose
//! statement left a transaction open keeps its lease until a later step ends the transaction.
//! A connection is read only while a statement runs on it, so one the server closed while it
//! sat idle is found out by the next step that takes it (`sql_connection_failure`, as a
//! `per_vu` connection's step is), not when it is given back.

use super::SqlConnection;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Idle connections by instance, each in the box it was opened in: a lease takes it and gives
/// it back as a pointer, not as the connection's few hundred bytes.
#[allow(clippy::vec_box)]
type Idle = Rc<RefCell<Vec<Vec<Box<SqlConnection>>>>>;

pub(crate) struct SqlPool {
    permits: Arc<Semaphore>,
    /// Idle connections by instance; the last given back is lent first.
    idle: Idle,
}

/// The right to one connection for one step (or one transaction): `connection` is the idle
/// connection lent, or `None` when the holder must connect; what it holds when the lease drops
/// is given back (leave it `None` for a connection that broke).
pub(crate) struct SqlLease {
    _permit: OwnedSemaphorePermit,
    idle: Idle,
    instance: usize,
    pub connection: Option<Box<SqlConnection>>,
}

impl Drop for SqlLease {
    fn drop(&mut self) {
        // A connection left inside a transaction (its VU stopped between the transaction's
        // steps, at the run's end) is closed, not lent: the next borrower would run inside the
        // abandoned transaction, or wait on its locks.
        if let Some(connection) =
            self.connection.take().filter(|connection| !connection.is_closed() && !connection.in_transaction)
        {
            self.idle.borrow_mut()[self.instance].push(connection);
        }
    }
}

impl SqlPool {
    /// A pool of `capacity` connections in use at once (at least 1) to `instances` instances.
    pub fn new(capacity: u64, instances: usize) -> Self {
        let capacity = usize::try_from(capacity).unwrap_or(Semaphore::MAX_PERMITS).clamp(1, Semaphore::MAX_PERMITS);
        Self {
            permits: Arc::new(Semaphore::new(capacity)),
            idle: Rc::new(RefCell::new((0..instances).map(|_| Vec::new()).collect())),
        }
    }

    pub async fn acquire(&self, instance: usize) -> SqlLease {
        let permit = Arc::clone(&self.permits).acquire_owned().await.expect("the pool's semaphore is never closed");
        let connection = self.idle.borrow_mut()[instance].pop();
        SqlLease { _permit: permit, idle: Rc::clone(&self.idle), instance, connection }
    }
}

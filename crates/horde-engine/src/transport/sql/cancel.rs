//! Asking the server to cancel a statement that its connection no longer waits for.
//!
//! A step past `target.request_timeout_ms`, or cut by the end of the grace period, drops its
//! connection, and closing a socket does not stop the statement on it: the backend notices its
//! client gone only when it next reads or writes, so a `pg_sleep(5)` or a long scan runs to its
//! end and holds its locks and a backend meanwhile (issue 36: 10 backends still ran `pg_sleep`
//! after a 6 s run). As libpq's `PQcancel`, the connection sends the protocol's CancelRequest on
//! a new connection to the same server, with the backend's process id and secret key (its
//! BackendKeyData at the login), and waits for the server to close that connection. It goes from
//! a task of its own on the worker's runtime: the VU does not wait for it.

use bytes::BytesMut;
use postgres_protocol::message::frontend;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Where a connection went, for a cancel request to reach the same server.
pub(super) enum Address {
    Tcp(SocketAddr),
    /// A Unix socket's path (a URL whose host is a directory).
    Unix(PathBuf),
}

/// What cancels a statement on one connection: its server, its backend's id and secret key.
pub(super) struct CancelKey {
    pub address: Address,
    pub process_id: i32,
    pub secret_key: i32,
    /// The longest a cancel request may take, its connect included: the URL's
    /// `connect_timeout` (`target.connect_timeout_ms`).
    pub limit: Duration,
}

thread_local! {
    /// This thread's cancel requests still on their way (the worker waits for them at its end).
    static OUTSTANDING: Arc<AtomicUsize> = Arc::new(AtomicUsize::new(0));
}

/// The longest a cancel request may take when the URL sets no `connect_timeout`.
const DEFAULT_LIMIT: Duration = Duration::from_secs(5);

impl CancelKey {
    /// Sends the request from a task of its own on the current runtime; outside any runtime (a
    /// connection dropped after its worker's runtime), nothing is sent.
    pub fn send(self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let outstanding = OUTSTANDING.with(Arc::clone);
        outstanding.fetch_add(1, Ordering::Relaxed);
        runtime.spawn(async move {
            let limit = if self.limit.is_zero() { DEFAULT_LIMIT } else { self.limit };
            // A cancel that cannot be sent changes nothing the run counts: the statement was
            // already counted as it ended (timeout, cut).
            let _ = tokio::time::timeout(limit, self.request()).await;
            outstanding.fetch_sub(1, Ordering::Relaxed);
        });
    }

    /// The CancelRequest, then the server's closing of the connection (it has read the request).
    async fn request(&self) -> io::Result<()> {
        let mut message = BytesMut::with_capacity(16);
        frontend::cancel_request(self.process_id, self.secret_key, &mut message);
        match &self.address {
            Address::Tcp(address) => {
                let mut stream = tokio::net::TcpStream::connect(address).await?;
                stream.write_all(&message).await?;
                closed(stream).await
            }
            Address::Unix(path) => {
                let mut stream = tokio::net::UnixStream::connect(path).await?;
                stream.write_all(&message).await?;
                closed(stream).await
            }
        }
    }
}

/// Until the server closes the connection (it answers a cancel request with nothing else).
async fn closed(mut stream: impl AsyncRead + Unpin) -> io::Result<()> {
    let mut reply = [0u8; 64];
    while stream.read(&mut reply).await? > 0 {}
    Ok(())
}

/// Waits, at most `limit`, for this thread's cancel requests still on their way: a worker's
/// end, after the statements the grace period cut have asked for theirs.
pub(crate) async fn cancels_sent(limit: Duration) {
    let outstanding = OUTSTANDING.with(Arc::clone);
    let deadline = tokio::time::Instant::now() + limit;
    while outstanding.load(Ordering::Relaxed) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cancel_request_is_the_protocols_sixteen_bytes_on_a_new_connection() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 16];
            stream.read_exact(&mut request).await.unwrap();
            // The server closes the connection once it has read the request.
            request
        });
        CancelKey { address: Address::Tcp(address), process_id: 4242, secret_key: -7, limit: Duration::from_secs(2) }
            .send();
        let request = server.await.unwrap();
        // Length 16, the code 80877102 (1234 << 16 | 5678), the process id, the secret key.
        let mut expected = Vec::new();
        for word in [16i32, 80_877_102, 4242, -7] {
            expected.extend_from_slice(&word.to_be_bytes());
        }
        assert_eq!(request.to_vec(), expected);
        cancels_sent(Duration::from_secs(2)).await;
        assert_eq!(OUTSTANDING.with(|outstanding| outstanding.load(Ordering::Relaxed)), 0, "the request's task ended");
    }
}

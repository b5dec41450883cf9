//! The target's lifecycle: a thread of its own with its own tokio runtime, a listener bound
//! before `start` returns, and a shutdown that never hangs its caller.
//!
//! The target owns its runtime so that it can be started from anywhere: plain Rust, Python (via
//! `horde-py`), or a test that is itself inside a tokio runtime. Nothing here blocks an async
//! caller for longer than binding a socket or, in `stop`, the bounded shutdown wait.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;

use crate::capacity::CapacityQueue;
use crate::config::{bind_reason, TargetConfig, TargetError};
use crate::game::{World, MAX_PLAYERS};
use crate::service::{handle, Shared};
use crate::stall::StallClock;
use crate::websocket::WebSocketState;
use crate::GatewayCounts;

/// Pending connections the kernel may queue before `accept`. A load generator opens hundreds of
/// connections in a burst at start; the usual default of 128 would refuse some of them.
const LISTEN_BACKLOG: u32 = 4096;

/// Streams one HTTP/2 connection may have open at once (advertised in SETTINGS). High enough that
/// a pool of few connections shared by many VUs is limited by the target's capacity model, not
/// by the protocol; a client must still respect it.
pub const MAX_CONCURRENT_STREAMS: u32 = 1000;

/// How long in-flight requests get to finish once a stop is asked. Shorter than `STOP_WAIT` so
/// that the runtime is normally torn down, not abandoned.
const DRAIN_WAIT: Duration = Duration::from_millis(1000);

/// How long the runtime gets to cancel what is left after `DRAIN_WAIT`.
const RUNTIME_SHUTDOWN_WAIT: Duration = Duration::from_millis(500);

/// The longest `stop` waits for the target's thread before leaving it to finish on its own.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// Pause after a failed `accept` (typically out of file descriptors), so that the loop neither
/// spins nor gives up on a listener that will work again once descriptors are freed.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
/// How long a client may take over its TLS handshake before the connection is dropped.
const TLS_HANDSHAKE_WAIT: Duration = Duration::from_secs(10);

/// A running target. Dropping it stops the target, as [`TargetHandle::stop`] does.
#[derive(Debug)]
pub struct TargetHandle {
    local_addr: SocketAddr,
    websocket_counts: Arc<GatewayCounts>,
    /// HTTPS (`TargetConfig::tls`): the base URL's scheme.
    tls: bool,
    shutdown: Option<watch::Sender<bool>>,
    finished: mpsc::Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl TargetHandle {
    /// Starts a target on its own thread and returns once it listens, so its port is known and
    /// connectable. Needs no tokio runtime from the caller, and works inside one.
    ///
    /// # Errors
    ///
    /// [`TargetError::InvalidConfig`] for an out-of-range field, [`TargetError::Bind`] when the
    /// address cannot be listened on (such as a port already in use), and
    /// [`TargetError::Runtime`] when the thread or runtime cannot be created.
    pub fn start(config: TargetConfig) -> Result<TargetHandle, TargetError> {
        config.check()?;
        let tls = config.tls.is_some();
        let (ready_sender, ready) = mpsc::sync_channel(1);
        let (finished_sender, finished) = mpsc::channel();
        let (shutdown_sender, shutdown) = watch::channel(false);
        let websocket_counts = Arc::new(GatewayCounts::default());
        let counts = Arc::clone(&websocket_counts);
        // Everything runtime-related, failures included, happens on the target's thread: a
        // tokio runtime must not be dropped on a thread that is running async code, which the
        // caller's may be.
        let thread = std::thread::Builder::new()
            .name("horde-target".to_string())
            .spawn(move || {
                run(config, counts, shutdown, ready_sender);
                // Nobody may be listening any more; that is fine.
                let _ = finished_sender.send(());
            })
            .map_err(TargetError::Runtime)?;
        match ready.recv() {
            Ok(Ok(local_addr)) => Ok(TargetHandle {
                local_addr,
                websocket_counts,
                tls,
                shutdown: Some(shutdown_sender),
                finished,
                thread: Some(thread),
            }),
            Ok(Err(error)) => {
                // The thread has nothing left to do but return.
                let _ = thread.join();
                Err(error)
            }
            Err(mpsc::RecvError) => {
                let _ = thread.join();
                Err(TargetError::Runtime(io::Error::other("the target's thread exited before listening")))
            }
        }
    }

    /// The port the target listens on (the one picked by the system when asked for port 0).
    pub fn port(&self) -> u16 {
        self.local_addr.port()
    }

    /// What its WebSockets (`/ws/...`) counted: `ws_in`, `ws_out` (messages) and `ws_dropped`
    /// (messages lost to a member that did not read).
    pub fn websocket_counts(&self) -> &GatewayCounts {
        &self.websocket_counts
    }

    /// The address the target listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The target's base URL, such as `http://127.0.0.1:41234`, for a plan's `target.base_url`.
    pub fn base_url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.local_addr)
    }

    /// Stops the target: it stops accepting, closes idle connections, lets requests in flight
    /// finish for up to a second, and joins its thread. Returns within about 2 seconds whatever
    /// the clients do; a thread that has not finished by then is left to end on its own.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        let Some(shutdown) = self.shutdown.take() else {
            return;
        };
        // Dropping the sender also wakes every receiver; sending first makes the intent plain.
        let _ = shutdown.send(true);
        drop(shutdown);
        if let Some(thread) = self.thread.take() {
            match self.finished.recv_timeout(STOP_WAIT) {
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = thread.join();
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

impl Drop for TargetHandle {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// The body of the target's thread: build the runtime, bind, report, serve until shutdown.
fn run(
    config: TargetConfig,
    websocket_counts: Arc<GatewayCounts>,
    shutdown: watch::Receiver<bool>,
    ready: mpsc::SyncSender<Result<SocketAddr, TargetError>>,
) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads)
        .thread_name("horde-target-worker")
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = ready.send(Err(TargetError::Runtime(error)));
            return;
        }
    };
    let acceptor = match config.tls.as_ref().map(crate::tls::acceptor).transpose() {
        Ok(acceptor) => acceptor,
        Err(error) => {
            let _ = ready.send(Err(error));
            return;
        }
    };
    let bound = {
        // The listener registers with the runtime that is current when it is created.
        let _entered = runtime.enter();
        bind(&config.host, config.port).and_then(|listener| Ok((local_address(&listener, &config)?, listener)))
    };
    let listener = match bound {
        Ok((local_addr, listener)) => {
            if ready.send(Ok(local_addr)).is_err() {
                return;
            }
            listener
        }
        Err(error) => {
            let _ = ready.send(Err(error));
            return;
        }
    };

    let now = Instant::now();
    let shared = Arc::new(Shared {
        stall: StallClock::new(now),
        capacity: config.capacity.map(|capacity| {
            let service = Duration::from_secs_f64(capacity.service_ms / 1000.0);
            CapacityQueue::with_times(capacity.workers, service, capacity.service_times, now)
        }),
        resource: config.shared.map(|costs| crate::shared::Member::new(&crate::shared::PROCESS, costs)),
        game: World::new(MAX_PLAYERS),
        websocket: Arc::new(WebSocketState::new(websocket_counts)),
    });
    runtime.block_on(accept_until_shutdown(listener, acceptor, shared, shutdown));
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_WAIT);
}

fn local_address(listener: &TcpListener, config: &TargetConfig) -> Result<SocketAddr, TargetError> {
    listener.local_addr().map_err(|source| TargetError::Bind {
        address: display_address(&config.host, config.port),
        reason: format!("cannot read the bound address: {source}"),
        source,
    })
}

/// Binds the first address `host` resolves to that accepts a listener.
fn bind(host: &str, port: u16) -> Result<TcpListener, TargetError> {
    let address = display_address(host, port);
    let candidates = (host, port).to_socket_addrs().map_err(|source| TargetError::Bind {
        address: address.clone(),
        reason: format!("cannot resolve host `{host}`: {source}"),
        source,
    })?;
    let mut last_error = None;
    for candidate in candidates {
        match listen(candidate) {
            Ok(listener) => return Ok(listener),
            Err(error) => last_error = Some(error),
        }
    }
    let source = last_error
        .unwrap_or_else(|| io::Error::new(io::ErrorKind::AddrNotAvailable, "the host resolved to no address"));
    Err(TargetError::Bind { address, reason: bind_reason(&source, port), source })
}

fn listen(address: SocketAddr) -> io::Result<TcpListener> {
    let socket = match address {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // Lets a restarted target take its fixed port back while old connections sit in
    // TIME_WAIT; it does not let two listeners share a port.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// `host:port`, with brackets around an IPv6 literal so the port stays readable.
fn display_address(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

async fn accept_until_shutdown(
    listener: TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Each connection task holds a clone of `alive`; once all are dropped, `recv` returns None,
    // which is how the loop learns that every connection has closed.
    let (alive, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
    loop {
        let accepted = tokio::select! {
            // A dropped sender (an error here) is a shutdown too.
            _ = shutdown.changed() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _peer)) => {
                tokio::spawn(serve_connection(
                    stream,
                    acceptor.clone(),
                    Arc::clone(&shared),
                    shutdown.clone(),
                    alive.clone(),
                ));
            }
            Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
        }
    }
    drop(listener);
    drop(alive);
    let _ = tokio::time::timeout(DRAIN_WAIT, all_closed.recv()).await;
}

async fn serve_connection(
    stream: TcpStream,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    _alive: tokio::sync::mpsc::Sender<()>,
) {
    // Small responses must leave at once: Nagle's algorithm would hold one back until the
    // client's delayed ACK, adding up to 40 ms to a latency the target promises to know.
    let _ = stream.set_nodelay(true);
    match acceptor {
        None => serve_http(stream, shared, shutdown).await,
        Some(acceptor) => {
            // A client that fails its handshake (or never finishes it) is simply dropped.
            if let Ok(Ok(tls)) = tokio::time::timeout(TLS_HANDSHAKE_WAIT, acceptor.accept(stream)).await {
                serve_http(tls, shared, shutdown).await;
            }
        }
    }
}

/// Serves HTTP/1.1 and HTTP/2 on one connection, in clear text or inside TLS.
async fn serve_http<S>(stream: S, shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| {
        let shared = Arc::clone(&shared);
        async move { handle(&shared, request).await }
    });
    // One port for both protocols: hyper-util reads the first bytes and serves HTTP/2 to a
    // client that opens with the h2c preface (prior knowledge), HTTP/1.1 to any other.
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // hyper's default 30 s header timeout also runs while a keep-alive connection idles,
        // which would close the connections of VUs with long think times.
        .header_read_timeout(None)
        .keep_alive(true);
    builder.http2().timer(TokioTimer::new()).max_concurrent_streams(MAX_CONCURRENT_STREAMS);
    // With upgrades: a WebSocket's 101 hands the connection over (`websocket.rs`).
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        // Errors are the client's doing (a reset, a malformed request hyper answered with 400);
        // the connection is over either way.
        _ = connection.as_mut() => return,
        _ = shutdown.changed() => {}
    }
    // Closes the connection if idle, or after the response in flight.
    connection.as_mut().graceful_shutdown();
    let _ = connection.await;
}

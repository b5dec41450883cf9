//! The built-in gateway: a game server's front door on TCP and UDP, whose answers are known in
//! advance, for the message transports' known-answer tests and demos.
//!
//! Every message is text; over TCP messages are framed (newline-delimited, or a big-endian
//! length prefix of 1, 2 or 4 bytes), over UDP a datagram is a message, over KCP (a session per
//! client address on a UDP port, `ikcp.c`'s protocol in fast mode) a KCP message. What comes back:
//!
//! | message | answer |
//! | --- | --- |
//! | `ping REST` | `pong REST` to the sender |
//! | `join ROOM` | `joined ROOM N` to the sender (N: the room's players, the sender included); a player is in one room at a time |
//! | `move REST` | `move REST` to every player of the sender's room, the sender included (so a room of P players moving once each carries P² messages out); to the sender alone outside a room |
//! | `leave` | `left` |
//! | anything else | the message itself (echo) |
//!
//! A room holds at most [`MAX_ROOM_PLAYERS`] players; UDP players are told apart by their
//! address, at most [`MAX_UDP_PLAYERS`] of them (a datagram from one more gets `error full`).
//! A TCP player that does not read its broadcasts loses them past [`TCP_QUEUE`] messages waiting,
//! as a game server drops frames for a slow client, rather than holding memory without bound.
//!
//! Like the HTTP target it runs on a thread of its own with its own tokio runtime and stops
//! within a bounded time ([`GatewayHandle::stop`] or drop).

mod kcp;
mod rooms;

pub(crate) use rooms::{Player, Rooms};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;

/// Players of one room.
pub const MAX_ROOM_PLAYERS: usize = 10_000;
/// UDP players (distinct addresses) the gateway keeps.
pub const MAX_UDP_PLAYERS: usize = 100_000;
/// Messages waiting for one TCP player before broadcasts to it are dropped.
pub const TCP_QUEUE: usize = 4096;
/// The largest message read: a longer frame closes the connection.
const MAX_MESSAGE: usize = 65_536;
const STOP_WAIT: Duration = Duration::from_secs(2);

/// How a TCP message is framed on the gateway's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GatewayFraming {
    #[default]
    Newline,
    /// A big-endian length of this many bytes (1, 2 or 4) before each message.
    Length(u8),
}

/// Which ports the gateway listens on (`Some(0)`: a free one; `None`: that transport is off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConfig {
    pub host: String,
    pub tcp_port: Option<u16>,
    pub udp_port: Option<u16>,
    pub kcp_port: Option<u16>,
    pub framing: GatewayFraming,
    pub threads: usize,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            tcp_port: Some(0),
            udp_port: Some(0),
            kcp_port: Some(0),
            framing: GatewayFraming::Newline,
            threads: 1,
        }
    }
}

/// What the gateway saw: messages in and out, by transport.
#[derive(Debug, Default)]
pub struct GatewayCounts {
    pub tcp_in: AtomicU64,
    pub tcp_out: AtomicU64,
    pub udp_in: AtomicU64,
    pub udp_out: AtomicU64,
    /// KCP messages in and out, and the datagrams carrying them (resends and ACKs included).
    pub kcp_in: AtomicU64,
    pub kcp_out: AtomicU64,
    pub kcp_datagrams_in: AtomicU64,
    pub kcp_datagrams_out: AtomicU64,
    /// Broadcasts not queued for a TCP player whose queue was full.
    pub tcp_dropped: AtomicU64,
    /// ... for a KCP session whose KCP task's queue was full.
    pub kcp_dropped: AtomicU64,
    /// WebSocket messages in and out (the HTTP target's `/ws/` paths).
    pub ws_in: AtomicU64,
    pub ws_out: AtomicU64,
    /// WebSocket messages (echoes and room broadcasts) not queued for a member not reading.
    pub ws_dropped: AtomicU64,
}

/// A running gateway. Dropping it stops it.
#[derive(Debug)]
pub struct GatewayHandle {
    pub tcp_addr: Option<SocketAddr>,
    pub udp_addr: Option<SocketAddr>,
    pub kcp_addr: Option<SocketAddr>,
    pub counts: Arc<GatewayCounts>,
    shutdown: Option<watch::Sender<bool>>,
    thread: Option<JoinHandle<()>>,
    finished: mpsc::Receiver<()>,
}

impl GatewayHandle {
    /// Binds the asked ports and serves on a thread of its own; returns once they listen.
    pub fn start(config: GatewayConfig) -> io::Result<GatewayHandle> {
        if let GatewayFraming::Length(bytes) = config.framing {
            if !matches!(bytes, 1 | 2 | 4) {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "a length prefix has 1, 2 or 4 bytes"));
            }
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.threads.max(1))
            .thread_name("horde-gateway-worker")
            .enable_all()
            .build()?;
        let (tcp, udp, kcp) = {
            let _entered = runtime.enter();
            let tcp = config.tcp_port.map(|port| bind_tcp(&config.host, port)).transpose()?;
            let udp = config.udp_port.map(|port| bind_udp(&config.host, port)).transpose()?;
            let kcp = config.kcp_port.map(|port| bind_udp(&config.host, port)).transpose()?;
            (tcp, udp, kcp)
        };
        let tcp_addr = tcp.as_ref().map(TcpListener::local_addr).transpose()?;
        let udp_addr = udp.as_ref().map(UdpSocket::local_addr).transpose()?;
        let kcp_addr = kcp.as_ref().map(UdpSocket::local_addr).transpose()?;
        let counts = Arc::new(GatewayCounts::default());
        let (shutdown_sender, shutdown) = watch::channel(false);
        let (finished_sender, finished) = mpsc::channel();
        let serving_counts = Arc::clone(&counts);
        let thread = std::thread::Builder::new().name("horde-gateway".into()).spawn(move || {
            let rooms = Arc::new(Rooms::default());
            runtime.block_on(async {
                let mut tasks = Vec::new();
                if let Some(listener) = tcp {
                    tasks.push(tokio::spawn(accept(
                        listener,
                        config.framing,
                        Arc::clone(&rooms),
                        Arc::clone(&serving_counts),
                        shutdown.clone(),
                    )));
                }
                if let Some(socket) = udp {
                    tasks.push(tokio::spawn(serve_udp(
                        socket,
                        Arc::clone(&rooms),
                        Arc::clone(&serving_counts),
                        shutdown.clone(),
                    )));
                }
                if let Some(socket) = kcp {
                    tasks.push(tokio::spawn(kcp::serve_kcp(
                        socket,
                        Arc::clone(&rooms),
                        Arc::clone(&serving_counts),
                        shutdown.clone(),
                    )));
                }
                let mut shutdown = shutdown;
                let _ = shutdown.wait_for(|stop| *stop).await;
                for task in tasks {
                    task.abort();
                }
            });
            runtime.shutdown_timeout(Duration::from_millis(500));
            let _ = finished_sender.send(());
        })?;
        Ok(GatewayHandle {
            tcp_addr,
            udp_addr,
            kcp_addr,
            counts,
            shutdown: Some(shutdown_sender),
            thread: Some(thread),
            finished,
        })
    }

    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        let Some(shutdown) = self.shutdown.take() else { return };
        let _ = shutdown.send(true);
        drop(shutdown);
        if let Some(thread) = self.thread.take() {
            if !matches!(self.finished.recv_timeout(STOP_WAIT), Err(mpsc::RecvTimeoutError::Timeout)) {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for GatewayHandle {
    fn drop(&mut self) {
        self.shut_down();
    }
}

fn bind_tcp(host: &str, port: u16) -> io::Result<TcpListener> {
    let address = resolve(host, port)?;
    let socket = if address.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(4096)
}

fn bind_udp(host: &str, port: u16) -> io::Result<UdpSocket> {
    let socket = std::net::UdpSocket::bind(resolve(host, port)?)?;
    socket.set_nonblocking(true)?;
    UdpSocket::from_std(socket)
}

fn resolve(host: &str, port: u16) -> io::Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("'{host}' does not resolve")))
}

/// What one message asks of the gateway.
enum Answer {
    /// To the sender only.
    Reply(Vec<u8>),
    /// To every player of the sender's room (the sender alone outside a room).
    Room(Vec<u8>),
}

/// The gateway's rules (the table above), for a player of either transport.
fn answer(rooms: &Rooms, player: &Player, message: &[u8]) -> Answer {
    if let Some(rest) = message.strip_prefix(b"ping") {
        let mut reply = b"pong".to_vec();
        reply.extend_from_slice(rest);
        return Answer::Reply(reply);
    }
    if let Some(room) = message.strip_prefix(b"join ") {
        let room = String::from_utf8_lossy(room).trim().to_owned();
        return Answer::Reply(match rooms.join(&room, player) {
            Some(members) => format!("joined {room} {members}").into_bytes(),
            None => b"error full".to_vec(),
        });
    }
    if message.starts_with(b"move") {
        return Answer::Room(message.to_vec());
    }
    if message == b"leave" {
        rooms.leave(player);
        return Answer::Reply(b"left".to_vec());
    }
    Answer::Reply(message.to_vec())
}

async fn accept(
    listener: TcpListener,
    framing: GatewayFraming,
    rooms: Arc<Rooms>,
    counts: Arc<GatewayCounts>,
    shutdown: watch::Receiver<bool>,
) {
    let mut next_id = 0u64;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                next_id += 1;
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve_tcp(
                    stream,
                    next_id,
                    framing,
                    Arc::clone(&rooms),
                    Arc::clone(&counts),
                    shutdown.clone(),
                ));
            }
            // Out of descriptors, most likely: wait for some to be freed.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

async fn serve_tcp(
    stream: TcpStream,
    id: u64,
    framing: GatewayFraming,
    rooms: Arc<Rooms>,
    counts: Arc<GatewayCounts>,
    mut shutdown: watch::Receiver<bool>,
) {
    let (mut reader, mut writer) = stream.into_split();
    let (queue, mut outgoing) = tokio::sync::mpsc::channel::<Arc<[u8]>>(TCP_QUEUE);
    let player = Player::Tcp { id, queue };
    let writer_counts = Arc::clone(&counts);
    // The writer frames and writes what the player is sent, its own answers and the room's moves.
    let writing = tokio::spawn(async move {
        let mut frame = Vec::new();
        while let Some(message) = outgoing.recv().await {
            frame.clear();
            encode(framing, &message, &mut frame);
            if writer.write_all(&frame).await.is_err() {
                return;
            }
            writer_counts.tcp_out.fetch_add(1, Ordering::Relaxed);
        }
    });
    let mut buffer = Vec::with_capacity(4096);
    let mut chunk = vec![0u8; 16 * 1024];
    'reading: loop {
        let read = tokio::select! {
            read = reader.read(&mut chunk) => read,
            _ = shutdown.changed() => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(length) => buffer.extend_from_slice(&chunk[..length]),
        }
        loop {
            let message = match decode(framing, &mut buffer) {
                Ok(Some(message)) => message,
                Ok(None) => break,
                Err(()) => break 'reading,
            };
            counts.tcp_in.fetch_add(1, Ordering::Relaxed);
            match answer(&rooms, &player, &message) {
                Answer::Reply(reply) => player.send(reply.into(), &counts),
                Answer::Room(message) => rooms.broadcast(&player, message.into(), &counts),
            }
        }
    }
    rooms.leave(&player);
    drop(player);
    let _ = writing.await;
}

fn encode(framing: GatewayFraming, message: &[u8], frame: &mut Vec<u8>) {
    match framing {
        GatewayFraming::Newline => {
            frame.extend_from_slice(message);
            frame.push(b'\n');
        }
        GatewayFraming::Length(bytes) => {
            let length = (message.len() as u64).to_be_bytes();
            frame.extend_from_slice(&length[8 - usize::from(bytes)..]);
            frame.extend_from_slice(message);
        }
    }
}

/// The first whole message of `buffer`, taken out; `Err` for a frame past [`MAX_MESSAGE`].
fn decode(framing: GatewayFraming, buffer: &mut Vec<u8>) -> Result<Option<Vec<u8>>, ()> {
    match framing {
        GatewayFraming::Newline => match buffer.iter().position(|byte| *byte == b'\n') {
            Some(end) => {
                let mut message: Vec<u8> = buffer.drain(..=end).collect();
                message.pop();
                if message.last() == Some(&b'\r') {
                    message.pop();
                }
                Ok(Some(message))
            }
            None if buffer.len() > MAX_MESSAGE => Err(()),
            None => Ok(None),
        },
        GatewayFraming::Length(bytes) => {
            let width = usize::from(bytes);
            if buffer.len() < width {
                return Ok(None);
            }
            let length = buffer[..width].iter().fold(0usize, |length, byte| (length << 8) | usize::from(*byte));
            if length > MAX_MESSAGE {
                return Err(());
            }
            if buffer.len() < width + length {
                return Ok(None);
            }
            let message = buffer[width..width + length].to_vec();
            buffer.drain(..width + length);
            Ok(Some(message))
        }
    }
}

async fn serve_udp(
    socket: UdpSocket,
    rooms: Arc<Rooms>,
    counts: Arc<GatewayCounts>,
    mut shutdown: watch::Receiver<bool>,
) {
    let socket = Arc::new(socket);
    let mut buffer = vec![0u8; MAX_MESSAGE];
    loop {
        let received = tokio::select! {
            received = socket.recv_from(&mut buffer) => received,
            _ = shutdown.changed() => return,
        };
        // An ICMP error from an earlier send to a gone client shows here: it is no reason to stop.
        let Ok((length, from)) = received else { continue };
        counts.udp_in.fetch_add(1, Ordering::Relaxed);
        let player = Player::Udp { address: from, socket: Arc::clone(&socket) };
        if !rooms.knows_udp(from) && rooms.udp_players() >= MAX_UDP_PLAYERS {
            player.send(Arc::from(&b"error full"[..]), &counts);
            continue;
        }
        match answer(&rooms, &player, &buffer[..length]) {
            Answer::Reply(reply) => player.send(reply.into(), &counts),
            Answer::Room(message) => rooms.broadcast(&player, message.into(), &counts),
        }
    }
}

//! The gateway's KCP port: a KCP session per client address on one UDP socket, its conversation
//! taken from the client's first segment, in the fast mode game servers run (nodelay, a 10 ms
//! interval, fast resend after 2 duplicate ACKs, no congestion window).
//!
//! Thousands of sessions on one task: a session is touched when a datagram comes for it or a
//! room sends it a move, and then flushed at once (its ACKs and answers leave in one datagram,
//! not at the next tick). The 10 ms tick updates only the sessions with data not yet acknowledged
//! (their resends are due from KCP's update); an idle session costs nothing per tick, and the
//! sweep for sessions gone quiet runs once a second. The socket's buffers are raised to
//! [`SOCKET_BUFFER`] so that the bursts of thousands of clients ticking together are queued by
//! the kernel rather than dropped (each drop is a resend, 30 ms or more later).

use super::rooms::{Player, Rooms};
use super::{answer, Answer, GatewayCounts, MAX_UDP_PLAYERS};
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};

/// How often sessions with data in flight are updated (KCP's interval in fast mode).
const TICK: Duration = Duration::from_millis(10);
/// A session not heard from for this long is dropped (a client gone without a word).
const IDLE: Duration = Duration::from_secs(60);
/// How often sessions are swept for those gone quiet or dead.
const SWEEP: Duration = Duration::from_secs(1);
/// Messages to KCP players waiting to be handed to their sessions (room broadcasts).
const QUEUE: usize = 65_536;
/// Datagrams (or queued messages) handled in a row before the task looks at its tick again.
const BATCH: usize = 256;
/// The socket's receive and send buffers asked of the kernel (it caps them at
/// `net.core.rmem_max` / `wmem_max`).
const SOCKET_BUFFER: usize = 4 << 20;

/// KCP's output for one client: its datagrams go out on the gateway's socket at once; a full
/// socket buffer drops one, which KCP then resends.
struct Output {
    socket: Arc<UdpSocket>,
    address: SocketAddr,
    counts: Arc<GatewayCounts>,
}

impl io::Write for Output {
    fn write(&mut self, datagram: &[u8]) -> io::Result<usize> {
        if self.socket.try_send_to(datagram, self.address).is_ok() {
            self.counts.kcp_datagrams_out.fetch_add(1, Ordering::Relaxed);
        }
        Ok(datagram.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

struct Session {
    kcp: kcp::Kcp<Output>,
    heard: Instant,
}

/// The port's sessions, and those the tick must update.
struct Sessions {
    socket: Arc<UdpSocket>,
    rooms: Arc<Rooms>,
    counts: Arc<GatewayCounts>,
    queue: mpsc::Sender<(SocketAddr, Arc<[u8]>)>,
    all: HashMap<SocketAddr, Session>,
    /// Sessions with data sent and not yet acknowledged.
    busy: HashSet<SocketAddr>,
    started: Instant,
    swept: Instant,
    message: Vec<u8>,
}

impl Sessions {
    fn now_ms(&self) -> u32 {
        self.started.elapsed().as_millis() as u32
    }

    /// One datagram from `address`: into its session (made on its first), the messages it
    /// completes answered, and the session flushed.
    fn receive(&mut self, address: SocketAddr, datagram: &[u8]) {
        self.counts.kcp_datagrams_in.fetch_add(1, Ordering::Relaxed);
        if datagram.len() < kcp::KCP_OVERHEAD {
            return;
        }
        let now = self.now_ms();
        if !self.all.contains_key(&address) {
            if self.all.len() >= MAX_UDP_PLAYERS {
                return;
            }
            let output = Output { socket: Arc::clone(&self.socket), address, counts: Arc::clone(&self.counts) };
            let mut kcp = kcp::Kcp::new(kcp::get_conv(datagram), output);
            kcp.set_nodelay(true, TICK.as_millis() as i32, 2, true);
            kcp.set_wndsize(128, 128);
            let _ = kcp.update(now);
            self.all.insert(address, Session { kcp, heard: Instant::now() });
        }
        let Some(session) = self.all.get_mut(&address) else { return };
        session.heard = Instant::now();
        if session.kcp.input(datagram).is_err() {
            return;
        }
        let _ = session.kcp.update(now);
        let mut answers = Vec::new();
        while let Ok(length) = session.kcp.recv(&mut self.message) {
            self.counts.kcp_in.fetch_add(1, Ordering::Relaxed);
            answers.push(self.message[..length].to_vec());
        }
        let player = Player::Kcp { address, queue: self.queue.clone() };
        for message in answers {
            match answer(&self.rooms, &player, &message) {
                Answer::Reply(reply) => {
                    if let Some(session) = self.all.get_mut(&address) {
                        if session.kcp.send(&reply).is_ok() {
                            self.counts.kcp_out.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                // Through the queue, even to this session: the room's other players are
                // sessions of this same task.
                Answer::Room(moved) => self.rooms.broadcast(&player, moved.into(), &self.counts),
            }
        }
        self.flush(address);
    }

    /// A room's message for the session at `address`, sent at once.
    fn deliver(&mut self, address: SocketAddr, message: &[u8]) {
        let now = self.now_ms();
        let Some(session) = self.all.get_mut(&address) else { return };
        if session.kcp.send(message).is_ok() {
            self.counts.kcp_out.fetch_add(1, Ordering::Relaxed);
            let _ = session.kcp.update(now);
            self.flush(address);
        }
    }

    /// Out at once, not at the next tick: the session's ACKs and answers (a ping's reply is not
    /// held 10 ms); the session is the tick's while anything it sent is unacknowledged.
    fn flush(&mut self, address: SocketAddr) {
        let Some(session) = self.all.get_mut(&address) else { return };
        let _ = session.kcp.flush();
        if session.kcp.wait_snd() > 0 {
            self.busy.insert(address);
        }
    }

    /// The tick: the busy sessions updated (resends due), and once a [`SWEEP`] the sessions
    /// gone quiet or dead dropped.
    fn tick(&mut self) {
        let now = self.now_ms();
        let all = &mut self.all;
        self.busy.retain(|address| {
            let Some(session) = all.get_mut(address) else { return false };
            let _ = session.kcp.update(now);
            session.kcp.wait_snd() > 0 && !session.kcp.is_dead_link()
        });
        if self.swept.elapsed() >= SWEEP {
            self.swept = Instant::now();
            all.retain(|_, session| session.heard.elapsed() < IDLE && !session.kcp.is_dead_link());
        }
    }
}

pub(super) async fn serve_kcp(
    socket: UdpSocket,
    rooms: Arc<Rooms>,
    counts: Arc<GatewayCounts>,
    mut shutdown: watch::Receiver<bool>,
) {
    enlarge_buffers(&socket);
    let socket = Arc::new(socket);
    let (queue, mut queued) = mpsc::channel::<(SocketAddr, Arc<[u8]>)>(QUEUE);
    let mut sessions = Sessions {
        socket: Arc::clone(&socket),
        rooms,
        counts,
        queue,
        all: HashMap::new(),
        busy: HashSet::new(),
        started: Instant::now(),
        swept: Instant::now(),
        message: vec![0u8; 256 * 1024],
    };
    let mut buffer = vec![0u8; 65_536];
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => sessions.tick(),
            next = queued.recv() => {
                let Some((address, next)) = next else { return };
                sessions.deliver(address, &next);
                for _ in 1..BATCH {
                    let Ok((address, next)) = queued.try_recv() else { break };
                    sessions.deliver(address, &next);
                }
            }
            readable = socket.readable() => {
                if readable.is_err() {
                    continue;
                }
                // What the kernel holds, up to a batch: one wake for a burst, not one per datagram.
                for _ in 0..BATCH {
                    match socket.try_recv_from(&mut buffer) {
                        Ok((length, address)) => sessions.receive(address, &buffer[..length]),
                        Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                        // An ICMP error from an earlier send to a gone client: no reason to stop.
                        Err(_) => continue,
                    }
                }
            }
        }
    }
}

/// Raises the socket's receive and send buffers to [`SOCKET_BUFFER`] (best effort: the kernel
/// caps them at its maximum, and a refusal leaves its default).
#[allow(unsafe_code)]
fn enlarge_buffers(socket: &UdpSocket) {
    use std::os::fd::AsRawFd;
    let size = SOCKET_BUFFER as libc::c_int;
    for option in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // SAFETY: setsockopt reads an int we own, on a descriptor the socket owns and keeps open.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                std::ptr::addr_of!(size).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

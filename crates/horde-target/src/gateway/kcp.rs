//! The gateway's KCP port: a KCP session per client address on one UDP socket, its conversation
//! taken from the client's first segment, in the fast mode game servers run (nodelay, a 10 ms
//! interval, fast resend after 2 duplicate ACKs, no congestion window).

use super::rooms::{Player, Rooms};
use super::{answer, Answer, GatewayCounts, MAX_UDP_PLAYERS};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};

/// How often every session is updated (KCP's interval in fast mode).
const TICK: Duration = Duration::from_millis(10);
/// A session not heard from for this long is dropped (a client gone without a word).
const IDLE: Duration = Duration::from_secs(60);
/// Messages to KCP players waiting to be handed to their sessions (room broadcasts).
const QUEUE: usize = 65_536;

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

pub(super) async fn serve_kcp(socket: UdpSocket, rooms: Arc<Rooms>, counts: Arc<GatewayCounts>, mut shutdown: watch::Receiver<bool>) {
    let socket = Arc::new(socket);
    let (queue, mut queued) = mpsc::channel::<(SocketAddr, Arc<[u8]>)>(QUEUE);
    let mut sessions: HashMap<SocketAddr, Session> = HashMap::new();
    let started = Instant::now();
    let now_ms = || started.elapsed().as_millis() as u32;
    let mut buffer = vec![0u8; 65_536];
    let mut message = vec![0u8; 256 * 1024];
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {
                let now = now_ms();
                sessions.retain(|_, session| {
                    let _ = session.kcp.update(now);
                    session.heard.elapsed() < IDLE && !session.kcp.is_dead_link()
                });
            }
            next = queued.recv() => {
                let Some((address, next)) = next else { return };
                if let Some(session) = sessions.get_mut(&address) {
                    send(session, &next, now_ms(), &counts);
                }
            }
            received = socket.recv_from(&mut buffer) => {
                let Ok((length, address)) = received else { continue };
                counts.kcp_datagrams_in.fetch_add(1, Ordering::Relaxed);
                let datagram = &buffer[..length];
                if length < kcp::KCP_OVERHEAD {
                    continue;
                }
                if !sessions.contains_key(&address) {
                    if sessions.len() >= MAX_UDP_PLAYERS {
                        continue;
                    }
                    let output = Output { socket: Arc::clone(&socket), address, counts: Arc::clone(&counts) };
                    let mut kcp = kcp::Kcp::new(kcp::get_conv(datagram), output);
                    kcp.set_nodelay(true, TICK.as_millis() as i32, 2, true);
                    kcp.set_wndsize(128, 128);
                    sessions.insert(address, Session { kcp, heard: Instant::now() });
                }
                let player = Player::Kcp { address, queue: queue.clone() };
                let Some(session) = sessions.get_mut(&address) else { continue };
                session.heard = Instant::now();
                if session.kcp.input(datagram).is_err() {
                    continue;
                }
                let _ = session.kcp.update(now_ms());
                let mut answers = Vec::new();
                while let Ok(length) = session.kcp.recv(&mut message) {
                    counts.kcp_in.fetch_add(1, Ordering::Relaxed);
                    answers.push(answer(&rooms, &player, &message[..length]));
                }
                for answer in answers {
                    match answer {
                        Answer::Reply(reply) => {
                            if let Some(session) = sessions.get_mut(&address) {
                                send(session, &reply, now_ms(), &counts);
                            }
                        }
                        // Through the queue, even to this session: the room's other players are
                        // sessions of this same task.
                        Answer::Room(moved) => rooms.broadcast(&player, moved.into(), &counts),
                    }
                }
            }
        }
    }
}

fn send(session: &mut Session, message: &[u8], now: u32, counts: &GatewayCounts) {
    if session.kcp.send(message).is_ok() {
        counts.kcp_out.fetch_add(1, Ordering::Relaxed);
        // Out at once, not at the next tick: a ping's reply is not held 10 ms.
        let _ = session.kcp.update(now);
        let _ = session.kcp.flush();
    }
}

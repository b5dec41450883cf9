//! The gateway's rooms: who is in which, and a move sent to everyone in the mover's room.

use super::{GatewayCounts, MAX_ROOM_PLAYERS, MAX_UDP_PLAYERS};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

/// A player, and how to send it a message: a TCP connection's queue (its writer task frames and
/// writes), or a UDP address on the gateway's socket.
#[derive(Clone)]
pub(crate) enum Player {
    Tcp {
        id: u64,
        queue: mpsc::Sender<Arc<[u8]>>,
    },
    Udp {
        address: SocketAddr,
        socket: Arc<UdpSocket>,
    },
    /// A KCP session of the gateway's KCP task, reached through that task's queue.
    Kcp {
        address: SocketAddr,
        queue: mpsc::Sender<(SocketAddr, Arc<[u8]>)>,
    },
    /// A WebSocket of the HTTP target, reached through what its connection gave the room:
    /// true when the message was queued for its writer (whose frames the rooms do not know).
    WebSocket {
        id: u64,
        deliver: Arc<dyn Fn(Arc<[u8]>) -> bool + Send + Sync>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum PlayerKey {
    Tcp(u64),
    Udp(SocketAddr),
    Kcp(SocketAddr),
    WebSocket(u64),
}

impl Player {
    fn key(&self) -> PlayerKey {
        match self {
            Player::Tcp { id, .. } => PlayerKey::Tcp(*id),
            Player::Udp { address, .. } => PlayerKey::Udp(*address),
            Player::Kcp { address, .. } => PlayerKey::Kcp(*address),
            Player::WebSocket { id, .. } => PlayerKey::WebSocket(*id),
        }
    }

    /// Sends without waiting: a full queue (a TCP player not reading) or a full socket buffer
    /// loses the message, as a gateway drops frames rather than stalling the room.
    pub fn send(&self, message: Arc<[u8]>, counts: &GatewayCounts) {
        match self {
            Player::Tcp { queue, .. } => {
                if queue.try_send(message).is_err() {
                    counts.tcp_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            Player::Udp { address, socket } => {
                if socket.try_send_to(&message, *address).is_ok() {
                    counts.udp_out.fetch_add(1, Ordering::Relaxed);
                }
            }
            Player::Kcp { address, queue } => {
                if queue.try_send((*address, message)).is_err() {
                    counts.kcp_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            Player::WebSocket { deliver, .. } => {
                if !deliver(message) {
                    counts.ws_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

#[derive(Default)]
struct Inner {
    rooms: HashMap<String, Vec<Player>>,
    room_of: HashMap<PlayerKey, String>,
    udp_players: usize,
}

#[derive(Default)]
pub(crate) struct Rooms {
    inner: Mutex<Inner>,
}

impl Rooms {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere cannot leave the maps half-changed: every change is one statement.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Puts `player` in `room` (out of any other); the room's players then, `None` when the
    /// room or the UDP players are full.
    pub fn join(&self, room: &str, player: &Player) -> Option<usize> {
        let mut inner = self.lock();
        let key = player.key();
        let already_udp = inner.room_of.contains_key(&key);
        if matches!(key, PlayerKey::Udp(_) | PlayerKey::Kcp(_)) && !already_udp && inner.udp_players >= MAX_UDP_PLAYERS
        {
            return None;
        }
        if inner.rooms.get(room).is_some_and(|players| players.len() >= MAX_ROOM_PLAYERS)
            && inner.room_of.get(&key).map(String::as_str) != Some(room)
        {
            return None;
        }
        leave_locked(&mut inner, key);
        let players = inner.rooms.entry(room.to_owned()).or_default();
        players.push(player.clone());
        let members = players.len();
        inner.room_of.insert(key, room.to_owned());
        if matches!(key, PlayerKey::Udp(_) | PlayerKey::Kcp(_)) {
            inner.udp_players += 1;
        }
        Some(members)
    }

    pub fn leave(&self, player: &Player) {
        leave_locked(&mut self.lock(), player.key());
    }

    /// `message` to every player of `player`'s room, `player` included; to `player` alone
    /// when it is in no room.
    pub fn broadcast(&self, player: &Player, message: Arc<[u8]>, counts: &GatewayCounts) {
        let players: Vec<Player> = {
            let inner = self.lock();
            match inner.room_of.get(&player.key()).and_then(|room| inner.rooms.get(room)) {
                Some(players) => players.clone(),
                None => vec![player.clone()],
            }
        };
        for member in &players {
            member.send(Arc::clone(&message), counts);
        }
    }

    pub fn knows_udp(&self, address: SocketAddr) -> bool {
        self.lock().room_of.contains_key(&PlayerKey::Udp(address))
    }

    pub fn udp_players(&self) -> usize {
        self.lock().udp_players
    }
}

fn leave_locked(inner: &mut Inner, key: PlayerKey) {
    let Some(room) = inner.room_of.remove(&key) else { return };
    if matches!(key, PlayerKey::Udp(_) | PlayerKey::Kcp(_)) {
        inner.udp_players -= 1;
    }
    if let Some(players) = inner.rooms.get_mut(&room) {
        players.retain(|player| player.key() != key);
        if players.is_empty() {
            inner.rooms.remove(&room);
        }
    }
}

//! A VU's connection to a message target: a framed TCP stream, a connected UDP socket used
//! directly or through the impaired network (`impair.rs`), a KCP session, or a WebSocket.

use super::datagram::recv_datagram;
use super::framing::{decode, encode};
use super::impair::ImpairedLink;
use super::kcp::KcpLink;
use super::websocket::WebSocketLink;
use bytes::BytesMut;
use horde_plan::{Framing, KcpOptions, Network};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

pub(crate) enum MessageConnection {
    Tcp { stream: TcpStream, framing: Framing, buffer: BytesMut, frame: Vec<u8> },
    Udp { socket: UdpSocket },
    ImpairedUdp(ImpairedLink),
    Kcp(KcpLink),
    WebSocket(Box<WebSocketLink>),
}

/// What a link that counts its own datagrams counted since it was last asked.
pub(crate) struct WireTaken {
    pub sent: u64,
    pub received: u64,
    pub retransmitted: u64,
}

/// One message received, and the bytes it took on the wire (its framing included).
pub(crate) struct Received {
    pub message: Vec<u8>,
    pub wire_bytes: u64,
    /// A WebSocket's pong (a control frame, not a message of the application): only a
    /// `control_frame` ping reads it.
    pub control: bool,
}

impl MessageConnection {
    /// A framed stream over `stream`, connected (from the plan's next source address, if any)
    /// by the target's HTTP connector.
    pub fn tcp(stream: TcpStream, framing: Framing) -> io::Result<Self> {
        // Messages are small and each is a unit: Nagle's wait would add up to 40 ms to an RTT.
        stream.set_nodelay(true)?;
        Ok(Self::Tcp { stream, framing, buffer: BytesMut::with_capacity(4096), frame: Vec::new() })
    }

    /// A UDP socket bound to `source` (or any local address) and connected to the target (so
    /// only its datagrams come in, and an ICMP "port unreachable" shows as a refused receive),
    /// impaired when the scenario says so.
    pub async fn udp(
        address: SocketAddr,
        source: Option<IpAddr>,
        network: Option<Network>,
        seed: u64,
    ) -> io::Result<Self> {
        let socket = connected_socket(address, source).await?;
        Ok(match network {
            Some(network) => Self::ImpairedUdp(ImpairedLink::start(socket, network, seed)?),
            None => Self::Udp { socket },
        })
    }

    /// A KCP session with the target over a socket of its own, `conv` its conversation.
    pub async fn kcp(
        address: SocketAddr,
        source: Option<IpAddr>,
        options: KcpOptions,
        conv: u32,
        network: Option<Network>,
        seed: u64,
    ) -> io::Result<Self> {
        let socket = connected_socket(address, source).await?;
        Ok(Self::Kcp(KcpLink::start(socket, options, conv, network, seed)?))
    }

    /// Sends one message; the bytes it took on the wire (framing included). `binary`: a
    /// WebSocket sends it in a binary frame rather than a text one (other transports carry
    /// bytes either way).
    pub async fn send(&mut self, message: Vec<u8>, binary: bool) -> io::Result<u64> {
        match self {
            Self::WebSocket(link) => link.send(&message, binary).await,
            Self::Tcp { stream, framing, frame, .. } => {
                frame.clear();
                encode(*framing, &message, frame)?;
                stream.write_all(frame).await?;
                Ok(frame.len() as u64)
            }
            Self::Udp { socket } => Ok(socket.send(&message).await? as u64),
            Self::ImpairedUdp(link) => {
                let length = message.len() as u64;
                link.send(message)?;
                Ok(length)
            }
            // The message's bytes: KCP's headers, acknowledgements and resends are its own.
            Self::Kcp(link) => {
                let length = message.len() as u64;
                link.send(message)?;
                Ok(length)
            }
        }
    }

    /// Sends a WebSocket ping control frame carrying `payload` (at most 125 bytes); the bytes it
    /// took on the wire.
    pub async fn send_ping(&mut self, payload: &[u8]) -> io::Result<u64> {
        match self {
            Self::WebSocket(link) => link.send_ping(payload).await,
            _ => Err(io::Error::new(io::ErrorKind::Unsupported, "a ping control frame needs a WebSocket")),
        }
    }

    /// The next whole message (cancel safe: a message partly read stays in the buffer).
    pub async fn recv(&mut self) -> io::Result<Received> {
        match self {
            Self::Tcp { stream, framing, buffer, .. } => loop {
                let before = buffer.len();
                if let Some(message) = decode(*framing, buffer)? {
                    let wire_bytes = (before - buffer.len()) as u64;
                    return Ok(Received { message: message.to_vec(), wire_bytes, control: false });
                }
                if buffer.capacity() - buffer.len() < 1024 {
                    buffer.reserve(4096);
                }
                if stream.read_buf(buffer).await? == 0 {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the target closed the connection"));
                }
            },
            Self::Udp { socket } => {
                let message = recv_datagram(socket).await?;
                let wire_bytes = message.len() as u64;
                Ok(Received { message, wire_bytes, control: false })
            }
            Self::ImpairedUdp(link) => {
                let message = link.recv().await?;
                let wire_bytes = message.len() as u64;
                Ok(Received { message, wire_bytes, control: false })
            }
            Self::Kcp(link) => {
                let message = link.recv().await?;
                let wire_bytes = message.len() as u64;
                Ok(Received { message, wire_bytes, control: false })
            }
            Self::WebSocket(link) => {
                let message = link.recv().await?;
                Ok(Received { message: message.payload, wire_bytes: message.wire_bytes, control: message.control })
            }
        }
    }

    /// Whether messages go over a byte stream (TCP, a WebSocket), which loses nothing: a reply
    /// that has not come is late, never lost.
    pub fn is_stream(&self) -> bool {
        matches!(self, Self::Tcp { .. } | Self::WebSocket(_))
    }

    /// Datagrams put on and taken off the wire since the last call, when the link counts them
    /// apart from the messages (an impaired link, KCP); `None`: they are the messages themselves.
    pub fn take_wire_counts(&mut self) -> Option<WireTaken> {
        let wire = match self {
            Self::ImpairedUdp(link) => &link.wire,
            Self::Kcp(link) => &link.wire,
            _ => return None,
        };
        Some(WireTaken {
            sent: wire.sent.take(),
            received: wire.received.take(),
            retransmitted: wire.retransmitted.take(),
        })
    }
}

/// A UDP socket on an ephemeral port of `source` (or of any local address), connected to the
/// target (so only its datagrams come in, and an ICMP "port unreachable" shows as a refused
/// receive).
async fn connected_socket(address: SocketAddr, source: Option<IpAddr>) -> io::Result<UdpSocket> {
    let any = if address.is_ipv4() { IpAddr::V4(Ipv4Addr::UNSPECIFIED) } else { IpAddr::V6(Ipv6Addr::UNSPECIFIED) };
    let socket = UdpSocket::bind(SocketAddr::new(source.unwrap_or(any), 0)).await?;
    socket.connect(address).await?;
    Ok(socket)
}

//! WebSocket (RFC 6455) on the target's HTTP port, upgraded from HTTP/1.1, with known answers:
//!
//! | path | what each message gets |
//! | --- | --- |
//! | `/ws/echo` | itself, at once (text for text, binary for binary) |
//! | `/ws/delay/{ms}` | itself, `ms` milliseconds after it arrived (so a ping's RTT is `ms` plus the loopback) |
//! | `/ws/rooms/{room}` | sent to every member of `room`, the sender included: the gateway's rooms (`gateway/rooms.rs`), so P members sending once each carry P² messages out |
//!
//! Pings are answered with pongs, a close frame with a close frame. Any other `/ws/` path is
//! `404`, a request that is not a WebSocket upgrade (or not HTTP/1.1) `400`. A message over
//! [`MAX_MESSAGE`] closes the connection with code 1009; a member that does not read loses
//! broadcasts past the gateway's queue, as its TCP players do.

use crate::gateway::{GatewayCounts, Player, Rooms, TCP_QUEUE};
use crate::routes::{self, Rejection};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_VERSION, UPGRADE};
use hyper::{Request, Response, StatusCode, Version};
use hyper_util::rt::TokioIo;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The largest message read.
pub const MAX_MESSAGE: usize = 65_536;
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// What every WebSocket of one target shares: the rooms, what was counted, the ids of members.
pub(crate) struct WebSocketState {
    rooms: Rooms,
    counts: Arc<GatewayCounts>,
    next_id: AtomicU64,
}

impl WebSocketState {
    pub(crate) fn new(counts: Arc<GatewayCounts>) -> Self {
        Self { rooms: Rooms::default(), counts, next_id: AtomicU64::new(0) }
    }
}

impl std::fmt::Debug for WebSocketState {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("WebSocketState").field("counts", &self.counts).finish_non_exhaustive()
    }
}

/// What an upgrade's path asks for.
#[derive(Debug, Clone, PartialEq)]
enum WsRoute {
    Echo,
    Delay(Duration),
    Room(String),
}

fn route(path: &str) -> Result<WsRoute, Rejection> {
    match path.strip_prefix("/ws/") {
        Some("echo") => Ok(WsRoute::Echo),
        Some(rest) => match rest.split_once('/') {
            Some(("delay", ms)) => routes::parse_milliseconds(ms).map(WsRoute::Delay),
            Some(("rooms", room)) if !room.is_empty() && !room.contains('/') => Ok(WsRoute::Room(room.to_owned())),
            _ => Err(Rejection::NotFound),
        },
        None => Err(Rejection::NotFound),
    }
}

pub(crate) fn is_websocket_path(path: &str) -> bool {
    path.starts_with("/ws/")
}

/// `Sec-WebSocket-Accept` for a key: base64 of SHA-1 of the key and RFC 6455's GUID.
pub fn accept_key(key: &[u8]) -> String {
    use base64::Engine as _;
    let mut context = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    context.update(key);
    context.update(GUID);
    base64::engine::general_purpose::STANDARD.encode(context.finish().as_ref())
}

/// Answers an upgrade under `/ws/`: `101` and the connection served from then on, or why not.
pub(crate) fn upgrade(state: &Arc<WebSocketState>, mut request: Request<Incoming>) -> Response<Full<Bytes>> {
    let route = match route(request.uri().path()) {
        Ok(route) => route,
        Err(rejection) => return routes::reject(rejection),
    };
    let headers = request.headers();
    let has = |name, value: &str| {
        headers.get_all(name).iter().any(|header: &HeaderValue| {
            header.to_str().is_ok_and(|text| text.split(',').any(|part| part.trim().eq_ignore_ascii_case(value)))
        })
    };
    let key = headers.get(SEC_WEBSOCKET_KEY).map(|key| key.as_bytes().to_vec());
    let upgrade_asked = request.version() == Version::HTTP_11
        && has(UPGRADE, "websocket")
        && has(CONNECTION, "upgrade")
        && headers.get(SEC_WEBSOCKET_VERSION).is_some_and(|version| version == "13");
    let Some(key) = key.filter(|_| upgrade_asked) else {
        return routes::reject(Rejection::BadRequest(
            "not a WebSocket upgrade: GET over HTTP/1.1 with Upgrade: websocket, Connection: Upgrade, Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key".into(),
        ));
    };
    let on_upgrade = hyper::upgrade::on(&mut request);
    let state = Arc::clone(state);
    tokio::spawn(async move {
        if let Ok(upgraded) = on_upgrade.await {
            serve(TokioIo::new(upgraded), route, state).await;
        }
    });
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let response_headers = response.headers_mut();
    response_headers.insert(UPGRADE, HeaderValue::from_static("websocket"));
    response_headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    response_headers
        .insert(SEC_WEBSOCKET_ACCEPT, HeaderValue::from_str(&accept_key(&key)).expect("base64 is a header value"));
    response
}

/// What the writer sends: a data message (when it is due), or a control frame.
enum Outgoing {
    Data { payload: Arc<[u8]>, binary: bool, due: Option<Instant> },
    Control { opcode: u8, payload: Vec<u8> },
}

const OPCODE_TEXT: u8 = 0x1;
const OPCODE_BINARY: u8 = 0x2;
const OPCODE_CLOSE: u8 = 0x8;
const OPCODE_PING: u8 = 0x9;
const OPCODE_PONG: u8 = 0xA;

async fn serve<S>(stream: S, route: WsRoute, state: Arc<WebSocketState>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (mut reader, mut writer) = tokio::io::split(stream);
    let (queue, mut outgoing) = mpsc::channel::<Outgoing>(TCP_QUEUE);
    let id = state.next_id.fetch_add(1, Ordering::Relaxed);
    let room_queue = queue.clone();
    let deliver = Arc::new(move |message: Arc<[u8]>| room_queue.try_send(data(message)).is_ok());
    let player = Player::WebSocket { id, deliver };
    let writer_counts = Arc::clone(&state.counts);
    let writing = tokio::spawn(async move {
        let mut frame = Vec::new();
        while let Some(message) = outgoing.recv().await {
            frame.clear();
            let closing = match &message {
                Outgoing::Data { payload, binary, due } => {
                    if let Some(due) = due {
                        tokio::time::sleep_until(*due).await;
                    }
                    encode_frame(if *binary { OPCODE_BINARY } else { OPCODE_TEXT }, payload, &mut frame);
                    false
                }
                Outgoing::Control { opcode, payload } => {
                    encode_frame(*opcode, payload, &mut frame);
                    *opcode == OPCODE_CLOSE
                }
            };
            if writer.write_all(&frame).await.is_err() {
                return;
            }
            if closing {
                let _ = writer.shutdown().await;
                return;
            }
            if matches!(message, Outgoing::Data { .. }) {
                writer_counts.ws_out.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    if let WsRoute::Room(room) = &route {
        if state.rooms.join(room, &player).is_none() {
            let _ =
                queue.send(Outgoing::Control { opcode: OPCODE_CLOSE, payload: close_payload(1013, "room full") }).await;
        }
    }
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let mut fragments: Option<(u8, Vec<u8>)> = None;
    'reading: loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(length) => buffer.extend_from_slice(&chunk[..length]),
        }
        loop {
            let frame = match decode_frame(&mut buffer) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(code) => {
                    let _ =
                        queue.send(Outgoing::Control { opcode: OPCODE_CLOSE, payload: close_payload(code, "") }).await;
                    break 'reading;
                }
            };
            let (opcode, payload) = match frame.opcode {
                OPCODE_PING => {
                    let _ = queue.send(Outgoing::Control { opcode: OPCODE_PONG, payload: frame.payload }).await;
                    continue;
                }
                OPCODE_PONG => continue,
                OPCODE_CLOSE => {
                    let code = frame.payload.get(..2).unwrap_or_default().to_vec();
                    let _ = queue.send(Outgoing::Control { opcode: OPCODE_CLOSE, payload: code }).await;
                    break 'reading;
                }
                0 => match fragments.as_mut() {
                    Some((_, joined)) if joined.len() + frame.payload.len() <= MAX_MESSAGE => {
                        joined.extend_from_slice(&frame.payload);
                        if !frame.fin {
                            continue;
                        }
                        fragments.take().expect("matched above")
                    }
                    _ => {
                        let _ = queue
                            .send(Outgoing::Control { opcode: OPCODE_CLOSE, payload: close_payload(1002, "") })
                            .await;
                        break 'reading;
                    }
                },
                opcode if !frame.fin => {
                    fragments = Some((opcode, frame.payload));
                    continue;
                }
                opcode => (opcode, frame.payload),
            };
            state.counts.ws_in.fetch_add(1, Ordering::Relaxed);
            let binary = opcode == OPCODE_BINARY;
            let payload: Arc<[u8]> = payload.into();
            // Echoes keep the message's frame type (text or binary) and its order.
            let due = match &route {
                WsRoute::Room(_) => {
                    state.rooms.broadcast(&player, payload, &state.counts);
                    continue;
                }
                WsRoute::Echo => None,
                WsRoute::Delay(delay) => Some(Instant::now() + *delay),
            };
            if queue.try_send(Outgoing::Data { payload, binary, due }).is_err() {
                state.counts.ws_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    state.rooms.leave(&player);
    drop(player);
    drop(queue);
    let _ = writing.await;
}

/// A close frame's payload: the code, then the reason.
fn close_payload(code: u16, reason: &str) -> Vec<u8> {
    let mut payload = code.to_be_bytes().to_vec();
    payload.extend_from_slice(reason.as_bytes());
    payload
}

struct Frame {
    fin: bool,
    opcode: u8,
    payload: Vec<u8>,
}

/// The first whole frame of `buffer`, taken out and unmasked; `Err(code)` (the close code to
/// answer with) for an unmasked, oversized or malformed one.
fn decode_frame(buffer: &mut Vec<u8>) -> Result<Option<Frame>, u16> {
    if buffer.len() < 2 {
        return Ok(None);
    }
    let (first, second) = (buffer[0], buffer[1]);
    if first & 0x70 != 0 || second & 0x80 == 0 {
        return Err(1002); // reserved bits, or a client frame without its mask
    }
    let (length, header) = match second & 0x7F {
        126 if buffer.len() >= 4 => (u64::from(u16::from_be_bytes([buffer[2], buffer[3]])), 4),
        127 if buffer.len() >= 10 => (u64::from_be_bytes(buffer[2..10].try_into().expect("8 bytes")), 10),
        126 | 127 => return Ok(None),
        length => (u64::from(length), 2),
    };
    if length > MAX_MESSAGE as u64 {
        return Err(1009);
    }
    let (length, start) = (length as usize, header + 4);
    if buffer.len() < start + length {
        return Ok(None);
    }
    let mask = [buffer[header], buffer[header + 1], buffer[header + 2], buffer[header + 3]];
    let mut payload: Vec<u8> = buffer[start..start + length].to_vec();
    for (index, byte) in payload.iter_mut().enumerate() {
        *byte ^= mask[index % 4];
    }
    buffer.drain(..start + length);
    Ok(Some(Frame { fin: first & 0x80 != 0, opcode: first & 0x0F, payload }))
}

/// One whole server frame, unmasked.
fn encode_frame(opcode: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.push(0x80 | opcode);
    match payload.len() {
        length @ 0..=125 => out.push(length as u8),
        length @ 126..=65_535 => {
            out.push(126);
            out.extend_from_slice(&(length as u16).to_be_bytes());
        }
        length => {
            out.push(127);
            out.extend_from_slice(&(length as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
}

/// A message to a WebSocket member (a room's broadcast): binary unless it is text.
fn data(payload: Arc<[u8]>) -> Outgoing {
    let binary = std::str::from_utf8(&payload).is_err();
    Outgoing::Data { payload, binary, due: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_and_the_rfc_key_is_accepted() {
        assert_eq!(route("/ws/echo"), Ok(WsRoute::Echo));
        assert_eq!(route("/ws/delay/20"), Ok(WsRoute::Delay(Duration::from_millis(20))));
        assert_eq!(route("/ws/rooms/r1"), Ok(WsRoute::Room("r1".into())));
        assert_eq!(route("/ws/rooms/"), Err(Rejection::NotFound));
        assert_eq!(route("/ws/nope"), Err(Rejection::NotFound));
        assert!(matches!(route("/ws/delay/x"), Err(Rejection::BadRequest(_))));
        assert_eq!(accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn masked_client_frames_are_read_and_unmasked_ones_refused() {
        let mask = [7u8, 1, 2, 3];
        let mut frame = vec![0x81, 0x80 | 5];
        frame.extend_from_slice(&mask);
        frame.extend(b"hello".iter().enumerate().map(|(index, byte)| byte ^ mask[index % 4]));
        let mut buffer = frame[..6].to_vec();
        assert!(decode_frame(&mut buffer).unwrap().is_none());
        buffer.extend_from_slice(&frame[6..]);
        let decoded = decode_frame(&mut buffer).unwrap().unwrap();
        assert_eq!((decoded.fin, decoded.opcode, decoded.payload.as_slice()), (true, OPCODE_TEXT, &b"hello"[..]));
        assert!(buffer.is_empty());
        assert_eq!(decode_frame(&mut vec![0x81, 0x05, b'h']).err(), Some(1002));
    }
}

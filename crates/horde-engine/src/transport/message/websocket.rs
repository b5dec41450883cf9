//! A VU's WebSocket (RFC 6455, `ws://` and `wss://`) over the HTTP client's connection (TCP,
//! or rustls with the plan's roots and `insecure`): the HTTP/1.1 upgrade, then a small frame
//! codec. What the VU sends goes out as one masked frame (text, or binary for hex and base64
//! payloads); what it reads is data frames, fragments joined. The server's pings are answered
//! with pongs as they are read; its close frame is answered and ends the connection as
//! `ws_closed`, its code in the detail.
//!
//! Memory per connection: the read buffer (4 KiB once a frame came, grown only for a larger
//! frame) and the write buffer (the largest frame sent); no task of its own.

use crate::transport::http::Connection;
use bytes::{Buf, BytesMut};
use horde_metrics::ErrorKind;
use std::io;

/// RFC 6455's GUID, appended to the key before hashing (`Sec-WebSocket-Accept`).
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// The largest message read: a frame (or fragments) announcing more breaks the connection.
const MAX_MESSAGE_BYTES: usize = horde_plan::MAX_MESSAGE_BYTES;
const READ_CHUNK: usize = 4096;

const OPCODE_CONTINUATION: u8 = 0x0;
const OPCODE_TEXT: u8 = 0x1;
const OPCODE_BINARY: u8 = 0x2;
const OPCODE_CLOSE: u8 = 0x8;
const OPCODE_PING: u8 = 0x9;
const OPCODE_PONG: u8 = 0xA;

/// The server closed the WebSocket with a close frame: `ws_closed`, its code in the detail.
#[derive(Debug)]
pub(crate) struct Closed {
    pub code: Option<u16>,
    pub reason: String,
}

impl std::fmt::Display for Closed {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code {
            Some(code) if self.reason.is_empty() => write!(formatter, "the server closed the WebSocket (code {code})"),
            Some(code) => write!(formatter, "the server closed the WebSocket (code {code}: {})", self.reason),
            None => write!(formatter, "the server closed the WebSocket (no code)"),
        }
    }
}

impl std::error::Error for Closed {}

/// The error kind of an IO error from a WebSocket: `ws_closed` for a close frame.
pub(crate) fn error_kind(error: &io::Error) -> ErrorKind {
    match error.get_ref().and_then(|inner| inner.downcast_ref::<Closed>()) {
        Some(_) => ErrorKind::WsClosed,
        None => ErrorKind::from_io(error),
    }
}

/// The upgrade request, rendered.
pub(crate) struct Upgrade<'a> {
    /// The request target: base_url's path and the step's, its query included.
    pub path: &'a str,
    pub host_header: &'a str,
    pub headers: &'a [(&'a str, String)],
    pub cookie: Option<String>,
    /// The largest response head read (`target.max_response_header_bytes`).
    pub max_head_bytes: usize,
}

/// What the upgrade's response said besides "switching protocols".
pub(crate) struct Upgraded {
    pub link: WebSocketLink,
    /// The `Set-Cookie` values of the 101 response, for the VU's jar.
    pub set_cookies: Vec<String>,
    /// The request and response heads' bytes on the wire.
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

pub(crate) struct WebSocketLink {
    connection: Connection,
    /// What came and is not yet a whole frame.
    buffer: BytesMut,
    /// Frames to write (a pong or a close reply waits here until the next read or send) and
    /// how much of them went.
    pending: Vec<u8>,
    written: usize,
    /// A fragmented message being joined: its first frame's opcode, its bytes, and the bytes
    /// its frames took on the wire.
    fragments: Option<(u8, Vec<u8>, u64)>,
    /// Draws the frames' masks (RFC 6455 asks them unpredictable to the network's caches, not
    /// secret).
    random: u64,
}

/// One data message read (text or binary alike), or a pong, and the bytes its frames took on
/// the wire.
pub(crate) struct Message {
    pub payload: Vec<u8>,
    pub wire_bytes: u64,
    /// A pong: the answer to a ping control frame, not a message of the application.
    pub control: bool,
}

impl WebSocketLink {
    /// Sends the upgrade on `connection` and reads its answer: a 101 with the right
    /// `Sec-WebSocket-Accept`, or the failure's kind and words (`status_NNN` for a refusal).
    pub async fn upgrade(
        mut connection: Connection,
        upgrade: &Upgrade<'_>,
        seed: u64,
    ) -> Result<Upgraded, (ErrorKind, String)> {
        let mut random = seed | 1;
        let mut key_bytes = [0u8; 16];
        for chunk in key_bytes.chunks_mut(8) {
            chunk.copy_from_slice(&next_random(&mut random).to_le_bytes());
        }
        let key = base64_encode(&key_bytes);
        let mut request = String::with_capacity(256);
        request.push_str("GET ");
        request.push_str(upgrade.path);
        request.push_str(" HTTP/1.1\r\nHost: ");
        request.push_str(upgrade.host_header);
        request.push_str(
            "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ",
        );
        request.push_str(&key);
        request.push_str("\r\n");
        for (name, value) in upgrade.headers {
            request.push_str(name);
            request.push_str(": ");
            request.push_str(value);
            request.push_str("\r\n");
        }
        if let Some(cookie) = &upgrade.cookie {
            request.push_str("Cookie: ");
            request.push_str(cookie);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        let failed = |error: io::Error, doing: &str| (ErrorKind::from_io(&error), format!("{error} {doing}"));
        connection.write_all(request.as_bytes()).await.map_err(|error| failed(error, "sending the upgrade"))?;
        let mut buffer = BytesMut::with_capacity(READ_CHUNK);
        let head_length = loop {
            if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
                break end + 4;
            }
            if buffer.len() > upgrade.max_head_bytes {
                return Err((
                    ErrorKind::HeadersTooLarge,
                    format!("the upgrade's response head passed {} bytes", upgrade.max_head_bytes),
                ));
            }
            buffer.reserve(READ_CHUNK);
            if connection
                .read_buf(&mut buffer)
                .await
                .map_err(|error| failed(error, "reading the upgrade's response"))?
                == 0
            {
                return Err((ErrorKind::Reset, "the target closed the connection before answering the upgrade".into()));
            }
        };
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut headers);
        let protocol = |why: String| (ErrorKind::Protocol, why);
        response
            .parse(&buffer[..head_length])
            .map_err(|error| protocol(format!("the upgrade's response is not HTTP: {error}")))?;
        let status = response.code.unwrap_or(0);
        if status != 101 {
            let reason = response.reason.unwrap_or("");
            return Err((
                ErrorKind::Status(status),
                format!("the upgrade to {} was refused: {status} {reason}", upgrade.path),
            ));
        }
        let header = |name: &str| {
            response.headers.iter().find(|header| header.name.eq_ignore_ascii_case(name)).map(|header| header.value)
        };
        if !header("upgrade").is_some_and(|value| value.eq_ignore_ascii_case(b"websocket")) {
            return Err(protocol("a 101 without 'Upgrade: websocket'".into()));
        }
        let expected = accept_key(key.as_bytes());
        if header("sec-websocket-accept").map(<[u8]>::trim_ascii) != Some(expected.as_bytes()) {
            return Err(protocol(format!("Sec-WebSocket-Accept is not the key's ({expected} expected)")));
        }
        let set_cookies = response
            .headers
            .iter()
            .filter(|header| header.name.eq_ignore_ascii_case("set-cookie"))
            .map(|header| String::from_utf8_lossy(header.value).into_owned())
            .collect();
        // Frames the server sent right behind its head stay for the first read.
        buffer.advance(head_length);
        let link = WebSocketLink { connection, buffer, pending: Vec::new(), written: 0, fragments: None, random };
        Ok(Upgraded { link, set_cookies, bytes_sent: request.len() as u64, bytes_received: head_length as u64 })
    }

    /// Sends one message as a masked frame (text or binary); the bytes it took on the wire.
    pub async fn send(&mut self, message: &[u8], binary: bool) -> io::Result<u64> {
        let before = self.pending.len();
        let mask = next_random(&mut self.random) as u32;
        encode_frame(if binary { OPCODE_BINARY } else { OPCODE_TEXT }, message, mask.to_be_bytes(), &mut self.pending);
        let wire_bytes = (self.pending.len() - before) as u64;
        self.flush_pending().await?;
        Ok(wire_bytes)
    }

    /// Sends a ping control frame (its payload at most 125 bytes); the bytes it took.
    pub async fn send_ping(&mut self, payload: &[u8]) -> io::Result<u64> {
        if payload.len() > 125 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a ping control frame carries at most 125 bytes"));
        }
        let before = self.pending.len();
        let mask = next_random(&mut self.random) as u32;
        encode_frame(OPCODE_PING, payload, mask.to_be_bytes(), &mut self.pending);
        let wire_bytes = (self.pending.len() - before) as u64;
        self.flush_pending().await?;
        Ok(wire_bytes)
    }

    /// The next data message or pong (cancel safe: a frame partly read stays in the buffer, a pong
    /// partly written stays pending).
    pub async fn recv(&mut self) -> io::Result<Message> {
        loop {
            if let Some(message) = self.take_message()? {
                return Ok(message);
            }
            if !self.pending.is_empty() {
                self.flush_pending().await?;
            }
            if self.buffer.capacity() - self.buffer.len() < 1024 {
                self.buffer.reserve(READ_CHUNK);
            }
            if self.connection.read_buf(&mut self.buffer).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the target closed the connection without a close frame",
                ));
            }
        }
    }

    /// Sends a close frame (code 1000), best effort: the VU is done with the connection.
    pub async fn close(&mut self) {
        let mask = next_random(&mut self.random) as u32;
        encode_frame(OPCODE_CLOSE, &1000u16.to_be_bytes(), mask.to_be_bytes(), &mut self.pending);
        let _ = self.flush_pending().await;
    }

    async fn flush_pending(&mut self) -> io::Result<()> {
        while self.written < self.pending.len() {
            let written = self.connection.write_some(&self.pending[self.written..]).await?;
            if written == 0 {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "the connection took no more bytes"));
            }
            self.written += written;
        }
        self.connection.flush().await?;
        self.pending.clear();
        self.written = 0;
        // A large frame sent once does not hold its buffer for the connection's life.
        if self.pending.capacity() > 64 * 1024 {
            self.pending = Vec::new();
        }
        Ok(())
    }

    /// Takes whole frames out of the buffer until a data message is complete; control frames
    /// are answered (ping) or end the connection (close) on the way.
    fn take_message(&mut self) -> io::Result<Option<Message>> {
        loop {
            let Some(frame) = decode_frame(&mut self.buffer)? else { return Ok(None) };
            match frame.opcode {
                OPCODE_PING => {
                    let mask = next_random(&mut self.random) as u32;
                    encode_frame(OPCODE_PONG, &frame.payload, mask.to_be_bytes(), &mut self.pending);
                }
                OPCODE_PONG => {
                    return Ok(Some(Message { payload: frame.payload, wire_bytes: frame.wire_bytes, control: true }))
                }
                OPCODE_CLOSE => {
                    let code =
                        (frame.payload.len() >= 2).then(|| u16::from_be_bytes([frame.payload[0], frame.payload[1]]));
                    let reason = String::from_utf8_lossy(frame.payload.get(2..).unwrap_or_default()).into_owned();
                    // Answered with the same code, as RFC 6455 asks; sent with the next write
                    // if ever (the connection is dropped after this error).
                    let mask = next_random(&mut self.random) as u32;
                    encode_frame(
                        OPCODE_CLOSE,
                        frame.payload.get(..2).unwrap_or_default(),
                        mask.to_be_bytes(),
                        &mut self.pending,
                    );
                    return Err(io::Error::other(Closed { code, reason }));
                }
                OPCODE_TEXT | OPCODE_BINARY if self.fragments.is_none() => {
                    if frame.fin {
                        return Ok(Some(Message {
                            payload: frame.payload,
                            wire_bytes: frame.wire_bytes,
                            control: false,
                        }));
                    }
                    self.fragments = Some((frame.opcode, frame.payload, frame.wire_bytes));
                }
                OPCODE_CONTINUATION if self.fragments.is_some() => {
                    let (_, joined, wire_bytes) = self.fragments.as_mut().expect("checked above");
                    if joined.len() + frame.payload.len() > MAX_MESSAGE_BYTES {
                        return Err(broken(format!("a fragmented message past {MAX_MESSAGE_BYTES} bytes")));
                    }
                    joined.extend_from_slice(&frame.payload);
                    *wire_bytes += frame.wire_bytes;
                    if frame.fin {
                        let (_, payload, wire_bytes) = self.fragments.take().expect("checked above");
                        return Ok(Some(Message { payload, wire_bytes, control: false }));
                    }
                }
                opcode => return Err(broken(format!("an unexpected frame (opcode {opcode:#x})"))),
            }
        }
    }
}

struct Frame {
    fin: bool,
    opcode: u8,
    payload: Vec<u8>,
    wire_bytes: u64,
}

/// The first whole frame of `buffer`, taken out (unmasked if the server masked it, which it
/// should not); `None` until it is all there.
fn decode_frame(buffer: &mut BytesMut) -> io::Result<Option<Frame>> {
    if buffer.len() < 2 {
        return Ok(None);
    }
    let (first, second) = (buffer[0], buffer[1]);
    if first & 0x70 != 0 {
        return Err(broken("reserved bits set (no extension was negotiated)".into()));
    }
    let (fin, opcode, masked) = (first & 0x80 != 0, first & 0x0F, second & 0x80 != 0);
    let (length, mut header) = match second & 0x7F {
        126 if buffer.len() >= 4 => (u64::from(u16::from_be_bytes([buffer[2], buffer[3]])), 4),
        127 if buffer.len() >= 10 => (u64::from_be_bytes(buffer[2..10].try_into().expect("8 bytes")), 10),
        126 | 127 => return Ok(None),
        length => (u64::from(length), 2),
    };
    if opcode >= OPCODE_CLOSE && (!fin || length > 125) {
        return Err(broken("a control frame fragmented or over 125 bytes".into()));
    }
    if length > MAX_MESSAGE_BYTES as u64 {
        return Err(broken(format!("a frame of {length} bytes, past {MAX_MESSAGE_BYTES}")));
    }
    let length = length as usize;
    let mask = if masked {
        if buffer.len() < header + 4 {
            return Ok(None);
        }
        header += 4;
        Some([buffer[header - 4], buffer[header - 3], buffer[header - 2], buffer[header - 1]])
    } else {
        None
    };
    if buffer.len() < header + length {
        buffer.reserve(header + length - buffer.len());
        return Ok(None);
    }
    buffer.advance(header);
    let mut payload = buffer.split_to(length).to_vec();
    if let Some(mask) = mask {
        apply_mask(&mut payload, mask);
    }
    Ok(Some(Frame { fin, opcode, payload, wire_bytes: (header + length) as u64 }))
}

/// Appends one whole frame (FIN set), masked as a client's frames must be.
fn encode_frame(opcode: u8, payload: &[u8], mask: [u8; 4], out: &mut Vec<u8>) {
    out.push(0x80 | opcode);
    match payload.len() {
        length @ 0..=125 => out.push(0x80 | length as u8),
        length @ 126..=65_535 => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(length as u16).to_be_bytes());
        }
        length => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(length as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    let start = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[start..], mask);
}

/// XORs `bytes` with the mask repeated, eight bytes at a time.
pub(crate) fn apply_mask(bytes: &mut [u8], mask: [u8; 4]) {
    let wide = u64::from_ne_bytes([mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3]]);
    let mut chunks = bytes.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let value = u64::from_ne_bytes(chunk.try_into().expect("8 bytes")) ^ wide;
        chunk.copy_from_slice(&value.to_ne_bytes());
    }
    for (index, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= mask[index % 4];
    }
}

/// `Sec-WebSocket-Accept` for a key: base64 of SHA-1 of the key and the GUID.
pub(crate) fn accept_key(key: &[u8]) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    context.update(key);
    context.update(GUID);
    base64_encode(context.finish().as_ref())
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// xorshift64*: masks and keys, cheap and seeded per connection.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

fn broken(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("the WebSocket is broken: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_example_key_gives_its_accept() {
        // RFC 6455 section 1.3.
        assert_eq!(accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn frames_round_trip_masked_in_every_length_form() {
        for length in [0usize, 5, 125, 126, 65_535, 65_536, 70_000] {
            let payload: Vec<u8> = (0..length).map(|index| index as u8).collect();
            let mut wire = Vec::new();
            encode_frame(OPCODE_BINARY, &payload, [1, 2, 3, 4], &mut wire);
            assert!(length == 0 || wire[wire.len() - length..] != payload[..], "masked on the wire ({length})");
            // Fed in two halves: nothing until the frame is whole.
            let mut buffer = BytesMut::from(&wire[..wire.len() / 2]);
            assert!(decode_frame(&mut buffer).unwrap().is_none() || wire.len() < 4);
            buffer.extend_from_slice(&wire[wire.len() / 2..]);
            let frame = decode_frame(&mut buffer).unwrap().unwrap();
            assert_eq!(
                (frame.fin, frame.opcode, frame.payload.len(), frame.wire_bytes),
                (true, OPCODE_BINARY, length, wire.len() as u64)
            );
            assert_eq!(frame.payload, payload);
            assert!(buffer.is_empty());
        }
    }

    #[test]
    fn a_server_frame_is_read_unmasked_and_broken_ones_are_errors() {
        let mut buffer = BytesMut::from(&[0x81u8, 0x05, b'h', b'e', b'l', b'l', b'o'][..]);
        let frame = decode_frame(&mut buffer).unwrap().unwrap();
        assert_eq!((frame.opcode, frame.payload.as_slice()), (OPCODE_TEXT, &b"hello"[..]));
        let mut reserved = BytesMut::from(&[0xC1u8, 0x00][..]);
        assert!(decode_frame(&mut reserved).is_err());
        let mut long_ping = BytesMut::from(&[0x89u8, 126, 0, 200][..]);
        assert!(decode_frame(&mut long_ping).is_err());
    }
}

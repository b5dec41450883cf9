//! Reading one HTTP/1.1 response: headers parsed with httparse, the body read to its end by
//! Content-Length, chunked encoding, or connection close, and counted. The body and headers are
//! kept only when a step needs them (extractors, checks); `Set-Cookie` values always are, for
//! the VU's cookie jar.

use super::Connection;
use horde_metrics::ErrorKind;

/// Headers parsed into an array on the stack; a response with more is parsed again with an
/// array on the heap as long as its head has lines (the head's size is what is bounded).
const STACK_HEADERS: usize = 64;
/// A VU's read buffer starts at this size and goes back to it after a response whose head made
/// it grow past `KEPT_BUFFER_BYTES`, so that one large head does not stay in every VU.
const INITIAL_BUFFER_BYTES: usize = 4096;
const KEPT_BUFFER_BYTES: usize = 64 * 1024;

/// The plan's bounds on what one response may make a VU hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// `target.max_response_header_bytes`: a longer head fails as `headers_too_large`.
    pub max_head_bytes: usize,
    /// `target.max_kept_body_bytes`: the most of a body kept for checks and extractors.
    pub max_kept_body_bytes: usize,
}

impl Default for ReadLimits {
    fn default() -> Self {
        Self {
            max_head_bytes: horde_plan::DEFAULT_MAX_RESPONSE_HEADER_BYTES as usize,
            max_kept_body_bytes: horde_plan::DEFAULT_MAX_KEPT_BODY_BYTES as usize,
        }
    }
}

/// What the VU needs to know about a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub bytes_received: u64,
    /// False when the server asked to close, or framed the body by closing.
    pub keep_alive: bool,
}

/// What a step wants kept of a response. Owned by the VU and reused, so keeping costs no
/// allocation once the buffers have grown.
#[derive(Debug, Default)]
pub struct Capture {
    pub keep_body: bool,
    pub keep_headers: bool,
    /// The decoded body (chunked framing removed), when `keep_body`: at most the read's
    /// `max_kept_body_bytes` of it.
    pub body: Vec<u8>,
    /// The body was longer than `max_kept_body_bytes`: `body` holds only its start (the rest
    /// was read and counted, not kept).
    pub body_truncated: bool,
    /// How much of the body may be kept (set by each read from its limits).
    body_limit: usize,
    /// Every header as (name, value), when `keep_headers`.
    pub headers: Vec<(String, String)>,
    /// Every `Set-Cookie` value, always.
    pub set_cookies: Vec<String>,
    /// For a response with status >= 400 only (the error detail): its status line, and the
    /// first [`ERROR_BODY_PREFIX_BYTES`] of its body. Untouched by responses below 400.
    pub error_status_line: String,
    pub error_body: Vec<u8>,
    pub(super) error_wanted: bool,
    /// Over HTTP/2: the request's body waited longer than [`super::H2_STALL`] for send
    /// capacity (the step's `h2_stalls`); taken by the VU after each exchange.
    pub h2_stalled: bool,
    /// Exchange recording (`crate::exchange`): when set, the response's head as received and
    /// the first `MAX_BODY_BYTES` of its decoded body are kept too, whatever the step needs.
    /// False (and both buffers empty) in a run without recording.
    pub record: bool,
    pub recorded_head: Vec<u8>,
    pub recorded_body: Vec<u8>,
    pub recorded_body_truncated: bool,
}

/// How much of an error response's body its error detail shows.
pub const ERROR_BODY_PREFIX_BYTES: usize = 120;

impl Capture {
    pub(super) fn clear(&mut self, body_limit: usize) {
        self.body.clear();
        self.body_truncated = false;
        self.body_limit = body_limit;
        self.headers.clear();
        self.set_cookies.clear();
        if self.error_wanted {
            self.error_wanted = false;
            self.error_status_line.clear();
            self.error_body.clear();
        }
        if self.record {
            self.recorded_head.clear();
            self.recorded_body.clear();
            self.recorded_body_truncated = false;
        }
    }

    pub(super) fn keep(&mut self, bytes: &[u8]) {
        if self.error_wanted && self.error_body.len() < ERROR_BODY_PREFIX_BYTES {
            let room = ERROR_BODY_PREFIX_BYTES - self.error_body.len();
            self.error_body.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        if self.record {
            let room = crate::exchange::MAX_BODY_BYTES.saturating_sub(self.recorded_body.len());
            self.recorded_body_truncated |= bytes.len() > room;
            self.recorded_body.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        if !self.keep_body || bytes.is_empty() {
            return;
        }
        let room = self.body_limit.saturating_sub(self.body.len());
        if bytes.len() > room {
            self.body_truncated = true;
        }
        self.body.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

/// Why reading a response failed, and whether any byte had arrived (a reused connection that
/// the server closed while idle yields no byte: the request is safe to send again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadError {
    pub kind: ErrorKind,
    pub nothing_received: bool,
}

#[derive(Debug, Clone, Copy)]
enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

/// Reads one response from `connection`, using `buffer` (kept by the VU between requests).
pub async fn read_response(
    connection: &mut Connection,
    buffer: &mut Vec<u8>,
    is_head: bool,
    capture: &mut Capture,
    limits: ReadLimits,
) -> Result<Response, ReadError> {
    if buffer.len() > KEPT_BUFFER_BYTES {
        buffer.truncate(INITIAL_BUFFER_BYTES);
        buffer.shrink_to_fit();
    }
    if buffer.len() < INITIAL_BUFFER_BYTES {
        buffer.resize(INITIAL_BUFFER_BYTES, 0);
    }
    capture.clear(limits.max_kept_body_bytes);
    let mut received: u64 = 0;
    // Bytes already in the buffer that belong to the next head (after an interim response).
    let mut carried = 0;
    loop {
        let (status, header_len, filled, framing, keep_alive) =
            read_head(connection, buffer, carried, &mut received, is_head, capture, limits.max_head_bytes).await?;
        if (100..200).contains(&status) && status != 101 {
            capture.clear(limits.max_kept_body_bytes);
            // An interim response (100 Continue): drop its head and read the real one, which
            // may already have arrived in the same read.
            buffer.copy_within(header_len..filled, 0);
            carried = filled - header_len;
            continue;
        }
        let already = filled - header_len;
        let keep_alive = match framing {
            Framing::None => keep_alive,
            Framing::Length(length) => {
                let first = already.min(length as usize);
                capture.keep(&buffer[header_len..header_len + first]);
                let mut remaining = length.saturating_sub(already as u64);
                while remaining > 0 {
                    let read = read_some(connection, buffer, 0, &mut received).await?;
                    capture.keep(&buffer[..read.min(remaining as usize)]);
                    remaining = remaining.saturating_sub(read as u64);
                }
                keep_alive
            }
            Framing::Chunked => {
                let mut decoder = ChunkedDecoder::default();
                let mut done = decoder.feed(&buffer[header_len..filled], capture).map_err(protocol)?;
                while !done {
                    let read = read_some(connection, buffer, 0, &mut received).await?;
                    done = decoder.feed(&buffer[..read], capture).map_err(protocol)?;
                }
                keep_alive
            }
            Framing::UntilClose => {
                capture.keep(&buffer[header_len..filled]);
                loop {
                    match connection.read(buffer).await {
                        Ok(0) => break,
                        Ok(read) => {
                            received += read as u64;
                            capture.keep(&buffer[..read]);
                        }
                        Err(error) => {
                            return Err(ReadError { kind: ErrorKind::from_io(&error), nothing_received: false })
                        }
                    }
                }
                false
            }
        };
        return Ok(Response { status, bytes_received: received, keep_alive });
    }
}

fn protocol(_: ()) -> ReadError {
    ReadError { kind: ErrorKind::Protocol, nothing_received: false }
}

/// Reads into `buffer[at..]`; end of stream mid-response is a reset.
async fn read_some(
    connection: &mut Connection,
    buffer: &mut [u8],
    at: usize,
    received: &mut u64,
) -> Result<usize, ReadError> {
    match connection.read(&mut buffer[at..]).await {
        Ok(0) => Err(ReadError { kind: ErrorKind::Reset, nothing_received: *received == 0 }),
        Ok(read) => {
            *received += read as u64;
            Ok(read)
        }
        Err(error) => Err(ReadError { kind: ErrorKind::from_io(&error), nothing_received: *received == 0 }),
    }
}

async fn read_head(
    connection: &mut Connection,
    buffer: &mut Vec<u8>,
    carried: usize,
    received: &mut u64,
    is_head: bool,
    capture: &mut Capture,
    max_head_bytes: usize,
) -> Result<(u16, usize, usize, Framing, bool), ReadError> {
    let mut filled = carried;
    // Where the bytes not yet looked at begin: past its first KiB, a head is parsed again only
    // once a line has ended among them, so that a long head arriving in many small pieces is not
    // parsed again for each piece (a short one is, so that garbage is told at once).
    let mut unseen = 0;
    loop {
        if filled > 0 && (filled <= 1024 || buffer[unseen..filled].contains(&b'\n')) {
            let parsed = parse_head(&buffer[..filled], |response, header_len| {
                let status = response.code.unwrap_or(0);
                for header in response.headers.iter() {
                    let is_cookie = header.name.eq_ignore_ascii_case("set-cookie");
                    if is_cookie || capture.keep_headers {
                        let value = String::from_utf8_lossy(header.value).into_owned();
                        if capture.keep_headers {
                            capture.headers.push((header.name.to_owned(), value.clone()));
                        }
                        if is_cookie {
                            capture.set_cookies.push(value);
                        }
                    }
                }
                if status < 100 {
                    return Err(()); // httparse reads any three digits; HTTP's codes start at 100
                }
                if status >= 400 {
                    capture.error_wanted = true;
                    capture.error_status_line = format!(
                        "HTTP/1.{} {status} {}",
                        response.version.unwrap_or(1),
                        response.reason.unwrap_or_default()
                    );
                }
                framing_of(response, status, is_head)
                    .map(|(framing, keep_alive)| (status, header_len, framing, keep_alive))
            });
            match parsed {
                Ok(Some(Ok((status, header_len, framing, keep_alive)))) => {
                    if capture.record {
                        capture.recorded_head.clear();
                        capture
                            .recorded_head
                            .extend_from_slice(&buffer[..header_len.min(crate::exchange::MAX_HEAD_BYTES)]);
                    }
                    return Ok((status, header_len, filled, framing, keep_alive));
                }
                Ok(None) => {}
                Ok(Some(Err(()))) | Err(()) => return Err(protocol(())),
            }
        }
        unseen = filled;
        if filled == buffer.len() {
            if buffer.len() >= max_head_bytes {
                return Err(ReadError { kind: ErrorKind::HeadersTooLarge, nothing_received: false });
            }
            buffer.resize((buffer.len() * 2).min(max_head_bytes), 0);
        }
        filled += read_some(connection, buffer, filled, received).await?;
    }
}

/// Parses a response head; `complete` reads it when it is whole. `Ok(None)`: more bytes are
/// needed. Headers go into an array on the stack, or, when there are more than it holds, into
/// one on the heap with a place for each line of the head.
fn parse_head<T>(
    bytes: &[u8],
    complete: impl FnOnce(&httparse::Response<'_, '_>, usize) -> T,
) -> Result<Option<T>, ()> {
    let mut stack = [httparse::EMPTY_HEADER; STACK_HEADERS];
    let mut response = httparse::Response::new(&mut stack);
    match response.parse(bytes) {
        Ok(httparse::Status::Complete(header_len)) => return Ok(Some(complete(&response, header_len))),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {}
        Err(_) => return Err(()),
    }
    let lines = bytes.iter().filter(|&&byte| byte == b'\n').count() + 1;
    let mut heap = vec![httparse::EMPTY_HEADER; lines];
    let mut response = httparse::Response::new(&mut heap);
    match response.parse(bytes) {
        Ok(httparse::Status::Complete(header_len)) => Ok(Some(complete(&response, header_len))),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(_) => Err(()),
    }
}

fn framing_of(response: &httparse::Response<'_, '_>, status: u16, is_head: bool) -> Result<(Framing, bool), ()> {
    let mut length = None;
    let mut chunked = false;
    // HTTP/1.1 keeps the connection unless told otherwise; HTTP/1.0 closes unless told otherwise.
    let mut keep_alive = response.version == Some(1);
    for header in response.headers.iter() {
        if header.name.eq_ignore_ascii_case("content-length") {
            let text = std::str::from_utf8(header.value).map_err(|_| ())?;
            length = Some(text.trim().parse::<u64>().map_err(|_| ())?);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = header.value.eq_ignore_ascii_case(b"chunked") || header.value.ends_with(b"chunked");
        } else if header.name.eq_ignore_ascii_case("connection") {
            if header.value.eq_ignore_ascii_case(b"close") {
                keep_alive = false;
            } else if header.value.eq_ignore_ascii_case(b"keep-alive") {
                keep_alive = true;
            }
        }
    }
    let framing = if is_head || status == 204 || status == 304 || (100..200).contains(&status) {
        Framing::None
    } else if chunked {
        Framing::Chunked
    } else if let Some(length) = length {
        Framing::Length(length)
    } else {
        Framing::UntilClose
    };
    Ok((framing, keep_alive))
}

/// Walks a chunked body as it arrives, without keeping it.
#[derive(Debug, Default)]
struct ChunkedDecoder {
    state: ChunkState,
    size: u64,
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
enum ChunkState {
    #[default]
    Size,
    Extension,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    /// After the last chunk: trailer lines until an empty line. `true` when the current line is empty so far.
    Trailer(bool),
    TrailerLf(bool),
    Done,
}

impl ChunkedDecoder {
    /// Feeds the next bytes, keeping chunk data in `capture`; `Ok(true)` once the whole body
    /// has been seen.
    fn feed(&mut self, mut bytes: &[u8], capture: &mut Capture) -> Result<bool, ()> {
        while let Some(&byte) = bytes.first() {
            match self.state {
                ChunkState::Size => match byte {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        let digit = (byte as char).to_digit(16).ok_or(())? as u64;
                        self.size = self.size.checked_mul(16).and_then(|size| size.checked_add(digit)).ok_or(())?;
                    }
                    b';' | b' ' | b'\t' => self.state = ChunkState::Extension,
                    b'\r' => self.state = ChunkState::SizeLf,
                    _ => return Err(()),
                },
                ChunkState::Extension => {
                    if byte == b'\r' {
                        self.state = ChunkState::SizeLf;
                    }
                }
                ChunkState::SizeLf => {
                    if byte != b'\n' {
                        return Err(());
                    }
                    self.state = if self.size == 0 { ChunkState::Trailer(true) } else { ChunkState::Data };
                }
                ChunkState::Data => {
                    let take = (self.size as usize).min(bytes.len());
                    capture.keep(&bytes[..take]);
                    self.size -= take as u64;
                    bytes = &bytes[take..];
                    if self.size == 0 {
                        self.state = ChunkState::DataCr;
                    }
                    continue;
                }
                ChunkState::DataCr => {
                    if byte != b'\r' {
                        return Err(());
                    }
                    self.state = ChunkState::DataLf;
                }
                ChunkState::DataLf => {
                    if byte != b'\n' {
                        return Err(());
                    }
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailer(empty) => {
                    self.state = if byte == b'\r' { ChunkState::TrailerLf(empty) } else { ChunkState::Trailer(false) };
                }
                ChunkState::TrailerLf(empty) => {
                    if byte != b'\n' {
                        return Err(());
                    }
                    self.state = if empty { ChunkState::Done } else { ChunkState::Trailer(true) };
                }
                ChunkState::Done => return Ok(true),
            }
            bytes = &bytes[1..];
        }
        Ok(self.state == ChunkState::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_in_pieces() {
        let body = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Trailer: 1\r\n\r\n";
        for split in 0..body.len() {
            let mut decoder = ChunkedDecoder::default();
            let mut capture = Capture { keep_body: true, body_limit: usize::MAX, ..Capture::default() };
            let first = decoder.feed(&body[..split], &mut capture).unwrap();
            assert!(!first, "done too early at {split}");
            assert!(decoder.feed(&body[split..], &mut capture).unwrap(), "not done after split {split}");
            assert_eq!(capture.body, b"Wikipedia in\r\n\r\nchunks.");
        }
        let mut bad = ChunkedDecoder::default();
        assert!(bad.feed(b"zz\r\n", &mut Capture::default()).is_err());
    }
}

//! HTTP/2 (`target.http_version` "2" or "auto"): connections opened by the same [`Connector`]
//! (TCP, TLS with ALPN) and handed to the `h2` crate, whose connection task runs beside the VUs
//! on the worker's runtime. A request is the HTTP/1.1 encoding the plan already made, read again
//! into HTTP/2's form, so that templates, cookies and headers work the same over both protocols:
//! once per plan for a request with nothing templated ([`H2Request`], kept beside its HTTP/1.1
//! bytes), per send for one rendered; the response fills the same [`Capture`] as an HTTP/1.1
//! one, so checks, extractors, cookies and recorded exchanges do not know which protocol it was.
//!
//! Bytes counted: a request as its HTTP/1.1 encoding, a response as its decoded head (status
//! line and headers written as HTTP/1.1 would) plus its body. HPACK compression and framing
//! are not measured: the figures compare across protocols, not with the wire.

use super::{Capture, Connection, Connector, Endpoint, ReadLimits, Scheme};
use bytes::Bytes;
use horde_metrics::ErrorKind;
use horde_plan::Http2Settings;
use std::sync::Arc;

/// A handle on an HTTP/2 connection: cloned, it lets several VUs open streams on it at once.
/// With `target.http2.max_concurrent_streams`, a semaphore shared by its clones keeps the
/// streams open at once within that cap (h2 keeps only the server's limit).
#[derive(Clone)]
pub struct H2Sender {
    sender: h2::client::SendRequest<Bytes>,
    streams: Option<Arc<tokio::sync::Semaphore>>,
}

/// How a plan that may speak HTTP/2 chooses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Http2Mode {
    /// `"2"`: h2c with prior knowledge over `http://`; over TLS the server must choose h2.
    Insist,
    /// `"auto"`: over TLS the server chooses between h2 and http/1.1; `http://` stays HTTP/1.1.
    Alpn,
}

/// What a connection turned out to speak.
pub enum Opened {
    Http2(H2Sender),
    Http1(Connection),
}

/// Why an HTTP/2 exchange failed, and what it says of the connection.
#[derive(Debug)]
pub struct H2Failure {
    pub kind: ErrorKind,
    pub detail: String,
    /// The connection can carry no more streams (GOAWAY, IO error, protocol error): drop it.
    pub connection_lost: bool,
    /// Nothing of the request reached the server (the connection was already closed when the
    /// stream was to open): the request may be sent again on a new connection.
    pub not_sent: bool,
}

/// Connects and, when HTTP/2 is to be spoken, performs its handshake. Over TLS with
/// [`Http2Mode::Alpn`], a server that chose http/1.1 gives an HTTP/1.1 connection; with
/// [`Http2Mode::Insist`] it is an `h2_refused` error. `settings` (`target.http2`, validated
/// within RFC 9113's bounds) give the receive windows advertised and the cap on streams.
pub async fn open(
    connector: &Connector,
    mode: Http2Mode,
    settings: &Http2Settings,
    limits: ReadLimits,
) -> Result<Opened, (ErrorKind, String)> {
    let connection = connector.connect_detailed().await?;
    let endpoint = connector.endpoint();
    let speak_h2 = match (&connection, mode) {
        (Connection::Plain(_), Http2Mode::Insist) => true,
        (Connection::Plain(_), Http2Mode::Alpn) => false,
        (Connection::Tls(_), _) => connection.negotiated_h2(),
    };
    if !speak_h2 {
        if mode == Http2Mode::Insist {
            return Err((
                ErrorKind::H2Refused,
                format!(
                    "{}:{} did not choose h2 in the TLS handshake (ALPN) and target.http_version is '2'",
                    endpoint.host, endpoint.port
                ),
            ));
        }
        return Ok(Opened::Http1(connection));
    }
    let mut builder = h2::client::Builder::new();
    // The windows' defaults (1 MiB per stream, 16 MiB per connection, horde-plan's) keep a
    // response of a few MiB from waiting on WINDOW_UPDATE round trips, as the RFC's 64 KiB would.
    let window = |bytes: u64| u32::try_from(bytes).unwrap_or(u32::MAX >> 1);
    builder
        .initial_window_size(window(settings.stream_window_bytes))
        .initial_connection_window_size(window(settings.connection_window_bytes))
        // The bound on a response head, as over HTTP/1.1 (the decoded header list).
        .max_header_list_size(u32::try_from(limits.max_head_bytes).unwrap_or(u32::MAX))
        // The server pushes nothing to a load generator.
        .enable_push(false);
    let handshake = match connection {
        Connection::Plain(stream) => {
            builder.handshake(stream).await.map(|(sender, driver)| spawn_driver(sender, driver))
        }
        Connection::Tls(stream) => {
            builder.handshake(*stream).await.map(|(sender, driver)| spawn_driver(sender, driver))
        }
    };
    let cap = settings
        .max_concurrent_streams
        .map(|streams| usize::try_from(streams).unwrap_or(usize::MAX).min(tokio::sync::Semaphore::MAX_PERMITS));
    handshake
        .map(|sender| {
            Opened::Http2(H2Sender {
                sender,
                streams: cap.map(|permits| Arc::new(tokio::sync::Semaphore::new(permits))),
            })
        })
        .map_err(|error| {
            (ErrorKind::Protocol, format!("HTTP/2 handshake with {}:{}: {error}", endpoint.host, endpoint.port))
        })
}

/// The connection's frames are read and written by a task of its own on the worker's runtime;
/// it ends when every sender is dropped and the last stream is done, or the connection fails.
fn spawn_driver<T>(
    sender: h2::client::SendRequest<Bytes>,
    driver: h2::client::Connection<T, Bytes>,
) -> h2::client::SendRequest<Bytes>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        // Its error reaches the streams too, which is where it is counted.
        let _ = driver.await;
    });
    sender
}

/// Headers that name HTTP/1.1's connection and are forbidden over HTTP/2 (RFC 9113 8.2.2);
/// `host` becomes the `:authority` pseudo-header.
fn connection_specific(name: &str) -> bool {
    ["host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"]
        .iter()
        .any(|forbidden| name.eq_ignore_ascii_case(forbidden))
}

/// A request in HTTP/2's form: its head (method, URI, headers) and its body. Made once for a
/// request with nothing templated, and cloned per send (the URI's and the values' bytes are
/// shared, not copied).
#[derive(Debug, Clone)]
pub struct H2Request {
    head: http::Request<()>,
    body: Bytes,
}

impl H2Request {
    /// The HTTP/2 form of `encoded`, an HTTP/1.1 request to `endpoint`.
    pub fn from_encoded(endpoint: &Endpoint, encoded: &[u8]) -> Result<Self, String> {
        to_h2(endpoint, encoded).map(|(head, body)| Self { head, body })
    }
}

/// The HTTP/1.1 encoding of a request (`super::encode_request`) as an HTTP/2 request and its body.
fn to_h2(endpoint: &Endpoint, encoded: &[u8]) -> Result<(http::Request<()>, Bytes), String> {
    let lines = encoded.iter().filter(|&&byte| byte == b'\n').count() + 1;
    let mut headers = vec![httparse::EMPTY_HEADER; lines];
    let mut parsed = httparse::Request::new(&mut headers);
    let head_len = match parsed.parse(encoded) {
        Ok(httparse::Status::Complete(head_len)) => head_len,
        _ => return Err("the request could not be read back for HTTP/2".into()),
    };
    let scheme = match endpoint.scheme {
        Scheme::Http => "http",
        Scheme::Https => "https",
    };
    let authority = parsed
        .headers
        .iter()
        .find(|header| header.name.eq_ignore_ascii_case("host"))
        .and_then(|header| std::str::from_utf8(header.value).ok())
        .unwrap_or(&endpoint.host_header);
    let uri = format!("{scheme}://{authority}{}", parsed.path.unwrap_or("/"));
    let mut builder = http::Request::builder().method(parsed.method.unwrap_or("GET")).uri(uri);
    for header in parsed.headers.iter().filter(|header| !connection_specific(header.name)) {
        builder = builder.header(header.name, header.value);
    }
    let request = builder.body(()).map_err(|error| format!("the request is not valid for HTTP/2: {error}"))?;
    Ok((request, Bytes::copy_from_slice(&encoded[head_len..])))
}

/// Sends one request as a stream of `sender`'s connection and reads its response into
/// `capture`: `prepared`, its HTTP/2 form made beforehand, or else `encoded` read into that form
/// here. Ok: (status, bytes sent (`encoded`'s length), bytes received). Waits while the server's limit of
/// concurrent streams, or the plan's cap, is reached (that wait is part of the request's latency).
pub async fn exchange_h2(
    connection: &mut H2Sender,
    endpoint: &Endpoint,
    encoded: &[u8],
    prepared: Option<&H2Request>,
    capture: &mut Capture,
    limits: ReadLimits,
) -> Result<(u16, u64, u64), H2Failure> {
    // Written into error details only: no text is made for a request that succeeds.
    let address = Address(endpoint);
    let (request, body) = match prepared {
        Some(prepared) => (prepared.head.clone(), prepared.body.clone()),
        None => to_h2(endpoint, encoded)
            // Not sent, but a second try would fail the same: not flagged as `not_sent`.
            .map_err(|detail| H2Failure {
                kind: ErrorKind::Protocol,
                detail,
                connection_lost: false,
                not_sent: false,
            })?,
    };
    // Held until the response's body ends (or the exchange fails): a stream of the cap's.
    let streams = connection.streams.clone();
    let _stream_permit = match &streams {
        Some(streams) => streams.acquire().await.ok(),
        None => None,
    };
    let sender = &mut connection.sender;
    // Polled in place: `ready()` would take the sender, and a clone of it (a lock of h2's
    // stream store, twice with its drop) would stand in meanwhile.
    std::future::poll_fn(|context| sender.poll_ready(context))
        .await
        .map_err(|error| H2Failure { not_sent: true, ..failure(&error, address) })?;
    let (response, mut stream) = sender
        .send_request(request, body.is_empty())
        .map_err(|error| H2Failure { not_sent: true, ..failure(&error, address) })?;
    if !body.is_empty() {
        // Sent as the server's flow-control window allows; a body that could not be sent
        // (the stream reset, or answered early) leaves the response to tell what happened.
        capture.h2_stalled = send_body(&mut stream, body).await > H2_STALL;
    }
    let response = match response.await {
        Ok(response) => response,
        Err(error) => return Err(after_goaway(sender, failure(&error, address)).await),
    };
    let status = response.status().as_u16();
    capture.clear(limits.max_kept_body_bytes);
    // "HTTP/2 NNN\r\n" (a status has three digits) and the blank line ending the head.
    let mut received = STATUS_LINE_BYTES + 2;
    if capture.record {
        capture.recorded_head.extend_from_slice(format!("HTTP/2 {status}\r\n").as_bytes());
    }
    for (name, value) in response.headers() {
        received += (name.as_str().len() + value.len() + 4) as u64;
        let is_cookie = name == http::header::SET_COOKIE;
        if is_cookie || capture.keep_headers {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            if capture.keep_headers {
                capture.headers.push((name.as_str().to_owned(), value.clone()));
            }
            if is_cookie {
                capture.set_cookies.push(value);
            }
        }
        if capture.record && capture.recorded_head.len() < crate::exchange::MAX_HEAD_BYTES {
            capture
                .recorded_head
                .extend_from_slice(format!("{name}: {}\r\n", String::from_utf8_lossy(value.as_bytes())).as_bytes());
        }
    }
    if received > limits.max_head_bytes as u64 {
        return Err(H2Failure {
            kind: ErrorKind::HeadersTooLarge,
            detail: format!(
                "the response head passed target.max_response_header_bytes ({} bytes) ({address})",
                limits.max_head_bytes
            ),
            connection_lost: false,
            not_sent: false,
        });
    }
    if status >= 400 {
        capture.error_wanted = true;
        capture.error_status_line = format!("HTTP/2 {status}");
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(error) => return Err(after_goaway(sender, failure(&error, address)).await),
        };
        // The window is given back as the body is read, so a long body keeps flowing.
        let _ = body.flow_control().release_capacity(chunk.len());
        received += chunk.len() as u64;
        capture.keep(&chunk);
    }
    Ok((status, encoded.len() as u64, received))
}

/// `HTTP/2 NNN\r\n`: the status line a response's head is counted with, as HTTP/1.1 writes it.
const STATUS_LINE_BYTES: u64 = 12;

/// The target's `host:port` in an error detail, written only when one is.
#[derive(Clone, Copy)]
struct Address<'a>(&'a Endpoint);

impl std::fmt::Display for Address<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}:{}", self.0.host, self.0.port)
    }
}

/// A request body that waited longer than this for send capacity counts as a flow-control
/// stall (`h2_stalls`): the server's window stayed shut (or, for a body past h2's send buffer
/// of 400 KiB, the socket did not drain) for a tenth of a second.
pub const H2_STALL: std::time::Duration = std::time::Duration::from_millis(100);

/// Sends `body` on `stream` in pieces no larger than the send capacity h2 assigns it (the
/// server's stream and connection windows, within h2's send buffer), ending the stream with
/// the last piece; returns how long it waited for capacity in all.
async fn send_body(stream: &mut h2::SendStream<Bytes>, mut body: Bytes) -> std::time::Duration {
    let mut waited = std::time::Duration::ZERO;
    stream.reserve_capacity(body.len());
    while !body.is_empty() {
        let mut capacity = stream.capacity();
        if capacity == 0 {
            let since = std::time::Instant::now();
            let polled = std::future::poll_fn(|context| stream.poll_capacity(context)).await;
            waited += since.elapsed();
            match polled {
                Some(Ok(assigned)) => capacity = assigned,
                _ => return waited,
            }
        }
        let piece = body.split_to(capacity.min(body.len()));
        if stream.send_data(piece, body.is_empty()).is_err() {
            return waited;
        }
    }
    waited
}

/// A stream cut by the connection's end (an IO error: the server closed it) after the server
/// had sent GOAWAY is counted as `h2_goaway`, not `reset`: the server announced it was going
/// and closed before answering. The connection's own error tells: h2 keeps the GOAWAY it read
/// as the connection's error, and a sender polled once returns it. A connection cut without a
/// GOAWAY read first (none sent, or lost in a TCP reset) stays `reset`.
async fn after_goaway(sender: &mut h2::client::SendRequest<Bytes>, failure: H2Failure) -> H2Failure {
    if !failure.connection_lost || failure.kind == ErrorKind::H2GoAway {
        return failure;
    }
    let polled = std::future::poll_fn(|context| std::task::Poll::Ready(sender.poll_ready(context))).await;
    match polled {
        std::task::Poll::Ready(Err(error)) if error.is_go_away() => {
            let reason = error.reason().map_or_else(|| "no code".to_owned(), |reason| format!("{reason:?}"));
            H2Failure {
                kind: ErrorKind::H2GoAway,
                detail: format!(
                    "the server closed the HTTP/2 connection after its GOAWAY ({reason}) before answering: {}",
                    failure.detail
                ),
                ..failure
            }
        }
        _ => failure,
    }
}

/// An `h2` error as Horde counts it: a stream reset by its code, a GOAWAY, an IO error by its
/// kind, anything else as a protocol error.
fn failure(error: &h2::Error, address: Address<'_>) -> H2Failure {
    let (kind, detail, connection_lost) = if error.is_go_away() {
        let reason = error.reason().map_or_else(|| "no code".to_owned(), |reason| format!("{reason:?}"));
        (
            ErrorKind::H2GoAway,
            format!("the server ended the HTTP/2 connection (GOAWAY, {reason}) before the response ended ({address})"),
            true,
        )
    } else if let (true, Some(reason)) = (error.is_reset(), error.reason()) {
        (
            ErrorKind::h2_reset(reason.into()),
            format!("the server reset the stream ({reason:?}, code {}) ({address})", u32::from(reason)),
            false,
        )
    } else if let Some(io) = error.get_io() {
        (ErrorKind::from_io(io), format!("{io} on the HTTP/2 connection ({address})"), true)
    } else {
        (ErrorKind::Protocol, format!("HTTP/2: {error} ({address})"), true)
    };
    H2Failure { kind, detail, connection_lost, not_sent: false }
}

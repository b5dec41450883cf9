//! PostgreSQL's wire protocol as the connection reads and writes it: the socket and its two
//! buffers, backend messages cut out of the read buffer in place (no copy, no allocation for a
//! message the step does not keep), the bodies the client reads, and what can go wrong.
//!
//! Frontend messages are written with `postgres-protocol`'s encoders into one buffer and sent
//! with one write; the replies are read in the VU's own task (`connection.rs`).

use bytes::{Buf, BytesMut};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::AsyncWrite;
use tokio_util::io::poll_read_buf;

/// Why a statement, a connect or a login failed.
#[derive(Debug)]
pub(crate) enum SqlError {
    /// The server's ErrorResponse: its SQLSTATE and message.
    Server { code: String, message: String },
    /// The socket could not be opened (refused, timed out, no such host...).
    Connect(std::io::Error),
    /// Reading or writing an open connection failed.
    Io(std::io::Error),
    /// The server closed the connection.
    Closed,
    /// The server refused the login (its SQLSTATE: class 28, a wrong password or no
    /// `pg_hba.conf` entry; 3D000, no such database), or asked for a password the plan does not
    /// give (no SQLSTATE): no session was opened.
    Login { code: Option<String>, message: String },
    /// Something this client cannot do or did not expect (an unsupported login method, TLS asked
    /// for, a message out of place).
    Client(String),
}

impl fmt::Display for SqlError {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqlError::Server { code, message } => write!(out, "SQLSTATE {code}: {message}"),
            SqlError::Connect(error) => write!(out, "error connecting to server: {error}"),
            SqlError::Io(error) => write!(out, "error communicating with the server: {error}"),
            SqlError::Closed => out.write_str("connection closed"),
            SqlError::Login { code: Some(code), message } => match condition_name(code) {
                Some(name) => write!(out, "login refused: SQLSTATE {code} ({name}): {message}"),
                None => write!(out, "login refused: SQLSTATE {code}: {message}"),
            },
            SqlError::Login { code: None, message } => write!(out, "login refused: {message}"),
            SqlError::Client(words) => out.write_str(words),
        }
    }
}

/// The condition names (PostgreSQL's appendix A) of the SQLSTATEs a refused login carries.
fn condition_name(code: &str) -> Option<&'static str> {
    Some(match code {
        "28000" => "invalid_authorization_specification",
        "28P01" => "invalid_password",
        "3D000" => "invalid_catalog_name",
        _ => return None,
    })
}

impl SqlError {
    /// The server's error during the login: a refusal of the login itself (class 28, 3D000) as
    /// [`SqlError::Login`], any other (too many connections, a server starting up) as it is.
    pub(super) fn at_login(self) -> Self {
        match self {
            SqlError::Server { code, message } if code.starts_with("28") || code == "3D000" => {
                SqlError::Login { code: Some(code), message }
            }
            other => other,
        }
    }
}

/// The socket: TCP, or a Unix socket when the URL's host is a directory (libpq's rule).
pub(super) enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

/// A backend message found at the front of the read buffer: its type byte and body length (the
/// body is `input[5..5 + len]`; `consume` drops it once read).
#[derive(Clone, Copy)]
pub(super) struct Frame {
    pub tag: u8,
    pub len: usize,
}

/// The socket with its buffers, and whether it is still usable.
pub(super) struct Wire {
    stream: Stream,
    /// Frontend messages waiting for `send`, and how much of them a send has written so far.
    pub out: BytesMut,
    sent: usize,
    /// Bytes read; those from `at` on are not yet consumed. A message consumed moves `at`, and
    /// the buffer is emptied when all of it is (a shift of the bytes for each message was a
    /// few percent of a select's client instructions).
    input: BytesMut,
    at: usize,
    /// The server closed, a read or write failed, a FATAL error came, or the protocol lost step:
    /// nothing more may be sent on it.
    pub broken: bool,
}

/// Read-buffer room asked for before each read: a whole reply of a small result in one read.
const READ_CHUNK: usize = 8 * 1024;

impl Wire {
    pub fn new(stream: Stream) -> Self {
        Self {
            stream,
            out: BytesMut::with_capacity(1024),
            sent: 0,
            input: BytesMut::with_capacity(READ_CHUNK),
            at: 0,
            broken: false,
        }
    }

    /// Writes what `out` holds, in one write when the socket takes it.
    ///
    /// This and [`Wire::frame`] are poll functions under a closure of one reference, not
    /// `async fn`s over tokio's write and read futures: a statement's future held those nested
    /// three deep, each level a state to resume and a few hundred bytes more of the step's
    /// future, which is moved at every step (issue 19: this client's cost is in its user
    /// space, `bench/NOTES.md`).
    pub fn send(&mut self) -> impl Future<Output = Result<(), SqlError>> + '_ {
        std::future::poll_fn(move |cx| self.poll_send(cx))
    }

    /// The next whole message, reading from the socket as needed.
    pub fn frame(&mut self) -> impl Future<Output = Result<Frame, SqlError>> + '_ {
        std::future::poll_fn(move |cx| self.poll_frame(cx))
    }

    /// [`Wire::send`] as a poll function (a statement's own, `connection.rs`).
    pub fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), SqlError>> {
        while self.sent < self.out.len() {
            let pending = &self.out[self.sent..];
            let written = match &mut self.stream {
                Stream::Tcp(stream) => Pin::new(stream).poll_write(cx, pending),
                Stream::Unix(stream) => Pin::new(stream).poll_write(cx, pending),
            };
            let error = match ready!(written) {
                Ok(0) => std::io::Error::from(std::io::ErrorKind::WriteZero),
                Ok(count) => {
                    self.sent += count;
                    continue;
                }
                Err(error) => error,
            };
            self.out.clear();
            self.sent = 0;
            self.broken = true;
            return Poll::Ready(Err(SqlError::Io(error)));
        }
        self.out.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    /// [`Wire::frame`] as a poll function.
    pub fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Result<Frame, SqlError>> {
        loop {
            let unread = &self.input[self.at..];
            let mut missing = 0;
            if unread.len() >= 5 {
                let declared = u32::from_be_bytes([unread[1], unread[2], unread[3], unread[4]]) as usize;
                if declared < 4 {
                    self.broken = true;
                    return Poll::Ready(Err(SqlError::Client(format!("a backend message declared {declared} bytes"))));
                }
                if unread.len() > declared {
                    return Poll::Ready(Ok(Frame { tag: unread[0], len: declared - 4 }));
                }
                missing = declared + 1 - unread.len();
            }
            // A message not yet whole: the consumed bytes before it go, and room is made for it.
            if self.at > 0 {
                self.input.advance(self.at);
                self.at = 0;
            }
            self.input.reserve(missing);
            ready!(self.poll_fill(cx))?;
        }
    }

    /// The body of the frame `frame` returned last.
    pub fn body(&self, frame: Frame) -> &[u8] {
        &self.input[self.at + 5..self.at + 5 + frame.len]
    }

    /// Drops the frame `frame` returned last.
    pub fn consume(&mut self, frame: Frame) {
        self.at += 5 + frame.len;
        if self.at == self.input.len() {
            self.input.clear();
            self.at = 0;
        }
    }

    /// One read into the buffer. A read that leaves room in it shows that the socket is drained,
    /// and the next waits for readiness without a read that would fail (tokio's `poll_read`).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), SqlError>> {
        if self.input.capacity() - self.input.len() < READ_CHUNK / 2 {
            self.input.reserve(READ_CHUNK);
        }
        let read = match &mut self.stream {
            Stream::Tcp(stream) => poll_read_buf(Pin::new(stream), cx, &mut self.input),
            Stream::Unix(stream) => poll_read_buf(Pin::new(stream), cx, &mut self.input),
        };
        Poll::Ready(match ready!(read) {
            Ok(0) => {
                self.broken = true;
                Err(SqlError::Closed)
            }
            Ok(_) => Ok(()),
            Err(error) => {
                self.broken = true;
                Err(SqlError::Io(error))
            }
        })
    }

    /// Says goodbye (Terminate) if the socket takes it at once, so that the server logs a
    /// client that left rather than one that vanished; never waits.
    pub fn terminate(&mut self) {
        if self.broken {
            return;
        }
        let goodbye = [b'X', 0, 0, 0, 4];
        let _ = match &self.stream {
            Stream::Tcp(stream) => stream.try_write(&goodbye),
            Stream::Unix(stream) => stream.try_write(&goodbye),
        };
    }
}

/// A column of a result: its name and type (as RowDescription gives them).
#[derive(Debug, Clone)]
pub(crate) struct Column {
    pub name: String,
    pub type_oid: u32,
}

/// A NUL-terminated string at the front of `bytes`, and the rest after its NUL.
fn cstr(bytes: &[u8]) -> Result<(&str, &[u8]), SqlError> {
    let end = bytes.iter().position(|byte| *byte == 0).ok_or_else(|| malformed("a string without its end"))?;
    let text = std::str::from_utf8(&bytes[..end]).map_err(|_| malformed("a string that is not UTF-8"))?;
    Ok((text, &bytes[end + 1..]))
}

fn malformed(what: &str) -> SqlError {
    SqlError::Client(format!("a malformed backend message ({what})"))
}

fn be_u32(bytes: &[u8], at: usize) -> Result<u32, SqlError> {
    bytes.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])).ok_or_else(|| malformed("too short"))
}

fn be_u16(bytes: &[u8], at: usize) -> Result<u16, SqlError> {
    bytes.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]])).ok_or_else(|| malformed("too short"))
}

/// RowDescription: each column's name and type.
pub(super) fn row_description(body: &[u8]) -> Result<Vec<Column>, SqlError> {
    let count = be_u16(body, 0)? as usize;
    let mut rest = &body[2..];
    let mut columns = Vec::with_capacity(count);
    for _ in 0..count {
        let (name, after) = cstr(rest)?;
        // table OID (4), attribute number (2), type OID (4), size (2), modifier (4), format (2).
        let type_oid = be_u32(after, 6)?;
        rest = after.get(18..).ok_or_else(|| malformed("a short column description"))?;
        columns.push(Column { name: name.to_owned(), type_oid });
    }
    Ok(columns)
}

/// DataRow: each value's bytes, `None` for NULL.
pub(super) fn data_row(body: &[u8]) -> Result<Vec<Option<&[u8]>>, SqlError> {
    let count = be_u16(body, 0)? as usize;
    let mut at = 2;
    let mut values = Vec::with_capacity(count);
    for _ in 0..count {
        let len = be_u32(body, at)? as i32;
        at += 4;
        if len < 0 {
            values.push(None);
        } else {
            let end = at + len as usize;
            values.push(Some(body.get(at..end).ok_or_else(|| malformed("a short value"))?));
            at = end;
        }
    }
    Ok(values)
}

/// CommandComplete: the rows its tag counts (`SELECT 3`, `INSERT 0 1`, `UPDATE 2`), 0 for a tag
/// without a count (`BEGIN`), as tokio-postgres and libpq's PQcmdTuples read it.
pub(super) fn command_rows(body: &[u8]) -> u64 {
    let tag = body.split(|byte| *byte == 0).next().unwrap_or_default();
    let last = tag.rsplit(|byte| *byte == b' ').next().unwrap_or_default();
    // Digits read in place (one a transaction's every statement ends with): no UTF-8 check,
    // no parser. A word (`BEGIN`), nothing, or a count past u64 counts 0.
    if last.is_empty() || !last.iter().all(u8::is_ascii_digit) {
        return 0;
    }
    last.iter().try_fold(0u64, |count, digit| count.checked_mul(10)?.checked_add(u64::from(digit - b'0'))).unwrap_or(0)
}

/// ErrorResponse: the error, and whether the server ends the session with it (FATAL, PANIC).
pub(super) fn error_response(body: &[u8]) -> (SqlError, bool) {
    let mut code = String::new();
    let mut message = String::new();
    let mut severity = "";
    let mut rest = body;
    while let Some((&field, after)) = rest.split_first() {
        if field == 0 {
            break;
        }
        let Ok((value, next)) = cstr(after) else { break };
        match field {
            b'C' => code = value.to_owned(),
            b'M' => message = value.to_owned(),
            // 'V' is never translated (9.6 and later); 'S' may be, and is the older servers' only one.
            b'V' => severity = value,
            b'S' if severity.is_empty() => severity = value,
            _ => {}
        }
        rest = next;
    }
    let fatal = matches!(severity, "FATAL" | "PANIC");
    (SqlError::Server { code, message }, fatal)
}

/// ReadyForQuery's status: whether a transaction is open (`T`) or failed (`E`) rather than idle.
pub(super) fn in_transaction(body: &[u8]) -> bool {
    body.first().is_some_and(|status| *status != b'I')
}

/// An Authentication request: its code and what follows (a salt, SASL mechanisms or data).
pub(super) fn authentication(body: &[u8]) -> Result<(u32, &[u8]), SqlError> {
    Ok((be_u32(body, 0)?, &body[4..]))
}

/// The SASL mechanisms an AuthenticationSASL request offers.
pub(super) fn sasl_mechanisms(mut body: &[u8]) -> Vec<&str> {
    let mut mechanisms = Vec::new();
    while let Ok((mechanism, rest)) = cstr(body) {
        if mechanism.is_empty() {
            break;
        }
        mechanisms.push(mechanism);
        body = rest;
    }
    mechanisms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_tags_give_their_counts() {
        assert_eq!(command_rows(b"SELECT 3\0"), 3);
        assert_eq!(command_rows(b"INSERT 0 12\0"), 12);
        assert_eq!(command_rows(b"BEGIN\0"), 0);
        assert_eq!(command_rows(b"CREATE TABLE\0"), 0);
        assert_eq!(command_rows(b"UPDATE 18446744073709551615\0"), u64::MAX);
        assert_eq!(command_rows(b"UPDATE 18446744073709551616\0"), 0, "past u64");
        assert_eq!(command_rows(b"SELECT 1x\0"), 0);
        assert_eq!(command_rows(b"\0"), 0);
        assert_eq!(command_rows(b""), 0);
    }

    #[test]
    fn errors_keep_code_message_and_severity() {
        let body = b"SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0";
        let (error, fatal) = error_response(body);
        assert!(fatal);
        assert_eq!(error.to_string(), "SQLSTATE 57P01: terminating connection due to administrator command");
        let (error, fatal) = error_response(b"SERROR\0C23505\0Mduplicate key\0\0");
        assert!(!fatal);
        assert!(matches!(error, SqlError::Server { ref code, .. } if code == "23505"));
        // At the login, a refusal is told apart and named; a full server is not a refusal.
        let (error, _) = error_response(b"SFATAL\0C28P01\0Mpassword authentication failed for user \"ann\"\0\0");
        assert_eq!(
            error.at_login().to_string(),
            "login refused: SQLSTATE 28P01 (invalid_password): password authentication failed for user \"ann\""
        );
        let (error, _) = error_response(b"SFATAL\0C53300\0Msorry, too many clients already\0\0");
        assert!(matches!(error.at_login(), SqlError::Server { .. }));
    }

    /// Backend messages as a server writes them: its type byte, its length, its body.
    fn message(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut bytes = vec![tag];
        bytes.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        bytes.extend_from_slice(body);
        bytes
    }

    #[tokio::test]
    async fn frames_come_whole_however_the_bytes_are_cut() {
        use tokio::io::AsyncWriteExt;
        let (client, mut server) = tokio::net::UnixStream::pair().unwrap();
        let mut wire = Wire::new(Stream::Unix(client));
        let big = vec![7u8; 3 * READ_CHUNK + 11];
        let mut sent = Vec::new();
        let mut expected = Vec::new();
        for (tag, body) in [
            (b'2', &b""[..]),
            (b'D', &b"\0\x01\0\0\0\x02ok"[..]),
            (b'D', &big[..]),
            (b'C', &b"SELECT 2\0"[..]),
            (b'Z', &b"I"[..]),
        ] {
            sent.extend_from_slice(&message(tag, body));
            expected.push((tag, body.to_vec()));
        }
        // Several messages in one write, one cut inside its header, one inside its body.
        let writer = tokio::spawn(async move {
            for piece in [&sent[..7], &sent[7..9], &sent[9..25], &sent[25..READ_CHUNK], &sent[READ_CHUNK..]] {
                server.write_all(piece).await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            server
        });
        for (tag, body) in expected {
            let frame = wire.frame().await.unwrap();
            assert_eq!((frame.tag, wire.body(frame)), (tag, &body[..]));
            wire.consume(frame);
        }
        drop(writer.await.unwrap());
        assert!(matches!(wire.frame().await, Err(SqlError::Closed)));
        assert!(wire.broken);
    }

    #[test]
    fn rows_and_descriptions_are_read_in_place() {
        // One column "n", int4 (OID 23).
        let mut description = vec![0, 1];
        description.extend_from_slice(b"n\0");
        description.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 23, 0, 4, 255, 255, 255, 255, 0, 1]);
        let columns = row_description(&description).unwrap();
        assert_eq!((columns[0].name.as_str(), columns[0].type_oid), ("n", 23));
        let row = [0, 2, 0, 0, 0, 4, 0, 0, 0, 7, 255, 255, 255, 255];
        assert_eq!(data_row(&row).unwrap(), vec![Some(&[0u8, 0, 0, 7][..]), None]);
        assert!(data_row(&[0, 1, 0, 0, 0, 9, 1]).is_err(), "a value longer than its message");
    }
}

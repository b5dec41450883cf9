//! One PostgreSQL connection, driven in the VU's own task, and how a statement goes over it in
//! each mode.
//!
//! A statement's messages (Parse, Bind, Execute, Sync; or Query) are written into one buffer and
//! sent with one write; its replies are read in the same task up to ReadyForQuery. There is no
//! socket task and no channel between the VU and its connection (tokio-postgres's split client
//! cost a wake and a task switch per statement): the connection is a plain value that a VU or
//! the pool holds, and dropping it (a step's timeout) closes it, after asking the server to
//! cancel the statement it was running (`cancel.rs`).

use super::cancel::CancelKey;
use super::result::FirstRow;
use super::wire::{self, Column, SqlError, Wire};
use super::{SimplePart, StatementNode};
use bytes::{BufMut, BytesMut};
use horde_plan::SqlMode;
use postgres_protocol::message::frontend;
use std::future::Future;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

/// A connection: its socket, its prepared statements, and whether a transaction is open on it.
pub(crate) struct SqlConnection {
    pub(super) wire: Wire,
    /// `mode: prepared`: by step (its global index), then by statement. Indexed rather than
    /// hashed: a SipHash of the key was a twentieth of a select's client instructions.
    prepared: Vec<Vec<Option<Prepared>>>,
    /// The server's own word, from its last ReadyForQuery: a transaction is open (or failed and
    /// not yet rolled back) on this connection.
    pub in_transaction: bool,
    /// The replies of the statement in flight, as read so far.
    reading: Reading,
    /// A statement was sent and its ReadyForQuery has not come: dropped now, the connection
    /// asks the server to cancel it.
    in_flight: bool,
    /// How to cancel it: the server and the backend's key, from the login (`None`: a server
    /// that sent no key).
    pub(super) cancel: Option<CancelKey>,
}

/// What a statement's replies are read for, and what they said so far. Kept in the connection
/// rather than in the statement's future: a statement is then one poll function under a
/// closure of one reference (`SqlConnection::exchange`), not an `async fn` whose state the
/// step's future holds and moves (issue 19: this client's cost is in its user space).
#[derive(Default)]
struct Reading {
    keep_row: bool,
    format: Format,
    /// The result's columns: known when prepared, or once a RowDescription comes.
    columns: Option<Rc<[Column]>>,
    /// A statement being prepared: kept once the server has described it, whatever happens to
    /// its execution after that (it exists there now).
    preparing: Option<((usize, usize), Rc<str>)>,
    rows: u64,
    row_count: Option<u64>,
    first_row: Option<FirstRow>,
    error: Option<SqlError>,
}

/// What a statement's replies will be: how its rows are encoded, its columns when it was
/// prepared before, and its key and name when it is being prepared now.
struct Expected {
    format: Format,
    columns: Option<Rc<[Column]>>,
    preparing: Option<((usize, usize), Rc<str>)>,
}

impl Expected {
    /// A simple query's: rows in text, no statement prepared.
    fn text() -> Self {
        Self { format: Format::Text, columns: None, preparing: None }
    }
}

/// A statement prepared on this connection: its name there and its result's columns.
struct Prepared {
    name: Rc<str>,
    columns: Rc<[Column]>,
}

/// What one statement returned: rows returned or affected, and the first row when asked for.
pub(crate) struct StatementOutcome {
    pub row_count: u64,
    /// The rows of the step's statements so far, this one's included (the step's `rows`).
    pub step_rows: u64,
    pub first_row: Option<FirstRow>,
}

/// Execute of the unnamed portal, all its rows (max rows 0), then Sync: the same bytes for every
/// statement, written as they are rather than encoded each time.
const EXECUTE_AND_SYNC: [u8; 15] = [b'E', 0, 0, 0, 9, 0, 0, 0, 0, 0, b'S', 0, 0, 0, 4];

/// Result columns in binary (format code 1 for all): numbers and booleans read without parsing.
const BINARY_RESULTS: [i16; 1] = [1];

/// How a result's rows are encoded: binary (extended and prepared) or text (simple).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum Format {
    #[default]
    Text,
    Binary,
}

impl Drop for SqlConnection {
    fn drop(&mut self) {
        // A broken connection's server has ended the session or is unreachable: nothing to cancel.
        if self.in_flight && !self.wire.broken {
            if let Some(cancel) = self.cancel.take() {
                cancel.send();
            }
        }
        self.wire.terminate();
    }
}

impl SqlConnection {
    pub(super) fn new(wire: Wire) -> Self {
        Self {
            wire,
            prepared: Vec::new(),
            in_transaction: false,
            reading: Reading::default(),
            in_flight: false,
            cancel: None,
        }
    }

    /// Whether the connection may not be used again: the server closed it or ended the session,
    /// or a read or write failed.
    pub fn is_closed(&self) -> bool {
        self.wire.broken
    }

    /// Runs text with no parameters through the simple protocol (`BEGIN`, `COMMIT`, `ROLLBACK`).
    pub async fn batch(&mut self, text: &str) -> Result<(), SqlError> {
        frontend::query(text, &mut self.wire.out).map_err(encode)?;
        self.exchange(false, Expected::text()).await.map(|_| ())
    }

    /// A server setting's value (`SHOW name`), for the login's `target_session_attrs` check.
    pub(super) async fn show(&mut self, name: &str) -> Result<String, SqlError> {
        frontend::query(&format!("SHOW {name}"), &mut self.wire.out).map_err(encode)?;
        let outcome = self.exchange(true, Expected::text()).await?;
        let value = outcome.first_row.and_then(|row| row.columns.into_iter().next()).map(|(_, value)| value);
        Ok(match value {
            Some(super::ColumnValue::Text(text)) => text,
            _ => String::new(),
        })
    }

    /// Runs one statement with its rendered parameters: its messages written into the send
    /// buffer now, then sent and its replies read by the future.
    pub fn run(
        &mut self,
        key: (usize, usize),
        statement: &StatementNode,
        params: &[String],
        mode: SqlMode,
        keep_row: bool,
    ) -> impl Future<Output = Result<StatementOutcome, SqlError>> + '_ {
        let written = self.write_statement(key, statement, params, mode, keep_row).inspect_err(|_| {
            // Nothing of a statement that could not be encoded is sent.
            self.wire.out.clear();
        });
        async move { self.exchange(keep_row, written?).await }
    }

    /// Writes one statement's messages into the send buffer; what its replies will be.
    fn write_statement(
        &mut self,
        key: (usize, usize),
        statement: &StatementNode,
        params: &[String],
        mode: SqlMode,
        keep_row: bool,
    ) -> Result<Expected, SqlError> {
        match mode {
            SqlMode::Simple => {
                self.write_simple(statement, params)?;
                Ok(Expected::text())
            }
            SqlMode::Extended => {
                // The unnamed statement and portal: parsed, bound and run in one round trip; a
                // Describe of the portal only when the first row's column names are wanted.
                let out = &mut self.wire.out;
                frontend::parse("", &statement.query, std::iter::empty(), out).map_err(encode)?;
                bind(out, "", params)?;
                if keep_row {
                    frontend::describe(b'P', "", out).map_err(encode)?;
                }
                out.put_slice(&EXECUTE_AND_SYNC);
                Ok(Expected { format: Format::Binary, columns: None, preparing: None })
            }
            SqlMode::Prepared => {
                if let Some(prepared) =
                    self.prepared.get(key.0).and_then(|statements| statements.get(key.1)).and_then(Option::as_ref)
                {
                    let columns = Rc::clone(&prepared.columns);
                    let out = &mut self.wire.out;
                    bind(out, &prepared.name, params)?;
                    out.put_slice(&EXECUTE_AND_SYNC);
                    return Ok(Expected { format: Format::Binary, columns: Some(columns), preparing: None });
                }
                // The first time on this connection: prepared, described, bound and run in one
                // round trip (the description comes before the rows it describes).
                let name: Rc<str> = format!("horde_{}_{}", key.0, key.1).into();
                let out = &mut self.wire.out;
                frontend::parse(&name, &statement.query, std::iter::empty(), out).map_err(encode)?;
                frontend::describe(b'S', &name, out).map_err(encode)?;
                bind(out, &name, params)?;
                out.put_slice(&EXECUTE_AND_SYNC);
                Ok(Expected { format: Format::Binary, columns: None, preparing: Some((key, name)) })
            }
        }
    }

    /// `mode: simple`: the parameters quoted into the query's text as literals.
    fn write_simple(&mut self, statement: &StatementNode, params: &[String]) -> Result<(), SqlError> {
        if params.is_empty() {
            return frontend::query(&statement.query, &mut self.wire.out).map_err(encode);
        }
        let mut text = String::with_capacity(statement.query.len() + 16 * params.len());
        for part in &statement.simple_parts {
            match part {
                SimplePart::Text(piece) => text.push_str(piece),
                // A placeholder past the parameters given stays NULL, as the server would say.
                SimplePart::Param(index) => match params.get(*index) {
                    Some(value) => super::quote_literal(value, &mut text),
                    None => text.push_str("NULL"),
                },
            }
        }
        frontend::query(&text, &mut self.wire.out).map_err(encode)
    }

    /// Sends what the send buffer holds and reads the replies up to ReadyForQuery: the (last)
    /// result's count, the first row when asked for, the first error.
    fn exchange(
        &mut self,
        keep_row: bool,
        expected: Expected,
    ) -> impl Future<Output = Result<StatementOutcome, SqlError>> + '_ {
        let Expected { format, columns, preparing } = expected;
        self.reading = Reading { keep_row, format, columns, preparing, ..Reading::default() };
        // Sending is done once the buffer is empty: later polls go straight to the replies.
        std::future::poll_fn(move |cx| {
            // From the first poll, which sends (a future dropped before it sent nothing).
            self.in_flight = true;
            let result = match ready!(self.wire.poll_send(cx)) {
                Ok(()) => ready!(self.poll_results(cx)),
                Err(error) => Err(error),
            };
            self.in_flight = false;
            Poll::Ready(result)
        })
    }

    fn poll_results(&mut self, cx: &mut Context<'_>) -> Poll<Result<StatementOutcome, SqlError>> {
        let reading = &mut self.reading;
        loop {
            let frame = match ready!(self.wire.poll_frame(cx)) {
                Ok(frame) => frame,
                // A server that ends the session says why first (57P01 and kin): that is the error.
                Err(lost) => return Poll::Ready(Err(reading.error.take().unwrap_or(lost))),
            };
            let body = self.wire.body(frame);
            match frame.tag {
                b'D' => {
                    reading.rows += 1;
                    if reading.keep_row && reading.first_row.is_none() {
                        reading.first_row = Some(first_row(reading, body));
                    }
                }
                b'C' => {
                    // A simple query's results each end so; the last one counts.
                    reading.row_count = Some(wire::command_rows(body));
                    reading.rows = 0;
                }
                b'Z' => {
                    self.in_transaction = wire::in_transaction(body);
                    self.wire.consume(frame);
                    break;
                }
                // ParseComplete, BindComplete, ParameterDescription, EmptyQueryResponse,
                // PortalSuspended, CloseComplete; and what the server may send at any time:
                // NoticeResponse, ParameterStatus, NotificationResponse.
                b'1' | b'2' | b't' | b'I' | b's' | b'3' | b'N' | b'S' | b'A' => {}
                tag => {
                    let (error, broken) = seldom_reply(&mut self.prepared, reading, tag, body);
                    if broken {
                        self.wire.broken = true;
                    }
                    if let Some(error) = error {
                        return Poll::Ready(Err(error));
                    }
                }
            }
            self.wire.consume(frame);
        }
        if let Some(error) = reading.error.take() {
            return Poll::Ready(Err(error));
        }
        let row_count = reading.row_count.unwrap_or(reading.rows);
        // The columns and the statement's name go back (their last references are the
        // prepared statement's).
        reading.columns = None;
        Poll::Ready(Ok(StatementOutcome { row_count, step_rows: row_count, first_row: reading.first_row.take() }))
    }
}

/// The first row of a result, decoded by its columns (a step that extracts or checks a column).
/// Out of line: most statements of a load keep no row, and the reply loop stays small.
#[inline(never)]
fn first_row(reading: &Reading, body: &[u8]) -> FirstRow {
    match (wire::data_row(body), &reading.columns) {
        (Ok(values), Some(columns)) => match reading.format {
            Format::Binary => FirstRow::from_binary(columns, &values),
            Format::Text => FirstRow::from_text(columns, &values),
        },
        _ => FirstRow { columns: Vec::new() },
    }
}

/// A reply that a statement's loop seldom reads: a description (the first run of a prepared
/// statement), an error, or a message no statement expects. Out of line and cold, so that the
/// loop's usual replies (rows, the command's tag, ReadyForQuery) lie together in the
/// instruction cache (issue 19: the worker's user time is in its cache misses). The error that
/// ends the statement now, if any, and whether the connection is broken.
#[cold]
#[inline(never)]
fn seldom_reply(
    prepared: &mut Vec<Vec<Option<Prepared>>>,
    reading: &mut Reading,
    tag: u8,
    body: &[u8],
) -> (Option<SqlError>, bool) {
    match tag {
        b'T' => {
            let described: Rc<[Column]> = match wire::row_description(body) {
                Ok(described) => described.into(),
                Err(malformed) => return (Some(malformed), true),
            };
            if let Some((key, name)) = reading.preparing.take() {
                keep_prepared(prepared, key, Prepared { name, columns: Rc::clone(&described) });
            }
            reading.columns = Some(described);
            (None, false)
        }
        // NoData: a statement that returns no rows (an UPDATE) was described.
        b'n' => {
            if let Some((key, name)) = reading.preparing.take() {
                keep_prepared(prepared, key, Prepared { name, columns: Rc::from(Vec::new()) });
            }
            (None, false)
        }
        b'E' => {
            let (server_error, fatal) = wire::error_response(body);
            reading.error.get_or_insert(server_error);
            (None, fatal)
        }
        other => (Some(SqlError::Client(format!("an unexpected backend message '{}'", char::from(other)))), true),
    }
}

/// Files a statement prepared on the connection under its (step, statement) key.
fn keep_prepared(prepared: &mut Vec<Vec<Option<Prepared>>>, (step, statement): (usize, usize), kept: Prepared) {
    if prepared.len() <= step {
        prepared.resize_with(step + 1, Vec::new);
    }
    let statements = &mut prepared[step];
    if statements.len() <= statement {
        statements.resize_with(statement + 1, || None);
    }
    statements[statement] = Some(kept);
}

/// Bind: the unnamed portal of `statement`, the parameters as text (the server parses each into
/// its parameter's type, as it does for pgbench's), every result column in binary. Written in
/// place: postgres-protocol's generic encoder (iterators of formats, values and result formats,
/// a closure per value) was a twentieth of a select's client instructions.
fn bind(out: &mut BytesMut, statement: &str, params: &[String]) -> Result<(), SqlError> {
    let start = out.len();
    let written = write_bind(out, statement, params);
    if written.is_none() {
        out.truncate(start);
    }
    written.ok_or_else(|| {
        SqlError::Client(
            "a statement's parameters could not be encoded (more than 32,767 of them, or a value over 2 GiB)".into(),
        )
    })
}

fn write_bind(out: &mut BytesMut, statement: &str, params: &[String]) -> Option<()> {
    debug_assert!(!statement.contains('\0'), "statement names are Horde's own");
    let start = out.len();
    out.put_u8(b'B');
    // The length, filled in once the body is written.
    out.put_i32(0);
    // The unnamed portal; the statement's name.
    out.put_u8(0);
    out.put_slice(statement.as_bytes());
    out.put_u8(0);
    // No parameter format codes: every parameter is text.
    out.put_i16(0);
    out.put_i16(i16::try_from(params.len()).ok()?);
    for param in params {
        out.put_i32(i32::try_from(param.len()).ok()?);
        out.put_slice(param.as_bytes());
    }
    // One result format code, for every column: binary.
    out.put_i16(1);
    out.put_i16(BINARY_RESULTS[0]);
    let length = i32::try_from(out.len() - start - 1).ok()?;
    out[start + 1..start + 5].copy_from_slice(&length.to_be_bytes());
    Some(())
}

fn encode(error: std::io::Error) -> SqlError {
    SqlError::Client(format!("a statement could not be encoded: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use postgres_protocol::IsNull;

    /// postgres-protocol's own encoder, which `bind` replaced: the known answer.
    fn reference(statement: &str, params: &[String]) -> BytesMut {
        let mut out = BytesMut::new();
        frontend::bind(
            "",
            statement,
            std::iter::empty(),
            params,
            |param, out| {
                out.extend_from_slice(param.as_bytes());
                Ok(IsNull::No)
            },
            BINARY_RESULTS,
            &mut out,
        )
        .map_err(|_| "the reference encoder refused it")
        .unwrap();
        out
    }

    #[test]
    fn bind_writes_what_postgres_protocol_writes() {
        let cases: [(&str, Vec<String>); 4] = [
            ("horde_3_0", vec!["42".into()]),
            ("", Vec::new()),
            ("horde_12_4", vec!["7".into(), String::new(), "ünïcode, with 'quotes'".into(), "x".repeat(70_000)]),
            ("horde_0_1", (0..300).map(|n| n.to_string()).collect()),
        ];
        for (statement, params) in cases {
            let mut out = BytesMut::from(&b"before"[..]);
            bind(&mut out, statement, &params).unwrap();
            assert_eq!(&out[..6], b"before");
            assert_eq!(&out[6..], &reference(statement, &params)[..], "{statement} with {} parameters", params.len());
        }
    }

    #[test]
    fn execute_and_sync_are_what_postgres_protocol_writes() {
        let mut out = BytesMut::new();
        frontend::execute("", 0, &mut out).unwrap();
        frontend::sync(&mut out);
        assert_eq!(&out[..], &EXECUTE_AND_SYNC[..]);
    }

    #[test]
    fn bind_refuses_too_many_parameters_and_leaves_the_buffer_as_it_was() {
        let params = vec![String::from("1"); 32_768];
        let mut out = BytesMut::from(&b"before"[..]);
        let error = bind(&mut out, "horde_0_0", &params).unwrap_err();
        assert!(error.to_string().contains("32,767"), "{error}");
        assert_eq!(&out[..], b"before");
        assert!(bind(&mut out, "horde_0_0", &params[..32_767]).is_ok());
    }
}

//! The `postgres` transport: `sql` steps sent straight to a PostgreSQL database.
//!
//! A plan whose `target.base_url` is `postgresql://user@host:port/database` runs `sql` steps
//! instead of HTTP requests, over connections of Horde's own small client of PostgreSQL's wire
//! protocol (`postgres-protocol`'s message encoders and login helpers), each driven in the task
//! of the VU that holds it: a statement is written with one write and its replies read in that
//! task, with no socket task, channel or wake between them (pgbench's own pattern).
//!
//! - `connect.rs`: opening a connection: the URL's hosts in turn (tokio-postgres's `Config` parses
//!   the URL by libpq's rules), startup and login (trust, password, MD5, SCRAM-SHA-256; no TLS).
//! - `connection.rs`: one connection, its statements prepared so far (`mode: prepared` prepares
//!   once per connection, as pgbench `-M prepared`), and how a statement goes over the wire in
//!   each mode (simple: parameters quoted into the text; extended: parse, bind, execute of an
//!   unnamed statement in one round trip; prepared: bind and execute, the first time parse and
//!   describe too, still one round trip). Parameters are always sent as text and typed by the
//!   server, as pgbench sends them.
//! - `wire.rs`: the socket and its buffers, backend messages read in place, errors.
//! - `cancel.rs`: a connection dropped while its statement runs (a step's timeout, the grace
//!   period's end) asks the server to cancel it, as libpq's `PQcancel` does.
//! - `pool.rs`: `target.connections: {pool: N}` for SQL: a worker's share of N connections in use
//!   at once; a VU holds its connection through a transaction that spans steps.
//! - `result.rs`: what a step keeps of a result (the row count, the first row's columns when an
//!   extractor or a check reads them) and the extractors and checks on it.
//! - errors are counted by SQLSTATE ([`classify`]).
//!
//! The VU side (`vu/sql_step.rs`) times a step like a request: from the open model's intended
//! start, or from just before the connection is taken.

mod cancel;
mod connect;
mod connection;
mod pool;
mod result;
mod wire;

pub(crate) use cancel::cancels_sent;
pub(crate) use connect::connect;
pub(crate) use connection::{SqlConnection, StatementOutcome};
pub(crate) use pool::{SqlLease, SqlPool};
pub(crate) use result::{ColumnValue, SqlResultView};
pub(crate) use wire::SqlError;

use crate::error::EngineError;
use crate::template::Text;
use horde_metrics::ErrorKind;
use horde_plan::{SqlCheck, SqlExtractFrom, SqlMode, Target, ThinkTime};
use std::time::Duration;

/// A `postgresql://` target: one connection configuration per instance (`base_url`, then
/// `target.instances`), the password already in each.
pub(crate) struct SqlTarget {
    pub configs: Vec<tokio_postgres::Config>,
    /// `target.connections: {pool: N}`: the generator's pool size.
    pub pool_size: Option<u64>,
}

impl SqlTarget {
    /// The target's SQL side, when its base URL is `postgresql://`; the password read now from
    /// `target.password_env` or `target.password_file`.
    pub fn from_plan(target: &Target) -> Result<Option<Self>, EngineError> {
        if !horde_plan::is_postgres_url(&target.base_url) {
            return Ok(None);
        }
        let password = match (&target.password_env, &target.password_file) {
            (Some(name), _) => Some(std::env::var(name).map_err(|_| {
                EngineError::Setup(format!("target.password_env: the environment variable '{name}' is not set"))
            })?),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|error| EngineError::Setup(format!("target.password_file '{path}': {error}")))?;
                Some(text.lines().next().unwrap_or_default().to_owned())
            }
            (None, None) => None,
        };
        let connect_timeout = Duration::from_secs_f64(target.connect_timeout_ms / 1000.0);
        let configs = std::iter::once(&target.base_url)
            .chain(&target.instances)
            .map(|url| {
                let mut config: tokio_postgres::Config = url
                    .parse()
                    .map_err(|error| EngineError::Setup(format!("target URL '{}': {error}", redact(url))))?;
                if let Some(password) = &password {
                    config.password(password.as_bytes());
                }
                config.connect_timeout(connect_timeout);
                if config.get_application_name().is_none() {
                    config.application_name("horde");
                }
                Ok(config)
            })
            .collect::<Result<Vec<_>, EngineError>>()?;
        Ok(Some(Self { configs, pool_size: target.connections.pool_size() }))
    }
}

/// The URL the HTTP side is given for a `postgresql://` instance, so that instance counting
/// (which VU talks to which instance) works the same for both transports; never connected to.
pub(crate) fn endpoint_url(url: &str) -> String {
    if !horde_plan::is_postgres_url(url) {
        return url.to_owned();
    }
    let rest = url.split_once("://").map(|(_, rest)| rest).unwrap_or_default();
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = if host.is_empty() { "localhost" } else { host };
    format!("http://{host}")
}

/// A URL with its password (if any) left out, for messages.
fn redact(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, rest)), Some(_)) => {
            let (credentials, host) = rest.rsplit_once('@').unwrap_or_default();
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}@{host}")
        }
        _ => url.to_owned(),
    }
}

/// One statement of a step, ready to run.
#[derive(Debug)]
pub(crate) struct StatementNode {
    pub query: String,
    /// `mode: simple`: the query cut at its `$n` placeholders, for quoting the parameters in.
    pub simple_parts: Vec<SimplePart>,
    pub params: Vec<Text>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SimplePart {
    Text(String),
    /// The parameter at this index (`$1` is 0).
    Param(usize),
}

/// One `sql` step, ready to run.
#[derive(Debug)]
pub(crate) struct SqlNode {
    pub global_index: usize,
    pub statements: Vec<StatementNode>,
    /// Run the statements inside `BEGIN` ... `COMMIT` (a step with `statements`).
    pub transaction: bool,
    pub mode: SqlMode,
    pub think_time: Option<ThinkTime>,
    pub extractors: Vec<horde_plan::SqlExtractor>,
    pub checks: Vec<SqlCheck>,
    pub end_on_check_failure: bool,
    /// Whether an extractor or a check reads the first row's columns (else only the count is kept).
    pub keep_row: bool,
}

impl SqlNode {
    pub fn needs_columns(extractors: &[horde_plan::SqlExtractor], checks: &[SqlCheck]) -> bool {
        extractors.iter().any(|extractor| extractor.from == SqlExtractFrom::Column)
            || checks.iter().any(|check| matches!(check, SqlCheck::Column { .. }))
    }
}

/// A query cut at its `$n` placeholders (outside quoted strings, identifiers and comments).
pub(crate) fn simple_parts(query: &str) -> Vec<SimplePart> {
    let bytes = query.as_bytes();
    let mut parts = Vec::new();
    let mut text_start = 0;
    let mut index = 0;
    let mut quote: Option<u8> = None;
    while index < bytes.len() {
        let byte = bytes[index];
        match quote {
            Some(open) => {
                if byte == open {
                    quote = None;
                }
                index += 1;
            }
            None if byte == b'\'' || byte == b'"' => {
                quote = Some(byte);
                index += 1;
            }
            None if byte == b'-' && bytes.get(index + 1) == Some(&b'-') => {
                while index < bytes.len() && bytes[index] != b'\n' {
                    index += 1;
                }
            }
            None if byte == b'$' && bytes.get(index + 1).is_some_and(u8::is_ascii_digit) => {
                let digits_end =
                    (index + 1..bytes.len()).find(|at| !bytes[*at].is_ascii_digit()).unwrap_or(bytes.len());
                let number: usize = query[index + 1..digits_end].parse().unwrap_or(0);
                if number >= 1 {
                    if text_start < index {
                        parts.push(SimplePart::Text(query[text_start..index].to_owned()));
                    }
                    parts.push(SimplePart::Param(number - 1));
                    text_start = digits_end;
                }
                index = digits_end;
            }
            None => index += 1,
        }
    }
    if text_start < bytes.len() {
        parts.push(SimplePart::Text(query[text_start..].to_owned()));
    }
    parts
}

/// The kind a failed statement is counted under, by SQLSTATE; without one, by what broke.
pub(crate) fn classify(error: &SqlError) -> ErrorKind {
    match error {
        SqlError::Server { code, .. } => match code.as_str() {
            "40001" => ErrorKind::SqlSerializationFailure,
            "40P01" => ErrorKind::SqlDeadlock,
            "23505" => ErrorKind::SqlUniqueViolation,
            code if code.starts_with("08") || code.starts_with("57P") => ErrorKind::SqlConnectionFailure,
            _ => ErrorKind::SqlOther,
        },
        SqlError::Connect(io) | SqlError::Io(io) => match ErrorKind::from_io(io) {
            kind @ (ErrorKind::Refused | ErrorKind::Timeout | ErrorKind::Dns) => kind,
            _ => ErrorKind::SqlConnectionFailure,
        },
        SqlError::Closed => ErrorKind::SqlConnectionFailure,
        SqlError::Login { .. } => ErrorKind::SqlLoginFailed,
        // A login this client cannot do, a message it did not expect.
        SqlError::Client(_) => ErrorKind::SqlOther,
    }
}

/// `value` as a SQL literal: quoted, quotes doubled (standard_conforming_strings, on by default
/// since PostgreSQL 9.1); a NUL byte, which no text value may hold, is dropped.
pub(crate) fn quote_literal(value: &str, out: &mut String) {
    out.push('\'');
    for character in value.chars() {
        match character {
            '\'' => out.push_str("''"),
            '\0' => {}
            other => out.push(other),
        }
    }
    out.push('\'');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_outside_quotes_are_cut_out() {
        assert_eq!(
            simple_parts("SELECT '$1', $1 FROM t WHERE a = $2 -- $3\n AND \"$4\" = $10"),
            vec![
                SimplePart::Text("SELECT '$1', ".into()),
                SimplePart::Param(0),
                SimplePart::Text(" FROM t WHERE a = ".into()),
                SimplePart::Param(1),
                SimplePart::Text(" -- $3\n AND \"$4\" = ".into()),
                SimplePart::Param(9),
            ]
        );
        assert_eq!(simple_parts("SELECT 1"), vec![SimplePart::Text("SELECT 1".into())]);
    }

    #[test]
    fn literals_are_quoted() {
        let mut out = String::new();
        quote_literal("it's", &mut out);
        assert_eq!(out, "'it''s'");
    }

    #[test]
    fn endpoint_urls_keep_host_and_port() {
        assert_eq!(endpoint_url("postgresql://u:secret@db:5433/app?sslmode=disable"), "http://db:5433");
        assert_eq!(endpoint_url("http://h:1/api"), "http://h:1/api");
        assert_eq!(redact("postgresql://u:secret@db/app"), "postgresql://u@db/app");
    }
}

//! Exchange recording (`horde run --debug N`, `horde try`): the first N exchanges of each step
//! kept in full — the request as sent, the response's head and body prefix, the timing, the
//! outcome, each check judged, the variables the step set — and carried to the caller in the
//! snapshots ([`crate::Snapshot::exchanges`]).
//!
//! Off by default, and then free: a run without recording has no [`Recording`] (`Shared::
//! recording` is `None`), so each request pays one branch on it and nothing else; the response
//! reader's own switch (`Capture::record`) stays false. When on, it is bounded: N exchanges per
//! step over the whole run (a shared counter per step), each text cut at [`MAX_HEAD_BYTES`],
//! each body at [`MAX_BODY_BYTES`].
//!
//! Credentials are redacted here, before anything leaves the engine: the values of headers and
//! query fields named like a credential ([`is_secret_name`]: horde-plan's rule, the one the
//! control plane's redaction asks too), and the values of the VU's variables named
//! so (a `token` extracted at login) wherever they appear. The control plane redacts once more
//! with what it knows besides (parameters set through the environment).

use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) use horde_plan::secrets::is_secret_name;
use horde_plan::secrets::is_secret_query_field;

/// A recorded request or response head is cut to this many bytes.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;
/// A recorded body is cut to this many bytes.
pub const MAX_BODY_BYTES: usize = 2 * 1024;
/// A recorded variable's value is cut to this many bytes.
const MAX_VALUE_BYTES: usize = 200;
/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// One exchange of one step, as recorded.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct Exchange {
    pub scenario: String,
    pub step: String,
    /// `"setup"`, `"steps"` or `"teardown"`: which part of the scenario the step ran in.
    pub phase: &'static str,
    /// `"http"`, `"sql"` or `"message"` (a message step: `request` holds the connection it
    /// opened and the messages it sent, a line each; `response` the messages it received).
    pub transport: &'static str,
    pub vu: u64,
    pub iteration: u64,
    /// Seconds since the run's time zero, when the exchange started.
    pub started_s: f64,
    /// HTTP: the request head as sent (request line and headers); SQL: the statements, each
    /// with its parameters. Empty when nothing was sent (a template failed).
    pub request: String,
    /// HTTP: the start of the request body (at most [`MAX_BODY_BYTES`]).
    pub request_body: String,
    pub request_body_bytes: u64,
    /// HTTP: the response head (status line and headers); SQL: the rows returned or affected
    /// and the first row's columns when kept. Empty when no response came.
    pub response: String,
    /// HTTP: the start of the response body (at most [`MAX_BODY_BYTES`], decoded from chunks).
    pub response_body: String,
    pub response_body_truncated: bool,
    pub status: Option<u16>,
    pub latency_us: u64,
    /// `"ok"`, or the error kind's label (`status_401`, `check_failed`, `refused`...).
    pub outcome: String,
    /// Why it failed, as the error detail says it.
    pub detail: Option<String>,
    /// Each check: (in words, passed, why it failed with expected and actual).
    #[serde(serialize_with = "judged_checks")]
    pub checks: Vec<(String, bool, Option<String>)>,
    /// Each variable the step extracts, with its value after the step (`None`: unset).
    #[serde(serialize_with = "variables")]
    pub vars: Vec<(String, Option<String>)>,
}

/// Each check as a record: `{check, passed, why}`.
fn judged_checks<S: serde::Serializer>(
    checks: &[(String, bool, Option<String>)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    #[derive(serde::Serialize)]
    struct Judged<'a> {
        check: &'a str,
        passed: bool,
        why: &'a Option<String>,
    }
    serializer.collect_seq(checks.iter().map(|(check, passed, why)| Judged { check, passed: *passed, why }))
}

/// Each variable as a record: `{name, value}`.
fn variables<S: serde::Serializer>(vars: &[(String, Option<String>)], serializer: S) -> Result<S::Ok, S::Error> {
    #[derive(serde::Serialize)]
    struct Variable<'a> {
        name: &'a str,
        value: &'a Option<String>,
    }
    serializer.collect_seq(vars.iter().map(|(name, value)| Variable { name, value }))
}

/// The run's recording: how many exchanges of each step are kept (`limit`), and how many have
/// been claimed so far, over all workers.
pub(crate) struct Recording {
    limit: u32,
    claimed: Vec<AtomicU32>,
}

impl Recording {
    /// `None` (nothing recorded, nothing paid) when `limit` is 0.
    pub fn new(limit: u32, steps: usize) -> Option<Self> {
        (limit > 0).then(|| Self { limit, claimed: (0..steps).map(|_| AtomicU32::new(0)).collect() })
    }

    /// Whether the next exchange of step `index` is to be recorded (true for the first `limit`).
    pub fn claim(&self, index: usize) -> bool {
        let Some(counter) = self.claimed.get(index) else { return false };
        if counter.load(Ordering::Relaxed) >= self.limit {
            return false;
        }
        counter.fetch_add(1, Ordering::Relaxed) < self.limit
    }
}

/// `text` cut to at most `limit` bytes at a character boundary; whether it was cut.
pub(crate) fn bounded(mut text: String, limit: usize) -> (String, bool) {
    if text.len() <= limit {
        return (text, false);
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    (text, true)
}

/// Bytes as text (invalid UTF-8 replaced), at most `limit` bytes of them.
pub(crate) fn text_prefix(bytes: &[u8], limit: usize) -> String {
    bounded(String::from_utf8_lossy(&bytes[..bytes.len().min(limit + 4)]).into_owned(), limit).0
}

/// An HTTP head (request or status line, then `Name: value` lines) with the values of headers
/// named like a credential, and of query fields so named in a request line, redacted.
pub(crate) fn redact_head(head: &str) -> String {
    let mut lines = head.split("\r\n");
    let mut out = String::with_capacity(head.len());
    if let Some(first) = lines.next() {
        out.push_str(&redact_request_line(first));
    }
    for line in lines {
        out.push_str("\r\n");
        match line.split_once(':') {
            Some((name, _)) if is_secret_name(name.trim()) => {
                out.push_str(name);
                out.push_str(": ");
                out.push_str(REDACTED);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// `GET /path?access_token=abc&page=2 HTTP/1.1` with `abc` redacted (a status line is kept).
fn redact_request_line(line: &str) -> String {
    let Some((before, query_and_rest)) = line.split_once('?') else { return line.to_owned() };
    let (query, rest) = query_and_rest.split_once(' ').map_or((query_and_rest, ""), |(query, rest)| (query, rest));
    let fields: Vec<String> = query
        .split('&')
        .map(|field| match field.split_once('=') {
            Some((name, value)) if !value.is_empty() && is_secret_query_field(name) => format!("{name}={REDACTED}"),
            _ => field.to_owned(),
        })
        .collect();
    let space = if rest.is_empty() { "" } else { " " };
    format!("{before}?{}{space}{rest}", fields.join("&"))
}

/// `text` with each of `secrets` (longest first) replaced wherever it appears.
pub(crate) fn redact_values(text: &mut String, secrets: &[String]) {
    for secret in secrets {
        if text.contains(secret.as_str()) {
            *text = text.replace(secret.as_str(), REDACTED);
        }
    }
}

impl Exchange {
    /// Redacts every text of the exchange: credential headers and query fields by name, then
    /// `secrets` (values of the VU's variables named like a credential) wherever they appear,
    /// variables named so included.
    pub(crate) fn redact(&mut self, mut secrets: Vec<String>) {
        if self.transport == "http" {
            self.request = redact_head(&self.request);
            self.response = redact_head(&self.response);
        }
        secrets.retain(|secret| secret.len() >= 4);
        secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
        for text in [&mut self.request, &mut self.request_body, &mut self.response, &mut self.response_body] {
            redact_values(text, &secrets);
        }
        if let Some(detail) = &mut self.detail {
            redact_values(detail, &secrets);
        }
        for (_, _, why) in &mut self.checks {
            if let Some(why) = why {
                redact_values(why, &secrets);
            }
        }
        for (name, value) in &mut self.vars {
            if let Some(value) = value {
                if is_secret_name(name) {
                    *value = REDACTED.to_owned();
                } else {
                    redact_values(value, &secrets);
                }
            }
        }
    }
}

/// A variable's value as text for a recorded exchange (bounded).
pub(crate) fn value_text(value: &minijinja::Value) -> String {
    bounded(value.to_string(), MAX_VALUE_BYTES).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_follow_the_control_planes_rule() {
        for name in [
            "Authorization",
            "X-Auth",
            "Api_Key",
            "X-Access-Key",
            "access_token",
            "Cookie",
            "Set-Cookie",
            "sessionId",
            "token",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["Accept", "page", "Content-Type", "Host", "city"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn heads_lose_their_credentials() {
        assert_eq!(
            redact_request_line("GET /cb?code=c0de&state=st4te&page=2 HTTP/1.1"),
            "GET /cb?code=<redacted>&state=<redacted>&page=2 HTTP/1.1"
        );
        let head = "GET /a?access_token=abc&page=2 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer xyz\r\nCookie: sid=1";
        assert_eq!(redact_head(head), "GET /a?access_token=<redacted>&page=2 HTTP/1.1\r\nHost: h\r\nAuthorization: <redacted>\r\nCookie: <redacted>");
        assert_eq!(
            redact_head("HTTP/1.1 200 OK\r\nSet-Cookie: session=abc"),
            "HTTP/1.1 200 OK\r\nSet-Cookie: <redacted>"
        );
    }

    #[test]
    fn recording_is_bounded_per_step_and_off_at_zero() {
        assert!(Recording::new(0, 3).is_none());
        let recording = Recording::new(2, 2).unwrap();
        assert_eq!((0..5).filter(|_| recording.claim(0)).count(), 2);
        assert!(recording.claim(1));
        assert!(!recording.claim(7));
    }

    #[test]
    fn secret_values_are_redacted_everywhere() {
        let mut exchange = Exchange {
            transport: "http",
            request: "GET /?t=tok-1234 HTTP/1.1\r\nX-Mine: tok-1234".into(),
            response_body: r#"{"token": "tok-1234"}"#.into(),
            vars: vec![("token".into(), Some("tok-1234".into())), ("city".into(), Some("paris".into()))],
            ..Exchange::default()
        };
        exchange.redact(vec!["tok-1234".into()]);
        let everything = format!("{exchange:?}");
        assert!(!everything.contains("tok-1234"), "{everything}");
        assert_eq!(exchange.vars[1].1.as_deref(), Some("paris"));
    }
}

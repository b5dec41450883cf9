//! Measurements: what the engine records per request, and how it becomes one snapshot a second.
//!
//! Metrics never travel per request. Each engine worker thread owns a [`WorkerRecorder`] (one
//! [`StepRecorder`] per step: an HDR histogram of latency in microseconds at 3 significant
//! digits, plus counters); once a second the worker swaps it for a fresh one and hands the full
//! one to the aggregator, which merges all workers' recorders exactly ([`WorkerRecorder::merge`])
//! into one interval. Histograms leave the engine serialised in the HDR V2 format
//! ([`encode_histogram`]) so that any HdrHistogram implementation can read them, and so that
//! percentiles over any time range come from exact merges ([`merge_encoded`]), never from
//! averaging percentiles.
//!
//! No async runtime and no IO here: a leaf crate the engine and the bindings share.

mod error_kind;
mod histogram;

pub use error_kind::{ErrorKind, H2_RESET_OTHER};
pub use histogram::{decode_histogram, encode_histogram, merge_encoded, new_latency_histogram, HistogramError};

use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// Records a value into an auto-resizing histogram. `saturating_record` would clamp to the
/// histogram's current top instead of growing it, so `record` comes first; it only fails for
/// values beyond what any histogram can hold, which are then clamped.
#[inline]
pub fn record_latency(histogram: &mut Histogram<u64>, value_us: u64) {
    let value_us = value_us.max(1);
    if histogram.record(value_us).is_err() {
        histogram.saturating_record(value_us);
    }
}

/// At most this many distinct messages are kept per error kind per step (per worker and per
/// interval, and again once merged); later distinct messages are counted by kind only.
pub const MAX_DETAILS_PER_KIND: usize = 8;
/// A kept message is cut to this many bytes (at a character boundary).
pub const MAX_DETAIL_BYTES: usize = 200;

/// One distinct message of an error kind (`connection refused (os error 111) to 127.0.0.1:1`),
/// and how many failures of the interval carried it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorDetail {
    pub kind: ErrorKind,
    pub message: String,
    pub count: u64,
}

/// An entry of a list of error details, however the list holds its kind: a recorder's
/// [`ErrorDetail`], or a snapshot's `(kind label, message, count)`.
pub trait Detail {
    fn same_kind(&self, other: &Self) -> bool;
    fn message(&self) -> &str;
    fn count_mut(&mut self) -> &mut u64;
}

impl Detail for ErrorDetail {
    fn same_kind(&self, other: &Self) -> bool {
        self.kind == other.kind
    }
    fn message(&self) -> &str {
        &self.message
    }
    fn count_mut(&mut self) -> &mut u64 {
        &mut self.count
    }
}

impl Detail for (String, String, u64) {
    fn same_kind(&self, other: &Self) -> bool {
        self.0 == other.0
    }
    fn message(&self) -> &str {
        &self.1
    }
    fn count_mut(&mut self) -> &mut u64 {
        &mut self.2
    }
}

/// `detail` added to `details`, the one rule every list of details keeps (a worker's recorder,
/// the engine's merge of workers, generators and seconds): a message already there of its kind
/// adds its count; a new one is kept while its kind has fewer than [`MAX_DETAILS_PER_KIND`]
/// (later distinct messages are counted by kind only, in the error counts).
pub fn add_detail<D: Detail>(details: &mut Vec<D>, mut detail: D) {
    let mut of_kind = 0;
    for known in details.iter_mut().filter(|known| known.same_kind(&detail)) {
        if known.message() == detail.message() {
            *known.count_mut() += *detail.count_mut();
            return;
        }
        of_kind += 1;
    }
    if of_kind < MAX_DETAILS_PER_KIND {
        details.push(detail);
    }
}

/// `message` cut to at most [`MAX_DETAIL_BYTES`], at a character boundary.
pub fn bounded_message(mut message: String) -> String {
    if message.len() > MAX_DETAIL_BYTES {
        let mut end = MAX_DETAIL_BYTES;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    message
}

impl ErrorKind {
    /// Whether a request failed this way got a response (or, for a group, a whole pass): its
    /// time is a latency result. A request that never got one (refused, reset, timeout, a
    /// malformed or oversized head, not sent, cut...) is counted, never timed: its "latency"
    /// would be how fast it failed. A SQL error is the server's answer, and timed; a SQL
    /// connection failure is not one.
    #[inline]
    pub fn got_response(&self) -> bool {
        !matches!(
            self,
            ErrorKind::Refused
                | ErrorKind::Reset
                | ErrorKind::Timeout
                | ErrorKind::Tls
                | ErrorKind::Dns
                | ErrorKind::Connect
                | ErrorKind::NoRoute
                | ErrorKind::Lost
                | ErrorKind::Protocol
                | ErrorKind::HeadersTooLarge
                | ErrorKind::Io
                | ErrorKind::FeederExhausted
                | ErrorKind::TemplateFailed
                | ErrorKind::Cut
                | ErrorKind::SqlConnectionFailure
                | ErrorKind::H2Reset(_)
                | ErrorKind::H2GoAway
                | ErrorKind::H2Refused
                | ErrorKind::WsClosed
        )
    }
}

/// A message step's traffic (the `tcp://` and `udp://` transports), counted as it happens: a
/// stream's frames show in the second they went out, not when the stream ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct MessageCounts {
    /// Messages the step sent and received (over TCP, framed messages; over UDP, datagrams).
    pub sent: u64,
    pub received: u64,
    /// Datagrams the engine put on the wire and took off it (UDP only; with an impaired network
    /// these differ from the messages: lost ones are not sent, duplicates are sent twice).
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    /// Replies to an earlier ping of the VU that came after that ping was counted `lost`.
    pub late: u64,
    /// KCP only: data segments the engine's KCP sent again (a timeout or a fast resend).
    pub retransmitted: u64,
}

impl MessageCounts {
    pub fn add(&mut self, other: &MessageCounts) {
        self.sent += other.sent;
        self.received += other.received;
        self.datagrams_sent += other.datagrams_sent;
        self.datagrams_received += other.datagrams_received;
        self.late += other.late;
        self.retransmitted += other.retransmitted;
    }

    pub fn is_empty(&self) -> bool {
        *self == MessageCounts::default()
    }
}

/// What one step did during one interval, on one worker or merged across workers.
#[derive(Debug, Clone)]
pub struct StepRecorder {
    /// Latency of every request that got a response (a status below 400 or not: see
    /// [`ErrorKind::got_response`]), in microseconds, as its user felt it: a request
    /// timed from an open-model arrival's intended instant includes any delay before its send.
    /// Requests that never got a response are counted in `requests` and the errors only.
    pub latency_us: Histogram<u64>,
    /// The requests timed from an intended instant (the first of each open-model iteration):
    /// their latency as in `latency_us`, and again from their actual send (what the target took).
    /// Both stay empty in closed models, which cost nothing more.
    pub intended_us: Histogram<u64>,
    pub from_send_us: Histogram<u64>,
    pub requests: u64,
    pub ok: u64,
    /// Fixed kinds (refused, reset...) by index; HTTP statuses in `status_errors`.
    pub fixed_errors: [u64; ErrorKind::FIXED_COUNT],
    pub status_errors: BTreeMap<u16, u64>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Rows the step's statements returned or changed (`sql` steps; 0 for HTTP), as
    /// PostgreSQL reports them in each statement's command tag.
    pub rows: u64,
    /// Requests sent over HTTP/1.1 and over HTTP/2, counted only when the plan may speak
    /// HTTP/2 (`target.http_version` "2" or "auto"; "auto" over TLS takes what ALPN chose);
    /// a request that never reached a connection is in neither.
    pub http1: u64,
    pub http2: u64,
    /// Requests over HTTP/2 whose body waited for send capacity (the server's flow-control
    /// window) longer than the engine's stall threshold: counted, not errors.
    pub h2_stalls: u64,
    /// The first distinct messages of each error kind (bounded: [`MAX_DETAILS_PER_KIND`]),
    /// counted. Empty (no allocation) while nothing fails.
    pub details: Vec<ErrorDetail>,
    /// Each check of the step (in the plan's order): (passes, failures). Empty for a step
    /// without checks.
    pub checks: Vec<[u64; 2]>,
    /// Message steps only: messages and datagrams sent and received, late replies.
    pub messages: MessageCounts,
}

impl Default for StepRecorder {
    fn default() -> Self {
        Self {
            latency_us: new_latency_histogram(),
            intended_us: new_latency_histogram(),
            from_send_us: new_latency_histogram(),
            requests: 0,
            ok: 0,
            fixed_errors: [0; ErrorKind::FIXED_COUNT],
            status_errors: BTreeMap::new(),
            bytes_sent: 0,
            bytes_received: 0,
            rows: 0,
            http1: 0,
            http2: 0,
            h2_stalls: 0,
            details: Vec::new(),
            checks: Vec::new(),
            messages: MessageCounts::default(),
        }
    }
}

impl StepRecorder {
    /// Records one finished request. `outcome` is `Ok(())` for a response below 400.
    #[inline]
    /// Its latency is recorded only when it got a response ([`ErrorKind::got_response`]).
    pub fn record(&mut self, latency_us: u64, outcome: Result<(), ErrorKind>, bytes_sent: u64, bytes_received: u64) {
        if outcome.is_ok() || outcome.is_err_and(|kind| kind.got_response()) {
            record_latency(&mut self.latency_us, latency_us);
        }
        self.requests += 1;
        match outcome {
            Ok(()) => self.ok += 1,
            Err(kind) => self.count_error(kind),
        }
        self.bytes_sent += bytes_sent;
        self.bytes_received += bytes_received;
    }

    /// Also records, for a request just recorded with a latency from its intended instant
    /// (`latency_us`), its latency from the actual send.
    #[inline]
    pub fn record_from_send(&mut self, latency_us: u64, from_send_us: u64) {
        record_latency(&mut self.intended_us, latency_us);
        record_latency(&mut self.from_send_us, from_send_us);
    }

    /// Every request's latency from its actual send (the target's side of the latency, without
    /// the generator's own delays): `latency_us` with each request timed from an intended instant
    /// counted at its send instead. `None` when no request was (then it is `latency_us` itself).
    pub fn latency_from_send(&self) -> Option<Histogram<u64>> {
        if self.intended_us.is_empty() {
            return None;
        }
        let mut histogram = self.latency_us.clone();
        // Exact: `intended_us` holds a subset of `latency_us`'s values, bucket by bucket.
        histogram.subtract(&self.intended_us).ok()?;
        histogram.add(&self.from_send_us).ok()?;
        Some(histogram)
    }

    /// Keeps `message` as a detail of `kind` (counted once more if already kept; dropped when
    /// the kind already has [`MAX_DETAILS_PER_KIND`] others). Called on failures only.
    pub fn note_detail(&mut self, kind: ErrorKind, message: String) {
        self.add_detail(kind, message, 1);
    }

    fn add_detail(&mut self, kind: ErrorKind, message: String, count: u64) {
        add_detail(&mut self.details, ErrorDetail { kind, message: bounded_message(message), count });
    }

    /// Counts one judgement of check number `check` of the step.
    #[inline]
    pub fn record_check(&mut self, check: usize, passed: bool) {
        if self.checks.len() <= check {
            self.checks.resize(check + 1, [0, 0]);
        }
        self.checks[check][usize::from(!passed)] += 1;
    }

    /// The details as (kind label, message, count), in the order they first occurred.
    pub fn details_by_kind(&self) -> Vec<(String, String, u64)> {
        self.details.iter().map(|detail| (detail.kind.label(), detail.message.clone(), detail.count)).collect()
    }

    fn count_error(&mut self, kind: ErrorKind) {
        match kind {
            ErrorKind::Status(code) => *self.status_errors.entry(code).or_insert(0) += 1,
            fixed => self.fixed_errors[fixed.fixed_index().expect("non-status kinds have an index")] += 1,
        }
    }

    pub fn errors(&self) -> u64 {
        self.requests - self.ok
    }

    /// Nothing finished and no message moved (a stream still going shows by its messages).
    pub fn is_empty(&self) -> bool {
        self.requests == 0 && self.messages.is_empty()
    }

    /// Errors by kind label (`status_503`, `timeout`...), only the kinds that occurred.
    pub fn errors_by_kind(&self) -> Vec<(String, u64)> {
        let fixed = ErrorKind::FIXED
            .iter()
            .zip(self.fixed_errors.iter())
            .filter(|(_, count)| **count > 0)
            .map(|(kind, count)| (kind.label(), *count));
        let statuses = self.status_errors.iter().map(|(code, count)| (ErrorKind::Status(*code).label(), *count));
        fixed.chain(statuses).collect()
    }

    /// Adds `other` into `self`; exact (histogram counts are added bucket by bucket).
    pub fn merge(&mut self, other: &StepRecorder) {
        // Both histograms auto-resize, so adding never fails for lack of range.
        self.latency_us.add(&other.latency_us).expect("auto-resizing histograms always add");
        if !other.intended_us.is_empty() {
            self.intended_us.add(&other.intended_us).expect("auto-resizing histograms always add");
            self.from_send_us.add(&other.from_send_us).expect("auto-resizing histograms always add");
        }
        self.requests += other.requests;
        self.ok += other.ok;
        for (mine, theirs) in self.fixed_errors.iter_mut().zip(other.fixed_errors.iter()) {
            *mine += theirs;
        }
        for (code, count) in &other.status_errors {
            *self.status_errors.entry(*code).or_insert(0) += count;
        }
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.rows += other.rows;
        self.http1 += other.http1;
        self.http2 += other.http2;
        self.h2_stalls += other.h2_stalls;
        self.messages.add(&other.messages);
        for detail in &other.details {
            self.add_detail(detail.kind, detail.message.clone(), detail.count);
        }
        for (check, [passes, failures]) in other.checks.iter().enumerate() {
            if self.checks.len() <= check {
                self.checks.resize(check + 1, [0, 0]);
            }
            self.checks[check][0] += passes;
            self.checks[check][1] += failures;
        }
    }
}

/// Everything one worker thread measured during one interval.
#[derive(Debug, Clone)]
pub struct WorkerRecorder {
    /// Indexed by the engine's global step index (scenario by scenario, step by step).
    pub steps: Vec<StepRecorder>,
    pub iterations: u64,
    pub dropped_arrivals: u64,
    pub connections_opened: u64,
    /// Pauses VUs took after a failed connect (`target.connect_backoff`), and their time in
    /// microseconds (counted when each pause ends, cut short by a stop or not).
    pub connect_backoffs: u64,
    pub connect_backoff_us: u64,
    /// VUs whose setup failed (each counted once, at its first failed setup).
    pub setup_failures: u64,
    /// How late timers fired, in microseconds (the generator's own health).
    pub timer_lateness_us: Histogram<u64>,
}

impl WorkerRecorder {
    pub fn new(step_count: usize) -> Self {
        Self {
            steps: (0..step_count).map(|_| StepRecorder::default()).collect(),
            iterations: 0,
            dropped_arrivals: 0,
            connections_opened: 0,
            connect_backoffs: 0,
            connect_backoff_us: 0,
            setup_failures: 0,
            timer_lateness_us: new_latency_histogram(),
        }
    }

    /// Takes the recorded interval out, leaving a fresh recorder in place.
    pub fn take(&mut self) -> WorkerRecorder {
        let fresh = WorkerRecorder::new(self.steps.len());
        std::mem::replace(self, fresh)
    }

    /// Adds `other` into `self`, exactly.
    pub fn merge(&mut self, other: &WorkerRecorder) {
        for (mine, theirs) in self.steps.iter_mut().zip(other.steps.iter()) {
            mine.merge(theirs);
        }
        self.iterations += other.iterations;
        self.dropped_arrivals += other.dropped_arrivals;
        self.connections_opened += other.connections_opened;
        self.connect_backoffs += other.connect_backoffs;
        self.connect_backoff_us += other.connect_backoff_us;
        self.setup_failures += other.setup_failures;
        self.timer_lateness_us.add(&other.timer_lateness_us).expect("auto-resizing histograms always add");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_is_exact() {
        let mut left = WorkerRecorder::new(2);
        let mut right = WorkerRecorder::new(2);
        for value in 1..=1000 {
            left.steps[0].record(value, Ok(()), 10, 100);
        }
        for value in 1001..=2000 {
            right.steps[0].record(value, Err(ErrorKind::Status(503)), 10, 100);
        }
        right.steps[1].record(5, Err(ErrorKind::Timeout), 1, 0);
        left.steps[0].rows = 7;
        right.steps[0].rows = 5;
        (left.steps[0].http1, left.steps[0].http2, right.steps[0].http2) = (1, 2, 3);
        left.merge(&right);
        let step = &left.steps[0];
        assert_eq!(step.rows, 12);
        assert_eq!((step.http1, step.http2), (1, 5));
        assert_eq!(step.requests, 2000);
        assert_eq!(step.ok, 1000);
        assert_eq!(step.errors(), 1000);
        assert_eq!(step.bytes_received, 200_000);
        assert_eq!(step.latency_us.len(), 2000);
        assert_eq!(step.latency_us.max(), 2000, "values are recorded, not clamped");
        // The median of 1..=2000 is 1000, within HDR's 3 significant digits.
        let median = step.latency_us.value_at_quantile(0.5);
        assert!((999..=1001).contains(&median), "median {median}");
        assert_eq!(step.errors_by_kind(), vec![("status_503".to_owned(), 1000)]);
        assert_eq!(left.steps[1].errors_by_kind(), vec![("timeout".to_owned(), 1)]);
    }

    #[test]
    fn latency_from_send_replaces_only_the_intended_requests() {
        let mut step = StepRecorder::default();
        assert!(step.latency_from_send().is_none(), "closed models: the latency is the target's");
        // 90 requests sent on time (10 ms), 10 timed from an intended instant 40 ms before
        // their send (50 ms felt, 10 ms at the target).
        for _ in 0..90 {
            step.record(10_000, Ok(()), 1, 1);
        }
        for _ in 0..10 {
            step.record(50_000, Ok(()), 1, 1);
            step.record_from_send(50_000, 10_000);
        }
        let mut other = StepRecorder::default();
        other.record(20_000, Ok(()), 1, 1);
        other.record_from_send(20_000, 20_000);
        step.merge(&other);
        assert_eq!(step.latency_us.len(), 101);
        assert!(step.latency_us.max() >= 49_000);
        let from_send = step.latency_from_send().expect("some were timed from an intended instant");
        assert_eq!(from_send.len(), 101);
        assert!(from_send.max() < 20_100, "max {}", from_send.max());
        assert_eq!(from_send.count_between(9_000, 11_000), 100);
    }

    #[test]
    fn only_requests_that_got_a_response_are_timed() {
        let mut step = StepRecorder::default();
        step.record(1_000, Ok(()), 1, 1);
        step.record(2_000, Err(ErrorKind::Status(503)), 1, 1);
        step.record(3_000, Err(ErrorKind::CheckFailed), 1, 1);
        for kind in [
            ErrorKind::Refused,
            ErrorKind::Reset,
            ErrorKind::Timeout,
            ErrorKind::Tls,
            ErrorKind::Dns,
            ErrorKind::Connect,
            ErrorKind::Protocol,
            ErrorKind::Io,
            ErrorKind::TemplateFailed,
            ErrorKind::Cut,
            ErrorKind::FeederExhausted,
        ] {
            step.record(5, Err(kind), 0, 0);
        }
        assert_eq!(step.requests, 14, "every request is counted");
        assert_eq!(step.latency_us.len(), 3, "only those with a response are timed");
        assert_eq!(step.latency_us.min(), 1_000);
    }

    #[test]
    fn details_are_counted_by_message_and_bounded() {
        let mut left = StepRecorder::default();
        let mut right = StepRecorder::default();
        for _ in 0..3 {
            left.note_detail(ErrorKind::Refused, "connection refused to 127.0.0.1:1".into());
        }
        for index in 0..20 {
            right.note_detail(ErrorKind::Status(503), format!("HTTP/1.1 503 busy {index}"));
        }
        right.note_detail(ErrorKind::Refused, "connection refused to 127.0.0.1:1".into());
        right.note_detail(ErrorKind::CheckFailed, "é".repeat(150));
        left.merge(&right);
        assert_eq!(
            left.details[0],
            ErrorDetail { kind: ErrorKind::Refused, message: "connection refused to 127.0.0.1:1".into(), count: 4 }
        );
        assert_eq!(
            left.details.iter().filter(|detail| detail.kind == ErrorKind::Status(503)).count(),
            MAX_DETAILS_PER_KIND
        );
        let long = left.details.iter().find(|detail| detail.kind == ErrorKind::CheckFailed).unwrap();
        assert_eq!(long.message.len(), MAX_DETAIL_BYTES, "cut at a character boundary");
        left.record_check(1, false);
        right.record_check(1, true);
        right.record_check(0, true);
        left.merge(&right);
        assert_eq!(left.checks, vec![[1, 0], [1, 1]]);
    }

    #[test]
    fn take_leaves_a_fresh_recorder() {
        let mut recorder = WorkerRecorder::new(1);
        recorder.steps[0].record(10, Ok(()), 1, 1);
        recorder.iterations = 3;
        let taken = recorder.take();
        assert_eq!(taken.steps[0].requests, 1);
        assert_eq!(taken.iterations, 3);
        assert!(recorder.steps[0].is_empty());
        assert_eq!(recorder.iterations, 0);
    }
}

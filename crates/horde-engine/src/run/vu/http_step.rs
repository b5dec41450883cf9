//! A VU's HTTP steps: a request rendered, sent (on its own connection or one borrowed from the
//! pool), read, judged (cookies, extractors, checks) and recorded; and, when the run records
//! exchanges (`crate::exchange`), kept in full for `--debug` and `horde try`.

use super::lane::ExchangeError;
use super::{Flow, InFlight, Vu};
use crate::exchange::{text_prefix, Exchange, MAX_BODY_BYTES, MAX_HEAD_BYTES};
use crate::response_rules::{body_prefix, ResponseView};
use crate::run::worker_state::WorkerState;
use crate::scenario::interpreter::{Body, RequestNode};
use crate::template::{JsonTemplate, Text, UNDEFINED_MARK};
use crate::transport::http::{encode_request, Capture, H2Request, RequestParts};
use horde_metrics::ErrorKind;
use minijinja::Value;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A request ready to go out: its bytes (fixed, from the plan, or rendered here) and its path.
pub(super) struct Prepared<'n> {
    pub fixed: Option<&'n Vec<u8>>,
    /// The fixed request in HTTP/2's form, when the plan may speak HTTP/2.
    pub h2: Option<&'n H2Request>,
    pub encoded: Option<Vec<u8>>,
    pub path: Cow<'n, str>,
}

impl Prepared<'_> {
    pub fn bytes(&self) -> &[u8] {
        self.fixed.map(Vec::as_slice).or(self.encoded.as_deref()).unwrap_or_default()
    }
}

/// An exchange ended: its outcome (`Lane::exchange`'s), when, and over which protocol.
pub(super) struct Done {
    pub outcome: Result<(u16, u64, u64), (ExchangeError, u64)>,
    pub ended: Instant,
    pub over_h2: Option<bool>,
}

impl Vu {
    pub(super) fn render_json(
        state: &WorkerState,
        context: &Value,
        template: &JsonTemplate,
    ) -> Option<serde_json::Value> {
        Some(match template {
            JsonTemplate::Fixed(value) => value.clone(),
            JsonTemplate::Typed(name) => {
                let rendered = Self::render(state, context, name)?;
                if rendered == UNDEFINED_MARK {
                    return None;
                }
                serde_json::from_str(&rendered).ok()?
            }
            JsonTemplate::Text(name) => serde_json::Value::String(Self::render(state, context, name)?),
            JsonTemplate::Array(items) => serde_json::Value::Array(
                items.iter().map(|item| Self::render_json(state, context, item)).collect::<Option<_>>()?,
            ),
            JsonTemplate::Object(fields) => serde_json::Value::Object(
                fields
                    .iter()
                    .map(|(key, item)| Some((key.clone(), Self::render_json(state, context, item)?)))
                    .collect::<Option<_>>()?,
            ),
        })
    }

    /// Encodes a request whose parts are templated (or that carries cookies) into `self.request`.
    /// Returns the rendered path (for cookie paths), or `None` when a template failed.
    fn encode_dynamic<'n>(&mut self, state: &WorkerState, node: &'n RequestNode) -> Option<Cow<'n, str>> {
        let path = self.render_text(state, &node.path)?;
        let path = match safe_path(&path) {
            Some(safe) => Cow::Owned(safe),
            None => path.into_cow(),
        };
        let mut rendered_headers = Vec::with_capacity(node.headers.len());
        for (name, value) in &node.headers {
            let value = self.render_text(state, value)?;
            // A line break in a header value would end the header (or the request) early.
            if value.contains(['\r', '\n']) {
                return None;
            }
            rendered_headers.push((name.as_str(), value));
        }
        let (body, json) = match &node.body {
            Body::None => (Vec::new(), false),
            Body::Text(text) => (self.render_text(state, text)?.into_owned().into_bytes(), false),
            Body::Json(template) => {
                let context = self.context(state);
                (serde_json::to_vec(&Self::render_json(state, &context, template)?).ok()?, true)
            }
        };
        let headers: Vec<(&str, &str)> = rendered_headers.iter().map(|(name, value)| (*name, &**value)).collect();
        let endpoint = &state.shared.plan.endpoints[self.instance];
        let cookie = self.cookies.header_for(&endpoint.path_prefix, &path);
        let parts = RequestParts {
            method: &node.method,
            path: &path,
            headers: &headers,
            cookie: cookie.as_deref(),
            body: &body,
            json,
        };
        self.request.clear();
        encode_request(&mut self.request, endpoint, &parts);
        Some(path)
    }

    /// A request's bytes, rendered unless fixed, and its path (for cookie paths); `None` when a
    /// template failed, which is then counted, noted and recorded as the step's outcome.
    pub(super) fn prepare<'n>(
        &mut self,
        state: &WorkerState,
        node: &'n RequestNode,
        started: Instant,
        recording: bool,
    ) -> Option<Prepared<'n>> {
        // Requests with nothing templated go out as encoded at start, unless cookies must be added.
        if let (Some(bytes), true, Text::Fixed(path)) = (&node.fixed, self.cookies.is_empty(), &node.path) {
            let h2 = node.fixed_h2.as_ref().map(|forms| &forms[self.instance]);
            return Some(Prepared {
                fixed: Some(&bytes[self.instance]),
                h2,
                encoded: None,
                path: Cow::Borrowed(path.as_str()),
            });
        }
        match self.encode_dynamic(state, node) {
            Some(path) => {
                Some(Prepared { fixed: None, h2: None, encoded: Some(std::mem::take(&mut self.request)), path })
            }
            None => {
                self.record(state, node.global_index, 0, Err(ErrorKind::TemplateFailed), 0, 0);
                let why = self.template_failure(state, node);
                if recording {
                    let mut exchange = self.exchange_record(state, node.global_index, "http", started);
                    exchange.outcome = ErrorKind::TemplateFailed.label();
                    exchange.detail = Some(why.clone());
                    exchange.vars = self.extracted(node.extractors.iter().map(|extractor| extractor.var.as_str()));
                    self.keep_exchange(state, exchange);
                }
                self.note(state, node.global_index, ErrorKind::TemplateFailed, why);
                None
            }
        }
    }

    pub(super) async fn request(&mut self, state: &WorkerState, node: &RequestNode, intended: Option<Instant>) -> Flow {
        let started = intended.unwrap_or_else(Instant::now);
        // One branch when the run records no exchanges (`crate::exchange`).
        let recording = state.shared.recording.as_ref().is_some_and(|recording| recording.claim(node.global_index));
        let Some(prepared) = self.prepare(state, node, started, recording) else {
            // Not sent; the step's think time still applies, as it would after a reply.
            if let Some(think_time) = &node.think_time {
                self.pause(state, think_time).await;
            }
            return Flow::Continue;
        };
        self.sent += 1;
        // Only a request timed from an intended instant needs its send instant too: a closed
        // model's latency is already from its send.
        let sent_at = intended.map(|_| Instant::now());
        self.lane.capture.keep_body = node.keep_body;
        self.lane.capture.keep_headers = node.keep_headers;
        let exchange = recording.then(|| self.request_record(state, node.global_index, started, prepared.bytes()));
        self.lane.capture.record = recording;
        let mut in_flight = InFlight { state, index: node.global_index, started, ended: false };
        // The timeout runs from the send (the start, in a closed model: no clock read of its own).
        let outcome = self
            .lane
            .exchange(state, self.instance, prepared.bytes(), prepared.h2, node.is_head, sent_at.unwrap_or(started))
            .await;
        in_flight.ended = true;
        if std::mem::take(&mut self.lane.connected) {
            self.backoff = Duration::ZERO;
        }
        let over_h2 = self.lane.over_h2.take();
        let mut capture = std::mem::take(&mut self.lane.capture);
        let Prepared { encoded, path, .. } = prepared;
        if let Some(buffer) = encoded {
            // The encoding buffer is reused by the next templated request.
            self.request = buffer;
        }
        let done = Done { outcome, ended: Instant::now(), over_h2 };
        let (end_iteration, back_off) =
            self.finish_request(state, node, started, sent_at, done, &mut capture, &path, exchange);
        self.lane.capture = capture;
        self.end_step(state, back_off, node.think_time.as_ref(), end_iteration).await
    }

    /// What follows a request's exchange: the protocol it went over counted, the response
    /// judged (cookies, extractors, checks), the outcome recorded and noted, the exchange
    /// recorded. Whether the iteration ends (a failed check that says so) and whether the VU
    /// backs off (a failed connect).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_request(
        &mut self,
        state: &WorkerState,
        node: &RequestNode,
        started: Instant,
        sent_at: Option<Instant>,
        done: Done,
        capture: &mut Capture,
        path: &str,
        exchange: Option<Exchange>,
    ) -> (bool, bool) {
        if let Some(over_h2) = done.over_h2 {
            let step = &mut state.recorder.borrow_mut().steps[node.global_index];
            *(if over_h2 { &mut step.http2 } else { &mut step.http1 }) += 1;
            if std::mem::take(&mut capture.h2_stalled) {
                step.h2_stalls += 1;
            }
        }
        let latency_us = done.ended.saturating_duration_since(started).as_micros() as u64;
        let from_send_us = sent_at.map(|sent_at| done.ended.saturating_duration_since(sent_at).as_micros() as u64);
        let mut end_iteration = false;
        let mut back_off = false;
        let status = done.outcome.as_ref().ok().map(|(status, _, _)| *status);
        let (result, sent, received, detail) = match done.outcome {
            Ok((status, sent, received)) => {
                let (result, why) = self.apply_response(state, node, capture, status, path);
                // A check that could not be judged (the body past the bound) did not pass.
                end_iteration = matches!(result, Err(ErrorKind::CheckFailed | ErrorKind::BodyTooLarge))
                    && node.end_on_check_failure;
                (result, sent, received, why)
            }
            Err((error, sent)) => {
                self.last_connect_failed = error.connecting;
                back_off = error.connecting && self.backs_off;
                (Err(error.kind), sent, 0, Some(error.detail))
            }
        };
        self.record(state, node.global_index, latency_us, result, sent, received);
        if let Some(exchange) = exchange {
            self.response_record(state, node, exchange, capture, status, latency_us, result, detail.clone());
        }
        if let (Err(kind), Some(mut detail)) = (result, detail) {
            // A failed check quotes the body, which may echo a credential the VU sent (a feeder's
            // password): redacted here, as a SQL error's words are, before any output holds it.
            crate::exchange::redact_values(&mut detail, &self.secrets(state));
            self.note(state, node.global_index, kind, detail);
        }
        // Only a request timed in `latency_us` (it got a response) has a latency from its send.
        let timed = result.is_ok() || result.is_err_and(|kind| kind.got_response());
        if let Some(from_send_us) = from_send_us.filter(|_| timed) {
            state.recorder.borrow_mut().steps[node.global_index].record_from_send(latency_us, from_send_us);
        }
        (end_iteration, back_off)
    }

    /// A recorded exchange completed with its response (`crate::exchange`): the head and body
    /// prefix as received, each check judged again on the kept response (recording only), the
    /// variables the step extracts.
    #[allow(clippy::too_many_arguments)]
    fn response_record(
        &mut self,
        state: &WorkerState,
        node: &RequestNode,
        mut exchange: Exchange,
        capture: &mut Capture,
        status: Option<u16>,
        latency_us: u64,
        result: Result<(), ErrorKind>,
        detail: Option<String>,
    ) {
        capture.record = false;
        exchange.status = status;
        exchange.latency_us = latency_us;
        exchange.outcome = match result {
            Ok(()) => "ok".to_owned(),
            Err(kind) => kind.label(),
        };
        exchange.detail = detail;
        if let Some(status) = status {
            exchange.response = text_prefix(&capture.recorded_head, MAX_HEAD_BYTES).trim_end().to_owned();
            exchange.response_body = text_prefix(&capture.recorded_body, MAX_BODY_BYTES);
            exchange.response_body_truncated = capture.recorded_body_truncated;
            if result != Err(ErrorKind::BodyTooLarge) {
                let mut view = ResponseView::new(status, &capture.body, &capture.headers, &node.json_scope);
                exchange.checks = super::recording::judged(
                    &state.shared.plan.check_labels[node.global_index],
                    &node.checks,
                    &mut view,
                );
            }
        }
        exchange.vars = self.extracted(node.extractors.iter().map(|extractor| extractor.var.as_str()));
        self.keep_exchange(state, exchange);
    }

    /// Cookies, extractors and checks on a response (each check counted); the outcome to
    /// record, and on a failure why (the error detail).
    fn apply_response(
        &mut self,
        state: &WorkerState,
        node: &RequestNode,
        capture: &Capture,
        status: u16,
        path: &str,
    ) -> (Result<(), ErrorKind>, Option<String>) {
        let prefix = &state.shared.plan.endpoints[self.instance].path_prefix;
        if !capture.set_cookies.is_empty() {
            let request_path = format!("{prefix}{path}");
            for set_cookie in &capture.set_cookies {
                self.cookies.store(set_cookie, &request_path);
            }
        }
        // A body past `max_kept_body_bytes` was kept only in part: what reads it is not judged
        // on a part (a check could pass or fail on the cut), and the step counts as body_too_large.
        let truncated = node.keep_body && capture.body_truncated;
        let mut view = ResponseView::new(status, &capture.body, &capture.headers, &node.json_scope);
        let mut extract_failed = None;
        if !node.extractors.is_empty() {
            // Only the renderings that read an extracted variable are stale (forget_renderings_of,
            // spelled out: the response view borrows the capture buffers).
            self.context = None;
            for extractor in &node.extractors {
                if let Some(slots) = state.shared.plan.memo_readers.get(&extractor.var) {
                    for slot in slots {
                        if let Some(rendered) = self.memo.get_mut(*slot) {
                            *rendered = None;
                        }
                    }
                }
            }
            let vars = Arc::make_mut(&mut self.vars);
            for extractor in &node.extractors {
                if truncated && extractor.needs_body() {
                    vars.remove(&extractor.var);
                    extract_failed.get_or_insert(extractor);
                    continue;
                }
                match extractor.extract(&mut view, &mut self.random) {
                    Some(value) => {
                        vars.insert(&extractor.var, value);
                    }
                    None => {
                        vars.remove(&extractor.var);
                        extract_failed.get_or_insert(extractor);
                    }
                }
            }
        }
        if truncated {
            let limit = state.shared.plan.read_limits.max_kept_body_bytes;
            return (
                Err(ErrorKind::BodyTooLarge),
                Some(format!("status {status}: the body passed target.max_kept_body_bytes ({limit} bytes)")),
            );
        }
        // Every check is judged (and counted), not only up to the first that fails.
        let mut failed_check = None;
        if !node.checks.is_empty() {
            let mut recorder = state.recorder.borrow_mut();
            let step = &mut recorder.steps[node.global_index];
            for (index, check) in node.checks.iter().enumerate() {
                let passed = check.passes(&mut view);
                step.record_check(index, passed);
                if !passed && failed_check.is_none() {
                    failed_check = Some(check.failure(&mut view));
                }
            }
        }
        if let Some(why) = failed_check {
            (Err(ErrorKind::CheckFailed), Some(why))
        } else if !node.has_status_check && status >= 400 {
            let why = format!("{} — {}", capture.error_status_line, body_prefix(&capture.error_body));
            (Err(ErrorKind::Status(status)), Some(why))
        } else if let Some(extractor) = extract_failed {
            let why = format!(
                "extractor '{}' ({}) found nothing (status {status}, {})",
                extractor.var,
                extractor.description,
                body_prefix(view.body)
            );
            (Err(ErrorKind::ExtractFailed), Some(why))
        } else {
            (Ok(()), None)
        }
    }
}

/// A rendered path as it may go on the request line: spaces and control characters (which
/// would end the request line early) percent-encoded; `None` when it has none.
fn safe_path(path: &str) -> Option<String> {
    if !path.bytes().any(|byte| byte <= b' ' || byte == 0x7F) {
        return None;
    }
    let mut safe = String::with_capacity(path.len() + 8);
    for character in path.chars() {
        if character <= ' ' || character == '\u{7f}' {
            safe.push_str(&format!("%{:02X}", character as u32));
        } else {
            safe.push(character);
        }
    }
    Some(safe)
}

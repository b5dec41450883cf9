//! A VU's HTTP steps: a request rendered, sent (on its own connection or one borrowed from the
//! pool), read, judged (cookies, extractors, checks) and recorded; and, when the run records
//! exchanges (`crate::exchange`), kept in full for `--debug` and `horde try`.

use super::{Flow, InFlight, Vu};
use crate::exchange::{text_prefix, Exchange, MAX_BODY_BYTES, MAX_HEAD_BYTES};
use crate::http::{encode_request, read_response, RequestParts};
use crate::interpreter::{Body, RequestNode};
use crate::response_rules::{body_prefix, ResponseView};
use crate::template::{JsonTemplate, Text, UNDEFINED_MARK};
use crate::pool::Pool;
use crate::worker_state::WorkerState;
use horde_metrics::ErrorKind;
use minijinja::Value;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why one exchange failed, in words too (the error detail), and whether it failed before
/// reaching the target.
#[derive(Debug, Clone)]
pub(super) struct ExchangeError {
    pub kind: ErrorKind,
    pub connecting: bool,
    pub detail: String,
}

impl Vu {
    pub(super) fn render_json(state: &WorkerState, context: &Value, template: &JsonTemplate) -> Option<serde_json::Value> {
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
            JsonTemplate::Array(items) => {
                serde_json::Value::Array(items.iter().map(|item| Self::render_json(state, context, item)).collect::<Option<_>>()?)
            }
            JsonTemplate::Object(fields) => serde_json::Value::Object(
                fields.iter().map(|(key, item)| Some((key.clone(), Self::render_json(state, context, item)?))).collect::<Option<_>>()?,
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
        let parts = RequestParts { method: &node.method, path: &path, headers: &headers, cookie: cookie.as_deref(), body: &body, json };
        self.request.clear();
        encode_request(&mut self.request, endpoint, &parts);
        Some(path)
    }

    pub(super) async fn request(&mut self, state: &WorkerState, node: &RequestNode, intended: Option<Instant>) -> Flow {
        let started = intended.unwrap_or_else(Instant::now);
        // One branch when the run records no exchanges (`crate::exchange`).
        let recording = state.shared.recording.as_ref().is_some_and(|recording| recording.claim(node.global_index));
        // Requests with nothing templated go out as encoded at start, unless cookies must be added.
        let (fixed, path) = match (&node.fixed, self.cookies.is_empty(), &node.path) {
            (Some(bytes), true, Text::Fixed(path)) => (Some(&bytes[self.instance]), Cow::Borrowed(path.as_str())),
            _ => match self.encode_dynamic(state, node) {
                Some(path) => (None, path),
                None => {
                    // Not sent; the step's think time still applies, as it would after a reply.
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
                    if let Some(think_time) = &node.think_time {
                        self.pause(state, think_time).await;
                    }
                    return Flow::Continue;
                }
            },
        };
        self.sent += 1;
        // Only a request timed from an intended instant needs its send instant too: a closed
        // model's latency is already from its send.
        let sent_at = intended.map(|_| Instant::now());
        self.capture.keep_body = node.keep_body;
        self.capture.keep_headers = node.keep_headers;
        let encoded = if fixed.is_none() { Some(std::mem::take(&mut self.request)) } else { None };
        let request: &[u8] = fixed.map(Vec::as_slice).or(encoded.as_deref()).unwrap_or_default();
        let mut exchange = None;
        if recording {
            exchange = Some(self.request_record(state, node.global_index, started, request));
            self.capture.record = true;
        }
        let mut in_flight = InFlight { state, index: node.global_index, started, ended: false };
        let outcome = self.exchange(state, request, node.is_head).await;
        in_flight.ended = true;
        if let Some(over_h2) = self.over_h2.take() {
            let step = &mut state.recorder.borrow_mut().steps[node.global_index];
            *(if over_h2 { &mut step.http2 } else { &mut step.http1 }) += 1;
            if std::mem::take(&mut self.capture.h2_stalled) {
                step.h2_stalls += 1;
            }
        }
        if let Some(buffer) = encoded {
            // The encoding buffer is reused by the next templated request.
            self.request = buffer;
        }
        let latency_us = started.elapsed().as_micros() as u64;
        let from_send_us = sent_at.map(|sent_at| sent_at.elapsed().as_micros() as u64);
        let mut end_iteration = false;
        let mut back_off = false;
        let status = outcome.as_ref().ok().map(|(status, _, _)| *status);
        let (result, sent, received, detail) = match outcome {
            Ok((status, sent, received)) => {
                let (result, why) = self.apply_response(state, node, status, &path);
                // A check that could not be judged (the body past the bound) did not pass.
                end_iteration = matches!(result, Err(ErrorKind::CheckFailed | ErrorKind::BodyTooLarge)) && node.end_on_check_failure;
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
            self.response_record(state, node, exchange, status, latency_us, result, detail.clone());
        }
        if let (Err(kind), Some(detail)) = (result, detail) {
            self.note(state, node.global_index, kind, detail);
        }
        // Only a request timed in `latency_us` (it got a response) has a latency from its send.
        let timed = result.is_ok() || result.is_err_and(|kind| kind.got_response());
        if let Some(from_send_us) = from_send_us.filter(|_| timed) {
            state.recorder.borrow_mut().steps[node.global_index].record_from_send(latency_us, from_send_us);
        }
        self.end_step(state, back_off, node.think_time.as_ref(), end_iteration).await
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
        status: Option<u16>,
        latency_us: u64,
        result: Result<(), ErrorKind>,
        detail: Option<String>,
    ) {
        self.capture.record = false;
        exchange.status = status;
        exchange.latency_us = latency_us;
        exchange.outcome = match result {
            Ok(()) => "ok".to_owned(),
            Err(kind) => kind.label(),
        };
        exchange.detail = detail;
        if let Some(status) = status {
            exchange.response = text_prefix(&self.capture.recorded_head, MAX_HEAD_BYTES).trim_end().to_owned();
            exchange.response_body = text_prefix(&self.capture.recorded_body, MAX_BODY_BYTES);
            exchange.response_body_truncated = self.capture.recorded_body_truncated;
            if result != Err(ErrorKind::BodyTooLarge) {
                let labels = &state.shared.plan.check_labels[node.global_index];
                let mut view = ResponseView::new(status, &self.capture.body, &self.capture.headers, &node.json_scope);
                for (index, check) in node.checks.iter().enumerate() {
                    let passed = check.passes(&mut view);
                    let why = (!passed).then(|| check.failure(&mut view));
                    exchange.checks.push((labels.get(index).cloned().unwrap_or_default(), passed, why));
                }
            }
        }
        exchange.vars = self.extracted(node.extractors.iter().map(|extractor| extractor.var.as_str()));
        self.keep_exchange(state, exchange);
    }

    /// Cookies, extractors and checks on a response (each check counted); the outcome to
    /// record, and on a failure why (the error detail).
    fn apply_response(&mut self, state: &WorkerState, node: &RequestNode, status: u16, path: &str) -> (Result<(), ErrorKind>, Option<String>) {
        let prefix = &state.shared.plan.endpoints[self.instance].path_prefix;
        if !self.capture.set_cookies.is_empty() {
            let request_path = format!("{prefix}{path}");
            for set_cookie in &self.capture.set_cookies {
                self.cookies.store(set_cookie, &request_path);
            }
        }
        // A body past `max_kept_body_bytes` was kept only in part: what reads it is not judged
        // on a part (a check could pass or fail on the cut), and the step counts as body_too_large.
        let truncated = node.keep_body && self.capture.body_truncated;
        let mut view = ResponseView::new(status, &self.capture.body, &self.capture.headers, &node.json_scope);
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
                        vars.insert(extractor.var.clone(), value);
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
            return (Err(ErrorKind::BodyTooLarge), Some(format!("status {status}: the body passed target.max_kept_body_bytes ({limit} bytes)")));
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
            let why = format!("{} — {}", self.capture.error_status_line, body_prefix(&self.capture.error_body));
            (Err(ErrorKind::Status(status)), Some(why))
        } else if let Some(extractor) = extract_failed {
            let why = format!("extractor '{}' ({}) found nothing (status {status}, {})", extractor.var, extractor.description, body_prefix(view.body));
            (Err(ErrorKind::ExtractFailed), Some(why))
        } else {
            (Ok(()), None)
        }
    }

    /// Sends one request and reads its response within the request timeout.
    /// Ok: (status, bytes sent, bytes received); Err: (why, bytes sent).
    /// With a pool, waiting for a connection is part of the exchange: its time and timeout.
    async fn exchange(&mut self, state: &WorkerState, request: &[u8], is_head: bool) -> Result<(u16, u64, u64), (ExchangeError, u64)> {
        let plan = &state.shared.plan;
        self.written = 0;
        let exchange = async {
            match (&state.pool, plan.http2) {
                (None, None) => self.exchange_unbounded(state, request, is_head).await,
                (Some(pool), _) => self.pooled_exchange(state, pool, request, is_head).await,
                (None, Some(mode)) => match &state.h2_pool {
                    None => self.own_h2_exchange(state, mode, request, is_head).await,
                    Some(pool) => self.pooled_h2_exchange(state, pool, mode, request).await,
                },
            }
        };
        match state.deadlines.within(plan.request_timeout, exchange).await {
            Some(result) => result,
            None => {
                // An HTTP/1.1 connection is left mid-response; an HTTP/2 one is kept, the
                // stream being cancelled (RST_STREAM) when its future is dropped.
                self.connection = None;
                let detail = format!("no whole response within {} ms (target.request_timeout_ms)", plan.request_timeout.as_millis());
                Err((ExchangeError { kind: ErrorKind::Timeout, connecting: false, detail }, self.written))
            }
        }
    }

    /// One exchange over a connection of the pool: the lease's connection and buffer are the
    /// VU's for the exchange, and go back to the pool when the lease drops (the connection only
    /// if still usable: `exchange_unbounded` drops one that failed or was closed).
    async fn pooled_exchange(&mut self, state: &WorkerState, pool: &Pool, request: &[u8], is_head: bool) -> Result<(u16, u64, u64), (ExchangeError, u64)> {
        let mut lease = pool.acquire(self.instance).await;
        self.connection = lease.connection.take();
        std::mem::swap(&mut self.buffer, &mut lease.buffer);
        let result = self.exchange_unbounded(state, request, is_head).await;
        std::mem::swap(&mut self.buffer, &mut lease.buffer);
        lease.connection = self.connection.take();
        result
    }

    /// The VU's instance of the target as `host:port`, for error details.
    fn address(&self, state: &WorkerState) -> String {
        let endpoint = &state.shared.plan.endpoints[self.instance];
        format!("{}:{}", endpoint.host, endpoint.port)
    }

    pub(super) async fn exchange_unbounded(&mut self, state: &WorkerState, request: &[u8], is_head: bool) -> Result<(u16, u64, u64), (ExchangeError, u64)> {
        // A kept-alive connection may have been closed by the server while idle; that shows as
        // a failure before any response byte, and the request is then sent once more on a new
        // connection, as browsers and HTTP libraries do.
        for attempt in 0..2 {
            let reused = self.connection.is_some();
            if !reused {
                match state.shared.plan.connectors[self.instance].connect_detailed().await {
                    Ok(connection) => {
                        self.connection = Some(connection);
                        self.backoff = Duration::ZERO;
                        state.recorder.borrow_mut().connections_opened += 1;
                    }
                    Err((kind, detail)) => return Err((ExchangeError { kind, connecting: true, detail }, 0)),
                }
            }
            let connection = self.connection.as_mut().expect("connected above");
            if let Err(error) = connection.write_all(request).await {
                self.connection = None;
                if reused && attempt == 0 {
                    continue;
                }
                let detail = format!("{error} while sending the request to {}", self.address(state));
                return Err((ExchangeError { kind: ErrorKind::from_io(&error), connecting: false, detail }, 0));
            }
            let sent = request.len() as u64;
            self.written = sent;
            match read_response(connection, &mut self.buffer, is_head, &mut self.capture, state.shared.plan.read_limits).await {
                Ok(response) => {
                    if !response.keep_alive {
                        self.connection = None;
                    }
                    return Ok((response.status, sent, response.bytes_received));
                }
                Err(error) => {
                    self.connection = None;
                    if reused && attempt == 0 && error.nothing_received {
                        continue;
                    }
                    let why = match error.kind {
                        ErrorKind::Reset => "the connection closed before the response ended".to_owned(),
                        ErrorKind::Protocol => "the response is not valid HTTP/1.1".to_owned(),
                        ErrorKind::HeadersTooLarge => format!(
                            "the response head passed target.max_response_header_bytes ({} bytes)",
                            state.shared.plan.read_limits.max_head_bytes
                        ),
                        kind => format!("{} while reading the response", kind.label()),
                    };
                    let detail = format!("{why} ({})", self.address(state));
                    return Err((ExchangeError { kind: error.kind, connecting: false, detail }, sent));
                }
            }
        }
        unreachable!("the second attempt always returns")
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

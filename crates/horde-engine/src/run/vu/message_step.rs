//! A VU's message steps (`tcp://`, `udp://`, `kcp://`, `ws://`, `wss://`: `crate::transport::message`):
//! its one connection between steps, its message numbers, and each step timed, run and
//! recorded as an HTTP request is: a recorded step (`horde try`, `--debug`) keeps the messages
//! it sent and received, the connection it opened, and its checks and variables.

use super::{Flow, InFlight, Vu};
use crate::exchange::{text_prefix, MAX_BODY_BYTES};
use crate::response_rules::{body_prefix, JsonScope, ResponseView};
use crate::run::worker_state::WorkerState;
use crate::template::Text;
use crate::transport::message::{
    decode_base64, decode_hex, reply_number, websocket_error_kind, MessageAction, MessageConnection, MessageNode,
    MessageText, PayloadNode, ReceiveNode, Received, Upgrade, UpgradeNode, WebSocketLink,
};
use horde_metrics::ErrorKind;
use horde_plan::MessageTransport;
use minijinja::Value;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a VU keeps between its message steps.
#[derive(Default)]
pub(crate) struct VuMessages {
    connection: Option<MessageConnection>,
    /// The VU's last message number (`seq` in templates), counted over its life.
    seq: u64,
    /// Connections opened so far: each impaired link draws from a random stream of its own.
    opened: u64,
    /// The numbers of the last pings that got no reply in time: a reply carrying one is counted
    /// late.
    lost: VecDeque<u64>,
    /// Whether anything has come from the peer on this connection: a ping or a receive that
    /// gets nothing from a peer never heard is told apart from one lost on the way.
    heard: bool,
}

/// How many lost ping numbers a VU remembers for counting late replies.
const REMEMBERED_LOST: usize = 64;

/// Messages a recorded step keeps each way; those beyond are counted.
const TRACED_MESSAGES: usize = 8;

/// What a recorded message step did on the wire, in order each way: `sent` the connection it
/// opened and the messages it sent, `received` the messages that came (each cut to
/// [`MAX_BODY_BYTES`]); `matched` the message a `receive` waited for, its checks judged again on
/// it for the record.
#[derive(Default)]
struct MessageTrace {
    sent: Vec<String>,
    received: Vec<String>,
    more_sent: u64,
    more_received: u64,
    matched: Option<Vec<u8>>,
}

impl MessageTrace {
    fn sent(trace: &mut Option<Self>, line: impl FnOnce() -> String) {
        if let Some(trace) = trace {
            if trace.sent.len() < TRACED_MESSAGES {
                trace.sent.push(line());
            } else {
                trace.more_sent += 1;
            }
        }
    }

    fn received(trace: &mut Option<Self>, message: &[u8]) {
        if let Some(trace) = trace {
            if trace.received.len() < TRACED_MESSAGES {
                trace.received.push(text_prefix(message, MAX_BODY_BYTES));
            } else {
                trace.more_received += 1;
            }
        }
    }

    /// The lines of one way, with the count of those not kept.
    fn lines(kept: Vec<String>, more: u64) -> String {
        let mut text = kept.join("\n");
        if more > 0 {
            text.push_str(&format!("\n… and {more} more"));
        }
        text
    }
}

/// Why a step failed: its kind, in words, whether it failed before reaching the target, and
/// whether its connection is still fit for the next step (a message that did not come leaves it
/// so; a failed read or write, or a frame half written, does not).
struct StepError {
    kind: ErrorKind,
    detail: String,
    connecting: bool,
    keeps_connection: bool,
}

impl StepError {
    fn io(error: &std::io::Error, doing: &str) -> Self {
        Self {
            kind: websocket_error_kind(error),
            detail: format!("{error} {doing}"),
            connecting: false,
            keeps_connection: false,
        }
    }

    /// Something awaited did not come in time; the connection stays.
    fn awaited(kind: ErrorKind, detail: String) -> Self {
        Self { kind, detail, connecting: false, keeps_connection: true }
    }

    /// A ping's reply or a receive's message that did not come in time (its connection kept).
    fn unanswered(&self) -> bool {
        matches!(self.kind, ErrorKind::Lost | ErrorKind::Timeout) && self.keeps_connection
    }
}

/// A step that got what it waited for: whether a failed check ends the iteration, and why it
/// failed when a check or an extractor did (counted, and timed: the message came).
struct Answered {
    result: Result<(), (ErrorKind, String)>,
    end_iteration: bool,
}

impl Answered {
    const OK: Answered = Answered { result: Ok(()), end_iteration: false };
}

impl Vu {
    pub(super) async fn message_step(
        &mut self,
        state: &WorkerState,
        node: &MessageNode,
        intended: Option<Instant>,
    ) -> Flow {
        let Some(index) = node.global_index else {
            // `close`: the next message step opens a new connection. A WebSocket says goodbye
            // first, without waiting longer than a send may.
            if let Some(MessageConnection::WebSocket(mut link)) =
                self.messages.as_mut().and_then(|messages| messages.connection.take())
            {
                let _ = tokio::time::timeout(state.shared.plan.request_timeout, link.close()).await;
            }
            return Flow::Continue;
        };
        let started = intended.unwrap_or_else(Instant::now);
        // One branch when the run records no exchanges (`crate::exchange`).
        let recording = state.shared.recording.as_ref().is_some_and(|recording| recording.claim(index));
        let mut trace = recording.then(MessageTrace::default);
        self.sent += 1;
        let mut in_flight = InFlight { state, index, started, ended: false };
        let outcome = self.run_message(state, node, index, &mut trace).await;
        in_flight.ended = true;
        let latency_us = started.elapsed().as_micros() as u64;
        if let Some(trace) = trace {
            self.message_record(state, node, index, started, latency_us, &outcome, trace);
        }
        if let Some(connection) = self.messages.as_mut().and_then(|messages| messages.connection.as_mut()) {
            if let Some(wire) = connection.take_wire_counts() {
                let counts = &mut state.recorder.borrow_mut().steps[index].messages;
                counts.datagrams_sent += wire.sent;
                counts.datagrams_received += wire.received;
                counts.retransmitted += wire.retransmitted;
            }
        }
        let mut back_off = false;
        let mut end_iteration = false;
        match outcome {
            Ok(answered) => {
                end_iteration = answered.end_iteration;
                let result = answered.result.as_ref().map_err(|(kind, _)| *kind).copied();
                self.record(state, index, latency_us, result, 0, 0);
                if let Err((kind, detail)) = answered.result {
                    self.note(state, index, kind, detail);
                }
            }
            Err(error) => {
                self.last_connect_failed = error.connecting;
                back_off = error.connecting && self.backs_off;
                self.record(state, index, latency_us, Err(error.kind), 0, 0);
                self.note(state, index, error.kind, error.detail);
            }
        }
        self.end_step(state, back_off, node.think_time.as_ref(), end_iteration).await
    }

    /// A recorded message step's exchange (`crate::exchange`): the connection it opened and the
    /// messages it sent (`request`), those it received (`response`), its outcome, each check
    /// judged again on the message a `receive` waited for, and the variables it extracts.
    #[allow(clippy::too_many_arguments)]
    fn message_record(
        &mut self,
        state: &WorkerState,
        node: &MessageNode,
        index: usize,
        started: Instant,
        latency_us: u64,
        outcome: &Result<Answered, StepError>,
        trace: MessageTrace,
    ) {
        let mut exchange = self.exchange_record(state, index, "message", started);
        exchange.request = MessageTrace::lines(trace.sent, trace.more_sent);
        exchange.response = MessageTrace::lines(trace.received, trace.more_received);
        exchange.latency_us = latency_us;
        let (label, detail) = match outcome {
            Ok(Answered { result: Ok(()), .. }) => ("ok".to_owned(), None),
            Ok(Answered { result: Err((kind, detail)), .. }) => (kind.label(), Some(detail.clone())),
            Err(error) => (error.kind.label(), Some(error.detail.clone())),
        };
        exchange.outcome = label;
        exchange.detail = detail;
        if let MessageAction::Receive(receive) = &node.action {
            if let Some(message) = &trace.matched {
                let mut view = ResponseView::new(200, message, &[], &JsonScope::Whole);
                exchange.checks =
                    super::recording::judged(&state.shared.plan.check_labels[index], &receive.checks, &mut view);
            }
            exchange.vars = self.extracted(receive.extractors.iter().map(|extractor| extractor.var.as_str()));
        }
        self.keep_exchange(state, exchange);
    }

    /// Runs one step on the VU's connection (opened first when it has none; `connect` opens a
    /// new one). A connection that failed is dropped: the next step connects again.
    async fn run_message(
        &mut self,
        state: &WorkerState,
        node: &MessageNode,
        index: usize,
        trace: &mut Option<MessageTrace>,
    ) -> Result<Answered, StepError> {
        let messages = self.messages.get_or_insert_with(Box::default);
        if matches!(node.action, MessageAction::Connect) {
            messages.connection = None;
        }
        let mut connection = match messages.connection.take() {
            Some(connection) => connection,
            None => {
                let opened = self.open(state, node, index, trace).await?;
                self.messages.get_or_insert_with(Box::default).heard = false;
                opened
            }
        };
        let mut heard = self.messages.as_ref().is_some_and(|messages| messages.heard);
        let outcome = match &node.action {
            MessageAction::Connect | MessageAction::Close => Ok(Answered::OK),
            MessageAction::Send(payload) => match self.render_payload(state, payload) {
                Ok(message) => {
                    send(state, index, &mut connection, message, is_binary(payload), trace).await.map(|_| Answered::OK)
                }
                Err(error) => Err(error),
            },
            MessageAction::Receive(receive) => {
                match wait_for(state, index, &mut connection, receive, trace, &mut heard).await {
                    Ok(message) => {
                        let answered = self.apply_message(state, index, receive, &message);
                        if let Some(trace) = trace {
                            trace.matched = Some(message);
                        }
                        Ok(answered)
                    }
                    Err(error) => Err(error),
                }
            }
            MessageAction::Ping { text, reply_seq, timeout, control_frame } => {
                let seq = self.next_seq();
                match self.render_text_with_seq(state, text, seq) {
                    Ok(message) => {
                        let lost = &mut self.messages.get_or_insert_with(Box::default).lost;
                        let ping_of =
                            Ping { message, seq, reply_seq, timeout: *timeout, control_frame: *control_frame };
                        let outcome = ping(state, index, &mut connection, ping_of, lost, trace, &mut heard).await;
                        if outcome.as_ref().is_err_and(StepError::unanswered) {
                            if lost.len() == REMEMBERED_LOST {
                                lost.pop_front();
                            }
                            lost.push_back(seq);
                        }
                        outcome
                    }
                    Err(error) => Err(error),
                }
            }
            MessageAction::Stream { payload, interval, duration } => {
                self.stream(state, index, &mut connection, payload, (*interval, *duration), trace, &mut heard).await
            }
        };
        self.messages.get_or_insert_with(Box::default).heard = heard;
        if heard {
            self.backoff = Duration::ZERO;
        }
        let outcome = outcome.map_err(|error| self.told_apart(state, error, heard));
        // Kept unless it broke: a timeout or a lost ping leaves it usable (its late answer is
        // skipped by the next step that waits for something else).
        if outcome.as_ref().map_or_else(|error| error.keeps_connection, |_| true) {
            self.messages.get_or_insert_with(Box::default).connection = Some(connection);
        }
        outcome
    }

    /// A failed step's words, and what a refusal means, told apart by what its peer has done:
    /// nothing awaited from a peer never heard on this connection is no loss on the way (a port
    /// nobody answers on, a server that accepts and stays silent); a datagram refused is an ICMP
    /// port unreachable (nothing listens there), a failed connect: a closed-model VU backs off
    /// before it tries again, as after a refused TCP connect.
    #[cold]
    #[inline(never)]
    fn told_apart(&self, state: &WorkerState, mut error: StepError, heard: bool) -> StepError {
        let target = state.shared.plan.message.as_ref().expect("message steps run only against a message target");
        let endpoint = &state.shared.plan.endpoints[self.instance];
        let host = if endpoint.host.contains(':') { format!("[{}]", endpoint.host) } else { endpoint.host.clone() };
        let peer = format!("{}{host}:{}", target.transport.scheme(), endpoint.port);
        if error.unanswered() && !heard {
            error.detail.push_str(&format!(
                "; nothing has come from {peer} since the connection opened: is anything answering there?"
            ));
        }
        if error.kind == ErrorKind::Refused
            && !error.connecting
            && matches!(target.transport, MessageTransport::Udp | MessageTransport::Kcp)
        {
            error.detail = format!(
                "{peer} is closed: an ICMP port unreachable came back, nothing listens on that port ({})",
                error.detail
            );
            error.connecting = true;
        }
        error
    }

    async fn open(
        &mut self,
        state: &WorkerState,
        node: &MessageNode,
        index: usize,
        trace: &mut Option<MessageTrace>,
    ) -> Result<MessageConnection, StepError> {
        let target = state.shared.plan.message.as_ref().expect("message steps run only against a message target");
        if let Some(upgrade) = &node.upgrade {
            let connection =
                match tokio::time::timeout(target.connect_timeout, self.open_websocket(state, upgrade, index, trace))
                    .await
                {
                    Ok(result) => result?,
                    Err(_) => {
                        let endpoint = &state.shared.plan.endpoints[self.instance];
                        let detail = format!(
                            "no WebSocket to {}:{} within {} ms (target.connect_timeout_ms)",
                            endpoint.host,
                            endpoint.port,
                            target.connect_timeout.as_millis()
                        );
                        return Err(StepError {
                            kind: ErrorKind::Timeout,
                            detail,
                            connecting: true,
                            keeps_connection: false,
                        });
                    }
                };
            self.messages.get_or_insert_with(Box::default).opened += 1;
            self.backoff = Duration::ZERO;
            state.recorder.borrow_mut().connections_opened += 1;
            return Ok(connection);
        }
        let endpoint = &state.shared.plan.endpoints[self.instance];
        let address = if endpoint.host.contains(':') {
            format!("[{}]:{}", endpoint.host, endpoint.port)
        } else {
            format!("{}:{}", endpoint.host, endpoint.port)
        };
        MessageTrace::sent(trace, || format!("(connect to {address})"));
        let opened = self.messages.as_ref().map_or(0, |messages| messages.opened);
        let seed = self.number.wrapping_mul(1_000_003).wrapping_add(opened);
        let connect = async {
            let resolved = tokio::net::lookup_host(&address).await.ok().and_then(|mut addresses| addresses.next());
            let Some(resolved) = resolved else {
                return Err(StepError {
                    kind: ErrorKind::Dns,
                    detail: format!("'{address}' does not resolve"),
                    connecting: true,
                    keeps_connection: false,
                });
            };
            // The target's HTTP connector holds `target.source_addresses`, taken in turn.
            let connector = &state.shared.plan.connectors[self.instance];
            let connection = match target.transport {
                MessageTransport::Tcp => {
                    let stream = connector.connect_to(resolved).await.map_err(|(kind, detail)| StepError {
                        kind,
                        detail,
                        connecting: true,
                        keeps_connection: false,
                    })?;
                    MessageConnection::tcp(stream, target.framing)
                }
                MessageTransport::Udp => {
                    MessageConnection::udp(resolved, connector.next_source(), node.network, seed).await
                }
                MessageTransport::Kcp => {
                    // Each VU its own conversation unless the plan fixes one (the gateway tells
                    // sessions apart by address either way).
                    let conv = target.kcp.conv.unwrap_or((self.number as u32).wrapping_add(1));
                    MessageConnection::kcp(resolved, connector.next_source(), target.kcp, conv, node.network, seed)
                        .await
                }
                MessageTransport::WebSocket { .. } => unreachable!("a WebSocket's steps carry their upgrade"),
            };
            connection.map_err(|error| StepError {
                kind: ErrorKind::from_io(&error),
                detail: format!("{error} connecting to {address}"),
                connecting: true,
                keeps_connection: false,
            })
        };
        let connection = match tokio::time::timeout(target.connect_timeout, connect).await {
            Ok(result) => result?,
            Err(_) => {
                let detail = format!(
                    "no connection to {address} within {} ms (target.connect_timeout_ms)",
                    target.connect_timeout.as_millis()
                );
                return Err(StepError { kind: ErrorKind::Timeout, detail, connecting: true, keeps_connection: false });
            }
        };
        self.messages.get_or_insert_with(Box::default).opened += 1;
        // A TCP connect is the peer's answer; a datagram socket is opened whatever the peer: its
        // first answer ends the back-off (`run_message`).
        if connection.is_stream() {
            self.backoff = Duration::ZERO;
        }
        state.recorder.borrow_mut().connections_opened += 1;
        Ok(connection)
    }

    /// Connects through the HTTP client's connector (TLS for `wss://`) and upgrades, with the
    /// VU's cookies for the upgrade's path; cookies the 101 sets go to the jar.
    async fn open_websocket(
        &mut self,
        state: &WorkerState,
        upgrade: &UpgradeNode,
        index: usize,
        trace: &mut Option<MessageTrace>,
    ) -> Result<MessageConnection, StepError> {
        let connecting =
            |(kind, detail): (ErrorKind, String)| StepError { kind, detail, connecting: true, keeps_connection: false };
        let plan = &state.shared.plan;
        let endpoint = &plan.endpoints[self.instance];
        let mut headers = Vec::with_capacity(upgrade.headers.len());
        for (name, value) in &upgrade.headers {
            let rendered = self.render_text(state, value).ok_or_else(|| template_failed("an upgrade header"))?;
            headers.push((name.as_str(), rendered.into_owned()));
        }
        let step_path = match &upgrade.path {
            Some(path) => {
                self.render_text(state, path).ok_or_else(|| template_failed("the upgrade's path"))?.into_owned()
            }
            None => String::new(),
        };
        let path = match format!("{}{step_path}", endpoint.path_prefix) {
            path if path.is_empty() => "/".to_owned(),
            path => path,
        };
        let cookie = self.cookies.header_for("", &path);
        MessageTrace::sent(trace, || format!("(WebSocket upgrade at {}{path})", endpoint.host_header));
        let connection = plan.connectors[self.instance].connect_detailed().await.map_err(connecting)?;
        let request = Upgrade {
            path: &path,
            host_header: &endpoint.host_header,
            headers: &headers,
            cookie,
            max_head_bytes: plan.read_limits.max_head_bytes,
        };
        let seed = self.number.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ self.messages.as_ref().map_or(0, |messages| messages.opened).wrapping_add(1);
        let upgraded = WebSocketLink::upgrade(connection, &request, seed).await.map_err(connecting)?;
        for set_cookie in &upgraded.set_cookies {
            self.cookies.store(set_cookie, &path);
        }
        let mut recorder = state.recorder.borrow_mut();
        let step = &mut recorder.steps[index];
        step.bytes_sent += upgraded.bytes_sent;
        step.bytes_received += upgraded.bytes_received;
        Ok(MessageConnection::WebSocket(Box::new(upgraded.link)))
    }

    fn next_seq(&mut self) -> u64 {
        let messages = self.messages.get_or_insert_with(Box::default);
        messages.seq += 1;
        messages.seq
    }

    /// A template rendered with `seq`, the message's number, besides the VU's own context.
    fn render_text_with_seq(
        &mut self,
        state: &WorkerState,
        text: &MessageText,
        seq: u64,
    ) -> Result<Vec<u8>, StepError> {
        let template = match text {
            MessageText::Seq { prefix, suffix } => {
                let mut message = Vec::with_capacity(prefix.len() + 20 + suffix.len());
                message.extend_from_slice(prefix.as_bytes());
                message.extend_from_slice(seq.to_string().as_bytes());
                message.extend_from_slice(suffix.as_bytes());
                return Ok(message);
            }
            MessageText::Text(Text::Fixed(fixed)) => return Ok(fixed.clone().into_bytes()),
            MessageText::Text(Text::Template(template)) => template,
        };
        let context = self.context_with_seq(state, seq);
        Self::render(state, &context, &template.name)
            .map(String::into_bytes)
            .ok_or_else(|| template_failed("the message"))
    }

    fn context_with_seq(&mut self, state: &WorkerState, seq: u64) -> Value {
        let context = self.context(state);
        minijinja::value::merge_maps([minijinja::context! { seq => seq }, context])
    }

    fn render_payload(&mut self, state: &WorkerState, payload: &PayloadNode) -> Result<Vec<u8>, StepError> {
        let seq = self.next_seq();
        match payload {
            PayloadNode::Text(text) => self.render_text_with_seq(state, text, seq),
            PayloadNode::Hex(text) => {
                let rendered = self.render_text_with_seq(state, text, seq)?;
                decode_hex(&String::from_utf8_lossy(&rendered))
                    .ok_or_else(|| template_failed("hex: not an even number of hex digits"))
            }
            PayloadNode::Base64(text) => {
                let rendered = self.render_text_with_seq(state, text, seq)?;
                decode_base64(&String::from_utf8_lossy(&rendered))
                    .ok_or_else(|| template_failed("base64: not valid base64"))
            }
            PayloadNode::Json(template) => {
                let context = self.context_with_seq(state, seq);
                let value = Self::render_json(state, &context, template).ok_or_else(|| template_failed("json"))?;
                serde_json::to_vec(&value).map_err(|_| template_failed("json"))
            }
        }
    }

    /// Extractors and checks on the message a `receive` waited for.
    fn apply_message(&mut self, state: &WorkerState, index: usize, node: &ReceiveNode, message: &[u8]) -> Answered {
        // A message is read whole (its steps are not where a run spends its time).
        let whole = JsonScope::Whole;
        let mut view = ResponseView::new(200, message, &[], &whole);
        let mut extract_failed = None;
        if !node.extractors.is_empty() {
            for extractor in &node.extractors {
                self.forget_renderings_of(state, &extractor.var);
            }
            let vars = Arc::make_mut(&mut self.vars);
            for extractor in &node.extractors {
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
        let mut failed_check = None;
        if !node.checks.is_empty() {
            let mut recorder = state.recorder.borrow_mut();
            let step = &mut recorder.steps[index];
            for (position, check) in node.checks.iter().enumerate() {
                let passed = check.passes(&mut view);
                step.record_check(position, passed);
                if !passed && failed_check.is_none() {
                    failed_check = Some(check.failure(&mut view));
                }
            }
        }
        if let Some(why) = failed_check {
            Answered { result: Err((ErrorKind::CheckFailed, why)), end_iteration: node.end_on_check_failure }
        } else if let Some(extractor) = extract_failed {
            let why = format!(
                "extractor '{}' ({}) found nothing in {}",
                extractor.var,
                extractor.description,
                body_prefix(message)
            );
            Answered { result: Err((ErrorKind::ExtractFailed, why)), end_iteration: false }
        } else {
            Answered::OK
        }
    }

    /// Sends a message every `interval` for `duration`, counting what arrives meanwhile. Ends
    /// early when the run stops (a stream is no reason to outlast the grace period).
    #[allow(clippy::too_many_arguments)]
    async fn stream(
        &mut self,
        state: &WorkerState,
        index: usize,
        connection: &mut MessageConnection,
        payload: &PayloadNode,
        (interval, duration): (Duration, Duration),
        trace: &mut Option<MessageTrace>,
        heard: &mut bool,
    ) -> Result<Answered, StepError> {
        let start = tokio::time::Instant::now();
        let end = start + duration;
        let mut next_send = start;
        loop {
            let now = tokio::time::Instant::now();
            if now >= end || state.stopping.get() {
                return Ok(Answered::OK);
            }
            if now >= next_send {
                let message = self.render_payload(state, payload)?;
                send(state, index, connection, message, is_binary(payload), trace).await?;
                // On schedule, not from this send: a late send is followed by the next at once.
                next_send += interval;
                continue;
            }
            match tokio::time::timeout_at(next_send.min(end), connection.recv()).await {
                // A pong is no message: only a control-frame ping reads it.
                Ok(Ok(received)) if received.control => {}
                Ok(Ok(received)) => count_received(state, index, connection, &received, trace, heard),
                Ok(Err(error)) => return Err(StepError::io(&error, "while streaming")),
                Err(_) => {}
            }
        }
    }
}

/// A binary message's start in hex, for its record.
fn hex_prefix(message: &[u8]) -> String {
    let mut text: String = message.iter().take(MAX_BODY_BYTES / 2).map(|byte| format!("{byte:02x}")).collect();
    if message.len() > MAX_BODY_BYTES / 2 {
        text.push('…');
    }
    text
}

fn template_failed(what: &str) -> StepError {
    StepError::awaited(ErrorKind::TemplateFailed, format!("{what} could not be rendered (a variable unset?)"))
}

/// Whether a payload is bytes (hex, base64): a WebSocket sends it in a binary frame.
fn is_binary(payload: &PayloadNode) -> bool {
    matches!(payload, PayloadNode::Hex(_) | PayloadNode::Base64(_))
}

/// Whether this connection's messages are datagrams the VU itself puts on the wire (an
/// impaired link and KCP count their own).
fn direct_datagrams(connection: &MessageConnection) -> bool {
    matches!(connection, MessageConnection::Udp { .. })
}

/// Sends one message within `target.request_timeout_ms` (a TCP gateway that stops reading
/// fills the socket's buffer; the frame then half written, the connection is dropped).
async fn send(
    state: &WorkerState,
    index: usize,
    connection: &mut MessageConnection,
    message: Vec<u8>,
    binary: bool,
    trace: &mut Option<MessageTrace>,
) -> Result<(), StepError> {
    MessageTrace::sent(trace, || {
        if binary {
            format!("(binary, {} bytes) {}", message.len(), hex_prefix(&message))
        } else {
            text_prefix(&message, MAX_BODY_BYTES)
        }
    });
    let timeout = state.shared.plan.request_timeout;
    let wire_bytes = match tokio::time::timeout(timeout, connection.send(message, binary)).await {
        Ok(sent) => sent.map_err(|error| StepError::io(&error, "while sending"))?,
        Err(_) => {
            let detail = format!(
                "the message could not be written within {} ms (target.request_timeout_ms)",
                timeout.as_millis()
            );
            return Err(StepError { kind: ErrorKind::Timeout, detail, connecting: false, keeps_connection: false });
        }
    };
    let mut recorder = state.recorder.borrow_mut();
    let step = &mut recorder.steps[index];
    step.bytes_sent += wire_bytes;
    step.messages.sent += 1;
    if direct_datagrams(connection) {
        step.messages.datagrams_sent += 1;
    }
    Ok(())
}

/// Sends a WebSocket ping control frame within `target.request_timeout_ms`, counted as a
/// message sent.
async fn send_control_ping(
    state: &WorkerState,
    index: usize,
    connection: &mut MessageConnection,
    payload: &[u8],
    trace: &mut Option<MessageTrace>,
) -> Result<(), StepError> {
    MessageTrace::sent(trace, || format!("(ping frame) {}", text_prefix(payload, MAX_BODY_BYTES)));
    let timeout = state.shared.plan.request_timeout;
    let wire_bytes = match tokio::time::timeout(timeout, connection.send_ping(payload)).await {
        Ok(sent) => sent.map_err(|error| StepError::io(&error, "while sending a ping frame"))?,
        Err(_) => {
            let detail = format!(
                "the ping frame could not be written within {} ms (target.request_timeout_ms)",
                timeout.as_millis()
            );
            return Err(StepError { kind: ErrorKind::Timeout, detail, connecting: false, keeps_connection: false });
        }
    };
    let mut recorder = state.recorder.borrow_mut();
    let step = &mut recorder.steps[index];
    step.bytes_sent += wire_bytes;
    step.messages.sent += 1;
    Ok(())
}

fn count_received(
    state: &WorkerState,
    index: usize,
    connection: &MessageConnection,
    received: &Received,
    trace: &mut Option<MessageTrace>,
    heard: &mut bool,
) {
    *heard = true;
    MessageTrace::received(trace, &received.message);
    let mut recorder = state.recorder.borrow_mut();
    let step = &mut recorder.steps[index];
    step.bytes_received += received.wire_bytes;
    step.messages.received += 1;
    if direct_datagrams(connection) {
        step.messages.datagrams_received += 1;
    }
}

/// The first message that matches, every message before it counted and skipped.
async fn wait_for(
    state: &WorkerState,
    index: usize,
    connection: &mut MessageConnection,
    node: &ReceiveNode,
    trace: &mut Option<MessageTrace>,
    heard: &mut bool,
) -> Result<Vec<u8>, StepError> {
    let deadline = tokio::time::Instant::now() + node.timeout;
    loop {
        match tokio::time::timeout_at(deadline, connection.recv()).await {
            Ok(Ok(received)) if received.control => {
                *heard = true;
            }
            Ok(Ok(received)) => {
                count_received(state, index, connection, &received, trace, heard);
                if node.matches(&received.message) {
                    return Ok(received.message);
                }
            }
            Ok(Err(error)) => return Err(StepError::io(&error, "while receiving")),
            Err(_) => {
                return Err(StepError::awaited(
                    ErrorKind::Timeout,
                    format!("no matching message within {} ms", node.timeout.as_millis()),
                ));
            }
        }
    }
}

/// One ping, rendered: its message, its number, where a reply carries the number, how long to
/// wait, and whether it goes as a WebSocket ping control frame (answered by a pong).
struct Ping<'a> {
    message: Vec<u8>,
    seq: u64,
    reply_seq: &'a regex::bytes::Regex,
    timeout: Duration,
    control_frame: bool,
}

/// Sends ping number `seq` and waits for the reply carrying it (a pong, for a control frame);
/// a reply to an earlier ping counted lost that comes meanwhile is counted late.
async fn ping(
    state: &WorkerState,
    index: usize,
    connection: &mut MessageConnection,
    ping: Ping<'_>,
    lost: &mut VecDeque<u64>,
    trace: &mut Option<MessageTrace>,
    heard: &mut bool,
) -> Result<Answered, StepError> {
    let Ping { message, seq, reply_seq, timeout, control_frame } = ping;
    let deadline = tokio::time::Instant::now() + timeout;
    if control_frame {
        if message.len() > horde_plan::MAX_CONTROL_FRAME_BYTES {
            return Err(StepError::awaited(
                ErrorKind::TemplateFailed,
                format!(
                    "the ping is {} bytes: a ping control frame carries at most {}",
                    message.len(),
                    horde_plan::MAX_CONTROL_FRAME_BYTES
                ),
            ));
        }
        send_control_ping(state, index, connection, &message, trace).await?;
    } else {
        send(state, index, connection, message, false, trace).await?;
    }
    loop {
        match tokio::time::timeout_at(deadline, connection.recv()).await {
            // A pong outside a control-frame ping, and a message a control-frame ping does not
            // wait for, are skipped (the latter counted).
            Ok(Ok(received)) if received.control && !control_frame => {
                *heard = true;
            }
            Ok(Ok(received)) if !received.control && control_frame => {
                count_received(state, index, connection, &received, trace, heard)
            }
            Ok(Ok(received)) => {
                count_received(state, index, connection, &received, trace, heard);
                match reply_number(reply_seq, &received.message) {
                    Some(number) if number == seq => return Ok(Answered::OK),
                    Some(number) => {
                        if let Some(position) = lost.iter().position(|earlier| *earlier == number) {
                            lost.remove(position);
                            state.recorder.borrow_mut().steps[index].messages.late += 1;
                        }
                    }
                    None => {}
                }
            }
            Ok(Err(error)) => return Err(StepError::io(&error, "while waiting for a ping's reply")),
            Err(_) => {
                // A datagram may be lost; over a stream (TCP, a WebSocket) the reply still comes,
                // late: it is counted `late` when it does.
                let kind = if connection.is_stream() { ErrorKind::Timeout } else { ErrorKind::Lost };
                return Err(StepError::awaited(
                    kind,
                    format!("no reply numbered as the ping within {} ms", timeout.as_millis()),
                ));
            }
        }
    }
}

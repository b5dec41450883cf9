//! The message transports: `connect`, `send`, `receive`, `ping`, `stream` and `close` steps
//! against a raw TCP or UDP gateway (`target.base_url` `tcp://host:port` or `udp://host:port`).
//!
//! - `framing.rs`: a TCP stream cut into messages (newline, length-prefixed, raw);
//! - `connection.rs`: a VU's connection: a framed TCP stream or a connected UDP socket;
//! - `datagram.rs`: a datagram read off a UDP socket (its ICMP errors included), for every
//!   transport that reads one;
//! - `kcp.rs`: a VU's KCP session (`kcp://`) in a task that owns its socket;
//! - `impair.rs`: the impaired network (`scenario.network`) a VU's datagrams go through both
//!   ways, in a task on the worker's `LocalSet` that owns the socket;
//! - `fine_timer.rs`: a worker's timer to the microsecond (a `timerfd`), on which the impaired
//!   network holds its datagrams: tokio's rounds to whole milliseconds;
//! - `websocket.rs`: a VU's WebSocket (`ws://`, `wss://`): the upgrade over the HTTP client's
//!   connection (TLS included), then masked frames out and data frames in.
//!
//! The VU side (`vu/message_step.rs`) runs each step on the VU's one connection (opened by
//! `connect`, or by the first step that needs it) and records it as a request is: a `ping`'s
//! latency is its round-trip time, a `receive`'s the wait for its message; messages and
//! datagrams are counted per step as they move (`horde_metrics::MessageCounts`).

mod connection;
mod datagram;
mod fine_timer;
mod framing;
mod impair;
mod kcp;
mod websocket;

pub(crate) use connection::{MessageConnection, Received};
pub(crate) use websocket::{error_kind as websocket_error_kind, Upgrade, WebSocketLink};

use crate::response_rules::{CompiledCheck, CompiledExtractor};
use crate::template::{JsonTemplate, Text};
use horde_plan::{Framing, KcpOptions, MessageTransport, Network, Target, ThinkTime};
use std::time::Duration;

/// A `tcp://` or `udp://` target: what every VU's connection needs.
pub(crate) struct MessageTarget {
    pub transport: MessageTransport,
    pub framing: Framing,
    pub kcp: KcpOptions,
    pub connect_timeout: Duration,
}

impl MessageTarget {
    pub fn from_plan(target: &Target) -> Option<Self> {
        Some(Self {
            transport: MessageTransport::of_url(&target.base_url)?,
            framing: target.framing.unwrap_or(Framing::Newline),
            kcp: target.kcp.unwrap_or_default(),
            connect_timeout: Duration::from_secs_f64(target.connect_timeout_ms / 1000.0),
        })
    }
}

/// A message URL as the HTTP endpoint parser reads host and port (`tcp://h:1` → `http://h:1`):
/// instances are numbered and dealt to VUs as for HTTP. A WebSocket's is its HTTP server's
/// (`ws://` → `http://`, `wss://` → `https://`, the path kept): its upgrade and the plan's http
/// steps go there.
pub(crate) fn endpoint_url(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, rest)| rest).unwrap_or_default();
    match MessageTransport::of_url(url) {
        Some(MessageTransport::WebSocket { secure: true }) => format!("https://{rest}"),
        Some(_) => format!("http://{rest}"),
        None => url.to_owned(),
    }
}

/// A message's text, compiled. The commonest message template numbers a fixed text
/// (`ping {{ seq }}`, `move {{ seq }}`): that one is written without the template engine, which
/// would cost more than the rest of the message's way out.
#[derive(Debug)]
pub(crate) enum MessageText {
    Seq { prefix: String, suffix: String },
    Text(Text),
}

impl MessageText {
    /// `source` as a prefix and suffix around its one `{{ seq }}`, when nothing else in it is
    /// templated.
    pub fn seq_only(source: &str) -> Option<(String, String)> {
        let start = source.find("{{")?;
        let end = start + source[start..].find("}}")?;
        let (prefix, suffix) = (&source[..start], &source[end + 2..]);
        let templated = |text: &str| text.contains("{{") || text.contains("{%") || text.contains("{#");
        (source[start + 2..end].trim() == horde_plan::SEQ_VARIABLE && !templated(prefix) && !templated(suffix))
            .then(|| (prefix.to_owned(), suffix.to_owned()))
    }
}

/// A message's payload, compiled: rendered per message with `seq` (the VU's message number).
#[derive(Debug)]
pub(crate) enum PayloadNode {
    Text(MessageText),
    Hex(MessageText),
    Base64(MessageText),
    Json(JsonTemplate),
}

/// One message step, compiled.
#[derive(Debug)]
pub(crate) struct MessageNode {
    /// The step's metrics entry; `None` for `close`, which records nothing.
    pub global_index: Option<usize>,
    pub action: MessageAction,
    pub think_time: Option<ThinkTime>,
    /// The scenario's impaired network (UDP only).
    pub network: Option<Network>,
    /// A WebSocket's upgrade when this step opens the connection: a `connect` step's own, the
    /// scenario's (base_url's path, the target's and scenario's headers) for any other step.
    pub upgrade: Option<std::sync::Arc<UpgradeNode>>,
}

/// A WebSocket's upgrade request, compiled: its path after base_url's and its headers, each
/// a template.
#[derive(Debug)]
pub(crate) struct UpgradeNode {
    pub path: Option<Text>,
    pub headers: Vec<(String, Text)>,
}

#[derive(Debug)]
pub(crate) enum MessageAction {
    Connect,
    Send(PayloadNode),
    Receive(Box<ReceiveNode>),
    /// `control_frame`: a WebSocket's ping control frame, answered by a pong.
    Ping {
        text: MessageText,
        reply_seq: regex::bytes::Regex,
        timeout: Duration,
        control_frame: bool,
    },
    Stream {
        payload: PayloadNode,
        interval: Duration,
        duration: Duration,
    },
    Close,
}

#[derive(Debug)]
pub(crate) struct ReceiveNode {
    pub pattern: Option<regex::bytes::Regex>,
    pub json_path: Option<serde_json_path::JsonPath>,
    pub timeout: Duration,
    pub extractors: Vec<CompiledExtractor>,
    pub checks: Vec<CompiledCheck>,
    pub end_on_check_failure: bool,
}

impl ReceiveNode {
    /// Whether `message` is the one the step waits for.
    pub fn matches(&self, message: &[u8]) -> bool {
        if self.pattern.as_ref().is_some_and(|pattern| !pattern.is_match(message)) {
            return false;
        }
        match &self.json_path {
            None => true,
            Some(path) => {
                serde_json::from_slice::<serde_json::Value>(message).is_ok_and(|value| !path.query(&value).is_empty())
            }
        }
    }
}

/// The number a reply carries: the first capture group of `reply_seq`, read as an integer.
pub(crate) fn reply_number(reply_seq: &regex::bytes::Regex, message: &[u8]) -> Option<u64> {
    let captures = reply_seq.captures(message)?;
    let digits = captures.get(1)?.as_bytes();
    std::str::from_utf8(digits).ok()?.trim().parse().ok()
}

/// Bytes from hex digits (`0a0B`); `None` when they are not.
pub(crate) fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|index| u8::from_str_radix(text.get(index..index + 2)?, 16).ok()).collect()
}

pub(crate) fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_decoding_and_reply_numbers() {
        assert_eq!(decode_hex("0a0B ff"), None, "a space inside is not hex");
        assert_eq!(decode_hex("0a0Bff"), Some(vec![10, 11, 255]));
        assert_eq!(decode_hex("abc"), None);
        assert_eq!(decode_base64("aGk="), Some(b"hi".to_vec()));
        let reply_seq = regex::bytes::Regex::new(r"pong (\d+)").unwrap();
        assert_eq!(reply_number(&reply_seq, b"pong 42 extra"), Some(42));
        assert_eq!(reply_number(&reply_seq, b"move 42"), None);
        assert_eq!(endpoint_url("udp://127.0.0.1:7000"), "http://127.0.0.1:7000");
        assert_eq!(endpoint_url("wss://h:8443/ws/echo"), "https://h:8443/ws/echo");
        assert_eq!(MessageText::seq_only("ping {{ seq }}!"), Some(("ping ".into(), "!".into())));
        assert_eq!(MessageText::seq_only("{{seq}}"), Some((String::new(), String::new())));
        assert_eq!(MessageText::seq_only("ping {{ seq }} {{ vu }}"), None);
        assert_eq!(MessageText::seq_only("ping {{ seq + 1 }}"), None);
        assert_eq!(MessageText::seq_only("{% if x %}{{ seq }}"), None);
    }
}

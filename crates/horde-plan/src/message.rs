//! The `message` transports' part of the plan: raw TCP and UDP gateways (game servers, IoT
//! brokers) driven by `connect`, `send`, `receive`, `ping`, `stream` and `close` steps.
//!
//! A plan whose `target.base_url` is `tcp://host:port` or `udp://host:port` sends messages instead
//! of HTTP requests. Over TCP the target's `framing` cuts the byte stream into messages; over UDP
//! a datagram is a message. A scenario's `network` impairs its UDP datagrams both ways inside the
//! engine (delay, jitter, loss, duplicates, reordering, a rate limit), seeded so that a run can be
//! repeated.

use crate::{Check, Extractor, OnCheckFailure, ThinkTime};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The variable a message step's templates read as the VU's message number (1 for its first
/// message, counted over the VU's life, every send, ping and stream frame included).
pub const SEQ_VARIABLE: &str = "seq";

/// Which message transport a base URL names, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageTransport {
    Tcp,
    Udp,
    /// KCP (reliable, ordered messages over UDP, as the reference C implementation `ikcp.c`).
    Kcp,
    /// WebSocket (RFC 6455): `ws://` in clear text, `wss://` over TLS. `connect` is the HTTP/1.1
    /// upgrade; a data frame (text or binary) is a message.
    WebSocket {
        secure: bool,
    },
}

impl MessageTransport {
    pub fn of_url(url: &str) -> Option<Self> {
        if url.starts_with("tcp://") {
            Some(Self::Tcp)
        } else if url.starts_with("udp://") {
            Some(Self::Udp)
        } else if url.starts_with("kcp://") {
            Some(Self::Kcp)
        } else if url.starts_with("ws://") {
            Some(Self::WebSocket { secure: false })
        } else if url.starts_with("wss://") {
            Some(Self::WebSocket { secure: true })
        } else {
            None
        }
    }

    /// The URL's scheme, as written (`"tcp://"`).
    pub fn scheme(self) -> &'static str {
        match self {
            Self::Tcp => "tcp://",
            Self::Udp => "udp://",
            Self::Kcp => "kcp://",
            Self::WebSocket { secure: false } => "ws://",
            Self::WebSocket { secure: true } => "wss://",
        }
    }

    pub fn is_websocket(self) -> bool {
        matches!(self, Self::WebSocket { .. })
    }
}

/// How a TCP byte stream is cut into messages (`target.framing`); newline-delimited when left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Framing {
    /// Each message ends with `\n` (not part of the message; a `\r` before it is dropped too).
    Newline,
    /// Each message is preceded by its length in `bytes` bytes (1, 2 or 4); the field holds the
    /// payload's length plus `adjust` (e.g. `adjust: 2` when a 2-byte field counts itself).
    Length {
        bytes: u8,
        #[serde(default)]
        endian: Endian,
        #[serde(default)]
        adjust: i64,
    },
    /// No framing: whatever one read returns is a message (a send is written as is).
    Raw,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endian {
    #[default]
    Big,
    Little,
}

/// A `kcp://` target's KCP knobs (`target.kcp`), with `ikcp.c`'s defaults: a gateway built on the
/// reference implementation talks to Horde unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KcpOptions {
    /// The conversation id; each VU's own (its number + 1) when left out.
    #[serde(default)]
    pub conv: Option<u32>,
    /// `ikcp_nodelay`'s first knob: no exponential backoff of the retransmission timeout, and a
    /// lower minimum RTO (30 ms instead of 100).
    #[serde(default)]
    pub nodelay: bool,
    /// The internal update interval in ms (`ikcp_interval`).
    #[serde(default = "default_kcp_interval_ms")]
    pub interval_ms: u32,
    /// Fast resend after this many duplicate ACKs (0: off).
    #[serde(default)]
    pub resend: u32,
    /// Turns the congestion window off (`nc`).
    #[serde(default)]
    pub no_congestion_window: bool,
    #[serde(default = "default_kcp_send_window")]
    pub send_window: u16,
    #[serde(default = "default_kcp_receive_window")]
    pub receive_window: u16,
    #[serde(default = "default_kcp_mtu")]
    pub mtu: u32,
}

fn default_kcp_interval_ms() -> u32 {
    100
}

fn default_kcp_send_window() -> u16 {
    32
}

fn default_kcp_receive_window() -> u16 {
    128
}

fn default_kcp_mtu() -> u32 {
    1400
}

impl Default for KcpOptions {
    fn default() -> Self {
        Self {
            conv: None,
            nodelay: false,
            interval_ms: default_kcp_interval_ms(),
            resend: 0,
            no_congestion_window: false,
            send_window: default_kcp_send_window(),
            receive_window: default_kcp_receive_window(),
            mtu: default_kcp_mtu(),
        }
    }
}

/// A scenario's impaired network: applied by the engine to its own UDP datagrams (KCP's too), each way.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Added to every datagram, each way.
    #[serde(default)]
    pub delay_ms: f64,
    /// Each datagram's delay is drawn uniformly in `delay_ms ± jitter_ms` (never below 0).
    #[serde(default)]
    pub jitter_ms: f64,
    #[serde(default)]
    pub loss_percent: f64,
    #[serde(default)]
    pub duplicate_percent: f64,
    /// The share of datagrams held back one more `delay_ms + jitter_ms` (at least 1 ms), so that
    /// later ones overtake them.
    #[serde(default)]
    pub reorder_percent: f64,
    /// The link's rate each way: a token bucket (see [`RateLimit`]); none when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// The draws' seed: the same seed, plan and VU give the same impairment.
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_seed() -> u64 {
    1
}

/// `network.rate_limit`: the bytes a second the impaired link carries each way. Written as a
/// number (bytes a second) or as a string, a number and a unit: `bit`, `kbit`, `mbit`, `gbit`
/// (bits a second, as `tc` writes them, any case) or `B`, `kB`, `MB`, `GB` (bytes a second),
/// either optionally followed by `/s`; k, M and G are powers of 1000 (`"1mbit"` = `"125kB/s"` =
/// `125000`). Between [`RateLimit::MIN`] and [`RateLimit::MAX`] bytes a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub bytes_per_s: f64,
}

impl RateLimit {
    pub const MIN: f64 = 1.0;
    pub const MAX: f64 = 1e12;
    const FORMS: &'static str = "a number of bytes a second, or e.g. \"1mbit\", \"500kbit\", \"125kB/s\", \"2MB/s\"";

    /// The rate a string names, or why not.
    pub fn parse(text: &str) -> Result<RateLimit, String> {
        let text = text.trim();
        let text = text.strip_suffix("/s").unwrap_or(text);
        let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
        let (number, unit) = (&text[..split], text[split..].trim_start());
        let value: f64 = number.parse().map_err(|_| format!("'{text}' is not a rate: {}", Self::FORMS))?;
        let bytes_per_unit = match unit {
            "B" => 1.0,
            "kB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            _ => match unit.to_ascii_lowercase().as_str() {
                "bit" => 1.0 / 8.0,
                "kbit" => 1e3 / 8.0,
                "mbit" => 1e6 / 8.0,
                "gbit" => 1e9 / 8.0,
                _ => return Err(format!("'{text}' has no known unit: {}", Self::FORMS)),
            },
        };
        Self::of_bytes(value * bytes_per_unit)
    }

    fn of_bytes(bytes_per_s: f64) -> Result<RateLimit, String> {
        if !(Self::MIN..=Self::MAX).contains(&bytes_per_s) {
            return Err(format!(
                "a rate limit is from {} byte to {:e} bytes a second, not {bytes_per_s}",
                Self::MIN,
                Self::MAX
            ));
        }
        Ok(RateLimit { bytes_per_s })
    }
}

impl Serialize for RateLimit {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.bytes_per_s)
    }
}

impl<'de> Deserialize<'de> for RateLimit {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Rate;
        impl serde::de::Visitor<'_> for Rate {
            type Value = RateLimit;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str(RateLimit::FORMS)
            }
            fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<RateLimit, E> {
                RateLimit::of_bytes(value).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<RateLimit, E> {
                self.visit_f64(value as f64)
            }
            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<RateLimit, E> {
                self.visit_f64(value as f64)
            }
            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<RateLimit, E> {
                RateLimit::parse(value).map_err(E::custom)
            }
        }
        deserializer.deserialize_any(Rate)
    }
}

/// What a message carries: text, bytes written in hex or base64, or JSON; each a template.
/// Written as keys of the step itself (`text: "move {{ seq }}"`); exactly one of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Payload<'a> {
    Text(&'a str),
    Hex(&'a str),
    Base64(&'a str),
    Json(&'a Value),
}

impl Payload<'_> {
    /// The plan's key for this payload.
    pub fn key(&self) -> &'static str {
        match self {
            Payload::Text(_) => "text",
            Payload::Hex(_) => "hex",
            Payload::Base64(_) => "base64",
            Payload::Json(_) => "json",
        }
    }
}

/// The payload keys a step gave, in the order text, hex, base64, json.
fn payloads<'a>(
    text: &'a Option<String>,
    hex: &'a Option<String>,
    base64: &'a Option<String>,
    json: &'a Option<Value>,
) -> Vec<Payload<'a>> {
    let mut given = Vec::new();
    given.extend(text.as_deref().map(Payload::Text));
    given.extend(hex.as_deref().map(Payload::Hex));
    given.extend(base64.as_deref().map(Payload::Base64));
    given.extend(json.as_ref().map(Payload::Json));
    given
}

/// Opens the VU's connection (TCP) or its socket (UDP), or performs a WebSocket's upgrade
/// (`ws://`, `wss://`); timed as the step's latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectStep {
    pub name: String,
    /// A WebSocket's upgrade path (a template, its query included), joined to base_url's path
    /// as an HTTP step's path is; base_url's path alone when left out.
    #[serde(default)]
    pub path: Option<String>,
    /// A WebSocket's upgrade request headers (templates), after the target's and the
    /// scenario's; the VU's cookies go with them.
    #[serde(default, with = "crate::header_map")]
    pub headers: Vec<(String, String)>,
    #[serde(default)]
    pub think_time: Option<ThinkTime>,
}

/// Sends one message (connecting first when the VU has no connection).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendStep {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
    #[serde(default)]
    pub think_time: Option<ThinkTime>,
}

/// Waits for the first message that matches; messages before it are counted and skipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiveStep {
    pub name: String,
    /// A regular expression the message must match.
    #[serde(default, rename = "match")]
    pub pattern: Option<String>,
    /// A JSONPath that must find something in the message (read as JSON).
    #[serde(default)]
    pub json_path: Option<String>,
    #[serde(default = "default_receive_timeout_ms")]
    pub timeout_ms: f64,
    #[serde(default)]
    pub extract: Vec<Extractor>,
    #[serde(default)]
    pub checks: Vec<Check>,
    #[serde(default)]
    pub on_check_failure: OnCheckFailure,
    #[serde(default)]
    pub think_time: Option<ThinkTime>,
}

fn default_receive_timeout_ms() -> f64 {
    5000.0
}

/// Sends a numbered message and waits for the reply carrying the same number: the round-trip
/// time is the step's latency; no reply within `timeout_ms` counts as `lost`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PingStep {
    pub name: String,
    /// The message; `{{ seq }}` is its number.
    #[serde(default = "default_ping_text")]
    pub text: String,
    /// Where a reply's number is: the first capture group of this regular expression.
    #[serde(default = "default_seq_pattern")]
    pub reply_seq: String,
    #[serde(default = "default_ping_timeout_ms")]
    pub timeout_ms: f64,
    /// A WebSocket target: the ping goes as a ping control frame (its payload the text, at most
    /// 125 bytes) and the pong carrying its number ends it: the RTT of the server's WebSocket
    /// stack rather than of its application.
    #[serde(default)]
    pub control_frame: bool,
    #[serde(default)]
    pub think_time: Option<ThinkTime>,
}

/// The most a WebSocket control frame (a ping's payload) carries.
pub const MAX_CONTROL_FRAME_BYTES: usize = 125;

fn default_ping_text() -> String {
    "ping {{ seq }}".into()
}

fn default_seq_pattern() -> String {
    r"(\d+)".into()
}

fn default_ping_timeout_ms() -> f64 {
    1000.0
}

/// Sends a message every `every_ms` (or `per_second` a second) for `duration_ms`, reading
/// whatever arrives meanwhile (a robot's movement frames while the room's broadcasts come in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamStep {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
    #[serde(default)]
    pub every_ms: Option<f64>,
    #[serde(default)]
    pub per_second: Option<f64>,
    pub duration_ms: f64,
    #[serde(default)]
    pub think_time: Option<ThinkTime>,
}

impl SendStep {
    /// The payloads given (a valid step has exactly one).
    pub fn payloads(&self) -> Vec<Payload<'_>> {
        payloads(&self.text, &self.hex, &self.base64, &self.json)
    }
}

impl StreamStep {
    /// The payloads given (a valid step has exactly one).
    pub fn payloads(&self) -> Vec<Payload<'_>> {
        payloads(&self.text, &self.hex, &self.base64, &self.json)
    }

    /// The interval between two sends.
    pub fn interval_ms(&self) -> f64 {
        match (self.every_ms, self.per_second) {
            (Some(every_ms), _) => every_ms,
            (None, Some(per_second)) if per_second > 0.0 => 1000.0 / per_second,
            _ => 0.0,
        }
    }
}

/// Closes the VU's connection; the next message step opens a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseStep {}

/// The most messages a stream step may send (its duration over its interval).
pub const MAX_STREAM_MESSAGES: f64 = 10_000_000.0;
/// A message template's largest rendering the engine sends (a datagram's limit, 64 KiB, for UDP).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

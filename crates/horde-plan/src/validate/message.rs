//! The message transports' checks (`tcp://`, `udp://`, `kcp://`, `ws://`, `wss://`): the URL,
//! the framing, the scenario's impaired network, that every step speaks the target's protocol,
//! and each message step.
//! python/horde/plan/message.py words the same problems the same way.

use super::{check_headers, check_json_path, check_think_time, regex_problem, Problems, StepWalker};
use crate::message::{Framing, MessageTransport, Network, Payload, MAX_STREAM_MESSAGES};
use crate::{Check, ExtractFrom, Plan, Step, Target, MAX_TIMEOUT_MS, SEQ_VARIABLE};

/// The target's URLs and options against the transport `base_url` names.
pub(super) fn check_target(problems: &mut Problems, target: &Target) {
    let transport = MessageTransport::of_url(&target.base_url);
    if let Some(transport) = transport {
        check_message_url(problems, "target.base_url".into(), &target.base_url, transport);
        for (index, url) in target.instances.iter().enumerate() {
            let path = format!("target.instances[{index}]");
            if MessageTransport::of_url(url) != Some(transport) {
                problems.push(path, format!("'{url}' must use the scheme of base_url ({})", transport.scheme()));
            } else {
                check_message_url(problems, path, url, transport);
            }
        }
        if target.connections.pool_size().is_some() {
            problems.push("target.connections".into(), "a message target has one connection per VU: remove the pool");
        }
        if transport.is_websocket() && target.framing.is_some() {
            problems.push_hint(
                "target.framing".into(),
                "a WebSocket's frames are its messages: framing is for tcp://",
                "remove framing",
            );
        } else if transport != MessageTransport::Tcp && target.framing.is_some() {
            problems.push_hint(
                "target.framing".into(),
                "a udp:// or kcp:// target's datagram is a message: framing is for tcp://",
                "remove framing",
            );
        }
        if let Some(Framing::Length { bytes, .. }) = target.framing {
            if !matches!(bytes, 1 | 2 | 4) {
                problems.push("target.framing.bytes".into(), format!("must be 1, 2 or 4 (got {bytes})"));
            }
        }
    } else if target.framing.is_some() {
        problems.push_hint("target.framing".into(), "framing is for a tcp:// target", "remove framing");
    }
    match (&target.kcp, transport) {
        (Some(kcp), Some(MessageTransport::Kcp)) => check_kcp(problems, kcp),
        (Some(_), _) => problems.push_hint("target.kcp".into(), "KCP's knobs are for a kcp:// target", "remove kcp"),
        _ => {}
    }
}

/// Each scenario's impaired network and its steps against the transport `base_url` names.
pub(super) fn check_scenarios(problems: &mut Problems, plan: &Plan) {
    let transport = MessageTransport::of_url(&plan.target.base_url);
    for (index, scenario) in plan.scenarios.iter().enumerate() {
        if let Some(network) = &scenario.network {
            let path = format!("scenarios[{index}].network");
            if !matches!(transport, Some(MessageTransport::Udp | MessageTransport::Kcp)) {
                problems.push(
                    path.clone(),
                    "the engine impairs its own UDP datagrams only: network needs a udp:// or kcp:// target",
                );
            }
            check_network(problems, &path, network);
        }
        for (part, steps) in [("setup", &scenario.setup), ("steps", &scenario.steps), ("teardown", &scenario.teardown)]
        {
            check_step_protocol(problems, &format!("scenarios[{index}].{part}"), steps, transport);
        }
    }
}

/// `ikcp.c`'s own bounds: an interval of 10 to 5000 ms (it clamps), an MTU of 50 bytes or more.
fn check_kcp(problems: &mut Problems, kcp: &crate::KcpOptions) {
    if !(10..=5000).contains(&kcp.interval_ms) {
        problems
            .push("target.kcp.interval_ms".into(), format!("must be between 10 and 5000 (got {})", kcp.interval_ms));
    }
    if !(50..=65_000).contains(&kcp.mtu) {
        problems.push("target.kcp.mtu".into(), format!("must be between 50 and 65000 (got {})", kcp.mtu));
    }
    if kcp.send_window == 0 {
        problems.push("target.kcp.send_window".into(), "must be at least 1");
    }
    if kcp.receive_window == 0 {
        problems.push("target.kcp.receive_window".into(), "must be at least 1");
    }
    if kcp.resend > 100 {
        problems.push("target.kcp.resend".into(), format!("must be at most 100 (got {})", kcp.resend));
    }
}

fn is_message_step(step: &Step) -> bool {
    matches!(
        step,
        Step::Connect(_) | Step::Send(_) | Step::Receive(_) | Step::Ping(_) | Step::Stream(_) | Step::Close(_)
    )
}

/// Every step against the target's protocol. A WebSocket's target is an HTTP server too: its
/// http steps (a login whose cookies the upgrade then carries) go to the same host over
/// http:// (`ws://`) or https:// (`wss://`).
fn check_step_protocol(problems: &mut Problems, path: &str, steps: &[Step], transport: Option<MessageTransport>) {
    let messages = transport.is_some();
    let websocket = transport.is_some_and(MessageTransport::is_websocket);
    for (index, step) in steps.iter().enumerate() {
        let step_path = format!("{path}[{index}]");
        match step {
            Step::Http(_) if messages && !websocket => {
                problems.push(
                    format!("{step_path}.type"),
                    "an http step against a message target: use send, receive or ping",
                );
            }
            Step::Parallel(_) if messages && !websocket => {
                problems.push(
                    format!("{step_path}.type"),
                    "a parallel group sends http requests: against a message target use send, receive or ping",
                );
            }
            Step::Sql(_) if messages => {
                problems.push(
                    format!("{step_path}.type"),
                    "a sql step against a message target: use send, receive or ping",
                );
            }
            step if is_message_step(step) && !messages => {
                problems.push(
                    format!("{step_path}.type"),
                    "a message step needs a tcp://, udp://, kcp://, ws:// or wss:// target.base_url",
                );
            }
            Step::Ping(ping) if ping.control_frame && !websocket => {
                problems
                    .push(format!("{step_path}.control_frame"), "a ping control frame is for a ws:// or wss:// target");
            }
            Step::Connect(connect) if messages && !websocket => {
                if connect.path.is_some() {
                    problems.push(format!("{step_path}.path"), "an upgrade path is for a ws:// or wss:// target");
                }
                if !connect.headers.is_empty() {
                    problems.push(format!("{step_path}.headers"), "upgrade headers are for a ws:// or wss:// target");
                }
            }
            _ => {}
        }
        for (part, children) in child_parts(step) {
            check_step_protocol(problems, &format!("{step_path}.{part}"), children, transport);
        }
    }
}

/// A step's nested lists with their keys, for locating problems inside them.
fn child_parts(step: &Step) -> Vec<(String, &[Step])> {
    match step {
        Step::Group(group) => vec![("steps".into(), group.steps.as_slice())],
        Step::Loop(loop_step) => vec![("steps".into(), loop_step.steps.as_slice())],
        Step::If(if_step) => {
            vec![("then".into(), if_step.then.as_slice()), ("else".into(), if_step.otherwise.as_slice())]
        }
        Step::Choice(choice) => choice
            .branches
            .iter()
            .enumerate()
            .map(|(index, branch)| (format!("branches[{index}].steps"), branch.steps.as_slice()))
            .collect(),
        _ => Vec::new(),
    }
}

/// `tcp://host:port` or `udp://host:port`: a host, a port, nothing after them. A WebSocket's
/// `ws://host[:port][/path]`: a host, the port when not the scheme's (80, 443), a path.
fn check_message_url(problems: &mut Problems, path: String, url: &str, transport: MessageTransport) {
    if transport.is_websocket() {
        check_websocket_url(problems, path, url, transport);
        return;
    }
    let rest = url.split_once("://").map(|(_, rest)| rest).unwrap_or_default();
    let example = format!("e.g. {}127.0.0.1:7000", &url[..url.len() - rest.len()]);
    let Some((host, port)) = rest.rsplit_once(':') else {
        problems.push(path, format!("'{url}' names no port, {example}"));
        return;
    };
    if host.is_empty() || host.contains(['/', '@', '?', '#']) {
        problems.push(path, format!("'{url}' is not host:port, {example}"));
    } else if port.parse::<u16>().ok().filter(|port| *port > 0).is_none() {
        problems.push(path, format!("'{url}' has a bad port '{port}', {example}"));
    }
}

fn check_websocket_url(problems: &mut Problems, path: String, url: &str, transport: MessageTransport) {
    let scheme = transport.scheme();
    let rest = &url[scheme.len()..];
    let example = format!("e.g. {scheme}127.0.0.1:8080/ws/echo");
    let authority = rest.split('/').next().unwrap_or_default();
    if rest.contains(['?', '#']) {
        problems.push(path, format!("'{url}' has a query or fragment: put a query in the connect step's path"));
        return;
    }
    if authority.contains('@') {
        problems.push(path, format!("'{url}' must not carry credentials (user:password@): send them as a header"));
        return;
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((host, tail)) => (host, tail.strip_prefix(':')),
            None => ("", None),
        },
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        problems.push(path, format!("'{url}' names no host, {example}"));
    } else if let Some(port) = port {
        if port.parse::<u16>().ok().filter(|port| *port > 0).is_none() {
            problems.push(path, format!("'{url}' has a bad port '{port}', {example}"));
        }
    }
}

fn check_network(problems: &mut Problems, path: &str, network: &Network) {
    problems.non_negative(format!("{path}.delay_ms"), network.delay_ms, MAX_TIMEOUT_MS);
    problems.non_negative(format!("{path}.jitter_ms"), network.jitter_ms, MAX_TIMEOUT_MS);
    for (key, value) in [
        ("loss_percent", network.loss_percent),
        ("duplicate_percent", network.duplicate_percent),
        ("reorder_percent", network.reorder_percent),
    ] {
        problems.non_negative(format!("{path}.{key}"), value, 100.0);
    }
}

/// How a ping's `reply_seq` is written: a capture group around the number.
const REPLY_SEQ_EXAMPLE: &str = r"e.g. reply_seq: 'pong (\d+)'";

impl StepWalker<'_> {
    pub(super) fn message(&mut self, path: &str, step: &Step) {
        match step {
            Step::Connect(connect) => {
                self.named(path, &connect.name);
                if let Some(upgrade_path) = &connect.path {
                    self.template(format!("{path}.path"), upgrade_path);
                    if !upgrade_path.starts_with('/') {
                        self.problems.push_hint(
                            format!("{path}.path"),
                            format!("'{upgrade_path}' must start with '/'"),
                            format!("e.g. '/{}'", upgrade_path.trim_start_matches(['.', '/'])),
                        );
                    }
                }
                check_headers(self.problems, &format!("{path}.headers"), &connect.headers);
                for (name, value) in &connect.headers {
                    self.template(format!("{path}.headers.{name}"), value);
                }
                self.think(path, connect.think_time.as_ref());
            }
            Step::Send(send) => {
                self.named(path, &send.name);
                self.payload(path, &send.payloads());
                self.think(path, send.think_time.as_ref());
            }
            Step::Receive(receive) => {
                self.named(path, &receive.name);
                if let Some(pattern) = &receive.pattern {
                    if let Some(message) = regex_problem(pattern) {
                        self.problems.push_hint(format!("{path}.match"), message, "e.g. match: '^pong'");
                    }
                }
                if let Some(json_path) = &receive.json_path {
                    check_json_path(self.problems, format!("{path}.json_path"), json_path);
                }
                self.problems.positive(format!("{path}.timeout_ms"), receive.timeout_ms, MAX_TIMEOUT_MS);
                for (index, extractor) in receive.extract.iter().enumerate() {
                    if matches!(extractor.from, ExtractFrom::Status | ExtractFrom::Header) {
                        self.problems.push_hint(
                            format!("{path}.extract[{index}].from"),
                            "a message has no status or headers",
                            "extract from json or regex",
                        );
                    }
                    if extractor.var == SEQ_VARIABLE {
                        self.problems.push_hint(
                            format!("{path}.extract[{index}].var"),
                            "'seq' is the message number",
                            "choose another variable name",
                        );
                    }
                }
                for (index, check) in receive.checks.iter().enumerate() {
                    if matches!(check, Check::Status { .. }) {
                        self.problems.push_hint(
                            format!("{path}.checks[{index}].type"),
                            "a message has no status",
                            "check with json, body_contains or body_matches",
                        );
                    }
                }
                self.extractors(path, &receive.extract);
                self.checks(path, &receive.checks);
                self.think(path, receive.think_time.as_ref());
            }
            Step::Ping(ping) => {
                self.named(path, &ping.name);
                self.template(format!("{path}.text"), &ping.text);
                if !ping.text.contains(SEQ_VARIABLE) {
                    self.problems.push_hint(
                        format!("{path}.text"),
                        "the ping must carry its number",
                        "e.g. text: 'ping {{ seq }}'",
                    );
                }
                if let Some(message) = regex_problem(&ping.reply_seq) {
                    self.problems.push_hint(format!("{path}.reply_seq"), message, REPLY_SEQ_EXAMPLE);
                }
                if regex::Regex::new(&ping.reply_seq).is_ok_and(|regex| regex.captures_len() < 2) {
                    self.problems.push_hint(
                        format!("{path}.reply_seq"),
                        "reply_seq needs a capture group around the number",
                        REPLY_SEQ_EXAMPLE,
                    );
                }
                self.problems.positive(format!("{path}.timeout_ms"), ping.timeout_ms, MAX_TIMEOUT_MS);
                if ping.control_frame && ping.text.len() > crate::MAX_CONTROL_FRAME_BYTES {
                    self.problems.push_hint(
                        format!("{path}.text"),
                        format!("a ping control frame carries at most {} bytes", crate::MAX_CONTROL_FRAME_BYTES),
                        "shorten the text",
                    );
                }
                self.think(path, ping.think_time.as_ref());
            }
            Step::Stream(stream) => {
                self.named(path, &stream.name);
                self.payload(path, &stream.payloads());
                match (stream.every_ms, stream.per_second) {
                    (Some(every_ms), None) => {
                        self.problems.positive(format!("{path}.every_ms"), every_ms, MAX_TIMEOUT_MS)
                    }
                    (None, Some(per_second)) => {
                        self.problems.positive(format!("{path}.per_second"), per_second, 1_000_000.0)
                    }
                    _ => self.problems.push_hint(
                        path.to_owned(),
                        "a stream needs exactly one of 'every_ms' or 'per_second'",
                        "e.g. per_second: 10",
                    ),
                }
                self.problems.positive(format!("{path}.duration_ms"), stream.duration_ms, MAX_TIMEOUT_MS);
                let interval_ms = stream.interval_ms();
                if interval_ms > 0.0 && stream.duration_ms / interval_ms > MAX_STREAM_MESSAGES {
                    self.problems.push_hint(
                        format!("{path}.duration_ms"),
                        format!("the stream would send more than {MAX_STREAM_MESSAGES} messages"),
                        "shorten duration_ms",
                    );
                }
                self.think(path, stream.think_time.as_ref());
            }
            _ => {}
        }
    }

    fn think(&mut self, path: &str, think_time: Option<&crate::ThinkTime>) {
        if let Some(think_time) = think_time {
            check_think_time(self.problems, &format!("{path}.think_time"), think_time);
        }
    }

    /// Exactly one of text, hex, base64 or json; each a template.
    fn payload(&mut self, path: &str, payloads: &[Payload<'_>]) {
        if payloads.len() != 1 {
            let given: Vec<&str> = payloads.iter().map(Payload::key).collect();
            let got = if given.is_empty() { String::new() } else { format!(" (got {})", given.join(", ")) };
            self.problems.push_hint(
                path.to_owned(),
                format!("needs exactly one of 'text', 'hex', 'base64' or 'json'{got}"),
                "e.g. text: 'move {{ seq }}'",
            );
        }
        for payload in payloads {
            match payload {
                Payload::Text(text) => self.template(format!("{path}.text"), text),
                Payload::Hex(hex) => {
                    self.template(format!("{path}.hex"), hex);
                    if !crate::templates::is_template(hex)
                        && (hex.len() % 2 != 0 || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()))
                    {
                        self.problems.push_hint(
                            format!("{path}.hex"),
                            format!("'{hex}' is not hex: an even number of 0-9a-f digits"),
                            "e.g. hex: '0a0b'",
                        );
                    }
                }
                Payload::Base64(base64) => self.template(format!("{path}.base64"), base64),
                Payload::Json(json) => self.json_templates(&format!("{path}.json"), json),
            }
        }
    }
}

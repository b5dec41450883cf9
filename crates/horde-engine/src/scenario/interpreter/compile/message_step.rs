//! Message steps compiled: payloads into templates, patterns and JSONPaths parsed once.

use super::{NodeCompiler, StepKind};
use crate::error::EngineError;
use crate::response_rules::{check_label, CompiledCheck, CompiledExtractor};
use crate::transport::message::{MessageAction, MessageNode, MessageText, PayloadNode, ReceiveNode, UpgradeNode};
use horde_plan::{OnCheckFailure, Payload, Scenario, Step};
use std::sync::Arc;
use std::time::Duration;

fn milliseconds(value: f64) -> Duration {
    Duration::from_secs_f64(value / 1000.0)
}

fn regex(pattern: &str) -> Result<regex::bytes::Regex, EngineError> {
    regex::bytes::Regex::new(pattern)
        .map_err(|error| EngineError::Setup(format!("invalid regular expression '{pattern}': {error}")))
}

impl NodeCompiler<'_> {
    pub(super) fn message(&mut self, scenario: &Scenario, step: &Step) -> Result<MessageNode, EngineError> {
        let (name, think_time, action) = match step {
            Step::Connect(connect) => (Some(&connect.name), connect.think_time, MessageAction::Connect),
            Step::Send(send) => {
                (Some(&send.name), send.think_time, MessageAction::Send(self.payload(&send.payloads())?))
            }
            Step::Receive(receive) => {
                let node = ReceiveNode {
                    pattern: receive.pattern.as_deref().map(regex).transpose()?,
                    json_path: receive
                        .json_path
                        .as_deref()
                        .map(|path| {
                            serde_json_path::JsonPath::parse(path)
                                .map_err(|error| EngineError::Setup(format!("invalid JSONPath: {error}")))
                        })
                        .transpose()?,
                    timeout: milliseconds(receive.timeout_ms),
                    extractors: receive.extract.iter().map(CompiledExtractor::compile).collect::<Result<_, _>>()?,
                    checks: receive.checks.iter().map(CompiledCheck::compile).collect::<Result<_, _>>()?,
                    end_on_check_failure: receive.on_check_failure == OnCheckFailure::EndIteration,
                };
                (Some(&receive.name), receive.think_time, MessageAction::Receive(Box::new(node)))
            }
            Step::Ping(ping) => (
                Some(&ping.name),
                ping.think_time,
                MessageAction::Ping {
                    text: self.message_text(&ping.text)?,
                    reply_seq: regex(&ping.reply_seq)?,
                    timeout: milliseconds(ping.timeout_ms),
                    control_frame: ping.control_frame,
                },
            ),
            Step::Stream(stream) => (
                Some(&stream.name),
                stream.think_time,
                MessageAction::Stream {
                    payload: self.payload(&stream.payloads())?,
                    interval: milliseconds(stream.interval_ms()),
                    duration: milliseconds(stream.duration_ms),
                },
            ),
            _ => (None, None, MessageAction::Close),
        };
        let global_index = name.map(|name| self.register(&scenario.name, name, StepKind::Request));
        if let (Some(index), Step::Receive(receive)) = (global_index, step) {
            self.check_labels[index] = receive.checks.iter().map(check_label).collect();
        }
        let upgrade = match step {
            _ if !self.websocket => None,
            Step::Connect(connect) => {
                Some(Arc::new(self.upgrade(scenario, connect.path.as_deref(), &connect.headers)?))
            }
            _ => Some(match self.scenario_upgrades.get(&scenario.name) {
                Some(upgrade) => Arc::clone(upgrade),
                None => {
                    let upgrade = Arc::new(self.upgrade(scenario, None, &[])?);
                    self.scenario_upgrades.insert(scenario.name.clone(), Arc::clone(&upgrade));
                    upgrade
                }
            }),
        };
        Ok(MessageNode { global_index, action, think_time, network: scenario.network, upgrade })
    }

    /// A WebSocket's upgrade: the target's headers, the scenario's, then the step's.
    fn upgrade(
        &mut self,
        scenario: &Scenario,
        path: Option<&str>,
        step_headers: &[(String, String)],
    ) -> Result<UpgradeNode, EngineError> {
        let mut headers = Vec::new();
        for (name, value) in self.target_headers.iter().chain(scenario.headers.iter()).chain(step_headers.iter()) {
            headers.push((name.clone(), self.text(value)?));
        }
        Ok(UpgradeNode { path: path.map(|path| self.text(path)).transpose()?, headers })
    }

    fn message_text(&mut self, source: &str) -> Result<MessageText, EngineError> {
        Ok(match MessageText::seq_only(source) {
            Some((prefix, suffix)) => MessageText::Seq { prefix, suffix },
            None => MessageText::Text(self.text(source)?),
        })
    }

    fn payload(&mut self, payloads: &[Payload<'_>]) -> Result<PayloadNode, EngineError> {
        Ok(match payloads.first() {
            Some(Payload::Text(text)) => PayloadNode::Text(self.message_text(text)?),
            Some(Payload::Hex(hex)) => PayloadNode::Hex(self.message_text(hex)?),
            Some(Payload::Base64(base64)) => PayloadNode::Base64(self.message_text(base64)?),
            Some(Payload::Json(json)) => PayloadNode::Json(self.json(json)?),
            None => return Err(EngineError::Setup("a message step needs text, hex, base64 or json".into())),
        })
    }
}

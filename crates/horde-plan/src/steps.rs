//! The steps of a scenario: requests, and the control flow around them.
//!
//! On the wire a step is an object with a `type`; without one it is an `http` step, so plans of
//! the first slice (a flat list of requests) read unchanged.

use crate::ThinkTime;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// One step of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Step {
    Http(crate::HttpStep),
    Sql(crate::sql::SqlStep),
    Connect(crate::ConnectStep),
    Send(crate::SendStep),
    Receive(crate::ReceiveStep),
    Ping(crate::PingStep),
    Stream(crate::StreamStep),
    Close(crate::CloseStep),
    Group(GroupStep),
    Parallel(ParallelStep),
    Choice(ChoiceStep),
    Loop(LoopStep),
    If(IfStep),
    Think(ThinkStep),
    EndIteration(EndIterationStep),
}

/// The same shape with the tag required, for decoding once the default tag is filled in.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum TaggedStep {
    Http(crate::HttpStep),
    Sql(crate::sql::SqlStep),
    Connect(crate::ConnectStep),
    Send(crate::SendStep),
    Receive(crate::ReceiveStep),
    Ping(crate::PingStep),
    Stream(crate::StreamStep),
    Close(crate::CloseStep),
    Group(GroupStep),
    Parallel(ParallelStep),
    Choice(ChoiceStep),
    Loop(LoopStep),
    If(IfStep),
    Think(ThinkStep),
    EndIteration(EndIterationStep),
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut object = serde_json::Map::<String, Value>::deserialize(deserializer)?;
        object.entry("type").or_insert_with(|| Value::String("http".into()));
        let tagged = TaggedStep::deserialize(Value::Object(object)).map_err(D::Error::custom)?;
        Ok(match tagged {
            TaggedStep::Http(step) => Step::Http(step),
            TaggedStep::Sql(step) => Step::Sql(step),
            TaggedStep::Connect(step) => Step::Connect(step),
            TaggedStep::Send(step) => Step::Send(step),
            TaggedStep::Receive(step) => Step::Receive(step),
            TaggedStep::Ping(step) => Step::Ping(step),
            TaggedStep::Stream(step) => Step::Stream(step),
            TaggedStep::Close(step) => Step::Close(step),
            TaggedStep::Group(step) => Step::Group(step),
            TaggedStep::Parallel(step) => Step::Parallel(step),
            TaggedStep::Choice(step) => Step::Choice(step),
            TaggedStep::Loop(step) => Step::Loop(step),
            TaggedStep::If(step) => Step::If(step),
            TaggedStep::Think(step) => Step::Think(step),
            TaggedStep::EndIteration(step) => Step::EndIteration(step),
        })
    }
}

/// Steps whose total time is recorded under the group's name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupStep {
    pub name: String,
    pub steps: Vec<Step>,
}

/// HTTP requests a VU sends at once, as a browser fetches a page's resources, and waits for
/// all; the pass is timed under the group's name, like a group's. Its steps are `http` steps
/// only, without think times (`validate` says so): nothing in it runs after anything else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParallelStep {
    pub name: String,
    pub steps: Vec<Step>,
}

/// One branch per pass, drawn by weight (JMeter's throughput controller).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChoiceStep {
    pub branches: Vec<Branch>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Branch {
    pub weight: f64,
    pub steps: Vec<Step>,
}

/// Repeats its steps: a number of times, while a condition holds, or for each item of a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopStep {
    pub steps: Vec<Step>,
    #[serde(default)]
    pub count: Option<u64>,
    #[serde(default, rename = "while")]
    pub while_condition: Option<String>,
    #[serde(default = "default_max_iterations")]
    pub max_iterations: u64,
    #[serde(default)]
    pub for_each: Option<String>,
    #[serde(default, rename = "as")]
    pub as_name: Option<String>,
}

fn default_max_iterations() -> u64 {
    1000
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IfStep {
    pub condition: String,
    #[serde(default)]
    pub then: Vec<Step>,
    #[serde(default, rename = "else")]
    pub otherwise: Vec<Step>,
}

/// A pause on its own.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThinkStep {
    pub think_time: ThinkTime,
}

/// Ends the iteration here.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndIterationStep {}

/// Takes a value out of a response into a VU variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Extractor {
    pub var: String,
    pub from: ExtractFrom,
    #[serde(default)]
    pub expression: Option<String>,
    #[serde(default)]
    pub pick: Pick,
    #[serde(default)]
    pub default: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtractFrom {
    Json,
    Regex,
    Header,
    Status,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pick {
    #[default]
    First,
    Random,
    All,
}

/// A condition a response must meet; a failed check counts the request as `check_failed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    Status {
        #[serde(rename = "in")]
        allowed: Vec<u16>,
    },
    Json {
        expression: String,
        #[serde(default)]
        equals: Option<Value>,
    },
    BodyContains {
        text: String,
    },
    BodyMatches {
        pattern: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnCheckFailure {
    #[default]
    Continue,
    EndIteration,
}

/// Rows of test data, handed to VUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Feeder {
    pub name: String,
    pub path: String,
    /// Inferred from the file's extension when left out (`.csv`; `.jsonl`, `.ndjson`).
    #[serde(default)]
    pub format: Option<FeederFormat>,
    #[serde(default)]
    pub mode: FeederMode,
}

impl Feeder {
    /// The format given, or the one the file's extension says.
    pub fn format(&self) -> Option<FeederFormat> {
        self.format.or_else(|| {
            let extension = self.path.rsplit_once('.').map(|(_, extension)| extension.to_ascii_lowercase())?;
            match extension.as_str() {
                "csv" => Some(FeederFormat::Csv),
                "jsonl" | "ndjson" => Some(FeederFormat::Jsonl),
                _ => None,
            }
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeederFormat {
    Csv,
    Jsonl,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeederMode {
    #[default]
    Circular,
    Random,
    Unique,
}

impl Step {
    /// The steps nested directly inside this one, in order.
    pub fn children(&self) -> Vec<&[Step]> {
        match self {
            Step::Group(group) => vec![&group.steps],
            Step::Parallel(parallel) => vec![&parallel.steps],
            Step::Choice(choice) => choice.branches.iter().map(|branch| branch.steps.as_slice()).collect(),
            Step::Loop(loop_step) => vec![&loop_step.steps],
            Step::If(if_step) => vec![&if_step.then, &if_step.otherwise],
            Step::Http(_) | Step::Sql(_) | Step::Think(_) | Step::EndIteration(_) => Vec::new(),
            Step::Connect(_) | Step::Send(_) | Step::Receive(_) | Step::Ping(_) | Step::Stream(_) | Step::Close(_) => {
                Vec::new()
            }
        }
    }
}

//! The scenario interpreter: a plan's step tree compiled once into [`Node`]s that VUs walk.
//!
//! Everything that can be prepared before the run is: templates are parsed into one shared
//! minijinja environment (looked up by name when rendered), JSONPath expressions and regular
//! expressions are compiled, requests with no templated part are encoded to bytes, feeders are
//! read into memory. What is left per request is rendering the templated parts, reading the
//! response, and applying the step's extractors and checks.

mod compile;
mod cookies;
mod feeder;

pub(crate) use compile::{compile_scenario, NodeCompiler};
pub(crate) use cookies::CookieJar;
pub(crate) use feeder::{CsvRow, Feeder};

use crate::response_rules::{CompiledCheck, CompiledExtractor, JsonScope};
use crate::template::{JsonTemplate, Text};
use horde_plan::ThinkTime;
use std::time::Duration;

#[derive(Debug, Clone)]
pub(crate) enum Body {
    None,
    Text(Text),
    Json(JsonTemplate),
}

/// One HTTP request step, ready to send.
#[derive(Debug)]
pub(crate) struct RequestNode {
    pub global_index: usize,
    pub method: String,
    pub is_head: bool,
    pub path: Text,
    /// Target, scenario and step headers in that order (later ones win).
    pub headers: Vec<(String, Text)>,
    pub body: Body,
    /// The whole request's bytes when nothing in it is templated (sent as is while the VU has
    /// no cookie to add), by instance index of the target (`CompiledPlan::endpoints`).
    pub fixed: Option<Box<[Vec<u8>]>>,
    /// With `target.http_version` "2" or "auto": the same fixed request in HTTP/2's form, by
    /// instance, so that a send does not read its bytes back into that form.
    pub fixed_h2: Option<Box<[crate::transport::http::H2Request]>>,
    pub think_time: Option<ThinkTime>,
    pub extractors: Vec<CompiledExtractor>,
    pub checks: Vec<CompiledCheck>,
    /// What of a JSON answer its extractors and checks read: the part that is parsed.
    pub json_scope: JsonScope,
    /// With a status check, the check decides which statuses are fine; without, >= 400 is an error.
    pub has_status_check: bool,
    pub end_on_check_failure: bool,
    pub keep_body: bool,
    pub keep_headers: bool,
}

#[derive(Debug)]
pub(crate) enum LoopMode {
    Count(u64),
    /// The condition, and the most passes.
    While(Condition, u64),
    ForEach {
        variable: String,
        item: String,
        max: u64,
    },
}

/// An `if` or `while` condition, compiled.
#[derive(Debug)]
pub(crate) struct Condition {
    /// The template that renders "1" when the condition holds.
    pub template: String,
    /// The variable's name, for a condition that is a variable alone: its value's truth is read
    /// without rendering (`Vu::condition`).
    pub variable: Option<String>,
}

/// A compiled step.
#[derive(Debug)]
pub(crate) enum Node {
    Request(Box<RequestNode>),
    /// A `sql` step (the `postgres` transport, `crate::transport::sql`).
    Sql(Box<crate::transport::sql::SqlNode>),
    /// A message step (`tcp://`, `udp://`: `crate::transport::message`).
    Message(Box<crate::transport::message::MessageNode>),
    Group {
        global_index: usize,
        children: Vec<Node>,
    },
    /// A `parallel` group: requests sent at once (`vu/parallel_step.rs`), the pass timed under
    /// `global_index` like a group's.
    Parallel {
        global_index: usize,
        requests: Vec<RequestNode>,
    },
    /// Branches with the running sum of their weights, for one draw per pass.
    Choice {
        cumulative_weights: Vec<f64>,
        branches: Vec<Vec<Node>>,
    },
    Loop {
        mode: LoopMode,
        children: Vec<Node>,
    },
    If {
        condition: Condition,
        then: Vec<Node>,
        otherwise: Vec<Node>,
    },
    Think(ThinkTime),
    EndIteration,
}

/// Whether the metrics entry of a global step index is a request or a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepKind {
    Request,
    Group,
}

impl StepKind {
    pub fn label(self) -> &'static str {
        match self {
            StepKind::Request => "request",
            StepKind::Group => "group",
        }
    }

    /// The kind a snapshot's label names (a snapshot read back from Python).
    pub fn from_label(label: &str) -> Option<StepKind> {
        [StepKind::Request, StepKind::Group].into_iter().find(|kind| kind.label() == label)
    }
}

/// A scenario ready to run.
#[derive(Debug)]
pub(crate) struct ScenarioProgram {
    pub setup: Vec<Node>,
    pub steps: Vec<Node>,
    pub teardown: Vec<Node>,
    pub pacing: Option<Duration>,
    pub feeders: Vec<Feeder>,
    /// Where a scenario-level error (an exhausted feeder) is counted: its first request step.
    pub first_request_index: Option<usize>,
}

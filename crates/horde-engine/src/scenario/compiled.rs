//! The plan prepared for running: scenarios compiled into programs, workloads into profiles,
//! steps numbered globally. Built once per run and shared read-only by every worker.

use crate::error::EngineError;
use crate::scenario::interpreter::{compile_scenario, NodeCompiler, ScenarioProgram, StepKind};
use crate::time::workload::Profile;
use crate::transport::http::{Connector, Endpoint, Http2Mode, ReadLimits, SourceAddresses};
use horde_plan::{Arrivals, HttpVersion, Plan, Workload};
use std::sync::Arc;
use std::time::Duration;

pub(crate) enum CompiledWorkload {
    Closed(Profile),
    Open { profile: Profile, max_vus: u64, arrivals: Arrivals },
}

pub(crate) struct CompiledScenario {
    pub program: ScenarioProgram,
    pub workload: CompiledWorkload,
    /// Added to the scenario's own VU numbers so that `vu` is unique in the whole run: the sum
    /// of the earlier scenarios' peak VU counts.
    pub vu_offset: u64,
}

pub(crate) struct CompiledPlan {
    pub scenarios: Vec<CompiledScenario>,
    /// (scenario name, step or group name, kind) by global step index.
    pub step_names: Vec<(String, String, StepKind)>,
    /// Each step's checks in words, by global step index (the checks summary's names).
    pub check_labels: Vec<Vec<String>>,
    /// The target's instances, by instance index: `base_url` first, then `target.instances`.
    /// Never empty. A VU talks to one of them only (see `Vu::start`).
    pub endpoints: Vec<Endpoint>,
    /// One per endpoint, same index.
    pub connectors: Vec<Connector>,
    /// `target.connections: {pool: N}`: the generator's pool size; `None` when each VU owns its
    /// connection.
    pub pool_size: Option<u64>,
    /// A `postgresql://` target's connections (its `endpoints` then only number the instances).
    pub sql: Option<crate::transport::sql::SqlTarget>,
    /// A `tcp://`, `udp://`, `kcp://`, `ws://` or `wss://` target's transport and framing.
    pub message: Option<crate::transport::message::MessageTarget>,
    /// Every template of the plan, by name; shared by all workers (rendering is read-only).
    pub environment: minijinja::Environment<'static>,
    /// The plan's parameters, as templates see them (`params.NAME`).
    pub params: minijinja::Value,
    /// Memo slots a VU keeps for templates whose rendering changes only with its variables.
    pub memo_slots: usize,
    /// The memo slots whose template reads each variable: what a new value of it makes stale.
    pub memo_readers: std::collections::HashMap<String, Vec<usize>>,
    pub request_timeout: Duration,
    /// `target.max_response_header_bytes` and `target.max_kept_body_bytes`.
    pub read_limits: ReadLimits,
    /// `target.connect_backoff`: closed-model VUs pause after a failed connect.
    pub connect_backoff: bool,
    /// `target.http_version` "2" or "auto"; `None` for HTTP/1.1 only, whose requests then take
    /// the HTTP/1.1 client's path with nothing more to decide.
    pub http2: Option<Http2Mode>,
    /// `target.http2`, or its defaults.
    pub http2_settings: horde_plan::Http2Settings,
    /// `target.parallel_connections`: the lanes a `parallel` group runs at once over HTTP/1.1.
    pub parallel_connections: usize,
    pub graceful_stop: Duration,
    /// When the longest scenario's stages end.
    pub duration: Duration,
}

impl CompiledPlan {
    pub fn compile(plan: &Plan) -> Result<Self, EngineError> {
        let endpoints = std::iter::once(&plan.target.base_url)
            .chain(&plan.target.instances)
            .map(|url| {
                Endpoint::parse(&crate::transport::message::endpoint_url(&crate::transport::sql::endpoint_url(url)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let connect_timeout = Duration::from_secs_f64(plan.target.connect_timeout_ms / 1000.0);
        let sources = plan
            .target
            .source_addresses
            .iter()
            .map(|text| {
                text.parse()
                    .map_err(|_| EngineError::Setup(format!("target.source_addresses: '{text}' is not an IP address")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let sources = Arc::new(SourceAddresses::new(sources));
        let extra_roots = match &plan.target.ca_file {
            Some(path) => crate::transport::http::read_ca_file(path)?,
            None => Vec::new(),
        };
        let http2 = match plan.target.http_version {
            HttpVersion::Http1 => None,
            HttpVersion::Http2 => Some(Http2Mode::Insist),
            HttpVersion::Auto => Some(Http2Mode::Alpn),
        };
        let connectors = endpoints
            .iter()
            .map(|endpoint| {
                Connector::new(
                    endpoint.clone(),
                    connect_timeout,
                    plan.target.insecure,
                    http2.is_some(),
                    &extra_roots,
                    Arc::clone(&sources),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let sql = crate::transport::sql::SqlTarget::from_plan(&plan.target)?;
        let mut compiler = NodeCompiler::new(&endpoints, &plan.target.headers);
        compiler.http2 = http2.is_some();
        compiler.websocket = horde_plan::MessageTransport::of_url(&plan.target.base_url)
            .is_some_and(horde_plan::MessageTransport::is_websocket);
        let mut scenarios = Vec::new();
        let mut vu_offset = 0;
        for scenario in &plan.scenarios {
            let program = compile_scenario(&mut compiler, scenario)?;
            let workload = match &scenario.workload {
                Workload::Closed { start_vus, stages } => CompiledWorkload::Closed(Profile::closed(*start_vus, stages)),
                Workload::Open { start_rate_per_s, stages, max_vus, arrivals } => CompiledWorkload::Open {
                    profile: Profile::open(*start_rate_per_s, stages),
                    max_vus: *max_vus,
                    arrivals: *arrivals,
                },
            };
            let peak = scenario.workload.peak_vus();
            check_unique_feeders(&scenario.name, &program, peak)?;
            scenarios.push(CompiledScenario { program, workload, vu_offset });
            vu_offset += peak;
        }
        let NodeCompiler { environment, steps: step_names, check_labels, memo_slots, memo_readers, .. } = compiler;
        Ok(Self {
            scenarios,
            step_names,
            check_labels,
            connectors,
            // A postgresql:// target's pool is its own (`SqlTarget::pool_size`).
            pool_size: plan.target.connections.pool_size().filter(|_| sql.is_none()),
            sql,
            message: crate::transport::message::MessageTarget::from_plan(&plan.target),
            environment,
            params: minijinja::Value::from_serialize(&plan.parameters),
            memo_slots,
            memo_readers,
            request_timeout: Duration::from_secs_f64(plan.target.request_timeout_ms / 1000.0),
            read_limits: ReadLimits {
                max_head_bytes: usize::try_from(plan.target.max_response_header_bytes).unwrap_or(usize::MAX),
                max_kept_body_bytes: usize::try_from(plan.target.max_kept_body_bytes).unwrap_or(usize::MAX),
            },
            connect_backoff: plan.target.connect_backoff,
            http2,
            http2_settings: plan.target.http2.unwrap_or_default(),
            parallel_connections: usize::try_from(plan.target.parallel_connections).unwrap_or(usize::MAX).max(1),
            graceful_stop: Duration::from_secs_f64(plan.graceful_stop_s),
            duration: Duration::from_secs_f64(plan.duration_s()),
            endpoints,
        })
    }
}

/// A unique feeder needs a row for every VU the workload can start (`peak` of them); known
/// before the run.
fn check_unique_feeders(scenario: &str, program: &ScenarioProgram, peak: u64) -> Result<(), EngineError> {
    for feeder in program.feeders.iter().filter(|feeder| feeder.mode == horde_plan::FeederMode::Unique) {
        if peak > feeder.len() as u64 {
            return Err(EngineError::Setup(format!(
                "scenario '{scenario}': unique feeder '{}' has {} rows for up to {peak} VUs",
                feeder.name,
                feeder.len()
            )));
        }
    }
    Ok(())
}

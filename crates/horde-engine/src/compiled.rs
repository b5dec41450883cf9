//! The plan prepared for running: requests encoded, profiles built, steps numbered globally.
//! Built once per run and shared read-only by every worker.

use crate::http::{Connector, EncodedRequest, Endpoint};
use crate::workload::Profile;
use crate::EngineError;
use horde_plan::{Plan, ThinkTime, Workload};
use std::time::Duration;

pub(crate) struct CompiledStep {
    /// Index into the recorders' step list (all scenarios' steps, in plan order).
    pub global_index: usize,
    pub request: EncodedRequest,
    pub think_time: Option<ThinkTime>,
}

pub(crate) enum CompiledWorkload {
    Closed(Profile),
    Open { profile: Profile, max_vus: u64 },
}

pub(crate) struct CompiledScenario {
    pub steps: Vec<CompiledStep>,
    pub workload: CompiledWorkload,
}

pub(crate) struct CompiledPlan {
    pub scenarios: Vec<CompiledScenario>,
    /// (scenario name, step name) by global step index.
    pub step_names: Vec<(String, String)>,
    pub connector: Connector,
    pub request_timeout: Duration,
    pub graceful_stop: Duration,
    /// When the longest scenario's stages end.
    pub duration: Duration,
}

impl CompiledPlan {
    pub fn compile(plan: &Plan) -> Result<Self, EngineError> {
        let endpoint = Endpoint::parse(&plan.target.base_url)?;
        let connector = Connector::new(
            endpoint.clone(),
            Duration::from_secs_f64(plan.target.connect_timeout_ms / 1000.0),
            plan.target.insecure,
        )?;
        let mut step_names = Vec::new();
        let mut scenarios = Vec::new();
        for scenario in &plan.scenarios {
            let steps = scenario
                .steps
                .iter()
                .map(|step| {
                    step_names.push((scenario.name.clone(), step.name.clone()));
                    CompiledStep {
                        global_index: step_names.len() - 1,
                        request: EncodedRequest::encode(&endpoint, &plan.target.headers, step),
                        think_time: step.think_time,
                    }
                })
                .collect();
            let workload = match &scenario.workload {
                Workload::Closed { start_vus, stages } => CompiledWorkload::Closed(Profile::closed(*start_vus, stages)),
                Workload::Open { start_rate_per_s, stages, max_vus } => CompiledWorkload::Open {
                    profile: Profile::open(*start_rate_per_s, stages),
                    max_vus: *max_vus,
                },
            };
            scenarios.push(CompiledScenario { steps, workload });
        }
        Ok(Self {
            scenarios,
            step_names,
            connector,
            request_timeout: Duration::from_secs_f64(plan.target.request_timeout_ms / 1000.0),
            graceful_stop: Duration::from_secs_f64(plan.graceful_stop_s),
            duration: Duration::from_secs_f64(plan.duration_s()),
        })
    }

    /// What the workload models ask for at `elapsed_s`: (VUs of closed scenarios, rate of open ones).
    pub fn asked_at(&self, elapsed_s: f64) -> (u64, Option<f64>) {
        let mut vus = 0;
        let mut rate = None;
        for scenario in &self.scenarios {
            match &scenario.workload {
                CompiledWorkload::Closed(profile) => vus += profile.vus_at(elapsed_s),
                CompiledWorkload::Open { profile, .. } => {
                    *rate.get_or_insert(0.0) += profile.level_at(elapsed_s);
                }
            }
        }
        (vus, rate)
    }
}

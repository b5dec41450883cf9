//! Semantic checks of a decoded plan, all reported at once.
//!
//! The rules mirror the pydantic validators in `python/horde/plan.py`; a plan that pydantic
//! accepts must pass here, and the tests in `tests/` feed both sides the same bad plans.

use crate::{
    HttpStep, Plan, Scenario, ThinkTime, Workload, MAX_GRACEFUL_STOP_S, MAX_RATE_PER_S, MAX_STAGE_DURATION_S,
    MAX_THINK_TIME_MS, MAX_TIMEOUT_MS, MAX_VUS, PLAN_VERSION,
};
use std::collections::HashSet;
use std::fmt;

/// One problem in a plan, located by its path (`scenarios[0].steps[1].path`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PlanError {
    pub path: String,
    pub message: String,
}

impl PlanError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), message: message.into() }
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(formatter, "{}", self.message)
        } else {
            write!(formatter, "{}: {}", self.path, self.message)
        }
    }
}

/// serde_path_to_error writes the root as `.`; pydantic writes nothing.
pub(crate) fn pydantic_path(serde_path: &str) -> String {
    if serde_path == "." {
        String::new()
    } else {
        serde_path.to_owned()
    }
}

const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Collects problems while walking the plan.
struct Problems(Vec<PlanError>);

impl Problems {
    fn push(&mut self, path: String, message: impl Into<String>) {
        self.0.push(PlanError::new(path, message));
    }

    /// In (0, max].
    fn positive(&mut self, path: String, value: f64, max: f64) {
        if !(value.is_finite() && value > 0.0) {
            self.push(path, format!("must be greater than 0 (got {value})"));
        } else if value > max {
            self.push(path, format!("must be at most {max} (got {value})"));
        }
    }

    /// In [0, max].
    fn non_negative(&mut self, path: String, value: f64, max: f64) {
        if !(value.is_finite() && value >= 0.0) {
            self.push(path, format!("must be 0 or more (got {value})"));
        } else if value > max {
            self.push(path, format!("must be at most {max} (got {value})"));
        }
    }

    fn vus(&mut self, path: String, value: u64) {
        if value > MAX_VUS {
            self.push(path, format!("must be at most {MAX_VUS} (got {value})"));
        }
    }
}

impl Plan {
    /// Every semantic problem of the plan; empty when the plan can run.
    pub fn validate(&self) -> Vec<PlanError> {
        let mut problems = Problems(Vec::new());
        if self.version != PLAN_VERSION {
            problems.push(
                "version".into(),
                format!("unsupported plan version {}; this engine reads version {PLAN_VERSION}", self.version),
            );
        }
        problems.non_negative("graceful_stop_s".into(), self.graceful_stop_s, MAX_GRACEFUL_STOP_S);
        check_base_url(&mut problems, &self.target.base_url);
        check_headers(&mut problems, "target.headers", &self.target.headers);
        problems.positive("target.connect_timeout_ms".into(), self.target.connect_timeout_ms, MAX_TIMEOUT_MS);
        problems.positive("target.request_timeout_ms".into(), self.target.request_timeout_ms, MAX_TIMEOUT_MS);
        if self.scenarios.is_empty() {
            problems.push("scenarios".into(), "must hold at least one scenario");
        }
        let mut names = HashSet::new();
        for (index, scenario) in self.scenarios.iter().enumerate() {
            let path = format!("scenarios[{index}]");
            if !names.insert(scenario.name.as_str()) {
                problems.push(format!("{path}.name"), format!("duplicate scenario name '{}'", scenario.name));
            }
            check_scenario(&mut problems, &path, scenario);
        }
        problems.0
    }
}

fn check_base_url(problems: &mut Problems, url: &str) {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    match rest {
        None => problems.push("target.base_url".into(), format!("'{url}' must start with http:// or https://")),
        Some(rest) => {
            let authority = rest.split('/').next().unwrap_or("");
            if authority.is_empty() || authority.starts_with(':') {
                problems.push("target.base_url".into(), format!("'{url}' has no host"));
            }
            if authority.contains('@') {
                problems.push("target.base_url".into(), "base_url must not carry credentials (user:password@)");
            }
        }
    }
}

/// RFC 9110 token characters: what a header name may contain.
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

fn check_headers(problems: &mut Problems, path: &str, headers: &[(String, String)]) {
    for (name, value) in headers {
        if !is_token(name) {
            problems.push(format!("{path}.{name}"), format!("'{name}' is not a valid header name"));
        }
        if value.bytes().any(|byte| byte == b'\r' || byte == b'\n') {
            problems.push(format!("{path}.{name}"), "header values cannot contain line breaks");
        }
    }
}

fn check_scenario(problems: &mut Problems, path: &str, scenario: &Scenario) {
    if scenario.name.is_empty() {
        problems.push(format!("{path}.name"), "must not be empty");
    }
    if scenario.steps.is_empty() {
        problems.push(format!("{path}.steps"), "must hold at least one step");
    }
    let mut names = HashSet::new();
    for (index, step) in scenario.steps.iter().enumerate() {
        let step_path = format!("{path}.steps[{index}]");
        if !names.insert(step.name.as_str()) {
            problems.push(format!("{step_path}.name"), format!("duplicate step name '{}'", step.name));
        }
        check_step(problems, &step_path, step);
    }
    check_workload(problems, &format!("{path}.workload"), &scenario.workload);
}

fn check_step(problems: &mut Problems, path: &str, step: &HttpStep) {
    if step.name.is_empty() {
        problems.push(format!("{path}.name"), "must not be empty");
    }
    if !METHODS.contains(&step.method.as_str()) {
        problems.push(
            format!("{path}.method"),
            format!("'{}' is not one of {}", step.method, METHODS.join(", ")),
        );
    }
    if !step.path.starts_with('/') {
        problems.push(format!("{path}.path"), format!("'{}' must start with '/'", step.path));
    }
    if step.path.bytes().any(|byte| byte.is_ascii_whitespace() || byte.is_ascii_control()) {
        problems.push(format!("{path}.path"), "must not contain spaces or control characters");
    }
    check_headers(problems, &format!("{path}.headers"), &step.headers);
    if let Some(think_time) = step.think_time {
        let think_path = format!("{path}.think_time");
        match think_time {
            ThinkTime::Constant { duration_ms } => {
                problems.non_negative(format!("{think_path}.duration_ms"), duration_ms, MAX_THINK_TIME_MS);
            }
            ThinkTime::Uniform { min_ms, max_ms } => {
                problems.non_negative(format!("{think_path}.min_ms"), min_ms, MAX_THINK_TIME_MS);
                problems.non_negative(format!("{think_path}.max_ms"), max_ms, MAX_THINK_TIME_MS);
                if min_ms > max_ms {
                    problems.push(format!("{think_path}.max_ms"), format!("must be at least min_ms ({min_ms})"));
                }
            }
            ThinkTime::Exponential { mean_ms } => {
                problems.non_negative(format!("{think_path}.mean_ms"), mean_ms, MAX_THINK_TIME_MS);
            }
        }
    }
}

fn check_workload(problems: &mut Problems, path: &str, workload: &Workload) {
    let durations: Vec<f64> = match workload {
        Workload::Closed { start_vus, stages } => {
            problems.vus(format!("{path}.start_vus"), *start_vus);
            for (index, stage) in stages.iter().enumerate() {
                problems.vus(format!("{path}.stages[{index}].vus"), stage.vus);
            }
            stages.iter().map(|s| s.duration_s).collect()
        }
        Workload::Open { start_rate_per_s, stages, max_vus } => {
            problems.non_negative(format!("{path}.start_rate_per_s"), *start_rate_per_s, MAX_RATE_PER_S);
            if *max_vus == 0 {
                problems.push(format!("{path}.max_vus"), "must be at least 1");
            }
            problems.vus(format!("{path}.max_vus"), *max_vus);
            for (index, stage) in stages.iter().enumerate() {
                problems.non_negative(format!("{path}.stages[{index}].rate_per_s"), stage.rate_per_s, MAX_RATE_PER_S);
            }
            stages.iter().map(|s| s.duration_s).collect()
        }
    };
    if durations.is_empty() {
        problems.push(format!("{path}.stages"), "must hold at least one stage");
    }
    for (index, duration_s) in durations.iter().enumerate() {
        problems.positive(format!("{path}.stages[{index}].duration_s"), *duration_s, MAX_STAGE_DURATION_S);
    }
}

#[cfg(test)]
mod tests {
    use crate::decode;

    fn plan_json(step: &str, workload: &str) -> String {
        format!(
            r#"{{"version": 1, "target": {{"base_url": "http://127.0.0.1:8080"}},
                "scenarios": [{{"name": "s", "steps": [{step}], "workload": {workload}}}]}}"#
        )
    }

    const STEP: &str = r#"{"name": "home", "method": "GET", "path": "/"}"#;
    const CLOSED: &str = r#"{"type": "closed", "stages": [{"duration_s": 1, "vus": 2}]}"#;

    #[test]
    fn valid_plan_has_no_problems() {
        let plan = decode(&plan_json(STEP, CLOSED)).unwrap();
        assert_eq!(plan.validate(), vec![]);
        assert_eq!(plan.name, "plan");
        assert_eq!(plan.scenarios[0].workload.peak_vus(), 2);
    }

    #[test]
    fn unknown_key_is_located() {
        let step = r#"{"name": "home", "method": "GET", "path": "/", "pth": "/x"}"#;
        let error = decode(&plan_json(step, CLOSED)).unwrap_err();
        assert_eq!(error.path, "scenarios[0].steps[0].pth");
        assert!(error.message.contains("unknown field `pth`"), "{}", error.message);
    }

    #[test]
    fn unknown_key_inside_a_tagged_enum_is_located() {
        let workload = r#"{"type": "closed", "stages": [{"duration_s": 1, "vus": 2}], "colour": "red"}"#;
        let error = decode(&plan_json(STEP, workload)).unwrap_err();
        assert_eq!(error.path, "scenarios[0].workload.colour");
    }

    #[test]
    fn numbers_have_upper_bounds() {
        let step = r#"{"name": "home", "method": "GET", "path": "/", "think_time": {"type": "constant", "duration_ms": 1e300}}"#;
        let workload = r#"{"type": "open", "stages": [{"duration_s": 1e9, "rate_per_s": 1e10}], "max_vus": 100000000}"#;
        let paths: Vec<String> = decode(&plan_json(step, workload)).unwrap().validate().into_iter().map(|p| p.path).collect();
        assert_eq!(
            paths,
            vec![
                "scenarios[0].steps[0].think_time.duration_ms",
                "scenarios[0].workload.max_vus",
                "scenarios[0].workload.stages[0].rate_per_s",
                "scenarios[0].workload.stages[0].duration_s",
            ]
        );
    }

    #[test]
    fn every_problem_is_reported() {
        let step = r#"{"name": "home", "method": "get", "path": "x",
                       "think_time": {"type": "uniform", "min_ms": 5, "max_ms": 1}}"#;
        let workload = r#"{"type": "open", "stages": [{"duration_s": 0, "rate_per_s": -1}], "max_vus": 0}"#;
        let plan = decode(&plan_json(step, workload)).unwrap();
        let paths: Vec<String> = plan.validate().into_iter().map(|p| p.path).collect();
        assert_eq!(
            paths,
            vec![
                "scenarios[0].steps[0].method",
                "scenarios[0].steps[0].path",
                "scenarios[0].steps[0].think_time.max_ms",
                "scenarios[0].workload.max_vus",
                "scenarios[0].workload.stages[0].rate_per_s",
                "scenarios[0].workload.stages[0].duration_s",
            ]
        );
    }

    #[test]
    fn duplicate_names_and_bad_url() {
        let json = r#"{"version": 2, "target": {"base_url": "ftp://x", "headers": {"bad name": "v"}},
            "scenarios": [
              {"name": "a", "steps": [{"name": "s", "method": "GET", "path": "/"},
                                      {"name": "s", "method": "GET", "path": "/"}],
               "workload": {"type": "closed", "stages": []}},
              {"name": "a", "steps": [{"name": "s", "method": "GET", "path": "/"}],
               "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]}}]}"#;
        let paths: Vec<String> = decode(json).unwrap().validate().into_iter().map(|p| p.path).collect();
        assert_eq!(
            paths,
            vec![
                "version",
                "target.base_url",
                "target.headers.bad name",
                "scenarios[0].steps[1].name",
                "scenarios[0].workload.stages",
                "scenarios[1].name",
            ]
        );
    }

    #[test]
    fn headers_keep_their_order() {
        let json = r#"{"version": 1, "target": {"base_url": "https://h", "headers": {"b": "1", "a": "2"}},
            "scenarios": [{"name": "s", "steps": [{"name": "x", "method": "GET", "path": "/"}],
            "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]}}]}"#;
        let plan = decode(json).unwrap();
        assert_eq!(plan.target.headers, vec![("b".into(), "1".into()), ("a".into(), "2".into())]);
        let again = serde_json::to_string(&plan).unwrap();
        assert_eq!(decode(&again).unwrap(), plan);
    }
}

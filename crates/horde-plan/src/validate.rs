//! Semantic checks of a decoded plan, all reported at once.
//!
//! The rules mirror the pydantic validators in `python/horde/plan.py`; a plan that pydantic
//! accepts must pass here, and the tests in `tests/` feed both sides the same bad plans.

use crate::{
    templates, Check, ExtractFrom, HttpStep, LoopStep, Plan, Scenario, Step, Target, ThinkTime, Workload,
    MAX_GRACEFUL_STOP_S, MAX_RATE_PER_S, MAX_STAGE_DURATION_S, MAX_STEP_DEPTH, MAX_THINK_TIME_MS, MAX_TIMEOUT_MS,
    MAX_VUS, MAX_WEIGHT, PLAN_VERSION,
};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::OnceLock;

mod message;
mod sql;
mod structure;
mod target;

pub use structure::scenario_structure_problems;

/// One problem in a plan, located by its path (`scenarios[0].steps[1].path`): what is wrong,
/// and, where the rule knows it, what to write instead (`hint`, shown under the message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PlanError {
    pub path: String,
    pub message: String,
    pub hint: Option<String>,
}

impl PlanError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), message: message.into(), hint: None }
    }

    /// The same problem, with what to do about it.
    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
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

/// A template that calls `supply("what")` stands for something the plan's author must still
/// give: a request body, a header, a credential that the source the plan was written from
/// could not hold (`horde profile` writes them for an access log's POST bodies). Nothing
/// renders it: the plan is reported, at each one's location with what to give, until every one
/// is replaced. This is the rule's one place; `horde profile` reads its problems by the prefix.
pub const SUPPLY: &str = "supply";
/// How each such problem's message begins.
pub const SUPPLY_PREFIX: &str = "to supply";

/// What to do about a variable no earlier part of the scenario sets.
const UNKNOWN_VARIABLE_HINT: &str = "set it before it is used: an earlier step's extract, a feeder (by its name), a \
loop's 'as', or a plan parameter ('parameters:', -p NAME=VALUE); vu and iteration are every VU's own";
/// What a template and an expression may hold (docs/plan-reference.md says it at length).
const TEMPLATE_HINT: &str = "each {{ ... }} holds a name or an expression over the VU's variables, params, vu, \
iteration and random_int, random_choice, uuid, now_ms (docs/plan-reference.md, 'Templates and expressions')";
const EXPRESSION_HINT: &str = "a condition is an expression without {{ }}, e.g. 'iteration > 1' or 'token is \
defined' (docs/plan-reference.md, 'Templates and expressions')";

/// Where a rule with no hint of its own sends the reader: the key's entry in the reference.
pub(crate) fn reference_hint(path: &str) -> String {
    let key = path.rsplit('.').next().unwrap_or(path);
    let key = key.split('[').next().unwrap_or(key);
    if key.is_empty() {
        "docs/plan-reference.md describes every key of a plan".to_owned()
    } else {
        format!("docs/plan-reference.md describes '{key}'")
    }
}

/// Collects problems while walking the plan.
struct Problems(Vec<PlanError>);

impl Problems {
    /// A problem whose rule has no hint of its own: the hint points at the key's reference.
    fn push(&mut self, path: String, message: impl Into<String>) {
        let hint = reference_hint(&path);
        self.0.push(PlanError::new(path, message).with_hint(hint));
    }

    /// A problem with what to do about it: the plan's author reads the hint under the message.
    fn push_hint(&mut self, path: String, message: impl Into<String>, hint: impl Into<String>) {
        self.0.push(PlanError::new(path, message).with_hint(hint));
    }

    /// In (0, max].
    fn positive(&mut self, path: String, value: f64, max: f64) {
        if !(value.is_finite() && value > 0.0) {
            self.push(path, format!("must be greater than 0 (got the number {value})"));
        } else if value > max {
            self.push(path, format!("must be at most {max} (got the number {value})"));
        }
    }

    /// In [0, max].
    fn non_negative(&mut self, path: String, value: f64, max: f64) {
        if !(value.is_finite() && value >= 0.0) {
            self.push(path, format!("must be 0 or more (got the number {value})"));
        } else if value > max {
            self.push(path, format!("must be at most {max} (got the number {value})"));
        }
    }

    fn vus(&mut self, path: String, value: u64) {
        if value > MAX_VUS {
            self.push(path, format!("must be at most {MAX_VUS} (got the number {value})"));
        }
    }
}

impl Plan {
    /// Every semantic problem of the plan; empty when the plan can run.
    pub fn validate(&self) -> Vec<PlanError> {
        let mut problems = Problems(Vec::new());
        if self.version != PLAN_VERSION {
            problems.push("version".into(), format!("unsupported plan version (got the number {})", self.version));
        }
        problems.non_negative("graceful_stop_s".into(), self.graceful_stop_s, MAX_GRACEFUL_STOP_S);
        check_target(&mut problems, &self.target);
        sql::check_steps(&mut problems, self);
        message::check_scenarios(&mut problems, self);
        if self.scenarios.is_empty() {
            problems.push("scenarios".into(), "must hold at least one scenario");
        }
        let mut names: HashMap<&str, usize> = HashMap::new();
        for (index, scenario) in self.scenarios.iter().enumerate() {
            let path = format!("scenarios[{index}]");
            if let Some(first) = names.get(scenario.name.as_str()) {
                problems.push_hint(
                    format!("{path}.name"),
                    format!("duplicate scenario name '{}' (also at index {first})", scenario.name),
                    "give each scenario its own name; results are reported by scenario name",
                );
            } else {
                names.insert(scenario.name.as_str(), index);
            }
            check_scenario(&mut problems, &path, scenario);
        }
        problems.0
    }
}

/// The target's own problems, located under `target.`: its URLs (of any protocol), how VUs reach
/// it, and its options against its protocol; the part of a plan's check that reads nothing but
/// the target. The plan's Python types ask it as a target is built
/// (`horde._engine.target_problems`).
pub fn target_problems(target: &Target) -> Vec<PlanError> {
    let mut problems = Problems(Vec::new());
    check_target(&mut problems, target);
    problems.0
}

/// A workload's own problems (its levels' bounds, its stages), located under `workload.`; the
/// plan's Python types ask it as a workload is built (`horde._engine.workload_problems`).
pub fn workload_problems(workload: &Workload) -> Vec<PlanError> {
    let mut problems = Problems(Vec::new());
    check_workload(&mut problems, "workload", workload);
    problems.0
}

fn check_target(problems: &mut Problems, target: &Target) {
    if !crate::is_postgres_url(&target.base_url) && crate::MessageTransport::of_url(&target.base_url).is_none() {
        target::check_target_urls(problems, &target.base_url, &target.instances);
    }
    sql::check_target(problems, target);
    message::check_target(problems, target);
    target::check_connections(problems, target);
    check_headers(problems, "target.headers", &target.headers);
    problems.positive("target.connect_timeout_ms".into(), target.connect_timeout_ms, MAX_TIMEOUT_MS);
    problems.positive("target.request_timeout_ms".into(), target.request_timeout_ms, MAX_TIMEOUT_MS);
}

/// An http step's path: relative to the target's base URL, with no spaces or control characters
/// outside its template tags (inside `{{ }}` an expression may hold spaces). Whether it passed.
fn check_request_path(problems: &mut Problems, path: &str, request_path: &str) -> bool {
    static TAG: OnceLock<regex::Regex> = OnceLock::new();
    if !request_path.starts_with('/') {
        let hint = if request_path.contains("://") {
            "put the scheme and host in target.base_url and only the path here, e.g. '/login'".to_owned()
        } else {
            format!(
                "write the path relative to target.base_url, e.g. '/{}'",
                request_path.trim_start_matches(['.', '/'])
            )
        };
        problems.push_hint(path.to_owned(), format!("'{request_path}' must start with '/'"), hint);
        return false;
    }
    let tag = TAG.get_or_init(|| regex::Regex::new(r"(?s)\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}").expect("a valid pattern"));
    if tag.replace_all(request_path, "").bytes().any(|byte| byte <= b' ' || byte == 0x7f) {
        problems.push_hint(
            path.to_owned(),
            format!("'{request_path}' contains spaces or control characters"),
            "percent-encode them, e.g. a space as %20 (inside {{ }} spaces are fine)",
        );
        return false;
    }
    true
}

/// RFC 9110 token characters: what a header name may contain.
fn is_token(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

/// Header names are RFC 9110 tokens, each given once (case-insensitively, as servers read them);
/// values are one line (a line break would start a header the plan does not show).
fn check_headers(problems: &mut Problems, path: &str, headers: &[(String, String)]) {
    let mut seen: HashMap<String, &str> = HashMap::new();
    for (name, value) in headers {
        if !is_token(name) {
            problems.push_hint(
                format!("{path}.{name}"),
                format!("'{name}' is not a valid header name"),
                "header names are letters, digits and !#$%&'*+-.^_`|~ only, no spaces or colons, e.g. 'x-request-id'",
            );
        } else if let Some(first) = seen.get(&name.to_ascii_lowercase()) {
            problems.push_hint(
                format!("{path}.{name}"),
                format!("header '{name}' is given twice (also as '{first}')"),
                "header names are case-insensitive; keep one of them",
            );
        } else {
            seen.insert(name.to_ascii_lowercase(), name);
        }
        if value.bytes().any(|byte| byte == b'\r' || byte == b'\n') {
            problems.push_hint(
                format!("{path}.{name}"),
                "header values cannot contain line breaks",
                "write the value on one line (in YAML, avoid '|' and '>' block scalars here)",
            );
        }
    }
}

fn check_scenario(problems: &mut Problems, path: &str, scenario: &Scenario) {
    if scenario.name.is_empty() {
        problems.push(format!("{path}.name"), "must not be empty");
    }
    problems.positive(format!("{path}.weight"), scenario.weight, MAX_WEIGHT);
    check_headers(problems, &format!("{path}.headers"), &scenario.headers);
    if let Some(pacing_s) = scenario.pacing_s {
        problems.positive(format!("{path}.pacing_s"), pacing_s, MAX_STAGE_DURATION_S);
    }
    if scenario.steps.is_empty() {
        problems.push(format!("{path}.steps"), "must hold at least one step");
    }
    for (index, feeder) in scenario.feeders.iter().enumerate() {
        let feeder_path = format!("{path}.feeders[{index}]");
        if let Some((message, hint)) = templates::variable_name_problem(&feeder.name, "feeder name") {
            problems.push_hint(format!("{feeder_path}.name"), message, hint);
        }
        if feeder.path.is_empty() {
            problems.push(format!("{feeder_path}.path"), "must not be empty");
        } else if feeder.format().is_none() {
            problems.push(
                format!("{feeder_path}.format"),
                "cannot be told from the file's extension: give 'csv' or 'jsonl'",
            );
        }
    }
    let mut walker =
        StepWalker { problems, environment: templates::environment(), known: known_variables(scenario), depth: 0 };
    for (part, steps) in [("setup", &scenario.setup), ("steps", &scenario.steps), ("teardown", &scenario.teardown)] {
        walker.walk(&format!("{path}.{part}"), steps);
    }
    // The rules that span the step lists read the scenario as JSON, as they are asked of a
    // scenario the plan's Python types are building: one owner of each, whichever side asks.
    structure::check(walker.problems, &format!("{path}."), &serde_json::to_value(scenario).unwrap_or_default());
    check_workload(walker.problems, &format!("{path}.workload"), &scenario.workload);
}

/// Every name a template of this scenario may read: builtins, feeders, and every variable some
/// step of the scenario sets (an extractor's `var`, a `for_each` loop's `as`).
fn known_variables(scenario: &Scenario) -> HashSet<String> {
    fn collect(steps: &[Step], known: &mut HashSet<String>) {
        for step in steps {
            match step {
                Step::Http(http) => known.extend(http.extract.iter().map(|extractor| extractor.var.clone())),
                Step::Sql(sql) => known.extend(sql.extract.iter().map(|extractor| extractor.var.clone())),
                Step::Receive(receive) => known.extend(receive.extract.iter().map(|extractor| extractor.var.clone())),
                Step::Send(_) | Step::Ping(_) | Step::Stream(_) => {
                    known.insert(crate::SEQ_VARIABLE.to_owned());
                }
                Step::Loop(LoopStep { as_name: Some(name), .. }) => {
                    known.insert(name.clone());
                }
                _ => {}
            }
            for children in step.children() {
                collect(children, known);
            }
        }
    }
    let mut known: HashSet<String> = templates::BUILTIN_NAMES.iter().map(|name| (*name).to_owned()).collect();
    known.extend(scenario.feeders.iter().map(|feeder| feeder.name.clone()));
    for steps in [&scenario.setup, &scenario.steps, &scenario.teardown] {
        collect(steps, &mut known);
    }
    known
}

/// Walks a scenario's step tree in order, checking each step.
struct StepWalker<'a> {
    problems: &'a mut Problems,
    environment: minijinja::Environment<'static>,
    known: HashSet<String>,
    /// How deep the walk is (a top-level step is at depth 1); past MAX_STEP_DEPTH it goes no
    /// further (the structure's check says so).
    depth: usize,
}

impl StepWalker<'_> {
    fn walk(&mut self, path: &str, steps: &[Step]) {
        self.depth += 1;
        if self.depth <= MAX_STEP_DEPTH {
            for (index, step) in steps.iter().enumerate() {
                self.step(&format!("{path}[{index}]"), step);
            }
        }
        self.depth -= 1;
    }

    fn variable_name(&mut self, path: String, name: &str) {
        if let Some((message, hint)) = templates::variable_name_problem(name, "variable") {
            self.problems.push_hint(path, message, hint);
        }
    }

    /// A step's or group's name is given (that it is the scenario's only one of that name is
    /// the structure's rule).
    fn named(&mut self, path: &str, name: &str) {
        if name.is_empty() {
            self.problems.push(format!("{path}.name"), "must not be empty");
        }
    }

    fn template(&mut self, path: String, source: &str) {
        if !templates::is_template(source) {
            return;
        }
        match templates::template_variables(&self.environment, source) {
            Ok(mut names) => {
                if !self.known.contains(SUPPLY) && names.remove(SUPPLY) {
                    self.supply_problems(&path, source);
                }
                self.unknown_names(path, names)
            }
            Err(error) => self.problems.push_hint(path, format!("invalid template: {error}"), TEMPLATE_HINT),
        }
    }

    /// Each `supply("what")` in a template: what the plan's author must still give.
    fn supply_problems(&mut self, path: &str, source: &str) {
        static CALL: OnceLock<regex::Regex> = OnceLock::new();
        let call = CALL.get_or_init(|| {
            regex::Regex::new(r#"supply\(\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')\s*\)"#)
                .expect("a valid pattern")
        });
        let mut found = false;
        for what in call.captures_iter(source) {
            found = true;
            let text = what.get(1).or_else(|| what.get(2)).map_or("", |text| text.as_str());
            self.problems
                .push(path.to_owned(), format!("{SUPPLY_PREFIX}: {text}; put it in place of the supply(...) template"));
        }
        if !found {
            self.problems.push(
                path.to_owned(),
                format!("{SUPPLY_PREFIX}: a value; put it in place of the supply(...) template"),
            );
        }
    }

    fn expression(&mut self, path: String, source: &str) {
        if source.contains("{{") || source.contains("{%") {
            // A template where an expression goes: said as such, not as the syntax error it makes.
            self.problems.push_hint(
                path,
                format!("condition '{source}' is an expression, not a template"),
                "write it without {{ }}, e.g. 'gold >= 100 and buildings' (parameters {{ params.NAME }} are \
                 substituted before this check, so they are fine)",
            );
            return;
        }
        match templates::expression_variables(&self.environment, source) {
            Ok(names) => self.unknown_names(path, names),
            Err(error) => self.problems.push_hint(path, format!("invalid expression: {error}"), EXPRESSION_HINT),
        }
    }

    fn unknown_names(&mut self, path: String, names: HashSet<String>) {
        let mut unknown: Vec<String> = names.into_iter().filter(|name| !self.known.contains(name)).collect();
        unknown.sort();
        for name in unknown {
            self.problems.push_hint(
                path.clone(),
                format!("unknown variable '{name}': no step, feeder, loop or parameter sets it"),
                UNKNOWN_VARIABLE_HINT,
            );
        }
    }

    fn json_templates(&mut self, path: &str, value: &serde_json::Value) {
        match value {
            serde_json::Value::String(text) => self.template(path.to_owned(), text),
            serde_json::Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    self.json_templates(&format!("{path}[{index}]"), item);
                }
            }
            serde_json::Value::Object(fields) => {
                for (key, item) in fields {
                    self.json_templates(&format!("{path}.{key}"), item);
                }
            }
            _ => {}
        }
    }

    fn step(&mut self, path: &str, step: &Step) {
        match step {
            Step::Http(http) => self.http(path, http),
            Step::Sql(sql) => self.sql(path, sql),
            Step::Connect(_) | Step::Send(_) | Step::Receive(_) | Step::Ping(_) | Step::Stream(_) | Step::Close(_) => {
                self.message(path, step)
            }
            Step::Group(group) => {
                self.named(path, &group.name);
                if group.steps.is_empty() {
                    self.problems.push(format!("{path}.steps"), "must hold at least one step");
                }
                self.walk(&format!("{path}.steps"), &group.steps);
            }
            Step::Parallel(parallel) => self.parallel(path, parallel),
            Step::Choice(choice) => {
                if choice.branches.is_empty() {
                    self.problems.push(format!("{path}.branches"), "must hold at least one branch");
                }
                for (index, branch) in choice.branches.iter().enumerate() {
                    let branch_path = format!("{path}.branches[{index}]");
                    self.problems.positive(format!("{branch_path}.weight"), branch.weight, MAX_WEIGHT);
                    self.walk(&format!("{branch_path}.steps"), &branch.steps);
                }
            }
            Step::Loop(loop_step) => {
                if loop_step.steps.is_empty() {
                    self.problems.push(format!("{path}.steps"), "must hold at least one step");
                }
                if loop_step.count.is_some_and(|count| count > MAX_LOOP_COUNT) {
                    self.problems.push(format!("{path}.count"), format!("must be at most {MAX_LOOP_COUNT}"));
                }
                if loop_step.max_iterations == 0 || loop_step.max_iterations > MAX_LOOP_COUNT {
                    self.problems
                        .push(format!("{path}.max_iterations"), format!("must be between 1 and {MAX_LOOP_COUNT}"));
                }
                // What kind of loop it is comes first: a loop of no kind, or of two, or a for_each
                // without its 'as', is not read further (its condition and list would be checked
                // for a loop it is not).
                if self.loop_kind(path, loop_step) {
                    if let Some(condition) = &loop_step.while_condition {
                        self.expression(format!("{path}.while"), condition);
                    }
                    if let Some(variable) = &loop_step.for_each {
                        if !templates::is_identifier(variable) {
                            self.problems.push_hint(
                                format!("{path}.for_each"),
                                format!("for_each '{variable}' is not a variable name"),
                                "name a list variable, without {{ }}, e.g. 'buildings'; to loop over part of a \
                                 response, extract it first with pick: all",
                            );
                        } else if !self.known.contains(variable) {
                            self.problems.push_hint(
                                format!("{path}.for_each"),
                                format!("unknown variable '{variable}': no step, feeder, loop or parameter sets it"),
                                UNKNOWN_VARIABLE_HINT,
                            );
                        }
                    }
                    if let (Some(_), Some(name)) = (&loop_step.for_each, &loop_step.as_name) {
                        self.variable_name(format!("{path}.as"), name);
                    }
                }
                self.walk(&format!("{path}.steps"), &loop_step.steps);
            }
            Step::If(if_step) => {
                self.expression(format!("{path}.condition"), &if_step.condition);
                self.walk(&format!("{path}.then"), &if_step.then);
                self.walk(&format!("{path}.else"), &if_step.otherwise);
            }
            Step::Think(think) => check_think_time(self.problems, &format!("{path}.think_time"), &think.think_time),
            Step::EndIteration(_) => {}
        }
    }

    /// A `parallel` group: its requests go out at once, so it holds `http` steps only (control
    /// flow or a pause inside would order what has no order) and none pauses after its request.
    /// python/horde/plan/steps.py (`ParallelStep`) words the same problems.
    /// Whether the loop is of one kind (count, while or for_each with its 'as'); its problem
    /// otherwise, located at what to change.
    fn loop_kind(&mut self, path: &str, loop_step: &crate::LoopStep) -> bool {
        let given: Vec<&str> = [
            ("count", loop_step.count.is_some()),
            ("while", loop_step.while_condition.is_some()),
            ("for_each", loop_step.for_each.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect();
        let before = self.problems.0.len();
        if given.is_empty() {
            self.problems.push_hint(
                path.to_owned(),
                "a loop needs one of 'count', 'while' or 'for_each'",
                "add count: N, while: 'EXPRESSION', or for_each: LIST_VARIABLE with as: ITEM",
            );
        }
        for extra in given.iter().skip(1) {
            self.problems.push_hint(
                format!("{path}.{extra}"),
                format!("a loop takes one of 'count', 'while' or 'for_each'; this one also has '{}'", given[0]),
                "keep one of them (nest two loops for both)",
            );
        }
        match (&loop_step.for_each, &loop_step.as_name) {
            (Some(_), None) => self.problems.push_hint(
                format!("{path}.as"),
                "a for_each loop needs 'as': the variable that holds the current item",
                "add e.g. as: item, then use {{ item }} in the loop's steps",
            ),
            (None, Some(_)) => self.problems.push_hint(
                format!("{path}.as"),
                "'as' names the item of a for_each loop; this loop has no for_each",
                "remove 'as', or loop with for_each: LIST_VARIABLE",
            ),
            _ => {}
        }
        self.problems.0.len() == before
    }

    fn parallel(&mut self, path: &str, parallel: &crate::ParallelStep) {
        self.named(path, &parallel.name);
        if parallel.steps.is_empty() {
            self.problems.push(format!("{path}.steps"), "must hold at least one step");
        }
        self.depth += 1;
        if self.depth > MAX_STEP_DEPTH {
            self.depth -= 1;
            return;
        }
        for (index, step) in parallel.steps.iter().enumerate() {
            let step_path = format!("{path}.steps[{index}]");
            match step {
                Step::Http(http) => {
                    if http.think_time.is_some() {
                        self.problems.push_hint(
                            format!("{step_path}.think_time"),
                            "a request of a parallel group takes no think time: its requests go out at once (pause after the group with a think step)",
                            "remove think_time here, and add {type: think, ...} after the group",
                        );
                    }
                    self.http(&step_path, http);
                }
                Step::Think(_) => self.problems.push_hint(
                    format!("{step_path}.type"),
                    "a think step inside a parallel group: its requests go out at once (put the pause before or after the group)",
                    "move the think step out of the group",
                ),
                other => self.problems.push_hint(
                    format!("{step_path}.type"),
                    format!("a parallel group holds http steps only, not '{}' (put control flow around the group)", step_type(other)),
                    "keep only requests in the group; a loop, if or choice may hold the whole group",
                ),
            }
        }
        self.depth -= 1;
    }

    fn http(&mut self, path: &str, step: &HttpStep) {
        self.named(path, &step.name);
        if let Some((message, hint)) = crate::method_problem(&step.method) {
            self.problems.push_hint(format!("{path}.method"), message, hint);
        }
        // A path refused as written is not read as a template too: one problem for one mistake.
        if check_request_path(self.problems, &format!("{path}.path"), &step.path) {
            self.template(format!("{path}.path"), &step.path);
        }
        check_headers(self.problems, &format!("{path}.headers"), &step.headers);
        for (name, value) in &step.headers {
            self.template(format!("{path}.headers.{name}"), value);
        }
        if let Some(body) = &step.body {
            self.template(format!("{path}.body"), body);
        }
        if let Some(json) = &step.json {
            if step.body.is_some() {
                self.problems.push_hint(
                    format!("{path}.json"),
                    "a step sends either 'body' or 'json', not both",
                    "keep 'json' for a JSON body (it sets Content-Type), or 'body' for any other text",
                );
            }
            self.json_templates(&format!("{path}.json"), json);
        }
        if let Some(think_time) = &step.think_time {
            check_think_time(self.problems, &format!("{path}.think_time"), think_time);
        }
        self.extractors(path, &step.extract);
        self.checks(path, &step.checks);
    }

    /// A step's extractors (`{path}.extract[i]`): variable names, and each expression's syntax.
    fn extractors(&mut self, path: &str, extractors: &[crate::Extractor]) {
        for (index, extractor) in extractors.iter().enumerate() {
            let extractor_path = format!("{path}.extract[{index}]");
            self.variable_name(format!("{extractor_path}.var"), &extractor.var);
            let expression_path = format!("{extractor_path}.expression");
            let given = extractor.expression.as_deref().filter(|expression| !expression.trim().is_empty());
            match (extractor.from, given) {
                (ExtractFrom::Status, None) if extractor.expression.is_none() => {}
                (ExtractFrom::Status, _) => self.problems.push_hint(
                    expression_path,
                    "an extractor from 'status' takes no expression",
                    "remove 'expression': the status code is the value",
                ),
                (from, None) => {
                    let (name, example) = match from {
                        ExtractFrom::Json => ("json", "'$.items[0].id'"),
                        ExtractFrom::Regex => ("regex", "'token=([a-z0-9]+)'"),
                        _ => ("header", "'location'"),
                    };
                    self.problems.push_hint(
                        expression_path,
                        format!("an extractor from '{name}' needs an expression"),
                        format!("add 'expression', e.g. {example}"),
                    );
                }
                (ExtractFrom::Json, Some(expression)) => check_json_path(self.problems, expression_path, expression),
                (ExtractFrom::Regex, Some(expression)) => check_regex(self.problems, expression_path, expression),
                (ExtractFrom::Header, Some(expression)) => {
                    if !is_token(expression) {
                        self.problems.push_hint(
                            expression_path,
                            format!("'{expression}' is not a valid header name"),
                            "give the response header's name, e.g. 'location' or 'x-request-id'",
                        );
                    }
                }
            }
        }
    }

    /// A step's checks (`{path}.checks[i]`).
    fn checks(&mut self, path: &str, checks: &[Check]) {
        for (index, check) in checks.iter().enumerate() {
            let check_path = format!("{path}.checks[{index}]");
            match check {
                Check::Status { allowed } => {
                    if allowed.is_empty() {
                        self.problems.push(format!("{check_path}.in"), "must list at least one status");
                    }
                    for (position, status) in allowed.iter().enumerate() {
                        if !(100..=599).contains(status) {
                            self.problems.push(
                                format!("{check_path}.in[{position}]"),
                                format!("{status} is not an HTTP status (100-599)"),
                            );
                        }
                    }
                }
                Check::Json { expression, .. } => {
                    check_json_path(self.problems, format!("{check_path}.expression"), expression)
                }
                Check::BodyContains { text } => {
                    if text.is_empty() {
                        self.problems.push(format!("{check_path}.text"), "must not be empty");
                    }
                }
                Check::BodyMatches { pattern } => check_regex(self.problems, format!("{check_path}.pattern"), pattern),
            }
        }
    }
}

/// A step's `type` as a plan writes it.
fn step_type(step: &Step) -> String {
    serde_json::to_value(step)
        .ok()
        .and_then(|value| value.get("type").and_then(serde_json::Value::as_str).map(str::to_owned))
        .unwrap_or_default()
}

/// The most a loop may repeat (a count, or `max_iterations`).
pub const MAX_LOOP_COUNT: u64 = 1_000_000;

fn check_json_path(problems: &mut Problems, path: String, expression: &str) {
    if let Err(error) = serde_json_path::JsonPath::parse(expression) {
        problems.push(path, format!("invalid JSONPath: {error}"));
    }
}

fn check_regex(problems: &mut Problems, path: String, pattern: &str) {
    if let Some(message) = regex_problem(pattern) {
        problems.push(path, message);
    }
}

/// What is wrong with a regular expression the engine would compile, in one line; None if it compiles.
fn regex_problem(pattern: &str) -> Option<String> {
    let error = regex::Regex::new(pattern).err()?;
    let first_line = error.to_string().lines().last().unwrap_or("").trim().to_owned();
    Some(format!("invalid regular expression: {first_line}"))
}

fn check_think_time(problems: &mut Problems, think_path: &str, think_time: &ThinkTime) {
    match *think_time {
        ThinkTime::Constant { duration_ms } => {
            problems.non_negative(format!("{think_path}.duration_ms"), duration_ms, MAX_THINK_TIME_MS);
        }
        ThinkTime::Uniform { min_ms, max_ms } => {
            problems.non_negative(format!("{think_path}.min_ms"), min_ms, MAX_THINK_TIME_MS);
            problems.non_negative(format!("{think_path}.max_ms"), max_ms, MAX_THINK_TIME_MS);
            if min_ms > max_ms {
                problems.push_hint(
                    format!("{think_path}.max_ms"),
                    format!("max_ms ({max_ms}) is less than min_ms ({min_ms})"),
                    "make max_ms at least min_ms, or swap the two",
                );
            }
        }
        ThinkTime::Normal { mean_ms, stddev_ms } => {
            problems.non_negative(format!("{think_path}.mean_ms"), mean_ms, MAX_THINK_TIME_MS);
            problems.non_negative(format!("{think_path}.stddev_ms"), stddev_ms, MAX_THINK_TIME_MS);
        }
        ThinkTime::Exponential { mean_ms } => {
            problems.non_negative(format!("{think_path}.mean_ms"), mean_ms, MAX_THINK_TIME_MS);
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
        Workload::Open { start_rate_per_s, stages, max_vus, .. } => {
            problems.non_negative(format!("{path}.start_rate_per_s"), *start_rate_per_s, MAX_RATE_PER_S);
            if *max_vus == 0 {
                problems.push(format!("{path}.max_vus"), "must be 1 or more (got the number 0)");
            }
            problems.vus(format!("{path}.max_vus"), *max_vus);
            for (index, stage) in stages.iter().enumerate() {
                problems.non_negative(format!("{path}.stages[{index}].rate_per_s"), stage.rate_per_s, MAX_RATE_PER_S);
            }
            stages.iter().map(|s| s.duration_s).collect()
        }
    };
    if durations.is_empty() {
        problems.push_hint(
            format!("{path}.stages"),
            "the stages last 0 s in total; a workload needs at least one stage",
            "add a stage, e.g. {duration_s: 10, vus: 5} (closed) or {duration_s: 10, rate_per_s: 20} (open)",
        );
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
    fn problems_carry_what_to_write_instead() {
        // Known answers, the words the plan reference gives for each mistake.
        let steps = r#"{"name": "a", "method": "get", "path": "login", "think_time": {"type": "uniform", "min_ms": 50, "max_ms": 5}},
                       {"name": "b", "method": "FETCH", "path": "http://h/x"},
                       {"name": "c", "method": "POST", "path": "/a b/{{ vu }}", "body": "x", "json": {}}"#;
        let problems = decode(&plan_json(steps, CLOSED)).unwrap().validate();
        let found: Vec<(&str, &str, Option<&str>)> =
            problems.iter().map(|p| (p.path.as_str(), p.message.as_str(), p.hint.as_deref())).collect();
        assert_eq!(
            found,
            vec![
                ("scenarios[0].steps[0].method", "method 'get' must be upper case", Some("write 'GET'")),
                (
                    "scenarios[0].steps[0].path",
                    "'login' must start with '/'",
                    Some("write the path relative to target.base_url, e.g. '/login'")
                ),
                (
                    "scenarios[0].steps[0].think_time.max_ms",
                    "max_ms (5) is less than min_ms (50)",
                    Some("make max_ms at least min_ms, or swap the two")
                ),
                (
                    "scenarios[0].steps[1].method",
                    "'FETCH' is not a method Horde sends",
                    Some("use one of: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
                ),
                (
                    "scenarios[0].steps[1].path",
                    "'http://h/x' must start with '/'",
                    Some("put the scheme and host in target.base_url and only the path here, e.g. '/login'"),
                ),
                (
                    "scenarios[0].steps[2].path",
                    "'/a b/{{ vu }}' contains spaces or control characters",
                    Some("percent-encode them, e.g. a space as %20 (inside {{ }} spaces are fine)"),
                ),
                (
                    "scenarios[0].steps[2].json",
                    "a step sends either 'body' or 'json', not both",
                    Some("keep 'json' for a JSON body (it sets Content-Type), or 'body' for any other text"),
                ),
            ]
        );
        // Inside a template tag an expression may hold spaces.
        let templated = r#"{"name": "a", "method": "GET", "path": "/{{ vu + 1 }}"}"#;
        assert_eq!(decode(&plan_json(templated, CLOSED)).unwrap().validate(), vec![]);
    }

    #[test]
    fn a_header_is_given_once_whatever_its_case() {
        let json = r#"{"version": 1, "target": {"base_url": "http://h", "headers": {"Accept": "a", "x y": "b", "accept": "c", "x-a": "1\r\nx-b: 2"}},
                       "scenarios": [{"name": "s", "steps": [{"name": "home", "method": "GET", "path": "/"}],
                                      "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 2}]}}]}"#;
        let problems = decode(json).unwrap().validate();
        let found: Vec<(&str, &str)> = problems.iter().map(|p| (p.path.as_str(), p.message.as_str())).collect();
        assert_eq!(
            found,
            vec![
                ("target.headers.x y", "'x y' is not a valid header name"),
                ("target.headers.accept", "header 'accept' is given twice (also as 'Accept')"),
                ("target.headers.x-a", "header values cannot contain line breaks"),
            ]
        );
        assert!(problems.iter().all(|problem| problem.hint.is_some()), "{problems:?}");
    }

    #[test]
    fn a_scenario_name_is_given_once() {
        let scenario = format!(r#"{{"name": "s", "steps": [{STEP}], "workload": {CLOSED}}}"#);
        let json =
            format!(r#"{{"version": 1, "target": {{"base_url": "http://h"}}, "scenarios": [{scenario}, {scenario}]}}"#);
        let problems = decode(&json).unwrap().validate();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            (problems[0].path.as_str(), problems[0].message.as_str(), problems[0].hint.as_deref()),
            (
                "scenarios[1].name",
                "duplicate scenario name 's' (also at index 0)",
                Some("give each scenario its own name; results are reported by scenario name")
            )
        );
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
    fn step_tree_problems_are_located() {
        let steps = r#"{"name": "login", "method": "POST", "path": "/login", "json": {"user": "{{ users.login }}"},
                        "extract": [{"var": "token", "from": "json", "expression": "$.token"},
                                    {"var": "bad", "from": "json", "expression": "$[?"},
                                    {"var": "r", "from": "regex", "expression": "(unclosed"}],
                        "checks": [{"type": "status", "in": [200, 999]}]},
                       {"type": "group", "name": "city", "steps": [
                           {"name": "view", "method": "GET", "path": "/city/{{ token }}/{{ tokn }}"},
                           {"type": "choice", "branches": [{"weight": 0, "steps": []}]},
                           {"type": "loop", "count": 2, "while": "x", "steps": []},
                           {"type": "loop", "for_each": "ids", "steps": []},
                           {"type": "if", "condition": "token and", "then": []},
                           {"name": "login", "method": "GET", "path": "/"}]}"#;
        let json = format!(
            r#"{{"version": 1, "target": {{"base_url": "http://h"}},
                "scenarios": [{{"name": "s", "feeders": [{{"name": "users", "path": "u.csv", "format": "csv", "mode": "unique"}}],
                                "steps": [{steps}], "workload": {CLOSED}}}]}}"#
        );
        let problems = decode(&json).unwrap().validate();
        let found: Vec<(String, bool)> =
            problems.iter().map(|p| (p.path.clone(), p.message.contains("unknown variable"))).collect();
        let paths: Vec<&str> = found.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "scenarios[0].steps[0].extract[1].expression",
                "scenarios[0].steps[0].extract[2].expression",
                "scenarios[0].steps[0].checks[0].in[1]",
                "scenarios[0].steps[1].steps[0].path",
                "scenarios[0].steps[1].steps[1].branches[0].weight",
                "scenarios[0].steps[1].steps[2].steps",
                // A loop of two kinds is said at the second; it is not read further.
                "scenarios[0].steps[1].steps[2].while",
                "scenarios[0].steps[1].steps[3].steps",
                // A for_each without its 'as' is said there; its list is not read further.
                "scenarios[0].steps[1].steps[3].as",
                "scenarios[0].steps[1].steps[4].condition",
                "scenarios[0].steps[1].steps[5].name",
            ],
            "{problems:#?}"
        );
        assert!(found[3].1, "the misspelt 'tokn' is an unknown variable");
    }

    #[test]
    fn a_template_where_an_expression_or_a_name_goes_is_said_as_such() {
        let steps = r#"{"name": "items", "method": "GET", "path": "/",
                        "extract": [{"var": "items", "from": "json", "expression": "$.ids", "pick": "all"}]},
                       {"type": "loop", "for_each": "{{ items }}", "as": "item", "steps": [{"type": "end_iteration"}]},
                       {"type": "loop", "while": "{{ items }}", "steps": [{"type": "end_iteration"}]},
                       {"type": "if", "condition": "{% if items %}", "then": []}"#;
        let json = format!(
            r#"{{"version": 1, "target": {{"base_url": "http://h"}},
                "scenarios": [{{"name": "s", "steps": [{steps}], "workload": {CLOSED}}}]}}"#
        );
        let problems: Vec<(String, String, bool)> = decode(&json)
            .unwrap()
            .validate()
            .into_iter()
            .map(|p| (p.path, p.message, p.hint.is_some_and(|hint| hint.starts_with("write it without {{ }}"))))
            .collect();
        assert_eq!(
            problems,
            vec![
                (
                    "scenarios[0].steps[1].for_each".to_owned(),
                    "for_each '{{ items }}' is not a variable name".to_owned(),
                    false
                ),
                (
                    "scenarios[0].steps[2].while".to_owned(),
                    "condition '{{ items }}' is an expression, not a template".to_owned(),
                    true
                ),
                (
                    "scenarios[0].steps[3].condition".to_owned(),
                    "condition '{% if items %}' is an expression, not a template".to_owned(),
                    true
                ),
            ],
        );
    }

    #[test]
    fn a_parallel_group_holds_requests_without_pauses() {
        let steps = r#"{"type": "parallel", "name": "page", "steps": [
                           {"name": "css", "method": "GET", "path": "/a.css", "extract": [{"var": "etag", "from": "header", "expression": "etag"}]},
                           {"name": "js", "method": "GET", "path": "/a.js", "think_time": {"type": "constant", "duration_ms": 5}},
                           {"type": "think", "think_time": {"type": "constant", "duration_ms": 5}},
                           {"type": "group", "name": "inner", "steps": [{"name": "x", "method": "GET", "path": "/"}]},
                           {"name": "css", "method": "GET", "path": "/b.css"}]},
                       {"type": "parallel", "name": "empty", "steps": []},
                       {"name": "next", "method": "GET", "path": "/{{ etag }}"}"#;
        let json = format!(
            r#"{{"version": 1, "target": {{"base_url": "http://h", "parallel_connections": 0}},
                "scenarios": [{{"name": "s", "steps": [{steps}], "workload": {CLOSED}}}]}}"#
        );
        let problems: Vec<String> =
            decode(&json).unwrap().validate().iter().map(|p| format!("{}: {}", p.path, p.message)).collect();
        assert_eq!(
            problems,
            vec![
                "target.parallel_connections: must be from 1 to 256 (got 0)",
                "scenarios[0].steps[0].steps[1].think_time: a request of a parallel group takes no think time: its requests go out at once (pause after the group with a think step)",
                "scenarios[0].steps[0].steps[2].type: a think step inside a parallel group: its requests go out at once (put the pause before or after the group)",
                "scenarios[0].steps[0].steps[3].type: a parallel group holds http steps only, not 'group' (put control flow around the group)",
                "scenarios[0].steps[1].steps: must hold at least one step",
                "scenarios[0].steps[0].steps[4].name: duplicate step name 'css' (also at steps[0].steps[0])",
            ],
        );
        let postgres = format!(
            r#"{{"version": 1, "target": {{"base_url": "postgresql://u@h/d"}},
                "scenarios": [{{"name": "s", "steps": [{{"type": "parallel", "name": "p", "steps": [{STEP}]}}], "workload": {CLOSED}}}]}}"#
        );
        let problems: Vec<String> =
            decode(&postgres).unwrap().validate().iter().map(|p| format!("{}: {}", p.path, p.message)).collect();
        assert!(problems.contains(&"scenarios[0].steps[0].type: a parallel group sends http requests: a postgresql:// target takes sql steps".to_owned()), "{problems:?}");
        let tcp = postgres.replace("postgresql://u@h/d", "tcp://h:1");
        let problems: Vec<String> =
            decode(&tcp).unwrap().validate().iter().map(|p| format!("{}: {}", p.path, p.message)).collect();
        assert!(problems.contains(&"scenarios[0].steps[0].type: a parallel group sends http requests: against a message target use send, receive or ping".to_owned()), "{problems:?}");
        assert!(decode(&postgres.replace("postgresql://u@h/d", "ws://h:1/ws/echo")).unwrap().validate().is_empty());
    }

    #[test]
    fn first_slice_steps_still_read_as_http() {
        let plan = decode(&plan_json(STEP, CLOSED)).unwrap();
        assert!(matches!(&plan.scenarios[0].steps[0], crate::Step::Http(step) if step.name == "home"));
        let written = serde_json::to_value(&plan).unwrap();
        assert_eq!(written["scenarios"][0]["steps"][0]["type"], "http");
    }

    #[test]
    fn numbers_have_upper_bounds() {
        let step = r#"{"name": "home", "method": "GET", "path": "/", "think_time": {"type": "constant", "duration_ms": 1e300}}"#;
        let workload = r#"{"type": "open", "stages": [{"duration_s": 1e9, "rate_per_s": 1e10}], "max_vus": 100000000}"#;
        let paths: Vec<String> =
            decode(&plan_json(step, workload)).unwrap().validate().into_iter().map(|p| p.path).collect();
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
    fn what_is_to_supply_is_reported_where_it_is_with_what_to_give() {
        let step = r#"{"name": "order", "method": "POST", "path": "/orders", "body": "{{ supply(\"the JSON body of POST /orders\") }}",
                       "headers": {"authorization": "Bearer {{ supply('a token') }}"}}"#;
        let workload = r#"{"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]}"#;
        let plan = decode(&plan_json(step, workload)).unwrap();
        let problems: Vec<(String, String)> = plan.validate().into_iter().map(|p| (p.path, p.message)).collect();
        assert_eq!(
            problems,
            vec![
                (
                    "scenarios[0].steps[0].headers.authorization".to_owned(),
                    "to supply: a token; put it in place of the supply(...) template".to_owned()
                ),
                (
                    "scenarios[0].steps[0].body".to_owned(),
                    "to supply: the JSON body of POST /orders; put it in place of the supply(...) template".to_owned()
                ),
            ]
        );
        // Filled in, the plan is valid.
        let filled = r#"{"name": "order", "method": "POST", "path": "/orders", "body": "{}"}"#;
        assert!(decode(&plan_json(filled, workload)).unwrap().validate().is_empty());
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
    fn instances_are_checked_against_base_url_and_each_other() {
        let json = r#"{"version": 1, "target": {"base_url": "http://a/api", "instances": ["http://b/api/", "https://c/api", "http://B:80/api"]},
            "scenarios": [{"name": "s", "steps": [{"name": "x", "method": "GET", "path": "/"}],
            "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]}}]}"#;
        let problems: Vec<String> = decode(json).unwrap().validate().into_iter().map(|p| p.to_string()).collect();
        assert_eq!(
            problems,
            vec![
                "target.instances[1]: 'https://c/api' uses https:// but base_url uses http://",
                "target.instances[2]: 'http://B:80/api' is the same instance as instances[0]",
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

//! From plan steps to nodes: templates registered, expressions and patterns compiled, fixed
//! requests encoded.

mod message_step;
mod sql_step;

use super::{Body, Condition, Feeder, LoopMode, Node, RequestNode, ScenarioProgram, StepKind};
use crate::error::EngineError;
use crate::response_rules::{check_label, CompiledCheck, CompiledExtractor, JsonScope};
use crate::template::{JsonTemplate, TemplateRef, Text, UNDEFINED_MARK};
use crate::transport::http::{encode_request, Endpoint, H2Request, RequestParts};
use horde_plan::templates::is_template;
use horde_plan::{Check, HttpStep, LoopStep, OnCheckFailure, Scenario, Step};
use minijinja::Environment;
use std::time::Duration;

/// Compiles the scenarios of one plan into nodes sharing one template environment.
pub(crate) struct NodeCompiler<'a> {
    pub environment: Environment<'static>,
    /// (scenario, step name, kind) by global step index: the order of the metrics entries.
    pub steps: Vec<(String, String, StepKind)>,
    /// Each step's checks in words (`response_rules::check_label`), by global step index.
    pub check_labels: Vec<Vec<String>>,
    /// The target's instances; a fixed request is encoded once for each.
    endpoints: &'a [Endpoint],
    target_headers: &'a [(String, String)],
    next_template: usize,
    /// How many memo slots templates have taken (see `TemplateRef::memo_slot`).
    pub memo_slots: usize,
    /// The memo slots whose template reads each variable (`CompiledPlan::memo_readers`).
    pub memo_readers: std::collections::HashMap<String, Vec<usize>>,
    /// A `ws://` or `wss://` target: message steps carry the upgrade that opens a connection.
    pub websocket: bool,
    /// `target.http_version` "2" or "auto": fixed requests are kept in HTTP/2's form too.
    pub http2: bool,
    /// Each scenario's upgrade for the message steps other than `connect`, by scenario name.
    scenario_upgrades: std::collections::HashMap<String, std::sync::Arc<crate::transport::message::UpgradeNode>>,
}

impl<'a> NodeCompiler<'a> {
    pub fn new(endpoints: &'a [Endpoint], target_headers: &'a [(String, String)]) -> Self {
        Self {
            environment: horde_plan::templates::environment(),
            steps: Vec::new(),
            check_labels: Vec::new(),
            endpoints,
            target_headers,
            next_template: 0,
            memo_slots: 0,
            memo_readers: std::collections::HashMap::new(),
            websocket: false,
            http2: false,
            scenario_upgrades: std::collections::HashMap::new(),
        }
    }

    fn add_template(&mut self, source: String) -> Result<String, EngineError> {
        let name = format!("t{}", self.next_template);
        self.next_template += 1;
        self.environment
            .add_template_owned(name.clone(), source)
            .map_err(|error| EngineError::Setup(format!("template does not compile: {error}")))?;
        Ok(name)
    }

    fn text(&mut self, source: &str) -> Result<Text, EngineError> {
        if is_template(source) {
            let name = self.add_template(source.to_owned())?;
            let memo_slot = self.memoizable(source).map(|variables| {
                let slot = self.memo_slots;
                self.memo_slots += 1;
                for variable in variables {
                    self.memo_readers.entry(variable).or_default().push(slot);
                }
                slot
            });
            Ok(Text::Template(TemplateRef { name, memo_slot, direct: crate::template::Direct::of(source) }))
        } else {
            Ok(Text::Fixed(source.to_owned()))
        }
    }

    /// The variables a template reads, when its rendering depends only on them and the
    /// parameters (`None`: it changes on its own).
    fn memoizable(&self, source: &str) -> Option<std::collections::HashSet<String>> {
        const CHANGING: [&str; 6] =
            ["random_int", "random_choice", "uuid", "now_ms", "iteration", horde_plan::SEQ_VARIABLE];
        let names = horde_plan::templates::template_variables(&self.environment, source).ok()?;
        (!names.iter().any(|name| CHANGING.contains(&name.as_str()))).then_some(names)
    }

    /// A condition as a template that renders "1" when it holds; with the variable's name when
    /// it is a variable alone.
    fn condition(&mut self, expression: &str) -> Result<Condition, EngineError> {
        let template = self.add_template(format!("{{% if ({expression}) %}}1{{% endif %}}"))?;
        Ok(Condition { template, variable: bare_variable(expression) })
    }

    fn json(&mut self, value: &serde_json::Value) -> Result<JsonTemplate, EngineError> {
        Ok(match value {
            serde_json::Value::String(text) if is_template(text) => match single_expression(text) {
                // `tojson` turns an undefined value into null even in strict mode; the mark makes
                // it a failed render instead, like any other template using an unset variable.
                Some(expression) => JsonTemplate::Typed(self.add_template(format!(
                    "{{% if ({expression}) is undefined %}}{UNDEFINED_MARK}{{% else %}}{{{{ ({expression}) | tojson }}}}{{% endif %}}"
                ))?),
                None => JsonTemplate::Text(self.add_template(text.clone())?),
            },
            serde_json::Value::Array(items) if contains_template(value) => {
                JsonTemplate::Array(items.iter().map(|item| self.json(item)).collect::<Result<_, _>>()?)
            }
            serde_json::Value::Object(fields) if contains_template(value) => JsonTemplate::Object(
                fields.iter().map(|(key, item)| Ok((key.clone(), self.json(item)?))).collect::<Result<_, EngineError>>()?,
            ),
            fixed => JsonTemplate::Fixed(fixed.clone()),
        })
    }

    fn register(&mut self, scenario: &str, name: &str, kind: StepKind) -> usize {
        self.steps.push((scenario.to_owned(), name.to_owned(), kind));
        self.check_labels.push(Vec::new());
        self.steps.len() - 1
    }

    fn nodes(&mut self, scenario: &Scenario, steps: &[Step]) -> Result<Vec<Node>, EngineError> {
        steps.iter().map(|step| self.node(scenario, step)).collect()
    }

    fn node(&mut self, scenario: &Scenario, step: &Step) -> Result<Node, EngineError> {
        Ok(match step {
            Step::Http(http) => Node::Request(Box::new(self.request(scenario, http)?)),
            Step::Sql(sql) => Node::Sql(Box::new(self.sql(scenario, sql)?)),
            Step::Connect(_) | Step::Send(_) | Step::Receive(_) | Step::Ping(_) | Step::Stream(_) | Step::Close(_) => {
                Node::Message(Box::new(self.message(scenario, step)?))
            }
            Step::Group(group) => {
                let global_index = self.register(&scenario.name, &group.name, StepKind::Group);
                Node::Group { global_index, children: self.nodes(scenario, &group.steps)? }
            }
            Step::Parallel(parallel) => {
                let global_index = self.register(&scenario.name, &parallel.name, StepKind::Group);
                let requests = parallel
                    .steps
                    .iter()
                    .map(|step| match step {
                        Step::Http(http) => self.request(scenario, http),
                        // horde-plan's validate refuses anything else in a parallel group.
                        _ => Err(EngineError::Setup(format!(
                            "parallel group '{}' holds a step that is not an http step",
                            parallel.name
                        ))),
                    })
                    .collect::<Result<_, _>>()?;
                Node::Parallel { global_index, requests }
            }
            Step::Choice(choice) => {
                let mut total = 0.0;
                let cumulative_weights = choice
                    .branches
                    .iter()
                    .map(|branch| {
                        total += branch.weight;
                        total
                    })
                    .collect();
                let branches = choice
                    .branches
                    .iter()
                    .map(|branch| self.nodes(scenario, &branch.steps))
                    .collect::<Result<_, _>>()?;
                Node::Choice { cumulative_weights, branches }
            }
            Step::Loop(loop_step) => {
                Node::Loop { mode: self.loop_mode(loop_step)?, children: self.nodes(scenario, &loop_step.steps)? }
            }
            Step::If(if_step) => Node::If {
                condition: self.condition(&if_step.condition)?,
                then: self.nodes(scenario, &if_step.then)?,
                otherwise: self.nodes(scenario, &if_step.otherwise)?,
            },
            Step::Think(think) => Node::Think(think.think_time),
            Step::EndIteration(_) => Node::EndIteration,
        })
    }

    fn loop_mode(&mut self, loop_step: &LoopStep) -> Result<LoopMode, EngineError> {
        Ok(match (&loop_step.count, &loop_step.while_condition, &loop_step.for_each, &loop_step.as_name) {
            (Some(count), _, _, _) => LoopMode::Count(*count),
            (_, Some(condition), _, _) => LoopMode::While(self.condition(condition)?, loop_step.max_iterations),
            (_, _, Some(variable), Some(item)) => {
                LoopMode::ForEach { variable: variable.clone(), item: item.clone(), max: loop_step.max_iterations }
            }
            _ => return Err(EngineError::Setup("a loop needs count, while or for_each (with as)".into())),
        })
    }

    fn request(&mut self, scenario: &Scenario, step: &HttpStep) -> Result<RequestNode, EngineError> {
        let global_index = self.register(&scenario.name, &step.name, StepKind::Request);
        let mut headers = Vec::new();
        for (name, value) in self.target_headers.iter().chain(scenario.headers.iter()).chain(step.headers.iter()) {
            headers.push((name.clone(), self.text(value)?));
        }
        let path = self.text(&step.path)?;
        let body = match (&step.body, &step.json) {
            (Some(body), _) => Body::Text(self.text(body)?),
            (None, Some(json)) => Body::Json(self.json(json)?),
            (None, None) => Body::None,
        };
        let extractors = step.extract.iter().map(CompiledExtractor::compile).collect::<Result<Vec<_>, _>>()?;
        let checks = step.checks.iter().map(CompiledCheck::compile).collect::<Result<Vec<_>, _>>()?;
        self.check_labels[global_index] = step.checks.iter().map(check_label).collect();
        let keep_body =
            extractors.iter().any(CompiledExtractor::needs_body) || checks.iter().any(CompiledCheck::needs_body);
        let keep_headers = extractors.iter().any(CompiledExtractor::needs_headers);
        let json_expressions = extractors
            .iter()
            .filter_map(CompiledExtractor::json_expression)
            .chain(checks.iter().filter_map(CompiledCheck::json_expression));
        let json_scope = JsonScope::of(json_expressions);
        let mut node = RequestNode {
            global_index,
            method: step.method.clone(),
            is_head: step.method == "HEAD",
            path,
            headers,
            body,
            fixed: None,
            fixed_h2: None,
            think_time: step.think_time,
            has_status_check: step.checks.iter().any(|check| matches!(check, Check::Status { .. })),
            end_on_check_failure: step.on_check_failure == OnCheckFailure::EndIteration,
            extractors,
            checks,
            json_scope,
            keep_body,
            keep_headers,
        };
        node.fixed = fixed_bytes(self.endpoints, &node);
        if self.http2 {
            node.fixed_h2 = node.fixed.as_ref().and_then(|fixed| {
                // A request HTTP/2 cannot carry is left to fail at its send, with its reason.
                fixed
                    .iter()
                    .zip(self.endpoints)
                    .map(|(bytes, endpoint)| H2Request::from_encoded(endpoint, bytes).ok())
                    .collect()
            });
        }
        Ok(node)
    }
}

/// The request's bytes for each instance (they differ in the `Host` header) if none of its
/// parts is templated.
fn fixed_bytes(endpoints: &[Endpoint], node: &RequestNode) -> Option<Box<[Vec<u8>]>> {
    let Text::Fixed(path) = &node.path else { return None };
    let mut headers = Vec::with_capacity(node.headers.len());
    for (name, value) in &node.headers {
        let Text::Fixed(value) = value else { return None };
        headers.push((name.as_str(), value.as_str()));
    }
    let (body, json) = match &node.body {
        Body::None => (Vec::new(), false),
        Body::Text(Text::Fixed(text)) => (text.clone().into_bytes(), false),
        Body::Json(JsonTemplate::Fixed(value)) => (serde_json::to_vec(value).ok()?, true),
        _ => return None,
    };
    let parts = RequestParts { method: &node.method, path, headers: &headers, cookie: None, body: &body, json };
    let encoded = endpoints.iter().map(|endpoint| {
        let mut out = Vec::new();
        encode_request(&mut out, endpoint, &parts);
        out
    });
    Some(encoded.collect())
}

fn contains_template(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(text) => is_template(text),
        serde_json::Value::Array(items) => items.iter().any(contains_template),
        serde_json::Value::Object(fields) => fields.values().any(contains_template),
        _ => false,
    }
}

/// `"{{ expression }}"` and nothing else: the expression, so its value can keep its JSON type.
fn single_expression(text: &str) -> Option<&str> {
    let inner = text.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}") && !inner.contains("{%")).then_some(inner.trim())
}

/// Compiles one scenario.
pub(crate) fn compile_scenario(
    compiler: &mut NodeCompiler<'_>,
    scenario: &Scenario,
) -> Result<ScenarioProgram, EngineError> {
    let first = compiler.steps.len();
    let setup = compiler.nodes(scenario, &scenario.setup)?;
    let steps = compiler.nodes(scenario, &scenario.steps)?;
    let teardown = compiler.nodes(scenario, &scenario.teardown)?;
    let first_request_index =
        compiler.steps[first..].iter().position(|(_, _, kind)| *kind == StepKind::Request).map(|offset| first + offset);
    let feeders = scenario.feeders.iter().map(Feeder::load).collect::<Result<Vec<_>, _>>()?;
    Ok(ScenarioProgram {
        setup,
        steps,
        teardown,
        pacing: scenario.pacing_s.map(Duration::from_secs_f64),
        feeders,
        first_request_index,
    })
}

/// The variable a condition is, when it is one name alone (`if: buildable`): one the template
/// would look up among the VU's variables. Not a literal (`true`, `none`...), an operator, or
/// a built-in that templates see over the variables (`params`, `vu`, `iteration`).
fn bare_variable(expression: &str) -> Option<String> {
    const NOT_VARIABLES: [&str; 14] =
        ["true", "false", "none", "True", "False", "None", "not", "and", "or", "in", "is", "params", "vu", "iteration"];
    let name = expression.trim();
    let mut characters = name.chars();
    let first = characters.next()?;
    let is_name =
        (first.is_ascii_alphabetic() || first == '_') && characters.all(|c| c.is_ascii_alphanumeric() || c == '_');
    (is_name && !NOT_VARIABLES.contains(&name)).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::single_expression;

    #[test]
    fn single_expressions() {
        assert_eq!(single_expression("{{ count + 1 }}"), Some("count + 1"));
        assert_eq!(single_expression("id-{{ x }}"), None);
        assert_eq!(single_expression("{{ a }}{{ b }}"), None);
    }
}

//! A scenario's structure: the rules that span its step lists rather than one step (names of
//! steps reported by name unique across setup, steps and teardown at any depth; how deep steps nest; feeders named once, and no
//! variable named like one; pacing only where VUs loop).
//!
//! They read the scenario as plain JSON, not as the typed [`crate::Scenario`], so that they can
//! be asked of a scenario with type mistakes too: the plan's Python types ask them as a scenario
//! is built (`horde._engine.scenario_structure_problems`), listing them with the types' own
//! problems, and the plan's check asks them of each scenario it decoded. Anything not of the
//! shape a rule reads (a name that is no string, a step that is no mapping) is left to the type
//! checks.

use super::Problems;
use crate::{templates, PlanError, MAX_STEP_DEPTH};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The structure problems of one scenario's JSON, each located from the scenario
/// (`steps[0].name`), with its hint.
pub fn scenario_structure_problems(scenario: &Value) -> Vec<PlanError> {
    let mut problems = Problems(Vec::new());
    check(&mut problems, "", scenario);
    problems.0
}

/// Adds the scenario's structure problems, each path prefixed by `prefix` (`scenarios[0].`).
pub(super) fn check(problems: &mut Problems, prefix: &str, scenario: &Value) {
    let Some(scenario) = scenario.as_object() else { return };
    let mut walk = Walk { problems, prefix, feeders: HashMap::new(), names: HashMap::new() };
    walk.feeders(scenario.get("feeders"));
    for part in ["setup", "steps", "teardown"] {
        walk.steps(scenario.get(part), part, 1);
    }
    let open =
        scenario.get("workload").and_then(|workload| workload.get("type")).and_then(Value::as_str) == Some("open");
    if open && scenario.get("pacing_s").is_some_and(|pacing| !pacing.is_null()) {
        walk.problems.push_hint(
            format!("{prefix}pacing_s"),
            "pacing applies to the closed model; in the open model the arrival rate sets when iterations start",
            "remove pacing_s, or use a closed workload",
        );
    }
}

struct Walk<'a> {
    problems: &'a mut Problems,
    prefix: &'a str,
    /// Each feeder's name, with its index.
    feeders: HashMap<String, usize>,
    /// Each name of a step that is reported by name (a request, a statement, a message, a group),
    /// with where (from the scenario) it was first given.
    names: HashMap<String, String>,
}

impl Walk<'_> {
    fn feeders(&mut self, feeders: Option<&Value>) {
        let Some(feeders) = feeders.and_then(Value::as_array) else { return };
        for (index, feeder) in feeders.iter().enumerate() {
            let Some(name) = feeder.get("name").and_then(Value::as_str) else { continue };
            if templates::variable_name_problem(name, "feeder name").is_some() {
                continue; // the name's own problem is said where the feeder's name is checked
            }
            if let Some(first) = self.feeders.get(name) {
                self.problems.push_hint(
                    format!("{}feeders[{index}].name", self.prefix),
                    format!("duplicate feeder name '{name}' (also at feeders[{first}])"),
                    "give each feeder its own name: it is the variable that holds the feeder's row",
                );
            } else {
                self.feeders.insert(name.to_owned(), index);
            }
        }
    }

    /// The steps of a list at `path` (from the scenario), the list `depth` deep (1: setup, steps,
    /// teardown).
    fn steps(&mut self, steps: Option<&Value>, path: &str, depth: usize) {
        let Some(steps) = steps.and_then(Value::as_array) else { return };
        if depth > MAX_STEP_DEPTH && !steps.is_empty() {
            self.problems.push_hint(
                format!("{}{path}[0]", self.prefix),
                format!("steps are nested more than {MAX_STEP_DEPTH} deep here"),
                "flatten the scenario: move inner steps up, or split it into groups side by side",
            );
            return;
        }
        for (index, step) in steps.iter().enumerate() {
            if let Some(step) = step.as_object() {
                self.step(step, &format!("{path}[{index}]"), depth);
            }
        }
    }

    fn step(&mut self, step: &Map<String, Value>, path: &str, depth: usize) {
        let kind = step.get("type").and_then(Value::as_str).unwrap_or("http");
        if matches!(kind, "http" | "sql" | "connect" | "send" | "receive" | "ping" | "stream" | "group" | "parallel") {
            if let Some(name) = step.get("name").and_then(Value::as_str).filter(|name| !name.is_empty()) {
                self.unique_name(name, path);
            }
        }
        if matches!(kind, "http" | "sql" | "receive") {
            if let Some(extractors) = step.get("extract").and_then(Value::as_array) {
                for (index, extractor) in extractors.iter().enumerate() {
                    self.variable(extractor.get("var"), &format!("{path}.extract[{index}].var"));
                }
            }
        }
        match kind {
            "group" | "parallel" | "loop" => {
                if kind == "loop" {
                    self.variable(step.get("as"), &format!("{path}.as"));
                }
                self.steps(step.get("steps"), &format!("{path}.steps"), depth + 1);
            }
            "if" => {
                self.steps(step.get("then"), &format!("{path}.then"), depth + 1);
                self.steps(step.get("else"), &format!("{path}.else"), depth + 1);
            }
            "choice" => {
                let Some(branches) = step.get("branches").and_then(Value::as_array) else { return };
                for (index, branch) in branches.iter().enumerate() {
                    self.steps(branch.get("steps"), &format!("{path}.branches[{index}].steps"), depth + 1);
                }
            }
            _ => {}
        }
    }

    fn unique_name(&mut self, name: &str, path: &str) {
        if let Some(first) = self.names.get(name) {
            self.problems.push_hint(
                format!("{}{path}.name", self.prefix),
                format!("duplicate step name '{name}' (also at {first})"),
                "give each step and group its own name (across setup, steps and teardown); results are reported by \
                 step name",
            );
        } else {
            self.names.insert(name.to_owned(), path.to_owned());
        }
    }

    /// A variable a step sets (at `path`) may not take a feeder's name: the feeder's row is the
    /// variable of that name.
    fn variable(&mut self, name: Option<&Value>, path: &str) {
        let Some(name) = name.and_then(Value::as_str) else { return };
        if self.feeders.contains_key(name) && templates::variable_name_problem(name, "variable").is_none() {
            self.problems.push_hint(
                format!("{}{path}", self.prefix),
                format!("variable '{name}' has the name of feeder '{name}'"),
                "rename the variable or the feeder: the feeder's row is the variable of its name",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scenario_structure_problems;
    use serde_json::json;

    fn said(scenario: serde_json::Value) -> Vec<(String, String)> {
        scenario_structure_problems(&scenario)
            .into_iter()
            .map(|problem| {
                assert!(problem.hint.is_some(), "{} has no hint", problem.message);
                (problem.path, problem.message)
            })
            .collect()
    }

    #[test]
    fn names_are_unique_across_the_parts_at_any_depth() {
        let scenario = json!({
            "setup": [{"name": "login", "method": "POST", "path": "/login"}],
            "steps": [{"type": "if", "condition": "true", "else": [
                {"type": "group", "name": "login", "steps": [{"name": "home", "path": "/"}]},
            ]}],
            "teardown": [{"type": "parallel", "name": "home", "steps": []}, {"type": "close", "name": "home"}],
        });
        assert_eq!(
            said(scenario),
            [
                ("steps[0].else[0].name".to_owned(), "duplicate step name 'login' (also at setup[0])".to_owned()),
                (
                    "teardown[0].name".to_owned(),
                    "duplicate step name 'home' (also at steps[0].else[0].steps[0])".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn steps_nest_at_most_the_bound_and_the_first_too_deep_is_named() {
        let mut steps = json!([{"name": "leaf", "path": "/"}]);
        for _ in 1..crate::MAX_STEP_DEPTH {
            steps = json!([{"type": "group", "name": format!("g{}", steps.to_string().len()), "steps": steps}]);
        }
        assert_eq!(said(json!({"steps": steps.clone()})), []);
        let deeper = json!({"steps": [{"type": "loop", "count": 2, "steps": steps}]});
        let path = format!("steps[0]{}", ".steps[0]".repeat(crate::MAX_STEP_DEPTH));
        assert_eq!(said(deeper), [(path, "steps are nested more than 16 deep here".to_owned())]);
    }

    #[test]
    fn feeders_are_named_once_and_no_variable_takes_a_feeders_name() {
        let scenario = json!({
            "feeders": [{"name": "users"}, {"name": "users"}, {"name": "vu"}, {"name": "vu"}],
            "steps": [
                {"name": "a", "path": "/", "extract": [{"var": "users"}, {"var": 3}, {"var": "token"}]},
                {"type": "loop", "for_each": "ids", "as": "users", "steps": [{"type": "sql", "extract": [{"var": "users"}]}]},
            ],
        });
        assert_eq!(
            said(scenario),
            [
                ("feeders[1].name".to_owned(), "duplicate feeder name 'users' (also at feeders[0])".to_owned()),
                ("steps[0].extract[0].var".to_owned(), "variable 'users' has the name of feeder 'users'".to_owned()),
                ("steps[1].as".to_owned(), "variable 'users' has the name of feeder 'users'".to_owned()),
                (
                    "steps[1].steps[0].extract[0].var".to_owned(),
                    "variable 'users' has the name of feeder 'users'".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn pacing_is_refused_in_the_open_model_only() {
        let open = json!({"pacing_s": 1, "workload": {"type": "open"}, "steps": []});
        assert_eq!(said(open)[0].0, "pacing_s");
        assert_eq!(said(json!({"pacing_s": 1, "workload": {"type": "closed"}})), []);
        assert_eq!(said(json!({"pacing_s": null, "workload": {"type": "open"}})), []);
    }

    #[test]
    fn what_is_not_of_the_shape_read_is_left_to_the_type_checks() {
        for scenario in [json!(null), json!([1]), json!({"steps": 3, "feeders": "x", "setup": [1, null, "a"]})] {
            assert_eq!(said(scenario), []);
        }
    }
}

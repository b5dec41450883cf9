//! The `postgres` transport's checks: its URL, where its password comes from, that every step
//! speaks the target's protocol, and each `sql` step.

use super::{Problems, StepWalker};
use crate::sql::{is_postgres_url, SqlCheck, SqlExtractFrom, SqlStep};
use crate::{Plan, Step, Target};

/// The target's URLs and its password's source against the transport `base_url` names.
pub(super) fn check_target(problems: &mut Problems, target: &Target) {
    if is_postgres_url(&target.base_url) {
        check_postgres_url(problems, "target.base_url".into(), &target.base_url);
        for (index, url) in target.instances.iter().enumerate() {
            check_postgres_url(problems, format!("target.instances[{index}]"), url);
        }
        if target.password_env.is_some() && target.password_file.is_some() {
            problems
                .push("target.password_file".into(), "give the password by password_env or password_file, not both");
        }
        if let Some(name) = &target.password_env {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                problems.push("target.password_env".into(), format!("'{name}' is not an environment variable name"));
            }
        }
    } else {
        if target.password_env.is_some() {
            problems.push("target.password_env".into(), "only a postgresql:// target takes a password");
        }
        if target.password_file.is_some() {
            problems.push("target.password_file".into(), "only a postgresql:// target takes a password");
        }
    }
}

/// The steps of every scenario against the transport `base_url` names.
pub(super) fn check_steps(problems: &mut Problems, plan: &Plan) {
    let postgres = is_postgres_url(&plan.target.base_url);
    for (index, scenario) in plan.scenarios.iter().enumerate() {
        for (part, steps) in [("setup", &scenario.setup), ("steps", &scenario.steps), ("teardown", &scenario.teardown)]
        {
            check_step_protocol(problems, &format!("scenarios[{index}].{part}"), steps, postgres);
        }
    }
}

fn check_step_protocol(problems: &mut Problems, path: &str, steps: &[Step], postgres: bool) {
    for (index, step) in steps.iter().enumerate() {
        let step_path = format!("{path}[{index}]");
        match step {
            Step::Http(_) if postgres => {
                problems
                    .push(format!("{step_path}.type"), "an http step against a postgresql:// target: write a sql step");
            }
            Step::Parallel(_) if postgres => {
                problems.push(
                    format!("{step_path}.type"),
                    "a parallel group sends http requests: a postgresql:// target takes sql steps",
                );
            }
            Step::Sql(_) if !postgres => {
                problems.push(format!("{step_path}.type"), "a sql step needs a postgresql:// target.base_url");
            }
            _ => {}
        }
        match step {
            Step::Group(group) => check_step_protocol(problems, &format!("{step_path}.steps"), &group.steps, postgres),
            Step::Loop(loop_step) => {
                check_step_protocol(problems, &format!("{step_path}.steps"), &loop_step.steps, postgres)
            }
            Step::If(if_step) => {
                check_step_protocol(problems, &format!("{step_path}.then"), &if_step.then, postgres);
                check_step_protocol(problems, &format!("{step_path}.else"), &if_step.otherwise, postgres);
            }
            Step::Choice(choice) => {
                for (branch_index, branch) in choice.branches.iter().enumerate() {
                    check_step_protocol(
                        problems,
                        &format!("{step_path}.branches[{branch_index}].steps"),
                        &branch.steps,
                        postgres,
                    );
                }
            }
            _ => {}
        }
    }
}

/// `postgresql://[user[:password]@]host[:port][/database][?options]`, as libpq reads it.
fn check_postgres_url(problems: &mut Problems, path: String, url: &str) {
    let rest = url.split_once("://").map(|(_, rest)| rest).unwrap_or_default();
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_and_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let (host, port) =
        match host_and_port.rsplit_once(':').filter(|(host, _)| !host.ends_with(']') || host.starts_with('[')) {
            Some((host, port)) if !host_and_port.ends_with(']') => (host, Some(port)),
            _ => (host_and_port, None),
        };
    if host.is_empty() && !url.contains("host=") {
        problems.push(path, format!("'{url}' names no host, e.g. postgresql://user@127.0.0.1:5432/database"));
    } else if let Some(port) = port {
        if port.parse::<u16>().ok().filter(|port| *port > 0).is_none() {
            problems.push(path, format!("'{url}' has a bad port '{port}'"));
        }
    }
}

impl StepWalker<'_> {
    pub(super) fn sql(&mut self, path: &str, step: &SqlStep) {
        self.named(path, &step.name);
        match (&step.query, step.statements.is_empty()) {
            (Some(_), false) => self.problems.push_hint(
                format!("{path}.statements"),
                "a step runs either 'query' or 'statements', not both",
                "keep one",
            ),
            (None, true) => self.problems.push_hint(
                format!("{path}.query"),
                "a sql step needs 'query' (or 'statements')",
                "add query: 'SELECT 1'",
            ),
            (None, false) if !step.params.is_empty() => {
                self.problems.push_hint(
                    format!("{path}.params"),
                    "with 'statements', each statement has its own params",
                    "move params into them",
                );
            }
            _ => {}
        }
        let statements_path =
            |index: usize| if step.query.is_some() { path.to_owned() } else { format!("{path}.statements[{index}]") };
        for (index, (query, params)) in step.statements().into_iter().enumerate() {
            let statement_path = statements_path(index);
            if query.trim().is_empty() {
                self.problems.push_hint(format!("{statement_path}.query"), "'query' is empty", "write the SQL");
            }
            for (position, param) in params.iter().enumerate() {
                self.template(format!("{statement_path}.params[{position}]"), param);
            }
        }
        if let Some(think_time) = &step.think_time {
            super::check_think_time(self.problems, &format!("{path}.think_time"), think_time);
        }
        for (index, extractor) in step.extract.iter().enumerate() {
            let extractor_path = format!("{path}.extract[{index}]");
            self.variable_name(format!("{extractor_path}.var"), &extractor.var);
            match (extractor.from, &extractor.column) {
                (SqlExtractFrom::Column, column) if column.as_deref().is_none_or(str::is_empty) => {
                    self.problems.push_hint(
                        format!("{extractor_path}.column"),
                        "from: column needs 'column'",
                        "name the column, e.g. column: id",
                    );
                }
                (SqlExtractFrom::RowCount, Some(_)) => {
                    self.problems.push_hint(
                        format!("{extractor_path}.column"),
                        "a row_count extractor takes no column",
                        "remove 'column'",
                    );
                }
                _ => {}
            }
        }
        for (index, check) in step.checks.iter().enumerate() {
            let check_path = format!("{path}.checks[{index}]");
            match check {
                SqlCheck::RowCount { equals: None, min: None, max: None } => {
                    self.problems.push_hint(
                        check_path,
                        "a row_count check needs equals, min or max",
                        "e.g. {type: row_count, equals: 1}",
                    );
                }
                SqlCheck::RowCount { min: Some(min), max: Some(max), .. } if min > max => {
                    self.problems.push_hint(
                        format!("{check_path}.min"),
                        format!("min {min} is above max {max}"),
                        "swap them",
                    );
                }
                SqlCheck::Column { column, .. } if column.is_empty() => {
                    self.problems.push(format!("{check_path}.column"), "must not be empty");
                }
                _ => {}
            }
        }
    }
}

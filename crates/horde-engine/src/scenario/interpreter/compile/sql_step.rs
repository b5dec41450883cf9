//! `sql` steps compiled: parameters into templates, queries cut for the simple protocol.

use super::{NodeCompiler, StepKind};
use crate::error::EngineError;
use crate::transport::sql::{simple_parts, SqlNode, StatementNode};
use horde_plan::{OnCheckFailure, Scenario, SqlStep};

impl NodeCompiler<'_> {
    pub(super) fn sql(&mut self, scenario: &Scenario, step: &SqlStep) -> Result<SqlNode, EngineError> {
        let global_index = self.register(&scenario.name, &step.name, StepKind::Request);
        let statements = step
            .statements()
            .into_iter()
            .map(|(query, params)| {
                Ok(StatementNode {
                    query: query.to_owned(),
                    simple_parts: simple_parts(query),
                    params: params.iter().map(|param| self.text(param)).collect::<Result<_, EngineError>>()?,
                })
            })
            .collect::<Result<Vec<_>, EngineError>>()?;
        Ok(SqlNode {
            global_index,
            transaction: step.query.is_none(),
            statements,
            mode: step.mode,
            think_time: step.think_time,
            keep_row: SqlNode::needs_columns(&step.extract, &step.checks),
            extractors: step.extract.clone(),
            checks: step.checks.clone(),
            end_on_check_failure: step.on_check_failure == OnCheckFailure::EndIteration,
        })
    }
}

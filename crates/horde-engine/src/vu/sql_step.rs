//! A VU's `sql` steps (the `postgres` transport, `crate::sql`): its connection between steps,
//! and one step timed, run, judged and recorded as an HTTP request is.

use super::{Flow, InFlight, Vu};
use crate::sql::{classify, SqlConnection, SqlLease, SqlNode, SqlResultView, StatementOutcome};
use crate::worker_state::WorkerState;
use horde_metrics::ErrorKind;
use std::time::{Duration, Instant};

/// Where a VU's SQL connection waits between its steps.
#[derive(Default)]
pub(crate) struct VuSql {
    /// `connections: per_vu`: the VU's own connection.
    connection: Option<SqlConnection>,
    /// `connections: {pool: N}`: the lease a VU keeps while its transaction spans steps.
    lease: Option<SqlLease>,
}

/// Why a step failed, and whether before reaching the database (a failed connect).
type StepError = (ErrorKind, bool);

impl Vu {
    pub(super) async fn sql_step(&mut self, state: &WorkerState, node: &SqlNode, intended: Option<Instant>) -> Flow {
        let started = intended.unwrap_or_else(Instant::now);
        let context = self.context(state);
        let mut params: Vec<Vec<String>> = Vec::with_capacity(node.statements.len());
        for statement in &node.statements {
            let rendered: Option<Vec<String>> =
                statement.params.iter().map(|param| self.render_text(state, &context, param).map(|text| text.into_owned())).collect();
            let Some(rendered) = rendered else {
                // Not sent; the step's think time still applies, as it would after a result.
                self.record(state, node.global_index, 0, Err(ErrorKind::TemplateFailed), 0, 0);
                if let Some(think_time) = &node.think_time {
                    self.pause(state, think_time).await;
                }
                return Flow::Continue;
            };
            params.push(rendered);
        }
        self.sent += 1;
        let sent_at = intended.map(|_| Instant::now());
        let mut in_flight = InFlight { state, index: node.global_index, started, ended: false };
        let outcome = match tokio::time::timeout(state.shared.plan.request_timeout, self.sql_exchange(state, node, &params)).await {
            Ok(outcome) => outcome,
            // The connection went with the dropped exchange: a late answer must not be read as
            // the next statement's.
            Err(_) => Err((ErrorKind::Timeout, false)),
        };
        in_flight.ended = true;
        let latency_us = started.elapsed().as_micros() as u64;
        let mut end_iteration = false;
        let mut back_off = false;
        let rows = outcome.as_ref().map_or(0, |outcome| outcome.step_rows);
        let result = match outcome {
            Ok(outcome) => {
                let result = self.apply_sql_result(node, &outcome);
                end_iteration = result == Err(ErrorKind::CheckFailed) && node.end_on_check_failure;
                result
            }
            Err((kind, connecting)) => {
                self.last_connect_failed = connecting;
                back_off = connecting && self.backs_off;
                Err(kind)
            }
        };
        self.record(state, node.global_index, latency_us, result, 0, 0);
        if rows > 0 {
            state.recorder.borrow_mut().steps[node.global_index].rows += rows;
        }
        if let Some(sent_at) = sent_at {
            state.recorder.borrow_mut().steps[node.global_index].record_from_send(latency_us, sent_at.elapsed().as_micros() as u64);
        }
        if back_off {
            self.back_off(state).await;
        }
        if let Some(think_time) = &node.think_time {
            self.pause(state, think_time).await;
        }
        if end_iteration {
            Flow::EndIteration
        } else {
            Flow::Continue
        }
    }

    /// Takes a connection (the VU's own, or one of the pool's, waiting its turn), runs the step's
    /// statements on it, and keeps it for the next step unless it broke.
    async fn sql_exchange(&mut self, state: &WorkerState, node: &SqlNode, params: &[Vec<String>]) -> Result<StatementOutcome, StepError> {
        let target = state.shared.plan.sql.as_ref().expect("sql steps run only against a postgresql:// target");
        let mut lease = None;
        let held = match &state.sql_pool {
            None => self.sql.connection.take(),
            Some(pool) => {
                let mut taken = match self.sql.lease.take() {
                    Some(held) => held,
                    None => pool.acquire(self.instance).await,
                };
                let connection = taken.connection.take();
                lease = Some(taken);
                connection
            }
        };
        // A connection the server closed while it sat idle (a terminated backend, a restart) is
        // not silently replaced: the step fails on it as sql_connection_failure, as an
        // application's would, and the next step connects afresh.
        let mut connection = match held {
            Some(connection) => connection,
            None => match SqlConnection::connect(&target.configs[self.instance]).await {
                Ok(connection) => {
                    self.backoff = Duration::ZERO;
                    state.recorder.borrow_mut().connections_opened += 1;
                    connection
                }
                Err(error) => return Err((classify(&error), true)),
            },
        };
        let result = run_statements(&mut connection, node, params).await;
        let broken = connection.is_closed() || result.as_ref().err() == Some(&ErrorKind::SqlConnectionFailure);
        if !broken {
            match lease {
                None => self.sql.connection = Some(connection),
                Some(mut lease) => {
                    let in_transaction = connection.in_transaction;
                    lease.connection = Some(connection);
                    if in_transaction {
                        self.sql.lease = Some(lease);
                    }
                }
            }
        }
        result.map_err(|kind| (kind, false))
    }

    /// Extractors and checks on the last statement's result; the outcome to record.
    fn apply_sql_result(&mut self, node: &SqlNode, outcome: &StatementOutcome) -> Result<(), ErrorKind> {
        let view = SqlResultView { row_count: outcome.row_count, first_row: outcome.first_row.as_ref() };
        let mut extract_failed = false;
        if !node.extractors.is_empty() {
            let values: Vec<_> = node.extractors.iter().map(|extractor| (extractor.var.clone(), view.extract(extractor))).collect();
            let vars = self.vars_mut();
            for (var, value) in values {
                match value {
                    Some(value) => {
                        vars.insert(var, value);
                    }
                    None => {
                        vars.remove(&var);
                        extract_failed = true;
                    }
                }
            }
        }
        if !node.checks.iter().all(|check| view.passes(check)) {
            Err(ErrorKind::CheckFailed)
        } else if extract_failed {
            Err(ErrorKind::ExtractFailed)
        } else {
            Ok(())
        }
    }
}

/// The step's statements, in a transaction when the step holds several; the last one's result.
async fn run_statements(connection: &mut SqlConnection, node: &SqlNode, params: &[Vec<String>]) -> Result<StatementOutcome, ErrorKind> {
    if node.transaction {
        connection.batch("BEGIN").await.map_err(|error| classify(&error))?;
    }
    let mut last: Option<StatementOutcome> = None;
    for (index, statement) in node.statements.iter().enumerate() {
        let keep_row = node.keep_row && index + 1 == node.statements.len();
        match connection.run((node.global_index, index), statement, &params[index], node.mode, keep_row).await {
            Ok(mut outcome) => {
                outcome.step_rows += last.map_or(0, |last| last.step_rows);
                last = Some(outcome);
            }
            Err(error) => {
                if node.transaction && !connection.is_closed() {
                    let _ = connection.batch("ROLLBACK").await;
                }
                return Err(classify(&error));
            }
        }
    }
    if node.transaction {
        connection.batch("COMMIT").await.map_err(|error| classify(&error))?;
    }
    last.ok_or(ErrorKind::SqlOther)
}

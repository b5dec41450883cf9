//! A VU's `sql` steps (the `postgres` transport, `crate::transport::sql`): its connection between steps,
//! and one step timed, run, judged and recorded as an HTTP request is.

use super::{Flow, InFlight, Vu};
use crate::exchange::{bounded, MAX_BODY_BYTES, MAX_HEAD_BYTES};
use crate::run::worker_state::WorkerState;
use crate::transport::sql::{classify, SqlConnection, SqlError, SqlLease, SqlNode, SqlResultView, StatementOutcome};
use horde_metrics::ErrorKind;
use std::time::{Duration, Instant};

/// Where a VU's SQL connection waits between its steps.
#[derive(Default)]
pub(crate) struct VuSql {
    /// `connections: per_vu`: the VU's own connection.
    connection: Option<Box<SqlConnection>>,
    /// `connections: {pool: N}`: the lease a VU keeps while its transaction spans steps.
    lease: Option<SqlLease>,
    /// The buffers of the last step's parameters, reused by the next.
    params: SqlParams,
}

/// A step's rendered parameters, statement after statement, in strings a VU keeps from one
/// step to the next: once they have grown, rendering a step's parameters allocates nothing
/// (a vector of strings per statement was three allocations and frees a transaction).
#[derive(Default)]
pub(crate) struct SqlParams {
    /// Every string rendered so far; the first `used` hold this step's values.
    values: Vec<String>,
    used: usize,
    /// Where each statement's values end in `values`.
    ends: Vec<usize>,
}

impl SqlParams {
    fn clear(&mut self) {
        self.used = 0;
        self.ends.clear();
    }

    /// The next value's string, emptied.
    fn next_value(&mut self) -> &mut String {
        if self.used == self.values.len() {
            self.values.push(String::new());
        }
        let value = &mut self.values[self.used];
        value.clear();
        self.used += 1;
        value
    }

    /// The last value given back (its template could not be rendered).
    fn drop_value(&mut self) {
        self.used -= 1;
    }

    fn end_statement(&mut self) {
        self.ends.push(self.used);
    }

    /// Statement `index`'s values.
    pub(crate) fn statement(&self, index: usize) -> &[String] {
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        &self.values[start..self.ends[index]]
    }

    /// Lets go of the strings that grew past [`KEPT_PARAM_BYTES`]: a VU keeps room for the
    /// usual parameter between its steps, not for the largest one it ever sent (a 100 KB
    /// document a step at 10,000 VUs would otherwise hold a gigabyte).
    fn shed_large(&mut self) {
        for value in &mut self.values {
            if value.capacity() > KEPT_PARAM_BYTES {
                *value = String::new();
            }
        }
    }
}

/// The most of a parameter's string a VU keeps between its steps.
const KEPT_PARAM_BYTES: usize = 1024;

/// Why a step failed (its kind, and the server's SQLSTATE and message or the client's error),
/// and whether before reaching the database (a failed connect).
type StepError = (ErrorKind, String, bool);

/// An error's kind, and its words: `SQLSTATE 23505: duplicate key value...` or the client's.
fn described(error: &SqlError) -> (ErrorKind, String) {
    (classify(error), error.to_string())
}

impl Vu {
    pub(super) async fn sql_step(&mut self, state: &WorkerState, node: &SqlNode, intended: Option<Instant>) -> Flow {
        let started = intended.unwrap_or_else(Instant::now);
        // One branch when the run records no exchanges (`crate::exchange`).
        let recording = state.shared.recording.as_ref().is_some_and(|recording| recording.claim(node.global_index));
        // A parameter that is a lone variable or `random_int` call is rendered directly, and the
        // template context built only for one that needs it (`Vu::render_text_into`).
        let mut params = self.sql.as_mut().map(|sql| std::mem::take(&mut sql.params)).unwrap_or_default();
        params.clear();
        for statement in &node.statements {
            let mut rendered = true;
            for param in &statement.params {
                rendered = self.render_text_into(state, param, params.next_value());
                if !rendered {
                    params.drop_value();
                    break;
                }
            }
            params.end_statement();
            if !rendered {
                self.keep_sql_params(params);
                self.sql_template_failed(state, node, &statement.query, started, recording);
                // Not sent; the step's think time still applies, as it would after a result.
                if let Some(think_time) = &node.think_time {
                    self.pause(state, think_time).await;
                }
                return Flow::Continue;
            }
        }
        self.sent += 1;
        let sent_at = intended.map(|_| Instant::now());
        let mut in_flight = InFlight { state, index: node.global_index, started, ended: false };
        // The worker's one deadline list, not a timer entry per step (`crate::time::deadline`); the
        // timeout runs from the send (the start, in a closed model).
        let from = tokio::time::Instant::from_std(sent_at.unwrap_or(started));
        let outcome = match state
            .deadlines
            .within(from, state.shared.plan.request_timeout, self.sql_exchange(state, node, &params))
            .await
        {
            Some(outcome) => outcome,
            // The connection went with the dropped exchange: a late answer must not be read as
            // the next statement's.
            None => Err((
                ErrorKind::Timeout,
                format!(
                    "no result within {} ms (target.request_timeout_ms)",
                    state.shared.plan.request_timeout.as_millis()
                ),
                false,
            )),
        };
        in_flight.ended = true;
        let latency_us = started.elapsed().as_micros() as u64;
        let mut end_iteration = false;
        let mut back_off = false;
        let rows = outcome.as_ref().map_or(0, |outcome| outcome.step_rows);
        let mut error_words = None;
        let result = match &outcome {
            // A step with nothing to extract or check (most of a load's statements) does not call
            // out for it: one function's code fewer in the instruction cache at every step.
            Ok(_) if node.extractors.is_empty() && node.checks.is_empty() => Ok(()),
            Ok(outcome) => {
                let result = self.apply_sql_result(node, outcome);
                end_iteration = result == Err(ErrorKind::CheckFailed) && node.end_on_check_failure;
                result
            }
            Err((kind, words, connecting)) => {
                self.last_connect_failed = *connecting;
                back_off = *connecting && self.backs_off;
                error_words = Some(words);
                Err(*kind)
            }
        };
        self.record(state, node.global_index, latency_us, result, 0, 0);
        if rows > 0 {
            state.recorder.borrow_mut().steps[node.global_index].rows += rows;
        }
        if recording {
            self.sql_record(state, node, &params, started, latency_us, result, &outcome);
        }
        self.keep_sql_params(params);
        if let (Err(kind), Some(words)) = (result, error_words) {
            self.note_sql_error(state, node.global_index, kind, words);
        }
        if let Some(sent_at) = sent_at {
            state.recorder.borrow_mut().steps[node.global_index]
                .record_from_send(latency_us, sent_at.elapsed().as_micros() as u64);
        }
        self.end_step(state, back_off, node.think_time.as_ref(), end_iteration).await
    }

    /// A step whose parameters could not be rendered: counted, and recorded when claimed.
    /// This and the two below are out of line and cold: a step's usual path (rendered, sent,
    /// answered) then lies together in the instruction cache, where the worker's user time
    /// goes (issue 19).
    #[cold]
    #[inline(never)]
    fn sql_template_failed(
        &mut self,
        state: &WorkerState,
        node: &SqlNode,
        query: &str,
        started: Instant,
        recording: bool,
    ) {
        self.record(state, node.global_index, 0, Err(ErrorKind::TemplateFailed), 0, 0);
        if recording {
            let mut exchange = self.exchange_record(state, node.global_index, "sql", started);
            exchange.request = query.to_owned();
            exchange.outcome = ErrorKind::TemplateFailed.label();
            exchange.detail =
                Some("a parameter's template could not be rendered (a variable it reads is not set)".into());
            self.keep_exchange(state, exchange);
        }
    }

    /// A failed step's words, kept for the run's error details.
    #[cold]
    #[inline(never)]
    fn note_sql_error(&self, state: &WorkerState, index: usize, kind: ErrorKind, words: &str) {
        // A server's message may quote a parameter's value (`invalid input syntax for type
        // integer: "..."`): credentials the VU holds are redacted from it.
        let mut words = words.to_owned();
        crate::exchange::redact_values(&mut words, &self.secrets(state));
        self.note(state, index, kind, words);
    }

    /// Keeps a step's parameter buffers for the VU's next step.
    fn keep_sql_params(&mut self, mut params: SqlParams) {
        params.shed_large();
        self.sql.get_or_insert_with(Box::default).params = params;
    }

    /// Takes a connection (the VU's own, or one of the pool's, waiting its turn), runs the step's
    /// statements on it, and keeps it for the next step unless it broke.
    async fn sql_exchange(
        &mut self,
        state: &WorkerState,
        node: &SqlNode,
        params: &SqlParams,
    ) -> Result<StatementOutcome, StepError> {
        let target = state.shared.plan.sql.as_ref().expect("sql steps run only against a postgresql:// target");
        let mut lease = None;
        let held = match &state.sql_pool {
            None => self.sql.as_mut().and_then(|sql| sql.connection.take()),
            Some(pool) => {
                let mut taken = match self.sql.as_mut().and_then(|sql| sql.lease.take()) {
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
            // Boxed: connecting (1 KB of future) is rare, and held in place it would double the
            // exchange's future, which is copied into the step's at every statement. Polled
            // through `dyn`, so that its code stays out of the step's.
            None => match connecting(&target.configs[self.instance]).await {
                Ok(connection) => {
                    self.backoff = Duration::ZERO;
                    state.recorder.borrow_mut().connections_opened += 1;
                    connection
                }
                Err(error) => {
                    let (kind, words) = described(&error);
                    return Err((kind, words, true));
                }
            },
        };
        let result = run_statements(&mut connection, node, params).await;
        let broken = connection.is_closed() || matches!(result, Err((ErrorKind::SqlConnectionFailure, _)));
        if !broken {
            match lease {
                None => self.sql.get_or_insert_with(Box::default).connection = Some(connection),
                Some(mut lease) => {
                    let in_transaction = connection.in_transaction;
                    lease.connection = Some(connection);
                    if in_transaction {
                        self.sql.get_or_insert_with(Box::default).lease = Some(lease);
                    }
                }
            }
        }
        result.map_err(|(kind, words)| (kind, words, false))
    }

    /// Records a claimed `sql` step (`crate::exchange`): its statements with their parameters,
    /// the rows returned or affected and the first row when kept, or the server's SQLSTATE and
    /// message; each check judged; the variables it extracts.
    #[allow(clippy::too_many_arguments)]
    #[cold]
    #[inline(never)]
    fn sql_record(
        &mut self,
        state: &WorkerState,
        node: &SqlNode,
        params: &SqlParams,
        started: Instant,
        latency_us: u64,
        result: Result<(), ErrorKind>,
        outcome: &Result<StatementOutcome, StepError>,
    ) {
        let mut exchange = self.exchange_record(state, node.global_index, "sql", started);
        let mut request = String::new();
        for (index, statement) in node.statements.iter().enumerate() {
            let params = params.statement(index);
            request.push_str(statement.query.trim());
            request.push('\n');
            for (index, param) in params.iter().enumerate() {
                request.push_str(&format!("  ${} = {param:?}\n", index + 1));
            }
        }
        exchange.request = bounded(request.trim_end().to_owned(), MAX_HEAD_BYTES).0;
        exchange.latency_us = latency_us;
        exchange.outcome = match result {
            Ok(()) => "ok".to_owned(),
            Err(kind) => kind.label(),
        };
        match outcome {
            Ok(outcome) => {
                let mut response = format!("{} row(s)", outcome.row_count);
                if let Some(row) = &outcome.first_row {
                    let columns: Vec<String> =
                        row.columns.iter().map(|(name, value)| format!("{name} = {}", column_text(value))).collect();
                    response.push_str(&format!("; first row: {}", columns.join(", ")));
                }
                exchange.response = bounded(response, MAX_BODY_BYTES).0;
                let view = SqlResultView { row_count: outcome.row_count, first_row: outcome.first_row.as_ref() };
                for check in &node.checks {
                    let passed = view.passes(check);
                    let why = (!passed).then(|| format!("expected {}, got {}", check_label(check), exchange.response));
                    exchange.checks.push((check_label(check), passed, why));
                }
            }
            Err((_, words, _)) => exchange.detail = Some(words.clone()),
        }
        exchange.vars = self.extracted(node.extractors.iter().map(|extractor| extractor.var.as_str()));
        self.keep_exchange(state, exchange);
    }

    /// Extractors and checks on the last statement's result; the outcome to record.
    fn apply_sql_result(&mut self, node: &SqlNode, outcome: &StatementOutcome) -> Result<(), ErrorKind> {
        let view = SqlResultView { row_count: outcome.row_count, first_row: outcome.first_row.as_ref() };
        let mut extract_failed = false;
        if !node.extractors.is_empty() {
            // The result is read, not the variables: each extractor sets its own as it goes, as
            // an HTTP step's do, with no vector of values between.
            let vars = self.vars_mut();
            for extractor in &node.extractors {
                match view.extract(extractor) {
                    Some(value) => vars.insert(&extractor.var, value),
                    None => {
                        vars.remove(&extractor.var);
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

/// A `sql` check in words, for a recorded exchange: `row_count == 1`, `column who == "ann"`.
fn check_label(check: &horde_plan::SqlCheck) -> String {
    match check {
        horde_plan::SqlCheck::RowCount { equals, min, max } => {
            let mut parts = Vec::new();
            if let Some(equals) = equals {
                parts.push(format!("row_count == {equals}"));
            }
            if let Some(min) = min {
                parts.push(format!("row_count >= {min}"));
            }
            if let Some(max) = max {
                parts.push(format!("row_count <= {max}"));
            }
            if parts.is_empty() {
                "row_count".to_owned()
            } else {
                parts.join(" and ")
            }
        }
        horde_plan::SqlCheck::Column { column, equals } => format!("column {column} == {equals}"),
    }
}

/// A column's value as a recorded exchange shows it: `NULL`, `42`, `"ann"`.
fn column_text(value: &crate::transport::sql::ColumnValue) -> String {
    use crate::transport::sql::ColumnValue;
    match value {
        ColumnValue::Null => "NULL".to_owned(),
        ColumnValue::Bool(value) => value.to_string(),
        ColumnValue::Int(value) => value.to_string(),
        ColumnValue::Float(value) => value.to_string(),
        ColumnValue::Text(value) => format!("{value:?}"),
        ColumnValue::Unreadable => "(a type not decoded: cast it to text)".to_owned(),
    }
}

/// A new connection's login, boxed and behind `dyn` (see `Vu::sql_exchange`).
fn connecting(
    config: &tokio_postgres::Config,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Box<SqlConnection>, SqlError>> + '_>> {
    Box::pin(crate::transport::sql::connect(config))
}

/// The step's statements, in a transaction when the step holds several; the last one's result.
async fn run_statements(
    connection: &mut SqlConnection,
    node: &SqlNode,
    params: &SqlParams,
) -> Result<StatementOutcome, (ErrorKind, String)> {
    if node.transaction {
        connection.batch("BEGIN").await.map_err(|error| described(&error))?;
    }
    let mut last: Option<StatementOutcome> = None;
    for (index, statement) in node.statements.iter().enumerate() {
        let keep_row = node.keep_row && index + 1 == node.statements.len();
        match connection.run((node.global_index, index), statement, params.statement(index), node.mode, keep_row).await
        {
            Ok(mut outcome) => {
                outcome.step_rows += last.map_or(0, |last| last.step_rows);
                last = Some(outcome);
            }
            Err(error) => {
                if node.transaction && !connection.is_closed() {
                    let _ = connection.batch("ROLLBACK").await;
                }
                return Err(described(&error));
            }
        }
    }
    if node.transaction {
        connection.batch("COMMIT").await.map_err(|error| described(&error))?;
    }
    // Lazily: the words are made only when there is no result (an allocation a step otherwise).
    last.ok_or_else(|| (ErrorKind::SqlOther, "the step ran no statement".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(params: &mut SqlParams, statements: &[&[&str]]) {
        params.clear();
        for values in statements {
            for value in *values {
                params.next_value().push_str(value);
            }
            params.end_statement();
        }
    }

    #[test]
    fn parameters_are_kept_statement_by_statement_in_reused_strings() {
        let mut params = SqlParams::default();
        fill(&mut params, &[&["1", "ann"], &[], &["x"]]);
        assert_eq!(
            (params.statement(0), params.statement(1), params.statement(2)),
            (&["1".to_owned(), "ann".to_owned()][..], &[][..], &["x".to_owned()][..])
        );
        // The next step reuses the strings, emptied first.
        fill(&mut params, &[&["22"]]);
        assert_eq!(params.statement(0), ["22"]);
        assert_eq!(params.values.len(), 3, "no new string for a value that had one");
        // A value given back (its template failed) is not among the statement's.
        params.clear();
        params.next_value().push('7');
        params.next_value().push_str("half");
        params.drop_value();
        params.end_statement();
        assert_eq!(params.statement(0), ["7"]);
    }

    #[test]
    fn a_large_parameter_is_not_kept_between_steps() {
        let mut params = SqlParams::default();
        let large = "x".repeat(KEPT_PARAM_BYTES * 100);
        fill(&mut params, &[&["small", &large]]);
        params.shed_large();
        assert!(params.values[0].capacity() > 0 && params.values[1].capacity() == 0);
        fill(&mut params, &[&["a", "b"]]);
        assert_eq!(params.statement(0), ["a", "b"]);
    }
}
